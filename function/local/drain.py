"""uvicorn's server, draining on SIGTERM: `serve` runs it (imported there after the model load starts).

uvicorn's own graceful shutdown does the draining: it stops accepting connections and waits up to
`timeout_graceful_shutdown` for the requests it accepted. This server adds two things: function.api.admission
hears of the shutdown (/readyz answers `draining`), and the process exits normally afterwards.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from uvicorn.server import HANDLED_SIGNALS

from function.api.admission import Admission


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, admission: Admission) -> None:
        super().__init__(config)
        self.admission = admission

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.admission.drain()
        super().handle_exit(sig, frame)

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
