"""function.cosyvoice.run_ahead: order, bound, errors and early close of a producer on its own thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from function.cosyvoice.run_ahead import RunAhead


def test_yields_the_source_in_order_on_another_thread() -> None:
    threads: set[str] = set()

    def source() -> Iterator[int]:
        for item in range(500):
            threads.add(threading.current_thread().name)
            yield item

    with RunAhead(source(), limit=7, name="producer") as items:
        assert list(items) == list(range(500))
    assert threads == {"producer"}


def test_the_producer_runs_at_most_limit_items_ahead() -> None:
    produced = 0

    def source() -> Iterator[int]:
        nonlocal produced
        for item in range(100):
            produced += 1
            yield item

    with RunAhead(source(), limit=5) as items:
        iterator = iter(items)
        assert next(iterator) == 0
        time.sleep(0.3)  # ample time for an unbounded producer to finish all 100
        # 1 taken + 5 queued + 1 drawn and waiting for room in the queue
        assert produced <= 7
        assert list(iterator) == list(range(1, 100))


def test_an_error_in_the_producer_reaches_the_consumer_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise LookupError("no such voice")

    received = []
    with RunAhead(source(), limit=4) as items, pytest.raises(LookupError, match="no such voice"):
        for item in items:
            received.append(item)
    assert received == [1, 2]


def test_closing_early_stops_the_producer_and_runs_its_cleanup() -> None:
    finished = threading.Event()
    drawn = 0

    def endless() -> Iterator[int]:
        nonlocal drawn
        try:
            while True:
                drawn += 1
                yield drawn
        finally:
            finished.set()

    run_ahead = RunAhead(endless(), limit=3)
    iterator = iter(run_ahead)
    assert [next(iterator), next(iterator)] == [1, 2]
    run_ahead.close()
    assert finished.is_set()  # close() joined the producer, whose generator was closed
    stopped_at = drawn
    time.sleep(0.1)
    assert drawn == stopped_at


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RunAhead(iter([1]), limit=0)


def test_a_held_producer_draws_nothing_until_released() -> None:
    drawn = 0

    def source() -> Iterator[int]:
        nonlocal drawn
        for item in range(50):
            time.sleep(0.005)  # a decode step
            drawn += 1
            yield item

    with RunAhead(source(), limit=100) as items:
        iterator = iter(items)
        assert next(iterator) == 0
        with items.hold():
            time.sleep(0.05)  # the item being drawn when hold() began may still arrive
            held_at = drawn
            time.sleep(0.3)  # ample time to draw all 50 if nothing held it
            assert drawn == held_at < 50
        assert list(iterator) == list(range(1, 50))  # released: the rest, in order


def test_closing_a_held_producer_stops_it() -> None:
    finished = threading.Event()

    def endless() -> Iterator[int]:
        try:
            while True:
                yield 1
        finally:
            finished.set()

    run_ahead = RunAhead(endless(), limit=3)
    next(iter(run_ahead))
    with run_ahead.hold():
        run_ahead.close()  # the client went away while the first chunk was being made
    assert finished.is_set()
