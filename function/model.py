"""The one model of the process (one cached factory) and the record of how long it took to get ready.

Lambda's INIT starts the load first thing (`start_loading`) and imports the rest of the handler while it
runs: creating onnxruntime sessions releases the GIL, so those imports and the sessions overlap, and
`get_engine()` joins the load before INIT ends. Startup phases, by the thread that runs them:

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
            "concurrent": list(self.concurrent),
            **context,
        }
        print(json.dumps(line), file=sys.stdout, flush=True)


class _Loader:
    """The engine loading on a thread of its own; `result()` joins it and re-raises what it raised."""

    def __init__(self, settings: Settings, warm_up: bool) -> None:
        self._engine: Engine | None = None
        self._error: BaseException | None = None
        # A daemon: if INIT fails elsewhere meanwhile, the process exits without waiting for the load.
        self._thread = threading.Thread(
            target=self._run, args=(settings, warm_up), name="cosyvoice-load", daemon=True
        )
        self._thread.start()

    def _run(self, settings: Settings, warm_up: bool) -> None:
        try:
            self._engine = _create(settings, warm_up)
        except BaseException as exc:  # whatever it is, the joining thread raises it instead of waiting
            self._error = exc

    def result(self) -> Engine:
        self._thread.join()
        if self._error is not None:
            # The original exception, so the INIT error names its type and message; its traceback
            # holds the loader thread's frames.
            raise self._error
        assert self._engine is not None
        return self._engine


STARTUP = StartupRecord()
_lock = threading.Lock()
_engine: Engine | None = None
_loader: _Loader | None = None


def start_loading(warm_up: bool | None = None) -> None:
    """Start loading the process's engine and return while sessions are being created; `get_engine()`
    waits for it. warm_up: None follows COSYVOICE_WARMUP (False under SnapStart: its hook warms up)."""
    global _loader
    with _lock:
        if _engine is not None or _loader is not None:
            return
        settings = get_settings()
        STARTUP.lap("process")
        _runtime_import()
        _loader = _Loader(settings, settings.warmup if warm_up is None else warm_up)


def get_engine(warm_up: bool | None = None) -> Engine:
    """The process's engine: the one `start_loading` began (joined, its failure raised here), else
    loaded on this first call, with warm_up as in `start_loading`."""
    global _engine
    if _engine is None:
        with _lock:
            if _engine is None:
                if _loader is not None:
                    STARTUP.lap("handler_init")
                    engine = _loader.result()
                    STARTUP.lap("load_wait")
                else:
                    settings = get_settings()
                    STARTUP.lap("process")
                    _runtime_import()
                    engine = _create(settings, settings.warmup if warm_up is None else warm_up)
                STARTUP.since_start("ready")
                _engine = engine
    return _engine


def loaded_engine() -> Engine | None:
    """The engine if it is loaded, without loading or waiting for it (readiness probes)."""
    return _engine


def _runtime_import() -> None:
    import function.engine  # noqa: F401 - imported here so the record times it
    import function.loader  # noqa: F401

    STARTUP.lap("runtime_import")


def _create(settings: Settings, warm_up: bool) -> Engine:
    from function.engine import Engine
    from function.frontend import preload_normalizer
    from function.loader import open_artifact

    with STARTUP.phase("artifact_fetch"):
        artifact = open_artifact(settings.artifact)
    with STARTUP.phase("session_creation"):
        engine = Engine.load(artifact, settings.threads)
    if warm_up:
        with STARTUP.phase("warm_up"):
            engine.warm_up()
    # The text graphs hold the GIL while they are read (~0.12 s): beside the sessions or the warm-up they
    # delayed ready by as much (measured), so they are read once the engine is up, on a thread of their
    # own; a request that comes sooner waits for the rest. Under SnapStart they are read before the snapshot.
    preload_normalizer()
    return engine


__all__ = ["STARTUP", "StartupRecord", "get_engine", "loaded_engine", "start_loading"]
