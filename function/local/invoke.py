"""`python -m function invoke EVENT.json`: run the handler the way Lambda does, on this machine.

The real runtime client (awslambdaric, in a child process) polls a local Runtime API (runtime_api.py).
  --snapstart    INIT → before-snapshot hooks → restore/next → after-restore hooks → the invocation
  --clones N     with --snapstart: fork N restored clones from the one snapshot; each serves the event
  --measure      the restore stand-in: a cold start, a restored clone's first response and warm calls,
                 side by side (one intra-op thread everywhere, as forked clones need)
  --stream       the response-streaming runtime (function.awslambda.streaming) instead of awslambdaric: a
                 Function URL event's reply is printed as its prelude, then the body's chunk timeline
stdout gets the handler's response (one JSON document per line); stderr the runtime's log and timings.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from function.cli.base import add_artifacts_option
from function.local.runtime import CLONES_VARIABLE, STREAM
from function.local.runtime_api import Invocation, RuntimeAPI

HANDLER = "function.awslambda.handler.lambda_handler"
ROOT = Path(__file__).resolve().parents[2]
# The child program: `python -m function.local.runtime HANDLER | --stream`.
LAUNCHER = ("-m", "function.local.runtime")
T = TypeVar("T")


class RuntimeFailed(RuntimeError):
    """The runtime process exited or reported an INIT / restore error."""


class LocalLambda:
    """One execution environment: a runtime process (and its clones) with its own Runtime API."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        snapstart: bool = False,
        clones: int = 0,
        handler: str = HANDLER,
        timeout: float = 300.0,
        echo: Callable[[str], None] | None = None,
        stream: bool = False,
        launcher: Sequence[str] = LAUNCHER,
    ) -> None:
        """stream: run function.awslambda.streaming instead of awslambdaric (its INIT is always
        function.awslambda.handler's, so `handler` goes unused); launcher: the child's arguments before
        HANDLER or --stream."""
        self.env = dict(env or {})
        self.snapstart = snapstart
        self.clones = clones
        self.handler = handler
        self.stream = stream
        self.launcher = tuple(launcher)
        self.timeout = timeout
        self.echo = echo
        self.api = RuntimeAPI()
        self.lines: list[tuple[float, str]] = []  # (perf_counter, line) of the runtime's stdout/stderr
        self.started = 0.0
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> LocalLambda:
        self.api.__enter__()
        env = {
            **os.environ,
            "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
            "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            "AWS_LAMBDA_FUNCTION_NAME": "cosyvoice-local",
            "AWS_LAMBDA_FUNCTION_VERSION": "1",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3008",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start" if self.snapstart else "on-demand",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
            **self.env,
            "AWS_LAMBDA_RUNTIME_API": self.api.address,
            CLONES_VARIABLE: str(self.clones),
        }
        self.started = time.perf_counter()
        # A session of its own: the clones are our child's children, and ending the group ends them too.
        self._process = subprocess.Popen(
            [sys.executable, *self.launcher, STREAM if self.stream else self.handler],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self.api.__exit__()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self.lines.append((time.perf_counter(), line.rstrip("\n")))
            if self.echo:
                self.echo(line.rstrip("\n"))

    def _until(self, attempt: Callable[[float], T]) -> T:
        """Retry a blocking queue call in short steps, failing fast if the runtime died."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return attempt(0.05)
            except queue.Empty:
                pass
            assert self._process is not None
            if self.api.init_errors or self.api.restore_errors or self._process.poll() is not None:
                # A reported error ends the process: its exit code belongs in the message.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(timeout=5)
                time.sleep(0.2)  # let the reader collect the last lines
                errors = [e.decode() for e in self.api.init_errors + self.api.restore_errors]
                tail = "\n".join(line for _, line in self.lines[-30:])
                raise RuntimeFailed(f"runtime failed (exit {self._process.poll()}): {errors}\n{tail}")
            if time.monotonic() > deadline:
                raise TimeoutError("the runtime did not answer in time")

    def wait_init(self) -> float:
        """Block until INIT is over (first /next, or first /restore/next under SnapStart); seconds taken."""
        if self.snapstart:
            self._until(lambda t: self.api.pending_restores() or _sleep_then_empty(t))
        else:
            self.api.requeue(self._until(self.api.wait_poll))
        return time.perf_counter() - self.started

    def restore(self) -> float:
        """Restore one environment (clone) and wait until it polls for work; seconds taken."""
        released = self._until(self.api.restore)
        self.api.requeue(self._until(self.api.wait_poll))
        return time.perf_counter() - released

    def invoke(self, event: Any) -> Invocation:
        payload = event if isinstance(event, bytes) else json.dumps(event).encode()
        pending = self.api.send(self._until(self.api.wait_poll), payload)
        return self._until(pending.result)

    def park(self) -> None:
        """Leave the next /next call unanswered: that environment takes no more events."""
        self._until(self.api.wait_poll)

    def log_records(self, event: str | None = None) -> list[dict[str, Any]]:
        """The runtime's JSON log lines (optionally those with "Event": event), in order."""
        records = []
        for _, line in self.lines:
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if event is None or record.get("Event") == event:
                    records.append(record)
        return records


def _sleep_then_empty(seconds: float) -> Any:
    time.sleep(seconds)
    raise queue.Empty


def _print_streamed(invocation: Invocation, save: Path | None) -> None:
    """A Function URL reply: the prelude and, per body chunk, when it arrived and how big it was."""
    reply = invocation.http()
    summary: dict[str, Any] = {"statusCode": reply.status, "headers": reply.headers, "cookies": reply.cookies}
    summary["chunks"] = [[round(chunk.at * 1000, 1), len(chunk.data)] for chunk in reply.chunks]
    if invocation.trailers:
        summary["trailers"] = dict(invocation.trailers)
    if save is not None:
        save.write_bytes(reply.body)
        summary["saved"] = str(save)
    elif reply.headers.get("content-type", "").startswith("application/json"):
        summary["body"] = json.loads(reply.body)  # an error, or the speakers
    print(json.dumps({**summary, "bytes": len(reply.body)}, ensure_ascii=False), flush=True)


def _print_response(invocation: Invocation, save: Path | None = None) -> None:
    if not invocation.ok:
        print(f"invocation failed ({invocation.error_type})", file=sys.stderr)
    if invocation.streamed:
        _print_streamed(invocation, save)
        return
    if save is None:
        print(invocation.body.decode(), flush=True)
        return
    reply = json.loads(invocation.body)
    audio = _reply_audio(reply)
    if audio is None:
        print(invocation.body.decode(), flush=True)
        return
    save.write_bytes(audio)
    summary = {k: v for k, v in reply.items() if k not in ("body", "audio")}
    print(json.dumps({**summary, "saved": str(save), "bytes": len(audio)}), flush=True)


PHASE_LABELS = {
    "process": "interpreter, runtime client",
    "runtime_import": "runtime imports (numpy, onnxruntime, engine)",
    "artifact_fetch": "artifact open (mmap) or S3 read",
    "session_creation": "onnxruntime sessions",
    "warm_up": "warm-up synthesis",
    "handler_init": "handler imports, S3 client (meanwhile)",
    "load_wait": "waiting for the model load",
    "ready": "ready (since process start)",
    "restore": "after-restore hooks",
}


def startup_table(record: Mapping[str, Any]) -> str:
    """A startup log record's phases as a small table; phases of the loader thread are marked, as they
    overlap the main thread's."""
    concurrent = set(record.get("concurrent", ()))
    rows = ["# startup phase (* loader thread, overlapping the others)       ms"]
    for name, ms in record.get("phases_ms", {}).items():
        label = ("* " if name in concurrent else "") + PHASE_LABELS.get(name, name)
        rows.append(f"#   {label:<52} {ms:8.1f}")
    return "\n".join(rows)


def _reply_audio(reply: Any) -> bytes | None:
    """The audio in an API Gateway-style reply (body, base64 when binary) or a direct-invoke reply."""
    if not isinstance(reply, dict):
        return None
    if reply.get("statusCode") == 200 and isinstance(reply.get("body"), str):
        body = reply["body"]
        return base64.b64decode(body) if reply.get("isBase64Encoded") else body.encode()
    if isinstance(reply.get("audio"), str):
        return base64.b64decode(reply["audio"])
    return None


def run(
    event: bytes,
    env: dict[str, str],
    snapstart: bool,
    clones: int,
    repeat: int,
    handler: str = HANDLER,
    save: Path | None = None,
    stream: bool = False,
) -> int:
    echo = lambda line: print(line, file=sys.stderr)  # noqa: E731 - a one-line sink
    with LocalLambda(
        env, snapstart=snapstart, clones=clones, handler=handler, echo=echo, stream=stream
    ) as runtime:
        init = runtime.wait_init()
        print(f"# INIT {init * 1000:.0f} ms", file=sys.stderr)
        for record in runtime.log_records("init")[-1:]:
            print(startup_table(record), file=sys.stderr)
        ok = True
        for clone in range(max(1, clones) if snapstart else 1):
            if snapstart:
                print(
                    f"# restore{f' clone {clone}' if clones else ''} {runtime.restore() * 1000:.1f} ms",
                    file=sys.stderr,
                )
            for attempt in range(repeat):
                invocation = runtime.invoke(event)
                ok = ok and invocation.ok
                label = "first response" if attempt == 0 else "warm call"
                print(f"# {label} {invocation.seconds * 1000:.1f} ms", file=sys.stderr)
                _print_response(invocation, save)
            if clones:
                runtime.park()
        return 0 if ok else 1


def measure(
    event: bytes, env: dict[str, str], handler: str = HANDLER, warm_calls: int = 3
) -> dict[str, float]:
    """The restore stand-in beside a cold start and warm calls, in milliseconds."""
    env = {"COSYVOICE_THREADS": "1", **env}
    with LocalLambda(env, handler=handler) as cold:
        init = cold.wait_init()
        first = cold.invoke(event)
        warm = min(cold.invoke(event).seconds for _ in range(warm_calls))
        for record in cold.log_records("init")[-1:]:
            print(startup_table(record), file=sys.stderr)
    with LocalLambda(env, snapstart=True, clones=1, handler=handler) as snap:
        snapshot = snap.wait_init()
        restore = snap.restore()
        restored = snap.invoke(event)
    if not (first.ok and restored.ok):
        raise RuntimeFailed(
            "an invocation failed: " + (first.body if not first.ok else restored.body).decode()
        )
    return {
        "cold_init_ms": init * 1000,
        "cold_first_response_ms": first.seconds * 1000,
        "snapshot_init_ms": snapshot * 1000,
        "restore_ms": restore * 1000,
        "restored_first_response_ms": restored.seconds * 1000,
        "warm_call_ms": warm * 1000,
    }


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("invoke", help="run the Lambda handler on an event through awslambdaric")
    parser.add_argument("event", type=Path, help="event JSON file (see events/)")
    add_artifacts_option(parser)
    parser.add_argument("--snapstart", action="store_true", help="INIT, snapshot hooks, restore, invoke")
    parser.add_argument("--clones", type=int, default=0, help="with --snapstart: restored clones (fork)")
    parser.add_argument("--repeat", type=int, default=1, help="invocations per environment")
    parser.add_argument("--measure", action="store_true", help="cold start vs restored clone vs warm call")
    parser.add_argument("--handler", default=HANDLER, help=f"MODULE.FUNCTION (default {HANDLER})")
    parser.add_argument(
        "--save", type=Path, help="write the reply's audio to this file instead of printing it"
    )
    parser.add_argument(
        "--stream", action="store_true", help="the response-streaming runtime (Function URL events stream)"
    )
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    event = args.event.read_bytes()
    env = {"COSYVOICE_ARTIFACT": args.artifacts} if args.artifacts else {}
    if args.clones:
        env.setdefault("COSYVOICE_THREADS", "1")  # see function.local.runtime
    if args.measure:
        results = measure(event, env, args.handler)
        for name, value in results.items():
            print(f"{name:28s} {value:9.1f}", file=sys.stderr)
        print(json.dumps(results))
        return 0
    clones = args.clones if args.snapstart else 0
    return run(event, env, args.snapstart, clones, max(1, args.repeat), args.handler, args.save, args.stream)


__all__ = ["LocalLambda", "RuntimeFailed", "measure", "register", "run"]
