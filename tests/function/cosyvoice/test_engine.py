"""The whole pipeline (LLM → flow → vocoder) on the tiny random-weight artifact: every mode, streamed and not,
seeds, seams, speed, bad input. No torch.

Random weights make two things worse than with the real model, and the thresholds here are set from what
the correct engine measures on them (see each test):
- the audio is noise-like (most energy above 2 kHz), so a click hides in ordinary sample-to-sample jumps;
  the seam test is therefore repeated with a smooth stand-in vocoder (`SmoothVocoder`), where a broken
  seam stands out;
- the flow's attention spreads over its whole window, so a streamed window (≥ 20 tokens of left context)
  gives a mel ~10–15 % away from a whole-utterance run, and the waveform follows it.
Each agreement / continuity check is also run on a deliberately broken stream, to show it can fail.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

import function.cosyvoice.engine as engine_module
import function.cosyvoice.stream as stream_module
from function.core.errors import (
    InvalidPromptAudio,
    InvalidRequest,
    TextTooLong,
    UnknownSpeaker,
    UnsupportedFormat,
)
from function.core.options import SynthesisOptions
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.engine import Engine
from function.cosyvoice.frontend import prepare_text
from function.cosyvoice.llm import DecoderCache
from function.cosyvoice.vocoder import SourceState, Vocoder
from tests.function.cosyvoice.speaking import llm_threads_end, spoken

TEXT = "Hello there, how are you today? I am fine."  # 14 text tokens → 42 to 420 speech tokens
SHORT = "Good morning."
LONG_TEXT = " ".join(  # several text segments
    f"Sentence number {word} is here to make the text long enough for several segments."
    for word in ("one", "two", "three", "four", "five", "six", "seven", "eight")
)
SPEAKER = "英文女"
UPSTREAM_FIRST_CHUNK_TOKENS = 120  # upstream v1 streams its first chunk after token_min_hop_len tokens

# Measured on the tiny artifact with the correct engine (3 seeds × 2 texts): waveform correlation per
# region ≥ 0.916, relative error ≤ 0.41; seam jump ≤ 0.63 × the local 99th-percentile |diff| (smooth
# stand-in: ≤ 1.0). Broken streams measured: a chunk shifted by 32 samples → correlation ≈ 0.25;
# windows starting on odd frames (the estimator's stride-2 grid missed) → 0.69–0.80; no vocoder
# look-ahead (smooth stand-in) → seam jump ≈ 6×; shifted chunk (smooth stand-in) → 12–27×.
MIN_REGION_CORRELATION = 0.88
MAX_REGION_RELATIVE_ERROR = 0.55
MAX_SEAM_JUMP = 1.5  # × the 99th percentile of |x[n+1] - x[n]| in the 256 samples around the seam
SEAM_MARGIN = 24 * 256  # samples (24 mel frames) either side of a seam left out of the agreement check


@pytest.fixture(scope="module")
def engine(tiny_artifact: Path) -> Engine:
    return Engine.load(Artifact.open(tiny_artifact), threads=1)


def voiced_audio(seconds: float, rate: int = 16000, amplitude: float = 0.3) -> np.ndarray:
    """Speech-like: a gliding 120–170 Hz pulse train's first harmonics under a syllable-rate envelope."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(145 + 25 * np.sin(2 * np.pi * 0.7 * t)) / rate
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 8))
    return (amplitude * harmonics * (0.4 + 0.6 * np.sin(2 * np.pi * 2.5 * t) ** 2)).astype(np.float32)


