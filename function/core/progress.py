"""Whether a request is still getting somewhere: a heartbeat that its work beats and a watchdog reads.

An edge that watches its requests (function.api.watchdog) gives each one a `Heartbeat` and makes it
current with `watched`; a context variable carries it into whatever runs the request (asyncio tasks and
the thread pool's workers start from a copy of the context). The engine beats at every speech token it
takes, every flow step and every chunk it yields, and knows nothing of who listens: outside a watched
request `beat` does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Heartbeat:
    """When a request last made progress."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def beat(self) -> None:
        self.last = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the last beat."""
        return time.monotonic() - self.last


_CURRENT: ContextVar[Heartbeat | None] = ContextVar("cosyvoice_heartbeat", default=None)


def beat() -> None:
    """Progress, for the request being run here, if it is watched."""
    heartbeat = _CURRENT.get()
    if heartbeat is not None:
        heartbeat.beat()


@contextmanager
def watched(heartbeat: Heartbeat) -> Iterator[Heartbeat]:
    """Inside the block (and in what it starts) `beat` beats `heartbeat`."""
    token = _CURRENT.set(heartbeat)
    try:
        yield heartbeat
    finally:
        _CURRENT.reset(token)


__all__ = ["Heartbeat", "beat", "watched"]
