"""function.cosyvoice.stream on the tiny artifact, torch-free: one segment's tokens → audio, whole or chunked.

GIVEN the tiny artifact's flow and vocoder (one thread), a speaker and tokens drawn from a seed
WHEN a segment is made whole, and chunk by chunk as the engine feeds it
THEN chunked and whole give the same number of frames and samples, one seed gives the same chunks, every
window starts on an even frame with its context, the noise at a position is the same however it is asked
for, and a cross-fade runs from the provisional tail into the head. (The seams, heard through the engine:
test_engine.py.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.flow import Flow
from function.cosyvoice.stream import (
    TOKEN_CONTEXT,
    TOKEN_LOOKAHEAD,
    Conditioning,
    NoiseField,
    SegmentStream,
    fade,
)
from function.cosyvoice.vocoder import Vocoder

TOKENS = 90
CHUNKS = (25, 30)  # the first chunk's tokens, then every later chunk's (the engine's pattern)


@pytest.fixture(scope="module")
def stages(tiny_artifact: Path) -> tuple[Flow, Vocoder]:
    artifact = Artifact.open(tiny_artifact)
    return Flow.load(artifact, threads=1), Vocoder.load(artifact, threads=1)


def segment(stages: tuple[Flow, Vocoder], seed: int = 0) -> SegmentStream:
    """A stream for a built-in-speaker-like voice (an embedding, no prompt), its noise from `seed`."""
    flow, vocoder = stages
    embedding = np.random.default_rng(100).standard_normal((1, 192), dtype=np.float32)
    empty = np.zeros((1, 0), dtype=np.int64)
    conditioning = Conditioning(
        embedding, embedding, empty, empty, empty, np.zeros((1, 0, flow.params.n_mels), np.float32)
    )
    flow_rng, source_rng = (np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(2))
    return SegmentStream(flow, vocoder, conditioning, flow_rng, source_rng, flow_steps=2)


def tokens(count: int = TOKENS) -> np.ndarray:
    return np.random.default_rng(1).integers(0, 100, (1, count), dtype=np.int64)


def whole(stream: SegmentStream, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mel = stream.mel(ids, 0, ids.shape[1], final=True)
    return mel, stream.audio(mel, final=True)


def chunked(stream: SegmentStream, ids: np.ndarray) -> list[np.ndarray]:
    """The engine's way: a chunk once its tokens and TOKEN_LOOKAHEAD more are drawn, the rest at the end
    (here every token is drawn already, so each chunk sees exactly its look-ahead)."""
    out, start, index = [], 0, 0
    while start + CHUNKS[min(index, 1)] + TOKEN_LOOKAHEAD <= ids.shape[1]:
        size = CHUNKS[min(index, 1)]
        out.append(stream.chunk(ids[:, : start + size + TOKEN_LOOKAHEAD], start, start + size, final=False))
        start, index = start + size, index + 1
    out.append(stream.chunk(ids, start, ids.shape[1], final=True))
    return out


def test_chunked_and_whole_make_the_same_frames_and_samples(stages: tuple[Flow, Vocoder]) -> None:
    flow, vocoder = stages
    ids = tokens()
    mel, audio = whole(segment(stages), ids)
    assert mel.shape == (1, flow.params.n_mels, flow.mel_frames(TOKENS))
    assert audio.shape == (mel.shape[2] * vocoder.params.upsample_factor,)
    stream = segment(stages)
    pieces = chunked(stream, ids)
    assert len(pieces) == 3  # 25, 30, then the last 35
    assert sum(piece.size for piece in pieces) == audio.size
    assert stream.emitted_frames == mel.shape[2]
    assert all(np.isfinite(piece).all() and np.abs(piece).max() <= 1.0 for piece in pieces)


def test_one_seed_gives_the_same_chunks_and_another_seed_others(stages: tuple[Flow, Vocoder]) -> None:
    ids = tokens()
    first, again = chunked(segment(stages, seed=3), ids), chunked(segment(stages, seed=3), ids)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = chunked(segment(stages, seed=4), ids)
    assert not np.allclose(np.concatenate(first), np.concatenate(other))


def test_each_window_starts_on_an_even_frame_with_its_context(stages: tuple[Flow, Vocoder]) -> None:
    stream = segment(stages)
    assert stream.window_start(0) == 0
    for start in range(1, TOKENS):
        first = stream.window_start(start)
        assert 0 <= first <= max(0, start - TOKEN_CONTEXT), start
        assert stream.frame(first) % 2 == 0, start


def test_noise_at_a_position_is_the_same_however_it_is_asked_for() -> None:
    def field() -> NoiseField:
        return NoiseField(np.random.default_rng(5), width=3, block=16)

    at_once = field().rows(0, 50)
    piecewise = field()
    pieces = [piecewise.rows(0, 7), piecewise.rows(7, 33), piecewise.rows(33, 50)]
    assert np.array_equal(np.concatenate(pieces), at_once)
    backwards = field()
    late, early = backwards.rows(40, 50), backwards.rows(0, 10)  # far ahead first, then from the start
    assert np.array_equal(late, at_once[40:]) and np.array_equal(early, at_once[:10])
    overlapping = field()
    assert np.array_equal(overlapping.rows(10, 30)[5:], overlapping.rows(15, 30))  # neighbours overlap
    assert at_once.shape == (50, 3) and at_once.dtype == np.float32


def test_a_fade_runs_from_the_tail_into_the_head_over_their_overlap() -> None:
    tail, head = np.zeros(4, np.float32), np.ones(10, np.float32)
    faded = fade(tail, head)
    assert faded.shape == head.shape and np.array_equal(head, np.ones(10))  # the head is left as it was
    assert np.all(np.diff(faded[:4]) > 0) and 0 < faded[0] < faded[3] < 1  # rising, never at either end
    assert np.array_equal(faded[4:], head[4:])
    assert np.array_equal(fade(np.zeros(0, np.float32), head), head)  # nothing provisional: the head
    mel_tail, mel_head = np.zeros((1, 2, 8), np.float32), np.ones((1, 2, 3), np.float32)
    assert fade(mel_tail, mel_head).shape == (1, 2, 3)  # along the last axis, at most the head's length
