"""The Lambda runtime, or a queue worker, with faults injected into the job worker, for the job tests (the
child process):

  python tests/function/jobs/job_faults.py SPEC[,SPEC...] HANDLER
  python tests/function/jobs/job_faults.py SPEC[,SPEC...] worker [ARGS...]

SPEC is one of
  clock:SECONDS            deadlines read a clock on which each segment the worker makes takes SECONDS,
                           and the speed meter expects exactly that: a deadline of 1.5 segments has room
                           for one, however fast this machine is
  kill:segment:N           SIGKILL once the N-th segment's audio is made, before its part is written
  kill:OPERATION:SUFFIX    SIGKILL at the first S3 / SQS OPERATION (PutObject, GetObject, SendMessage)
                           on a key (or queue URL) ending in SUFFIX, before it is sent
  fail:OPERATION:SUFFIX    that call fails instead, as a lost connection does (once; later calls work)
  fail-always:OPERATION:SUFFIX   every such call fails
  drop:SendMessage:TEXT    the first message whose body holds TEXT is lost: SQS answers as if it had it
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

SERVICES = {"PutObject": "s3", "GetObject": "s3", "SendMessage": "sqs"}


def segment_clock(seconds: float) -> None:
    import time
    from types import SimpleNamespace

    from function.core import deadline
    from function.cosyvoice.budget import SpeedMeter
    from function.jobs import batch, worker

    passed = [0.0]  # what the segments made so far added to the monotonic clock
    clock = SimpleNamespace(monotonic=lambda: time.monotonic() + passed[0], time=time.time)
    deadline.time = clock  # type: ignore[assignment]
    batch.time = clock  # type: ignore[assignment]

    def expected(self: SpeedMeter, segments: list[str], token_rate: float) -> float:
        return seconds * len(segments)

    SpeedMeter.seconds_for = expected  # type: ignore[assignment,method-assign]
    original = worker.to_pcm16

    def made(chunk: Any) -> bytes:
        passed[0] += seconds
        return original(chunk)

    worker.to_pcm16 = made


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def fail() -> None:
    from botocore.exceptions import EndpointConnectionError

    raise EndpointConnectionError(endpoint_url="injected: the connection was lost")


def at_segment(count: int, act: Callable[[], None]) -> None:
    from function.jobs import worker

    original, made = worker.to_pcm16, [0]

    def counted(chunk: Any) -> bytes:
        made[0] += 1
        if made[0] == count:
            act()
        return original(chunk)

    worker.to_pcm16 = counted


def at_call(operation: str, match: str, act: Callable[[], Any], once: bool = True) -> None:
    """`act` at OPERATION on a key or queue URL ending in `match`, or a message body holding it; what
    `act` returns stands for the service's answer (the call is never sent)."""
    from botocore.awsrequest import AWSResponse

    from function.aws import clients

    original, fired = clients._session, [False]

    def chosen(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        target = str(params.get("Key", params.get("QueueUrl", "")))
        body = str(params.get("MessageBody", ""))
        if (once and fired[0]) or not (target.endswith(match) or (match and match in body)):
            return
        fired[0] = True
        context["answer"] = act()

    def answered(context: dict[str, Any], **_: Any) -> Any:
        if "answer" not in context:
            return None
        return AWSResponse("", 200, {}, None), context["answer"]

    def session() -> Any:
        made = original()
        made.events.register(f"provide-client-params.{SERVICES[operation]}.{operation}", chosen)
        made.events.register(f"before-call.{SERVICES[operation]}.{operation}", answered)
        return made

    clients._session = session


def lost() -> dict[str, Any]:
    return {"MessageId": "lost", "ResponseMetadata": {"HTTPStatusCode": 200}}


def inject(spec: str) -> None:
    if spec.startswith("clock:"):
        segment_clock(float(spec.split(":", 1)[1]))
        return
    action, point, argument = spec.split(":", 2)
    act = {"kill": kill, "fail": fail, "fail-always": fail, "drop": lost}[action]
    if point == "segment":
        at_segment(int(argument), act)
    else:
        at_call(point, argument, act, once=action != "fail-always")


if __name__ == "__main__":
    for spec in sys.argv[1].split(","):
        inject(spec)
    if sys.argv[2] == "worker":
        from function.__main__ import main as commands

        sys.exit(commands(sys.argv[2:]))
    from function.local.runtime import main

    main([sys.argv[0], *sys.argv[2:]])
