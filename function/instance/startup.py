"""The record of how long the process took to get ready: startup phases, emitted as one EMF line.

Phases, by the thread that runs them (function.instance.model times the load, function.awslambda.handler the
hooks):

Main thread; laps, each starting where the previous one ended, so they add up to `ready`:
  process           process start → the load starts (interpreter, runtime client, this module)
  runtime_import    numpy, onnxruntime and the engine's modules (here, not on the loader thread: imports
                    hold the GIL, so there they would only interleave with the handler's)
  handler_init      the caller's work while the model loads: the handler's imports (the web stack too,
                    except in an on-demand INIT), edges and S3 client; uvicorn and the app for `serve`
  load_wait         waiting for the loader after that (~0 when it finished first)
  ready             process start → ready
Loader thread; named in the record's `concurrent` field, they overlap handler_init and load_wait:
  artifact_fetch    open the artifact: map a directory, or read s3:// into memory
  session_creation  one onnxruntime session per graph
  warm_up           one short synthesis through every graph
Without `start_loading` (get_engine() alone) the loader's phases run on the main thread between
runtime_import and ready, and handler_init / load_wait do not occur. Under SnapStart, warm_up runs in
the before-snapshot hook on the main thread and ready is recorded again after it; after a restore:
  restore           the after-restore hooks (reseeding, fresh clients)

The record goes out as one JSON line on stdout that is also a CloudWatch embedded-metric (EMF) document
(function.core.emf) in COSYVOICE_METRICS_NAMESPACE, so Lambda turns it into metrics without an agent or
an API call.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from function.core.emf import MILLISECONDS, emf_document
from function.instance.settings import get_settings


def _process_age() -> float | None:
    """Seconds since this process started (Linux /proc, 10 ms resolution); None where unknown."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            # The command name may contain spaces: fields are counted after its closing parenthesis.
            fields = handle.read().rsplit(b")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of stat(5): starttime, in clock ticks since boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class StartupRecord:
    """Phase durations in seconds, in the order they were recorded."""

    def __init__(self) -> None:
        age = _process_age()
        self.origin = time.perf_counter() - (age if age is not None else 0.0)
        self.phases: dict[str, float] = {}
        self.concurrent: list[str] = []  # phases timed off the main thread, overlapping the others
        self._lap_end = self.origin

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = time.perf_counter() - start
            if threading.current_thread() is not threading.main_thread():
                self.concurrent.append(name)

    def lap(self, name: str) -> None:
        """A main-thread phase from the end of the previous one (or process start) to now: laps and the
        phases between them tile the main thread's timeline without gaps."""
        now = time.perf_counter()
        self.phases[name] = now - self._lap_end
        self._lap_end = now

    def since_start(self, name: str) -> None:
        now = time.perf_counter()
        self.phases.pop(name, None)  # re-recorded phases (ready after a pre-snapshot warm-up) move last
        self.phases[name] = now - self.origin
        self._lap_end = now

    def milliseconds(self) -> dict[str, float]:
        return {name: round(seconds * 1000, 2) for name, seconds in self.phases.items()}

    def emit(self, event: str, **context: Any) -> None:
        """One line: a structured log record and an EMF document (metrics named startup.<phase>)."""
        phases = self.milliseconds()
        line = emf_document(
            get_settings().metrics_namespace,
            {"Event": event},
            {f"startup.{name}": (value, MILLISECONDS) for name, value in phases.items()},
            {"phases_ms": phases, "concurrent": list(self.concurrent), **context},
        )
        print(json.dumps(line), file=sys.stdout, flush=True)


STARTUP = StartupRecord()  # the process's one record

__all__ = ["STARTUP", "StartupRecord"]