def wav_bytes(audio: np.ndarray, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, audio, rate, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def prompt_wav() -> bytes:
    return wav_bytes(voiced_audio(3.0))


def mode_options(mode: str, prompt_wav: bytes) -> dict[str, Any]:
    modes: dict[str, dict[str, Any]] = {
        "sft": {"speaker": SPEAKER},
        "instruct": {"speaker": SPEAKER, "instruct": "A calm, low voice."},
        "zero_shot": {"prompt_audio": prompt_wav, "prompt_text": "This is the voice to clone."},
        "cross_lingual": {"prompt_audio": prompt_wav},
    }
    return modes[mode]


class GenerateSpy:
    """Stands in for engine.llm.generate: records each call's tokens as the engine draws them."""

    def __init__(self, generate: Callable[..., Iterator[int]]) -> None:
        self._generate = generate
        self.calls: list[list[int]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens: list[int] = []
        self.calls.append(tokens)
        for token in self._generate(*args, **kwargs):
            tokens.append(token)
            yield token

    @property
    def drawn(self) -> int:
        return sum(len(tokens) for tokens in self.calls)


@pytest.fixture
def spy(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> GenerateSpy:
    recorder = GenerateSpy(engine.llm.generate)
    monkeypatch.setattr(engine.llm, "generate", recorder)
    return recorder


def run(engine: Engine, spy: GenerateSpy, **options: Any) -> tuple[list[np.ndarray], list[list[int]]]:
    """(chunks, tokens of each text segment) of one request."""
    spy.calls.clear()
    chunks = list(spoken(engine, SynthesisOptions(**options)))
    return chunks, [list(tokens) for tokens in spy.calls]


def expected_samples(engine: Engine, segment_tokens: list[list[int]]) -> int:
    hop = engine.vocoder.params.upsample_factor
    return sum(engine.flow.mel_frames(len(tokens)) * hop for tokens in segment_tokens)


def seams(chunks: list[np.ndarray]) -> list[int]:
    return [int(n) for n in np.cumsum([len(chunk) for chunk in chunks])[:-1]]


def region_agreement(whole: np.ndarray, chunks: list[np.ndarray]) -> list[tuple[float, float]]:
    """(correlation, relative error) of streamed vs whole audio in each chunk, SEAM_MARGIN from seams."""
    streamed = np.concatenate(chunks)
    edges = [0, *seams(chunks), len(streamed)]
    regions = []
    for index in range(len(edges) - 1):
        start = edges[index] + (SEAM_MARGIN if index else 0)
        stop = edges[index + 1] - (SEAM_MARGIN if index < len(edges) - 2 else 0)
        if stop - start >= 4 * 256:
            a, b = whole[start:stop], streamed[start:stop]
            regions.append((float(np.corrcoef(a, b)[0, 1]), float(np.linalg.norm(a - b) / np.linalg.norm(a))))
    return regions


def seam_jumps(chunks: list[np.ndarray]) -> list[float]:
    """Each seam's sample-to-sample jump over the 99th percentile of the jumps around it (seam excluded)."""
    audio = np.concatenate(chunks)
    steps = np.abs(np.diff(audio))
    ratios = []
    for seam in seams(chunks):
        around = np.concatenate([steps[seam - 129 : seam - 1], steps[seam : seam + 128]])
        ratios.append(float(steps[seam - 1] / np.percentile(around, 99)))
    return ratios


def shift_later_chunks(monkeypatch: pytest.MonkeyPatch, samples: int = 32) -> None:
    """Broken seam handling: every chunk after the first starts `samples` late (length kept)."""
    audio = stream_module.SegmentStream.audio

    def shifted(self: Any, mel: np.ndarray, final: bool) -> np.ndarray:
        first = self.emitted_frames == 0
        out = audio(self, mel, final)
        return out if first else np.concatenate([out[samples:], np.zeros(samples, dtype=np.float32)])

    monkeypatch.setattr(stream_module.SegmentStream, "audio", shifted)


# --- modes, tokens, lengths, seeds ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sft", "instruct", "zero_shot", "cross_lingual"])
def test_every_mode_streamed_and_whole(
    engine: Engine, spy: GenerateSpy, prompt_wav: bytes, mode: str
) -> None:
    options = {"text": TEXT, "seed": 5, **mode_options(mode, prompt_wav)}
    whole, whole_tokens = run(engine, spy, **options)
    streamed, streamed_tokens = run(engine, spy, stream=True, **options)

    # At least 42 tokens (3 per text token) are drawn: past the first chunk's 10 + 10, so two chunks or more.
    assert len(whole) == 1 and len(streamed) >= 2
    assert streamed_tokens == whole_tokens and len(whole_tokens[0]) > 0
    n = expected_samples(engine, whole_tokens)
    assert sum(len(chunk) for chunk in streamed) == len(whole[0]) == n
    for chunk in [*whole, *streamed]:
        assert chunk.dtype == np.float32 and chunk.ndim == 1 and len(chunk) > 0
        assert np.all(np.isfinite(chunk)) and np.max(np.abs(chunk)) <= 1.0
    assert np.std(whole[0]) > 1e-3  # sound, not silence


@pytest.mark.parametrize("stream", [False, True])
def test_seed_reproduces_bit_exactly_and_different_seeds_differ(engine: Engine, stream: bool) -> None:
    def audio(seed: int | None) -> np.ndarray:
        return engine.synthesize(SynthesisOptions(text=SHORT, speaker=SPEAKER, seed=seed, stream=stream))

    first = audio(11)
    assert np.array_equal(first, audio(11))
    other = audio(12)
    assert len(other) != len(first) or not np.allclose(other, first, atol=1e-3)
    unseeded = audio(None)
    assert len(unseeded) != len(audio(None)) or not np.array_equal(unseeded, audio(None))


# --- streaming: agreement, seams, latency --------------------------------------------------------------


# Chunks long enough that every one is checked away from its seams (the engine's first chunk, 10 tokens or
# 17 frames, is shorter than the seam margin, and so may be a segment's last).
LONG_CHUNKS = (25, 50, 100)


@pytest.mark.parametrize("plan", ["engine's", "long"])
@pytest.mark.parametrize("seed", [1, 2])
def test_streamed_agrees_with_whole_away_from_seams(
    engine: Engine, spy: GenerateSpy, monkeypatch: pytest.MonkeyPatch, seed: int, plan: str
) -> None:
    if plan == "long":
        monkeypatch.setattr(engine, "chunk_tokens", LONG_CHUNKS)
    (whole,), tokens = run(engine, spy, text=TEXT, speaker=SPEAKER, seed=seed)
    chunks, streamed_tokens = run(engine, spy, text=TEXT, speaker=SPEAKER, seed=seed, stream=True)
    assert streamed_tokens == tokens and sum(map(len, chunks)) == len(whole)
    regions = region_agreement(whole, chunks)
    assert len(regions) >= (3 if plan == "long" else 2)
    for correlation, error in regions:
        assert correlation >= MIN_REGION_CORRELATION, regions
        assert error <= MAX_REGION_RELATIVE_ERROR, regions


def test_agreement_check_fails_on_shifted_chunks(
    engine: Engine, spy: GenerateSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    (whole,), _ = run(engine, spy, text=TEXT, speaker=SPEAKER, seed=1)
    shift_later_chunks(monkeypatch)
    chunks, _ = run(engine, spy, text=TEXT, speaker=SPEAKER, seed=1, stream=True)
    assert min(correlation for correlation, _ in region_agreement(whole, chunks)) < MIN_REGION_CORRELATION


def test_agreement_check_fails_on_odd_frame_windows(
    engine: Engine, spy: GenerateSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Context taken blindly TOKEN_CONTEXT back, as before windows were aligned to even frames.

    Whether a blind start lands on an odd frame depends on where a request's chunks start (its token
    count), so every request that met an odd window must fail the check, and some must meet one."""
    odd: list[bool] = []

    def blind(self: Any, start: int) -> int:
        window = max(0, start - stream_module.TOKEN_CONTEXT)
        odd.append(self.frame(window) % 2 == 1)
        return window

    monkeypatch.setattr(engine, "chunk_tokens", LONG_CHUNKS)  # every window's chunk is checked
    exercised = 0
    for seed in (1, 2, 3):
        (whole,), _ = run(engine, spy, text=TEXT, speaker=SPEAKER, seed=seed)
        odd.clear()
        with monkeypatch.context() as patch:
            patch.setattr(stream_module.SegmentStream, "window_start", blind)
            chunks, _ = run(engine, spy, text=TEXT, speaker=SPEAKER, seed=seed, stream=True)
        if any(odd):
            exercised += 1
            worst = min(correlation for correlation, _ in region_agreement(whole, chunks))
            assert worst < MIN_REGION_CORRELATION, (seed, worst)
    assert exercised


def test_no_click_at_seams(engine: Engine) -> None:
    for seed in (1, 2):
        chunks = list(spoken(engine, SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=seed, stream=True)))
        assert len(chunks) >= 3
        assert max(seam_jumps(chunks)) <= MAX_SEAM_JUMP


class SmoothVocoder(Vocoder):
    """The real vocoder's source bookkeeping (phase carried across chunks), but a smooth output with a
    receptive field: a 220 Hz sine under an envelope averaged over ±RADIUS mel frames, zero-padded at the
    window edges as convolutions are. A seam computed without enough right context shows as a step."""

    RADIUS = 6

    def f0(self, mel: np.ndarray) -> np.ndarray:
        return np.full((1, mel.shape[2]), 220.0, dtype=np.float32)

    def sine_waves(self, f0: np.ndarray, noise: Any, state: SourceState) -> np.ndarray:
        return super().sine_waves(f0, np.zeros_like(noise), state)

    def generate(self, mel: np.ndarray, sine_waves: np.ndarray) -> np.ndarray:
        hop = self.params.upsample_factor
        level = 1.0 / (1.0 + np.exp(-mel[0].mean(axis=0)))  # [frames]
        envelope = np.convolve(level, np.ones(2 * self.RADIUS + 1) / (2 * self.RADIUS + 1), mode="same")
        centres = (np.arange(mel.shape[2]) + 0.5) * hop
        smooth = np.interp(np.arange(mel.shape[2] * hop), centres, envelope)
        return (0.5 / self.params.sine_amp * sine_waves[0, :, 0] * smooth).astype(np.float32)


@pytest.fixture
def smooth_engine(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    real = engine.vocoder
    monkeypatch.setattr(engine, "vocoder", SmoothVocoder(real.f0_graph, real.generator_graph, real.params))
    return engine


@pytest.mark.parametrize("breakage", [None, "no_lookahead", "shifted_chunk"])
def test_no_click_at_seams_of_a_smooth_signal(
    smooth_engine: Engine, monkeypatch: pytest.MonkeyPatch, breakage: str | None
) -> None:
    if breakage == "no_lookahead":
        monkeypatch.setattr(stream_module, "VOCODER_LOOKAHEAD", 0)
    elif breakage == "shifted_chunk":
        shift_later_chunks(monkeypatch)
    options = SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=1, stream=True)
    jumps = seam_jumps(list(spoken(smooth_engine, options)))
    assert len(jumps) >= 2
    if breakage is None:
        assert max(jumps) <= MAX_SEAM_JUMP, jumps
    else:
        assert max(jumps) > 2 * MAX_SEAM_JUMP, jumps


def test_first_chunk_comes_after_far_fewer_tokens_than_upstream(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first chunk is made from the first 35 tokens (25 + 10 look-ahead), whatever the LLM's thread
    has drawn beyond them by then."""
    drawn_at_chunk: list[int] = []
    chunk = stream_module.SegmentStream.chunk

    def recorded(self: Any, tokens: np.ndarray, start: int, end: int, final: bool) -> np.ndarray:
        drawn_at_chunk.append(tokens.shape[1])
        return chunk(self, tokens, start, end, final)

    monkeypatch.setattr(stream_module.SegmentStream, "chunk", recorded)
    stream = spoken(engine, SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=1, stream=True))
    first = next(stream)
    rest = list(stream)
    assert len(first) > 0 and rest  # there was more to come: the first chunk did not wait for the end
    assert drawn_at_chunk[0] < drawn_at_chunk[-1]
    assert drawn_at_chunk[0] <= UPSTREAM_FIRST_CHUNK_TOKENS // 3  # measured: 20 (10 + 10 look-ahead)


# --- speed, long text --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_speed_changes_duration(engine: Engine, spy: GenerateSpy, speed: float, stream: bool) -> None:
    (normal,), tokens = run(engine, spy, text=SHORT, speaker=SPEAKER, seed=3)
    chunks, changed_tokens = run(engine, spy, text=SHORT, speaker=SPEAKER, seed=3, speed=speed, stream=stream)
    assert changed_tokens == tokens  # the same speech, only its tempo changes
    hop = engine.vocoder.params.upsample_factor
    assert abs(sum(map(len, chunks)) - len(normal) / speed) <= hop


def test_long_text_gives_audio_for_every_segment(
    engine: Engine, spy: GenerateSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Random weights rarely draw EOS; fewer speech tokens per text token keep this test fast.
    monkeypatch.setattr(engine.llm, "params", replace(engine.llm.params, max_token_text_ratio=3.0))
    segments = prepare_text(LONG_TEXT, engine.tokenizer)
    assert len(segments) >= 2
    for stream in (False, True):
        chunks, tokens = run(engine, spy, text=LONG_TEXT, speaker=SPEAKER, seed=4, stream=stream)
        assert len(tokens) == len(segments) and all(tokens)
        assert sum(map(len, chunks)) == expected_samples(engine, tokens)


@pytest.mark.parametrize("stream", [False, True])
def test_a_whole_request_decodes_its_segments_as_one_batch_with_the_audio_of_one_row(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """After the first segment, up to `decode_rows` segments share each decode step and each draws its own
    tokens, so the audio is what one row gives; a streamed request keeps one row."""
    # Random weights rarely draw EOS: each segment ends at its maximum, rows of longer texts later.
    monkeypatch.setattr(engine.llm, "params", replace(engine.llm.params, max_token_text_ratio=3.0))
    text = f"{LONG_TEXT} Then a short one. {LONG_TEXT}"
    assert len(prepare_text(text, engine.tokenizer)) > 3  # a segment joins when another leaves
    options = SynthesisOptions(text=text, speaker=SPEAKER, seed=8, stream=stream)
    one_row = list(spoken(engine, options))
    batch_sizes: list[int] = []
    step = engine.llm._step

    def counted(cache: DecoderCache) -> np.ndarray:
        batch_sizes.append(cache.rows)
        return step(cache)

    monkeypatch.setattr(engine.llm, "_step", counted)
    monkeypatch.setattr(engine, "decode_rows", 3)
    batched = list(spoken(engine, options))
    assert batch_sizes[0] == 1  # the first segment alone: the flow waits for all of it
    assert max(batch_sizes) == (1 if stream else 3)
    assert len(batched) == len(one_row)
    for a, b in zip(batched, one_row, strict=True):
        assert np.array_equal(a, b)
    assert list(spoken(engine, replace(options, text=SHORT)))  # one segment: nothing left to batch


def test_unseeded_requests_decode_in_the_shared_batch_and_seeded_ones_in_their_own(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seed gives the same audio whatever else runs, and a streamed request's first chunk holds its own
    decode: only unseeded whole requests share the process's batch, and then two at once both speak."""
    monkeypatch.setattr(engine.llm, "params", replace(engine.llm.params, max_token_text_ratio=3.0))
    monkeypatch.setattr(engine, "shared_decoder", None)  # both put back after the test
    monkeypatch.setattr(engine, "decode_rows", 1)
    engine.batch_decode(2)
    assert engine.shared_decoder is not None
    shared = engine.shared_decoder
    seeded = SynthesisOptions(text=LONG_TEXT, speaker=SPEAKER, seed=8)
    alone = list(spoken(engine, seeded))
    assert shared.steps == 0
    assert all(np.array_equal(a, b) for a, b in zip(spoken(engine, seeded), alone, strict=True))
    assert list(spoken(engine, replace(seeded, seed=None, stream=True))) and shared.steps == 0
    unseeded = replace(seeded, seed=None)
    results: list[list[np.ndarray]] = []
    speakers = [threading.Thread(target=lambda: results.append(list(spoken(engine, unseeded)))) for _ in "ab"]
    for thread in speakers:
        thread.start()
    for thread in speakers:
        thread.join()
    assert len(results) == 2 and all(sum(map(len, audio)) > 0 for audio in results)
    assert shared.steps > 0
    engine.batch_decode(1)
    assert engine.shared_decoder is None


class InThread:
    """Stands in for function.cosyvoice.run_ahead.RunAhead: the same items, drawn on the consumer's thread."""

    def __init__(self, source: Iterator[Any], limit: int, name: str = "", patience: Any = None) -> None:
        self.source = source

    def __iter__(self) -> Iterator[Any]:
        return self.source

    def hold(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # nothing runs ahead to hold

    def __enter__(self) -> InThread:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.parametrize("stream", [False, True])
def test_overlapped_stages_give_the_audio_of_one_thread_bit_exactly(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """The LLM drawing on its own thread changes no token and no sample, over several segments."""
    monkeypatch.setattr(engine.llm, "params", replace(engine.llm.params, max_token_text_ratio=3.0))
    assert len(prepare_text(LONG_TEXT, engine.tokenizer)) >= 2
    options = SynthesisOptions(text=LONG_TEXT, speaker=SPEAKER, seed=21, stream=stream)
    overlapped = list(spoken(engine, options))
    with monkeypatch.context() as patch:
        patch.setattr(engine_module, "RunAhead", InThread)
        one_thread = list(spoken(engine, options))
    assert len(overlapped) == len(one_thread)
    for a, b in zip(overlapped, one_thread, strict=True):
        assert np.array_equal(a, b)


def _tokens_drawn_during_the_first_window(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Tokens the LLM drew during each estimator call of a streamed request's first flow window."""
    drawn = 0
    generate = engine.llm.generate

    def counting(*args: Any, **kwargs: Any) -> Iterator[int]:
        nonlocal drawn
        for token in generate(*args, **kwargs):
            drawn += 1
            yield token

    per_call: list[int] = []
    velocity = engine.flow._velocity

    def watched(more_steps: bool, **batch: np.ndarray) -> np.ndarray:
        before = drawn
        out = velocity(more_steps, **batch)
        time.sleep(0.02)  # time enough for an LLM left running to draw
        per_call.append(drawn - before)
        return out

    monkeypatch.setattr(engine.llm, "generate", counting)
    monkeypatch.setattr(engine.flow, "_velocity", watched)
    stream = spoken(engine, SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=3, stream=True))
    next(stream)
    stream.close()
    steps = engine.flow.params.n_timesteps
    assert len(per_call) == steps  # one window made the first chunk
    return per_call


def test_the_first_chunk_holds_the_llm_while_it_goes_through_the_flow(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First audio before all else: the LLM draws nothing during the first chunk's flow window, but for
    the token it was drawing when the hold began (it may finish during the first estimator call)."""
    first, *rest = _tokens_drawn_during_the_first_window(engine, monkeypatch)
    assert first <= 1 and sum(rest) == 0
    with monkeypatch.context() as patch:  # the check can tell: without the hold the LLM draws meanwhile
        patch.setattr(engine_module.RunAhead, "hold", lambda self: contextlib.nullcontext())
        assert sum(_tokens_drawn_during_the_first_window(engine, patch)[1:]) > 0


def test_an_abandoned_stream_stops_the_llm_thread(engine: Engine) -> None:
    stream = spoken(engine, SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=2, stream=True))
    next(stream)
    stream.close()  # what a server does when the client goes away: the LLM thread is told to stop
    assert llm_threads_end()


# --- bad input --------------------------------------------------------------------------------------------


SHORT_PROMPT = wav_bytes(voiced_audio(0.5))
LONG_PROMPT = wav_bytes(voiced_audio(31.0, rate=8000), rate=8000)
SILENT_PROMPT = wav_bytes(np.zeros(32000, dtype=np.float32))
BAD_REQUESTS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("empty text", {"text": "", "speaker": SPEAKER}, InvalidRequest, "text is empty"),
    ("whitespace text", {"text": " \n\t ", "speaker": SPEAKER}, InvalidRequest, "text is empty"),
    ("punctuation only", {"text": "?!…", "speaker": SPEAKER}, InvalidRequest, "nothing to speak"),
    ("unknown speaker", {"text": SHORT, "speaker": "nobody"}, UnknownSpeaker, "known speakers: "),
    (
        "prompt not audio",
        {"text": SHORT, "prompt_audio": b"RIFF but not really a wav"},
        InvalidPromptAudio,
        "could not be decoded",
    ),
    (
        "prompt under 1 s",
        {"text": SHORT, "prompt_audio": SHORT_PROMPT},
        InvalidPromptAudio,
        "between 1 and 30 s",
    ),
    ("prompt over 30 s", {"text": SHORT, "prompt_audio": LONG_PROMPT}, InvalidPromptAudio, "at most 30 s"),
    ("prompt silent", {"text": SHORT, "prompt_audio": SILENT_PROMPT}, InvalidPromptAudio, "silent"),
    (
        "prompt_text alone",
        {"text": SHORT, "speaker": SPEAKER, "prompt_text": "hello"},
        InvalidRequest,
        "prompt_text was given without prompt_audio",
    ),
    (
        "speed too low",
        {"text": SHORT, "speaker": SPEAKER, "speed": 0.4},
        InvalidRequest,
        "speed must be between",
    ),
    (
        "speed too high",
        {"text": SHORT, "speaker": SPEAKER, "speed": 2.5},
        InvalidRequest,
        "speed must be between",
    ),
    (
        "unknown format",
        {"text": SHORT, "speaker": SPEAKER, "format": "aiff"},
        UnsupportedFormat,
        "choose one of wav, flac, ogg, mp3, pcm",
    ),
]


@pytest.fixture(scope="module")
def served_before() -> dict[bool, np.ndarray]:
    """A good request's audio as the engine first gave it, streamed (True) or whole, once per module."""
    return {}


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
@pytest.mark.parametrize("stream", [False, True])
def test_bad_input_raises_a_typed_error_and_the_engine_keeps_serving(
    engine: Engine,
    served_before: dict[bool, np.ndarray],
    options: dict[str, Any],
    error: type[Exception],
    message: str,
    stream: bool,
) -> None:
    good = SynthesisOptions(text=SHORT, speaker=SPEAKER, seed=8, stream=stream)
    if stream not in served_before:
        served_before[stream] = engine.synthesize(good)
    with pytest.raises(error, match=message) as raised:
        engine.synthesize(SynthesisOptions(stream=stream, **options))
    if error is UnknownSpeaker:
        assert all(name in str(raised.value) for name in engine.speakers)
    assert np.array_equal(engine.synthesize(good), served_before[stream])


def test_text_over_the_edge_limit_is_refused_up_front() -> None:
    options = SynthesisOptions(text="word " * 30, speaker=SPEAKER)
    with pytest.raises(TextTooLong, match="150 characters, the limit is 100"):
        options.validated(max_text_chars=100)
    assert options.validated(max_text_chars=200) is options


def test_instruction_ends_with_v1s_plain_endofprompt(engine: Engine) -> None:
    # v1's frontend_instruct tokenizes normalize(instruction) + '<endofprompt>' (ordinary BPE text).
    options = SynthesisOptions(text="Hello there.", speaker="英文女", instruct="Speak slowly.")
    voice = engine.conditioning(options)
    expected = engine.tokenizer.encode("Speak slowly.<endofprompt>")
    assert voice.prompt_text_tokens.tolist() == [expected]
    assert voice.llm_embedding.shape == (0, 192)


def test_model_inputs_are_what_synthesis_feeds_the_llm(
    engine: Engine, spy: GenerateSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine.llm, "params", replace(engine.llm.params, max_token_text_ratio=4.0))  # short
    text = "This first sentence is long enough to stand alone as a segment of its own, truly. " * 6
    options = SynthesisOptions(text=text, speaker="英文男", instruct="Calm.", seed=3)
    utterance = engine.prepare(options)
    inputs = engine.model_inputs(utterance)
    assert len(inputs) == len(engine.segments(text)) > 1
    fed: list[tuple[Any, ...]] = []
    original = spy._generate
    spy._generate = lambda *args: (fed.append(args), original(*args))[1]  # type: ignore[method-assign]
    list(spoken(engine, options))
    assert len(fed) == len(inputs)
    for args, item in zip(fed, inputs, strict=True):
        np.testing.assert_array_equal(args[0], item.text_tokens)
        np.testing.assert_array_equal(args[1], item.conditioning.prompt_text_tokens)
        np.testing.assert_array_equal(args[2], item.conditioning.llm_embedding)
        n = item.text_tokens.shape[1]
        assert (item.min_tokens, item.max_tokens) == (3 * n, 4 * n)
    assert [item.text for item in engine.model_inputs(utterance.part(range(1, 2)))] == [inputs[1].text]
