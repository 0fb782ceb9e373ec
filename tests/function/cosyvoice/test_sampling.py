"""Sampling rules and the LLM's decode loop, without torch (fake graphs stand in for onnxruntime)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from function.core.errors import InvalidRequest
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.llm import (
    CACHE_BLOCK,
    DECODE_SPIN_MICROSECONDS,
    LLM,
    CacheMemory,
    DecoderCache,
)
from function.cosyvoice.params import LLMParams
from function.cosyvoice.sampling import MAX_TRIALS, draw, nucleus, ras_sample, sample_next, softmax
from tests.function.cosyvoice.fake_llm import (
    EOS,
    HEAD_DIM,
    HEADS,
    LAYERS,
    PARAMS,
    FakeDecode,
    FakePositions,
    FakePrefill,
    fake_llm,
    generate,
    segment,
    split_at_none,
)


class Draws:
    """Stands in for np.random.Generator with fixed uniforms."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def logp_of(probs: list[float]) -> np.ndarray:
    return np.log(np.asarray(probs, dtype=np.float32))


def test_nucleus_keeps_tokens_while_mass_before_is_below_top_p() -> None:
    probs = np.array([0.05, 0.5, 0.25, 0.1, 0.1], dtype=np.float32)
    ids, weights = nucleus(probs, top_p=0.8, top_k=25)
    # mass before: 0, .5, .75 (< .8: kept), .85 (stop)
    assert ids.tolist() == [1, 2, 3]
    np.testing.assert_allclose(weights, [0.5, 0.25, 0.1])


def test_nucleus_is_capped_at_top_k_and_breaks_ties_by_index() -> None:
    probs = np.full(10, 0.1, dtype=np.float32)
    ids, _ = nucleus(probs, top_p=0.99, top_k=3)
    assert ids.tolist() == [0, 1, 2]


