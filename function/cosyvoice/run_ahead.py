"""Iterate a producer on its own thread, a bounded number of items ahead of the consumer.

The engine runs the LLM this way: its decode is bound by memory bandwidth, while the flow and the vocoder
that consume its tokens are bound by arithmetic. On a thread of its
own the LLM draws the next tokens while the consumer turns the previous ones into audio, so a request
takes about as long as its slowest stage instead of the sum of all three. onnxruntime releases the GIL
while a session runs, so the two threads really do run at once.

The queue is bounded, so a producer never runs further ahead than `limit` items (memory stays flat when
the consumer is slow). Items come out in order; an exception raised by the producer is raised to the
consumer where the next item would have come.

Closing only signals. `close` sets a flag the producer reads before each item and returns at once: it
takes no lock and waits for nothing, because it runs wherever the consumer's generator is finalised,
which may be the garbage collector on another request's thread, holding that thread's locks. Waiting
there for a producer that needs one of those locks would wedge both for good. The producer stops at its
next item and closes its source on its own thread; `wait` waits for that, with a bound. A consumer waits
for the next item at most `patience` seconds (`Stalled` after that), and a producer told to stop that
has not stopped is counted (`stuck_producers`), so that a health check can see a process that cannot
recover by itself.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from function.core.errors import Stalled

T = TypeVar("T")

_POLL_SECONDS = 0.05  # how often a producer blocked on a full queue checks whether it should stop
_ITEM, _DONE, _ERROR = range(3)
_EXHAUSTED = object()  # next()'s default: the source has no more items
# Producers told to stop and still running: thread → time.monotonic() when told. Written without a lock
# (a dict's item assignment and pop are atomic), since `close` may run inside a finaliser.
_STOPPING: dict[threading.Thread, float] = {}


def stuck_producers(seconds: float) -> int:
    """How many producers were told to stop over `seconds` ago and are still running: each holds a
    thread and whatever its source holds, and a process that collects them does not recover by itself."""
    now, stuck = time.monotonic(), 0
    for thread, told in _STOPPING.copy().items():
        if not thread.is_alive():  # told as it was ending: it never removed itself
            _STOPPING.pop(thread, None)
        elif now - told > seconds:
            stuck += 1
    return stuck


class RunAhead(Generic[T]):
    """`for item in RunAhead(source, limit)` yields what `source` yields, drawn on a worker thread.

    Use it as a context manager (or call `close`): leaving the block tells the worker to stop.
    patience: the longest the consumer waits for one item before `Stalled` (None: no bound)."""

    def __init__(
        self, source: Iterator[T], limit: int, name: str = "run-ahead", patience: float | None = None
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if patience is not None and patience <= 0:
            raise ValueError(f"patience must be positive, got {patience}")
        self._patience = patience
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=limit)
        self._stopping = False  # a plain flag: setting it takes no lock (an Event's set does)
        self._released = threading.Event()
        self._released.set()
        self._thread = threading.Thread(target=self._produce, args=(source,), name=name, daemon=True)
        self._thread.start()

    def _produce(self, source: Iterator[T]) -> None:
        try:
            for item in self._unheld_items(source):
                if not self._put(_ITEM, item):
                    return
        except BaseException as exc:  # handed to the consumer, which decides what it means
            self._put(_ERROR, exc)
        else:
            self._put(_DONE, None)
        finally:
            try:
                close = getattr(source, "close", None)
                if close is not None:
                    close()  # a generator stopped early runs its cleanup here, on its own thread
            finally:
                _STOPPING.pop(threading.current_thread(), None)

    def _put(self, kind: int, value: Any) -> bool:
        while not self._stopping:
            try:
                self._queue.put((kind, value), timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def _unheld_items(self, source: Iterator[T]) -> Iterator[T]:
        """`source`'s items, each drawn only while the consumer does not hold the producer; they end early
        once it should stop (the _DONE put after them is then a no-op)."""
        items = iter(source)
        while self._wait_released():
            item = next(items, _EXHAUSTED)
            if item is _EXHAUSTED:
                return
            yield item  # type: ignore[misc]  # not the sentinel

    def _wait_released(self) -> bool:
        """Wait while the consumer holds the producer; False once it should stop."""
        while not self._released.wait(_POLL_SECONDS):
            if self._stopping:
                return False
        return not self._stopping

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Inside the block the producer draws nothing more (it finishes the item it is drawing): the
        consumer has what it needs and wants the cores to itself."""
        self._released.clear()
        try:
            yield
        finally:
            self._released.set()

    def __iter__(self) -> Iterator[T]:
        while True:
            try:
                kind, value = self._queue.get(timeout=self._patience)
            except queue.Empty:
                raise Stalled(
                    f"synthesis stalled: its {self._thread.name} thread drew nothing for {self._patience:g} s"
                ) from None
            if kind == _DONE:
                return
            if kind == _ERROR:
                raise value
            yield value

    def close(self) -> None:
        """Tell the producer to stop at its next item, and return at once (see the module docstring)."""
        if not self._stopping:
            self._stopping = True
            if self._thread.is_alive():
                _STOPPING[self._thread] = time.monotonic()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the producer to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> RunAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["RunAhead", "stuck_producers"]
