"""Iterate a producer on its own thread, a bounded number of items ahead of the consumer.

The engine runs the LLM this way: its decode is bound by memory bandwidth, while the flow and the vocoder
that consume its tokens are bound by arithmetic. On a thread of its
own the LLM draws the next tokens while the consumer turns the previous ones into audio, so a request
takes about as long as its slowest stage instead of the sum of all three. onnxruntime releases the GIL
while a session runs, so the two threads really do run at once.

The queue is bounded, so a producer never runs further ahead than `limit` items (memory stays flat when
the consumer is slow). Items come out in order; an exception raised by the producer is raised to the
consumer where the next item would have come; closing the consumer early stops the producer at its next
item and waits for it, so nothing keeps running (or holds a session) after a request has ended.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_POLL_SECONDS = 0.05  # how often a producer blocked on a full queue checks whether it should stop
_ITEM, _DONE, _ERROR = range(3)
_EXHAUSTED = object()  # next()'s default: the source has no more items


class RunAhead(Generic[T]):
    """`for item in RunAhead(source, limit)` yields what `source` yields, drawn on a worker thread.

    Use it as a context manager (or call `close`): leaving the block stops and joins the worker."""

    def __init__(self, source: Iterator[T], limit: int, name: str = "run-ahead") -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self._queue: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=limit)
        self._stop = threading.Event()
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
            close = getattr(source, "close", None)
            if close is not None:
                close()  # a generator stopped early runs its cleanup here, on its own thread

    def _put(self, kind: int, value: Any) -> bool:
        while not self._stop.is_set():
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
            if self._stop.is_set():
                return False
        return not self._stop.is_set()

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
            kind, value = self._queue.get()
            if kind == _DONE:
                return
            if kind == _ERROR:
                raise value
            yield value

    def close(self) -> None:
        """Stop the producer (at its next item) and wait for it."""
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> RunAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["RunAhead"]