def _nucleus_by_full_sort(probs: np.ndarray, top_p: float, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Upstream's rule read literally: stable-sort the whole vocabulary, then cut."""
    order = np.argsort(-probs, kind="stable")
    sorted_probs = probs[order]
    mass_before = np.concatenate([[np.float32(0.0)], np.cumsum(sorted_probs, dtype=np.float32)[:-1]])
    count = min(int(np.count_nonzero(mass_before < np.float32(top_p))), top_k)
    return order[:count], sorted_probs[:count]


@pytest.mark.parametrize("shape", ["smooth", "peaked", "few_values", "mostly_zero"])
def test_nucleus_by_selection_equals_the_full_sort(shape: str) -> None:
    # Tie-heavy shapes put equal values across the k-th place, where a selection could pick other ids.
    rng = np.random.default_rng(7)
    for _ in range(200):
        vocab = int(rng.integers(1, 4200))
        if shape == "smooth":
            logp = rng.normal(size=vocab)
        elif shape == "peaked":
            logp = rng.normal(scale=6.0, size=vocab)
        elif shape == "few_values":
            logp = rng.integers(0, 4, size=vocab).astype(np.float64)
        else:
            logp = np.where(rng.random(vocab) < 0.995, -np.inf, rng.integers(0, 2, size=vocab))
            logp[int(rng.integers(vocab))] = 0.0
        probs = softmax(logp.astype(np.float32))
        top_p, top_k = float(rng.choice([0.3, 0.8, 0.99, 1.0])), int(rng.choice([1, 3, 25, 5000]))
        ids, weights = nucleus(probs, top_p, top_k)
        expected_ids, expected_weights = _nucleus_by_full_sort(probs, top_p, top_k)
        assert ids.tolist() == expected_ids.tolist()
        assert weights.tobytes() == expected_weights.tobytes()


def test_draw_is_the_inverse_cdf() -> None:
    weights = np.array([0.5, 0.25, 0.25])
    assert [draw(weights, u) for u in (0.0, 0.49, 0.5, 0.74, 0.75, 0.999)] == [0, 0, 1, 1, 2, 2]


def test_repeated_token_is_redrawn_from_the_full_distribution() -> None:
    logp = logp_of([0.85, 0.05, 0.04, 0.03, 0.01, 0.01, 0.005, 0.004, 0.001])
    # The nucleus holds token 0 alone; it occurs in the window, so the second uniform picks from all tokens.
    assert ras_sample(logp, [5, 0], Draws(0.3, 0.992), PARAMS) == 6  # cumulative .99 → .995
    assert ras_sample(logp, [5, 1], Draws(0.3, 0.992), PARAMS) == 0  # not repeated: kept
    assert ras_sample(logp, [0, 5, 5, 5, 5], Draws(0.3), PARAMS) == 0  # 0 left the window of 4


def test_eos_is_rejected_until_allowed() -> None:
    logp = logp_of([0.3, 0.02, 0.02, 0.02, 0.01, 0.01, 0.01, 0.01, 0.6])
    # Nucleus {EOS: .6, 0: .3}: draws below 2/3 pick EOS.
    assert sample_next(logp, [], Draws(0.5, 0.1, 0.9), PARAMS, allow_eos=False) == 0  # type: ignore[arg-type]
    assert sample_next(logp, [], Draws(0.5), PARAMS, allow_eos=True) == EOS  # type: ignore[arg-type]


def test_certain_eos_falls_back_to_the_best_speech_token() -> None:
    logp = np.full(EOS + 1, -np.inf, dtype=np.float32)
    logp[EOS], logp[3] = 0.0, -30.0
    draws = Draws(*([0.5] * (2 * MAX_TRIALS)), 0.5)
    assert sample_next(logp, [], draws, PARAMS, allow_eos=False) == 3  # type: ignore[arg-type]


def test_seeded_sampling_is_reproducible() -> None:
    logp = np.log(softmax(np.random.default_rng(1).standard_normal(EOS + 1).astype(np.float32)))

    def run(seed: int) -> list[int]:
        rng, decoded = np.random.default_rng(seed), []
        for _ in range(30):
            decoded.append(sample_next(logp, decoded, rng, PARAMS, allow_eos=False))
        return decoded

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_generation_stops_at_eos_only_after_three_times_the_text() -> None:
    llm, prefill, decode = fake_llm(eos_prob=0.95)
    for seed in range(5):
        tokens = generate(llm, text_len=3, prompt_text_len=4, seed=seed)
        assert len(tokens) == 9  # v1's min 3 per text token (prompt text not counted), then EOS wins
        assert EOS not in tokens
    assert prefill.calls[0]["text_tokens"].shape == (1, 7)
    prefix = 1 + 7 + 1 + 1  # sos, speaker, text, task id
    assert decode.past_lens[:5] == list(range(prefix, prefix + 5))


def test_generation_is_capped_at_thirty_per_text_token() -> None:
    llm, _, _ = fake_llm(eos_prob=0.0)
    assert len(generate(llm, text_len=2)) == 60  # v1's CosyVoiceModel: max_token_text_ratio=30


def test_v1_length_ratios_are_the_defaults() -> None:
    assert (LLMParams().min_token_text_ratio, LLMParams().max_token_text_ratio) == (3.0, 30.0)


def test_a_segment_longer_than_the_context_allows_is_spoken_up_to_the_context() -> None:
    # 300 text tokens would allow 9000 speech tokens: upstream has no refusal, so the cap is the context.
    llm, prefill, _ = fake_llm(eos_prob=0.0)
    llm.params = LLMParams(**{**vars(PARAMS), "max_context": 400})
    assert llm.length_limits(300, 20, 30) == (48, 48)
    assert len(generate(llm, text_len=300, prompt_text_len=20)) == 400 - (300 + 20 + 2)
    assert prefill.calls[0]["text_tokens"].shape == (1, 320)


def test_a_prompt_and_text_that_fill_the_context_alone_are_refused() -> None:
    llm, _, _ = fake_llm(eos_prob=0.0)
    llm.params = LLMParams(**{**vars(PARAMS), "max_context": 400})
    with pytest.raises(InvalidRequest, match="402 LLM positions"):
        llm.length_limits(380, 20, 0)


def test_eos_stays_in_the_first_nucleus_and_is_redrawn() -> None:
    # v1 keeps EOS in the nucleus before min_len and draws again when it comes up; masking EOS first
    # would widen the nucleus to the third token. EOS 0.5, token 0 0.35, token 1 0.15, top_p 0.8: the
    # nucleus is {EOS, 0}, so the first token is always 0.
    probs = np.zeros(EOS + 1, dtype=np.float32)
    probs[[EOS, 0, 1]] = [0.5, 0.35, 0.15]
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    llm = LLM(FakePrefill(logp), FakeDecode(logp), FakePositions(), PARAMS)  # type: ignore[arg-type]
    first = {generate(llm, text_len=1, seed=seed)[0] for seed in range(40)}
    assert first == {0}


class DistancePositions:
    """Position rows that hold their own distance, and a record of the distances asked for."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def __call__(self, distances: np.ndarray) -> np.ndarray:
        self.asked.append(distances.tolist())
        rows = np.broadcast_to(distances[None, None, :, None], (LAYERS, HEADS, distances.size, HEAD_DIM))
        return rows.astype(np.float32)


def test_decoder_cache_binds_its_buffers_and_grows() -> None:
    prefill = np.arange(LAYERS * 3 * HEADS * 5 * HEAD_DIM, dtype=np.float32).reshape(
        LAYERS, 3, HEADS, 5, HEAD_DIM
    )
    positions = DistancePositions()
    cache = DecoderCache(positions, vocab=EOS + 1)
    cache.add(prefill)
    assert cache.capacity == CACHE_BLOCK
    assert positions.asked == [list(range(5, CACHE_BLOCK))]  # the prefix's own rows came with prefill
    first = cache.feeds()
    for step in range(CACHE_BLOCK):
        cache.token[0, 0] = step
        outputs = cache.outputs()
        length = int(cache.lengths[0])
        assert cache.feeds()["past_len"].tolist() == [length]
        for name, rows in outputs.items():  # what the decode graph writes
            if name.startswith("present_"):
                rows[:, :, length] = step
        cache.advance()
        assert cache.capacity > cache.lengths[0]  # the next step finds its position rows
    assert cache.lengths.tolist() == [5 + CACHE_BLOCK] and cache.capacity == 2 * CACHE_BLOCK
    assert positions.asked[1:] == [list(range(CACHE_BLOCK, 2 * CACHE_BLOCK))]  # one block, when it was added
    feeds = cache.feeds()
    assert feeds["past_key_0"].shape == (1, HEADS, cache.capacity, HEAD_DIM)
    assert feeds["past_pos_0"].shape == (HEADS, HEAD_DIM, cache.capacity)  # distance last
    assert feeds["past_len"].tolist() == cache.lengths.tolist()
    assert np.shares_memory(feeds["past_len"], first["past_len"])  # read in place
    np.testing.assert_array_equal(feeds["past_value_1"][0, :, :5], prefill[1, 1])
    np.testing.assert_array_equal(feeds["past_pos_0"][:, :, :5], prefill[0, 2].transpose(0, 2, 1))
    assert (feeds["past_key_0"][0, :, 5 + 7] == 7).all() and (
        feeds["past_key_0"][0, :, cache.lengths[0] :] == 0
    ).all()
    assert (feeds["past_pos_1"][:, :, 5 + 7] == 5 + 7).all()
    assert (feeds["past_pos_1"][:, :, -1] == cache.capacity - 1).all()
    assert all(value.flags.c_contiguous for value in feeds.values())
    # The outputs are the key and value buffers themselves, so the graph writes where the next step reads.
    assert np.shares_memory(cache.outputs()["present_value_1"], feeds["past_value_1"])


def test_a_step_rebinds_after_the_cache_grows() -> None:
    llm, _, decode = fake_llm(eos_prob=0.0)
    text = np.zeros(CACHE_BLOCK - 7, dtype=np.int64)  # + speaker, sos, task id: 4 positions short of a block
    _, cache = llm.start(text, np.zeros((1, 192), np.float32), np.zeros(0, dtype=np.int64))
    assert cache.capacity == CACHE_BLOCK
    for token in range(1, 9):
        llm.step(token, cache)
    assert cache.capacity == 2 * CACHE_BLOCK
    start = int(cache.lengths[0]) - 8
    assert decode.past_lens == list(range(start, start + 8))
    written = cache.feeds()["past_key_0"][0, 0, start : start + 8, 0]  # each step's row, across the growth
    assert written.tolist() == list(range(1, 9))


@pytest.mark.parametrize("shape", [(192,), (1, 192), (0, 192)])
def test_speaker_embedding_shapes(shape: tuple[int, ...]) -> None:
    llm, prefill, _ = fake_llm(eos_prob=0.5)
    list(
        llm.generate(
            np.arange(2),
            np.zeros(0, np.int64),
            np.ones(shape, np.float32),
            np.zeros(0, np.int64),
            np.random.default_rng(0),
        )
    )
    assert prefill.calls[0]["speaker_embedding"].shape == (shape[0] if len(shape) == 2 else 1, 192)


def test_the_loaded_decode_session_has_both_cores_and_waits_for_work_only_briefly_within_a_run(
    tiny_artifact: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("function.cosyvoice.llm.available_cpus", lambda: 2)
    llm = LLM.load(Artifact.open(tiny_artifact))
    options = llm.decode.session.get_session_options()
    assert options.intra_op_num_threads == 2
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.intra_op.spin_duration_us") == str(
        DECODE_SPIN_MICROSECONDS
    )
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    for other in (llm.prefill, llm.positions):  # the other graphs' workers sleep at once
        assert (
            other.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
            == "0"
        )


def test_cache_memory_hands_back_the_smallest_kept_block_and_keeps_only_the_largest() -> None:
    memory = CacheMemory()
    small, large = memory.take((2, 3)), memory.take((4, 5))
    memory.give(large)
    memory.give(small)
    reused = memory.take((2, 2))  # the smallest block that holds it: `small`'s
    assert reused.shape == (2, 2) and np.shares_memory(reused, small)
    assert np.shares_memory(memory.take((3, 5)), large)  # too big for any other kept block
    assert memory.take((1, 1)).base is not small.base  # nothing kept is left: a new block
    for size in range(1, CacheMemory.KEPT + 3):
        memory.give(memory.take((size, 8)))
    assert memory.kept_bytes == 4 * 8 * sum(range(3, CacheMemory.KEPT + 3))  # the KEPT largest


def test_a_grown_cache_in_reused_memory_reads_zeros_past_what_it_holds() -> None:
    memory = CacheMemory()
    stale = memory.take((LAYERS * 2 * HEADS * 2 * CACHE_BLOCK * HEAD_DIM,))
    stale[...] = 99.0  # an earlier request's rows
    memory.give(stale)
    prefill = np.ones((LAYERS, 3, HEADS, 5, HEAD_DIM), dtype=np.float32)
    cache = DecoderCache(DistancePositions(), vocab=EOS + 1, memory=memory)
    cache.add(prefill)
    for _ in range(CACHE_BLOCK):
        cache.advance()
    feeds = cache.feeds()
    assert cache.capacity == 2 * CACHE_BLOCK
    assert (feeds["past_key_1"][0, :, :5] == 1).all() and (feeds["past_key_1"][0, :, 5:] == 0).all()
    assert (feeds["past_value_0"][0, :, 5:] == 0).all()


def test_a_finished_generation_gives_its_cache_to_the_next_one() -> None:
    llm, _, decode = fake_llm(eos_prob=0.0)
    generate(llm, text_len=CACHE_BLOCK // 20)  # grows past one block: 30 tokens per text token
    kept = llm.cache_memory.kept_bytes
    assert kept > 0
    tokens = llm.generate(
        np.arange(4),
        np.arange(0),
        np.ones((1, 192), np.float32),
        np.zeros((1, 0), np.int64),
        np.random.default_rng(1),
    )
    next(tokens)  # a request whose consumer stops after one token still gives its cache back
    assert llm.cache_memory.kept_bytes < kept  # in use: taken from what was kept
    tokens.close()
    assert llm.cache_memory.kept_bytes == kept


def prefill_of(length: int, value: float) -> np.ndarray:
    return np.full((LAYERS, 3, HEADS, length, HEAD_DIM), value, dtype=np.float32)


def test_a_batched_cache_holds_rows_of_their_own_lengths_and_closes_ranks_when_one_leaves() -> None:
    cache = DecoderCache(DistancePositions(), vocab=EOS + 1, slots=3)
    assert [cache.add(prefill_of(length, length)) for length in (5, 9, 200)] == [0, 1, 2]
    assert cache.lengths.tolist() == [5, 9, 200] and cache.capacity == 2 * CACHE_BLOCK  # the longest's
    with pytest.raises(ValueError, match="3 rows are all in use"):
        cache.add(prefill_of(4, 4))
    feeds = cache.feeds()
    assert feeds["past_key_0"].shape == (3, HEADS, cache.capacity, HEAD_DIM)
    assert feeds["token"].shape == (3, 1) and cache.outputs()["logp"].shape == (3, EOS + 1)
    assert all(value.flags.c_contiguous for value in feeds.values())
    # Each row: its own prefix, zeros after it.
    assert (feeds["past_value_1"][1, :, :9] == 9).all() and (feeds["past_value_1"][1, :, 9:] == 0).all()
    assert (feeds["past_pos_0"][:, :, :5] == 5).all()  # the first prefill's rows ...
    assert (feeds["past_pos_0"][:, :, 5:] == np.arange(5, cache.capacity)).all()  # ... then by distance
    cache.token[:, 0] = [11, 12, 13]
    cache.remove(0)  # the last row takes its place
    assert cache.rows == 2 and cache.lengths.tolist() == [200, 9] and cache.token[:, 0].tolist() == [13, 12]
    feeds = cache.feeds()
    assert feeds["past_key_1"].shape == (2, HEADS, cache.capacity, HEAD_DIM)
    assert (feeds["past_key_1"][0, :, :200] == 200).all() and (feeds["past_key_1"][1, :, :9] == 9).all()
    cache.remove(1)
    assert cache.lengths.tolist() == [200]
    assert cache.add(prefill_of(3, 3)) == 1  # a sequence joins in the freed slot
    for _ in range(2 * CACHE_BLOCK - 200):
        cache.advance()
    assert cache.lengths.tolist() == [2 * CACHE_BLOCK, 3 + 2 * CACHE_BLOCK - 200]
    assert cache.capacity == 3 * CACHE_BLOCK  # grown for the longest row
    assert (cache.feeds()["past_key_0"][1, :, :3] == 3).all()
    with pytest.raises(IndexError):
        cache.remove(2)


@pytest.mark.parametrize("rows", [1, 2, 3, 8])
def test_segments_come_out_in_order_each_as_generated_alone(rows: int) -> None:
    # EOS likely: each segment ends at its own minimum (3 per text token), so rows leave the batch at
    # different steps and the later segments join in their slots.
    llm, prefill, decode = fake_llm(eos_prob=0.9)
    lengths = [4, 1, 3, 2, 5]
    alone = [generate(llm, text_len=n, seed=seed) for seed, n in enumerate(lengths)]
    assert [len(tokens) for tokens in alone] == [3 * n for n in lengths]
    prefill.calls.clear()
    stream = list(llm.generate_segments([segment(n, seed) for seed, n in enumerate(lengths)], rows))
    assert split_at_none(stream) == alone
    assert [call["text_tokens"].shape[1] for call in prefill.calls] == lengths  # prefilled in order
    assert llm.cache_memory.kept_bytes > 0  # the cache went back


def test_a_segment_may_draw_up_to_its_maximum_in_a_batch() -> None:
    llm, _, _ = fake_llm(eos_prob=0.0)  # never ends before its maximum, 30 per text token
    stream = list(llm.generate_segments([segment(2, 0), segment(1, 1), segment(3, 2)], rows=2))
    assert [len(tokens) for tokens in split_at_none(stream)] == [60, 30, 90]


def test_a_batch_stopped_early_gives_its_cache_back() -> None:
    llm, _, _ = fake_llm(eos_prob=0.0)
    generate(llm, text_len=CACHE_BLOCK // 20)
    kept = llm.cache_memory.kept_bytes
    tokens = llm.generate_segments([segment(4, 0), segment(4, 1)], rows=2)
    next(tokens)
    assert llm.cache_memory.kept_bytes < kept
    tokens.close()
    assert llm.cache_memory.kept_bytes >= kept


def test_no_segments_draw_nothing() -> None:
    llm, prefill, _ = fake_llm(eos_prob=0.5)
    assert list(llm.generate_segments([], rows=3)) == [] and prefill.calls == []


def test_rows_must_be_positive() -> None:
    llm, _, _ = fake_llm(eos_prob=0.5)
    with pytest.raises(ValueError, match="rows must be at least 1"):
        next(llm.generate_segments([segment(2, 0)], rows=0))
