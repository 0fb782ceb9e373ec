"""What one unit of work did, measured once on the service path whatever the edge.

An edge that runs a unit of work (an HTTP request, function.api.request_ids) makes it current with
`tallying`; a context variable carries it into the thread pool and the tasks that serve the request.
Work no edge tallies (a job message's, on the worker's thread) goes to the thread's own tally, which
the edge takes when the message is done (`taken`). The service path (function.service.synthesis) sets
the characters billed and wraps each run of the engine in `measured`, which adds the audio, the time
to first audio and the compute time. Filling a tally records nothing: the edge does, once the unit is
done (function.observe.metrics, function.observe.embedded), so the service path reads no settings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from function.core.tenant import DEFAULT_TENANT


@dataclass
class Tally:
    """One unit of work so far. Seconds are measured from `started` (time.perf_counter)."""

    started: float = field(default_factory=time.perf_counter)
    tenant: str = DEFAULT_TENANT  # whose work it is
    characters: int = 0  # billable: the spoken text's, no SSML tags (Polly's RequestCharacters)
    audio_seconds: float = 0.0
    compute_seconds: float = 0.0  # time spent drawing audio from the engine
    first_audio_seconds: float | None = None  # from `started` to the first audio chunk
    streamed: bool = False  # the audio left as it was made: first audio is what the caller waited for

    @property
    def realtime_factor(self) -> float | None:
        """Compute seconds per audio second; None without audio."""
        return self.compute_seconds / self.audio_seconds if self.audio_seconds > 0 else None

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


_CURRENT: ContextVar[Tally | None] = ContextVar("cosyvoice_tally", default=None)
_thread = threading.local()


def current() -> Tally:
    """The tally of the work being run here: the edge's, else this thread's own."""
    found = _CURRENT.get()
    if found is not None:
        return found
    own: Tally | None = getattr(_thread, "tally", None)
    if own is None:
        own = _thread.tally = Tally()
    return own


def taken() -> Tally:
    """This thread's own tally, replaced by a fresh one: an edge that runs work without `tallying` (a
    job message) takes what it did once it is done."""
    found = current() if _CURRENT.get() is None else Tally()
    _thread.tally = Tally()
    return found


@contextmanager
def tallying(tally: Tally) -> Iterator[Tally]:
    """Inside the block (and in what it starts) the work is `tally`'s."""
    token = _CURRENT.set(tally)
    try:
        yield tally
    finally:
        _CURRENT.reset(token)


def measured(chunks: Iterator[np.ndarray], tally: Tally, rate: int) -> Iterator[np.ndarray]:
    """`chunks` (audio at `rate`) passed on, with the time spent drawing each, and when the run ends
    (or is closed) its audio and compute seconds added to `tally`. Nothing else: the edge counts the
    tally once its unit of work is done."""
    compute = 0.0
    samples = 0
    try:
        while True:
            start = time.perf_counter()
            chunk = next(chunks, None)
            now = time.perf_counter()
            compute += now - start
            if chunk is None:
                return
            if tally.first_audio_seconds is None:
                tally.first_audio_seconds = now - tally.started
            samples += chunk.size
            yield chunk
    finally:
        tally.audio_seconds += samples / rate
        tally.compute_seconds += compute


__all__ = ["Tally", "current", "measured", "taken", "tallying"]
