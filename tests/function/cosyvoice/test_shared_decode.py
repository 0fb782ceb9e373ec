"""The decode batch that requests running at once share, on fake graphs (no torch, no artifact)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from function.core.errors import InvalidRequest
from function.cosyvoice.llm import LLM, LLMInput
from function.cosyvoice.shared_decode import SharedDecoder
from tests.function.cosyvoice.fake_llm import FakeDecode, fake_llm, generate, segment, split_at_none

WAIT_SECONDS = 30  # only a broken decoder thread makes a test wait this long


class Gate:
    """Holds the first decode step (of `rows` rows, if given) until `open` is called, and tells when it
    is there."""

    def __init__(self, decode: FakeDecode, rows: int | None = None) -> None:
        self.rows = rows
        self.reached = threading.Event()
        self._open = threading.Event()
        decode.before_step = self._before_step

    def _before_step(self, rows: int) -> None:
        if self.rows in (None, rows) and not self._open.is_set():
            self.reached.set()
            assert self._open.wait(WAIT_SECONDS)

    def wait(self) -> None:
        assert self.reached.wait(WAIT_SECONDS), "the decoder never took a step of that many rows"

    def open(self) -> None:
        self._open.set()


def eventually(condition: Callable[[], bool]) -> bool:
    """Whether `condition` holds within WAIT_SECONDS (it waits on the decoder's thread)."""
    waited = threading.Event()
    for _ in range(WAIT_SECONDS * 100):
        if condition():
            return True
        waited.wait(0.01)
    return condition()


def alone(llm: LLM, text_len: int, seed: int) -> list[int]:
    return generate(llm, text_len=text_len, seed=seed)


def test_requests_running_at_once_share_steps_and_draw_what_they_draw_alone() -> None:
    llm, _, decode = fake_llm(eos_prob=0.0)  # each segment runs to its maximum: 30 per text token
    expected = [alone(llm, 2, seed=1), alone(llm, 4, seed=2)]
    decode.rows.clear()
    shared = SharedDecoder(llm, rows=4)
    gate = Gate(decode)
    first = shared.generate_segments([segment(2, 1)], rows=1)
    gate.wait()  # the first request is decoding alone; the second arrives
    second = shared.generate_segments([segment(4, 2)], rows=1)
    gate.open()
    assert split_at_none(list(first)) == [expected[0]]
    assert split_at_none(list(second)) == [expected[1]]
    assert max(decode.rows) == 2  # the second joined the first's steps
    assert shared.steps == len(decode.rows) < sum(map(len, expected))


def test_a_free_row_goes_to_the_request_with_the_fewest_rows() -> None:
    llm, prefill, decode = fake_llm(eos_prob=0.0)
    shared = SharedDecoder(llm, rows=2)
    gate = Gate(decode, rows=2)
    # One request's three segments, two rows at a time; its shortest ends first.
    first = shared.generate_segments([segment(1, 0), segment(3, 1), segment(5, 2)], rows=3)
    gate.wait()  # its first two fill the batch
    second = shared.generate_segments([segment(2, 3)], rows=1)
    gate.open()
    assert [len(tokens) for tokens in split_at_none(list(first))] == [30, 90, 150]
    assert [len(tokens) for tokens in split_at_none(list(second))] == [60]
    # The row the first segment freed went to the second request, not to the first's third segment.
    assert [call["text_tokens"].shape[1] for call in prefill.calls] == [1, 3, 2, 5]


def test_a_request_that_goes_away_leaves_the_batch_and_the_memory_comes_back() -> None:
    llm, _, decode = fake_llm(eos_prob=0.0)
    shared = SharedDecoder(llm, rows=2)
    gate = Gate(decode)
    leaving = shared.generate_segments([segment(10, 0), segment(10, 1)], rows=2)
    gate.wait()
    staying = shared.generate_segments([segment(3, 2)], rows=1)
    gate.open()
    assert next(leaving) is not None
    leaving.close()
    assert split_at_none(list(staying)) == [alone(llm, 3, seed=2)]
    assert sum(decode.rows) < 2 * 300 + 90  # the closed request's segments were not decoded to their end
    assert eventually(lambda: llm.cache_memory.kept_bytes > 0)  # given back once the thread is idle


def test_a_segment_that_cannot_fit_fails_alone() -> None:
    llm, _, _ = fake_llm(eos_prob=0.0)
    shared = SharedDecoder(llm, rows=2)
    too_long = LLMInput(
        np.arange(llm.params.max_context), np.zeros(0, np.int64), np.ones((1, 192), np.float32),
        np.zeros(0, np.int64), np.random.default_rng(0),
    )  # fmt: skip
    refused = shared.generate_segments([too_long], rows=1)
    fine = shared.generate_segments([segment(2, 5)], rows=1)
    with pytest.raises(InvalidRequest, match="more than the"):
        list(refused)
    assert split_at_none(list(fine)) == [alone(llm, 2, seed=5)]


def test_a_failed_step_reaches_every_request_in_the_batch_and_the_next_ones_decode() -> None:
    llm, _, decode = fake_llm(eos_prob=0.0)
    shared = SharedDecoder(llm, rows=2)
    failures = iter([RuntimeError("onnxruntime failed")])

    def fail_once(rows: int) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure

    decode.before_step = fail_once
    with pytest.raises(RuntimeError, match="onnxruntime failed"):
        list(shared.generate_segments([segment(2, 0)], rows=1))
    assert split_at_none(list(shared.generate_segments([segment(2, 0)], rows=1))) == [alone(llm, 2, seed=0)]


def test_segments_come_out_in_order_with_no_more_than_their_rows_in_the_batch() -> None:
    llm, _, decode = fake_llm(eos_prob=0.9)  # each ends at its minimum, 3 per text token
    lengths = [4, 1, 3, 2, 5]
    expected = [alone(llm, n, seed) for seed, n in enumerate(lengths)]
    decode.rows.clear()
    shared = SharedDecoder(llm, rows=4)
    drawn: Iterator[int | None] = shared.generate_segments(
        [segment(n, seed) for seed, n in enumerate(lengths)], rows=2
    )
    assert split_at_none(list(drawn)) == expected
    assert max(decode.rows) == 2


def test_fewer_than_two_rows_is_not_a_shared_batch() -> None:
    llm, _, _ = fake_llm(eos_prob=0.5)
    with pytest.raises(ValueError, match="at least two rows"):
        SharedDecoder(llm, rows=1)
    with pytest.raises(ValueError, match="rows must be at least 1"):
        SharedDecoder(llm, rows=2).generate_segments([segment(1, 0)], rows=0)
