"""The Lambda runtime with faults injected into the job worker, for test_job_crashes.py (the child process):

  python tests/function/jobs/job_faults.py SPEC[,SPEC...] HANDLER

SPEC is one of
  clock:SECONDS            deadlines read a clock on which each segment the worker makes takes SECONDS,
                           and the speed meter expects exactly that: a deadline of 1.5 segments has room
                           for one, however fast this machine is
  kill:segment:N           SIGKILL once the N-th segment's audio is made, before its part is written
  kill:OPERATION:SUFFIX    SIGKILL at the first S3 / SQS OPERATION (PutObject, GetObject, SendMessage)
                           on a key (or queue URL) ending in SUFFIX, before it is sent
  fail:OPERATION:SUFFIX    that call fails instead, as a lost connection does (once; later calls work)
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


def at_call(operation: str, suffix: str, act: Callable[[], None]) -> None:
    from function.aws import clients

    original, fired = clients._session, [False]

    def hook(params: dict[str, Any], **_: Any) -> None:
        target = str(params.get("Key", params.get("QueueUrl", "")))
        if not fired[0] and target.endswith(suffix):
            fired[0] = True
            act()

    def session() -> Any:
        made = original()
        made.events.register(f"provide-client-params.{SERVICES[operation]}.{operation}", hook)
        return made

    clients._session = session


def inject(spec: str) -> None:
    if spec.startswith("clock:"):
        segment_clock(float(spec.split(":", 1)[1]))
        return
    action, point, argument = spec.split(":", 2)
    act = {"kill": kill, "fail": fail}[action]
    if point == "segment":
        at_segment(int(argument), act)
    else:
        at_call(point, argument, act)


if __name__ == "__main__":
    from function.local.runtime import main

    for spec in sys.argv[1].split(","):
        inject(spec)
    main([sys.argv[0], *sys.argv[2:]])
