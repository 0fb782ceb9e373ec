"""function.cosyvoice.run_ahead: order, bound, errors and early close of a producer on its own thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from function.core.errors import Stalled
from function.cosyvoice.run_ahead import RunAhead, stuck_producers


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
    limit, asked, ahead = 5, [0], []
    full = threading.Event()

    def source() -> Iterator[int]:
        for item in range(100):
            # Drawing item `item`: the items before it are taken or queued (at most `limit`).
            ahead.append(item - asked[0])
            if item - asked[0] == limit:
                full.set()  # as far ahead as it may go: the queue is full and this one waits for room
            yield item

    with RunAhead(source(), limit=limit) as items:
        iterator = iter(items)
        asked[0] += 1
        assert next(iterator) == 0
        assert full.wait(timeout=30)  # it ran ahead while nothing was taken...
        for expected in range(1, 100):
            asked[0] += 1
            assert next(iterator) == expected
    assert max(ahead) == limit  # ...and never further: 1 taken, `limit` queued, 1 waiting for room


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

    source = endless()
    run_ahead = RunAhead(source, limit=3)
    iterator = iter(run_ahead)
    assert [next(iterator), next(iterator)] == [1, 2]
    run_ahead.close()  # returns at once: the producer stops at its next item
    assert run_ahead.wait(30) and finished.is_set()  # its generator was closed on its own thread
    assert next(source, None) is None and drawn <= 2 + 3 + 1  # closed: it draws nothing more


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RunAhead(iter([1]), limit=0)


def test_a_held_producer_draws_nothing_until_released() -> None:
    holding, began_held = [False], []  # whether the hold was on as each draw began
    hold_began = threading.Event()

    def source() -> Iterator[int]:
        for item in range(50):
            began_held.append(holding[0])
            if item == 1:
                hold_began.wait(timeout=30)  # the item being drawn when hold() begins may still arrive
            yield item

    with RunAhead(source(), limit=100) as items:
        iterator = iter(items)
        assert next(iterator) == 0
        with items.hold():
            holding[0] = True
            hold_began.set()
            time.sleep(0.3)  # ample time to draw all 50 if nothing held it
            during = list(began_held)
            holding[0] = False
        assert during and True not in during, during  # no draw began while held
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
        assert run_ahead.wait(30)  # stopped while still held
    assert finished.is_set()


def test_close_returns_at_once_and_a_producer_that_does_not_stop_is_counted() -> None:
    busy, release = threading.Event(), threading.Event()

    def stuck() -> Iterator[int]:
        yield 1
        busy.set()
        release.wait(30)  # a draw that does not end (a stage that stopped answering)
        yield 2

    run_ahead = RunAhead(stuck(), limit=1, name="stuck-producer")
    next(iter(run_ahead))
    assert busy.wait(30)
    run_ahead.close()  # would wait for good if close joined
    assert not run_ahead.wait(0.05)
    stuck_while_drawing = stuck_producers(0.0)
    assert stuck_while_drawing >= 1  # told to stop, still running
    release.set()
    assert run_ahead.wait(30)
    assert stuck_producers(0.0) == stuck_while_drawing - 1  # once it ends, no longer counted


def test_a_consumer_waits_for_an_item_at_most_its_patience() -> None:
    release = threading.Event()

    def silent() -> Iterator[int]:
        yield 1
        release.wait(30)
        yield 2

    with RunAhead(silent(), limit=1, patience=0.2) as items:
        iterator = iter(items)
        assert next(iterator) == 1
        with pytest.raises(Stalled, match="drew nothing for 0.2 s"):
            next(iterator)
        release.set()
