"""uvicorn's server, draining on SIGTERM: `serve` runs it (imported there after the model load starts).

uvicorn's own graceful shutdown does the draining: it stops accepting connections, waits for the requests
it accepted, and cancels those still running when its timeout ends. A cancelled request whose synthesis
thread does not return (a thread cannot be stopped from outside) would still keep the process from
exiting, so the drain has a hard end too: `drain_seconds` after the signal the process exits, whatever is
running. This server also tells function.api.admission of the shutdown (/readyz answers `draining`), and
exits normally afterwards.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

from function.api.admission import Admission

logger = logging.getLogger(__name__)

# uvicorn's graceful timeout ends this long before the hard end, so that requests are cut in order first.
CUT_SECONDS = 1.0


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, admission: Admission, drain_seconds: float) -> None:
        config.timeout_graceful_shutdown = max(0, round(drain_seconds - CUT_SECONDS))
        super().__init__(config)
        self.admission = admission
        self.drain_seconds = drain_seconds
        self._hard_end: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.admission.drain()
        if self._hard_end is None:
            self._hard_end = threading.Timer(self.drain_seconds, self._exit_now)
            self._hard_end.daemon = True
            self._hard_end.start()
        super().handle_exit(sig, frame)

    def _exit_now(self) -> None:
        """The drain's hard end: what still runs is cut with the process."""
        running = self.admission.in_flight
        logger.error(
            "drain: %d synthesis request(s) still running after %g s; exiting", running, self.drain_seconds
        )
        sys.stderr.flush()
        os._exit(0)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # As uvicorn's, but without raising the signal again once shut down: uvicorn does, so that the
        # process dies of it (exit 143 for SIGTERM); after a drain, stopping is what was asked for (exit 0).
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


__all__ = ["DrainingServer"]
