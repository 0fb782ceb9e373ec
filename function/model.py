"""The one model of the process (one cached factory) and the record of how long it took to get ready.

Startup phases, in the order they happen:
  process           process start → the first get_engine() call (interpreter, runtime client, web stack)
  runtime_import    numpy, onnxruntime and the engine's modules
  artifact_fetch    open the artifact: map a directory, or read s3:// into memory
  session_creation  one onnxruntime session per graph
  warm_up           one short synthesis through every graph (at INIT, or before the SnapStart snapshot)
  ready             process start → ready, everything above included
  restore           after a SnapStart restore: the after-restore hooks (reseeding, fresh clients)

The record goes out as one JSON line on stdout that is also a CloudWatch embedded-metric (EMF) document,
so Lambda turns it into metrics without an agent or an API call.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from function.settings import Settings, get_settings

if TYPE_CHECKING:
    from function.engine import Engine

METRIC_NAMESPACE = "CosyVoice"


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

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = time.perf_counter() - start

    def since_start(self, name: str) -> None:
        self.phases.pop(name, None)  # re-recorded phases (ready after a pre-snapshot warm-up) move last
        self.phases[name] = time.perf_counter() - self.origin

    def milliseconds(self) -> dict[str, float]:
        return {name: round(seconds * 1000, 2) for name, seconds in self.phases.items()}

    def emit(self, event: str, **context: Any) -> None:
        """One line: a structured log record and an EMF document (metrics named startup.<phase>)."""
        phases = self.milliseconds()
        line = {
            "_aws": {
                "Timestamp": int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": METRIC_NAMESPACE,
                        "Dimensions": [["Event"]],
                        "Metrics": [{"Name": f"startup.{name}", "Unit": "Milliseconds"} for name in phases],
                    }
                ],
            },
            "Event": event,
            **{f"startup.{name}": value for name, value in phases.items()},
            "phases_ms": phases,
            **context,
        }
        print(json.dumps(line), file=sys.stdout, flush=True)


STARTUP = StartupRecord()
_lock = threading.Lock()
_engine: Engine | None = None


def get_engine(warm_up: bool | None = None) -> Engine:
    """The process's engine, loaded on the first call (Lambda INIT, or before a server starts workers).

    warm_up: None follows COSYVOICE_WARMUP; the SnapStart path passes False and warms up in its
    before-snapshot hook instead.
    """
    global _engine
    if _engine is None:
        with _lock:
            if _engine is None:
                _engine = _load(get_settings(), get_settings().warmup if warm_up is None else warm_up)
    return _engine


def loaded_engine() -> Engine | None:
    """The engine if it is loaded, without loading it (readiness probes)."""
    return _engine


def _load(settings: Settings, warm_up: bool) -> Engine:
    STARTUP.since_start("process")
    with STARTUP.phase("runtime_import"):
        from function.engine import Engine
        from function.loader import open_artifact
    with STARTUP.phase("artifact_fetch"):
        artifact = open_artifact(settings.artifact)
    with STARTUP.phase("session_creation"):
        engine = Engine.load(artifact, settings.threads)
    if warm_up:
        with STARTUP.phase("warm_up"):
            engine.warm_up()
    STARTUP.since_start("ready")
    return engine


__all__ = ["STARTUP", "StartupRecord", "get_engine", "loaded_engine"]
