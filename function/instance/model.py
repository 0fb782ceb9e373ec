"""The one model of the process: one cached factory, loading on a thread of its own during INIT.

Lambda's INIT starts the load first thing (`start_loading`) and imports the rest of the handler while it
runs: creating onnxruntime sessions releases the GIL, so those imports and the sessions overlap, and
`get_engine()` joins the load before INIT ends. The load's phases go into function.instance.startup's record
(the table of phases is there).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from function.instance import startup
from function.instance.settings import Settings, get_settings

if TYPE_CHECKING:
    from function.cosyvoice.engine import Engine


class _Loader:
    """The engine loading on a thread of its own; `result()` joins it and re-raises what it raised."""

    def __init__(self, settings: Settings, warm_up: bool, verify_hashes: bool) -> None:
        self._engine: Engine | None = None
        self._error: BaseException | None = None
        # A daemon: if INIT fails elsewhere meanwhile, the process exits without waiting for the load.
        self._thread = threading.Thread(
            target=self._run, args=(settings, warm_up, verify_hashes), name="cosyvoice-load", daemon=True
        )
        self._thread.start()

    def _run(self, settings: Settings, warm_up: bool, verify_hashes: bool) -> None:
        try:
            self._engine = _create(settings, warm_up, verify_hashes)
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


_lock = threading.Lock()
_engine: Engine | None = None
_loader: _Loader | None = None


def start_loading(warm_up: bool | None = None, verify_hashes: bool = False) -> None:
    """Start loading the process's engine and return while sessions are being created; `get_engine()`
    waits for it. warm_up: None follows COSYVOICE_WARMUP (False under SnapStart: its hook warms up);
    verify_hashes: check every artifact file's sha256 first (where no caller waits for the INIT)."""
    global _loader
    with _lock:
        if _engine is not None or _loader is not None:
            return
        settings = get_settings()
        startup.STARTUP.lap("process")
        _runtime_import()
        _loader = _Loader(settings, settings.warmup if warm_up is None else warm_up, verify_hashes)


def get_engine(warm_up: bool | None = None) -> Engine:
    """The process's engine: the one `start_loading` began (joined, its failure raised here), else
    loaded on this first call, with warm_up as in `start_loading`."""
    global _engine
    if _engine is None:
        with _lock:
            if _engine is None:
                if _loader is not None:
                    startup.STARTUP.lap("handler_init")
                    engine = _loader.result()
                    startup.STARTUP.lap("load_wait")
                else:
                    settings = get_settings()
                    startup.STARTUP.lap("process")
                    _runtime_import()
                    engine = _create(
                        settings, settings.warmup if warm_up is None else warm_up, verify_hashes=False
                    )
                startup.STARTUP.since_start("ready")
                _engine = engine
    return _engine


def loaded_engine() -> Engine | None:
    """The engine if it is loaded, without loading or waiting for it (readiness probes)."""
    return _engine


def _runtime_import() -> None:
    import function.cosyvoice.engine  # noqa: F401 - imported here so the record times it
    import function.instance.loader  # noqa: F401

    startup.STARTUP.lap("runtime_import")


def build_engine(settings: Settings, verify_hashes: bool = False) -> Engine:
    """An engine as the deployment's settings describe it: the one way every edge builds one (the
    process's model below, `python -m function synth`), so each honours the same settings."""
    from function.cosyvoice.engine import Engine
    from function.instance.loader import open_artifact

    with startup.STARTUP.phase("artifact_fetch"):
        artifact = open_artifact(settings.artifact, verify_hashes)
    with startup.STARTUP.phase("session_creation"):
        engine = Engine.load(artifact, settings.threads, settings.flow_steps)
        engine.batch_decode(settings.decode_batch)
    engine.stall_seconds = settings.stall_seconds
    return engine


def _create(settings: Settings, warm_up: bool, verify_hashes: bool) -> Engine:
    from function.cosyvoice.frontend import preload_normalizer

    engine = build_engine(settings, verify_hashes)
    if warm_up:
        with startup.STARTUP.phase("warm_up"):
            engine.warm_up()
    # The text graphs hold the GIL while they are read: beside the sessions or the warm-up they delay
    # ready by as much (`python -m bench coldstart`), so they are read once the engine is up, on a thread
    # of their own; a request that comes sooner waits for the rest. Under SnapStart they are read before
    # the snapshot.
    preload_normalizer()
    return engine


__all__ = ["build_engine", "get_engine", "loaded_engine", "start_loading"]
