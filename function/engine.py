"""The pipeline: text → speech tokens (LLM) → mel (flow) → waveform (vocoder), as a stream of chunks.

Requests flow one way: options → voice (who speaks) → text segments → chunks. Randomness is per request:
one seed spawns, for each text segment, independent generators for the LLM's sampling, the flow's noise and
the vocoder's source, so a seed pins the whole result and streaming does not change which tokens are drawn.

Streaming. The LLM yields tokens one by one; every time enough have arrived for the next chunk (25 tokens,
then 50, then 100: 35 tokens drawn before the first chunk instead of upstream's 120; smaller first chunks
did not arrive sooner, as each flow call has ~0.1 s of fixed per-node cost, but cost more calls), the chunk's
tokens go through the flow together with at least `TOKEN_CONTEXT` tokens before it and `TOKEN_LOOKAHEAD`
after it. Each window covers exactly its share of the utterance's mel frames and starts on an even frame
near a token boundary, so the estimator's stride-2 U-Net sees the frame grid of a whole-utterance run;
the flow noise comes from a segment-wide noise field by absolute frame, so overlapping frames of
neighbouring chunks start from the same noise. The vocoder runs on the chunk's mel plus a few frames of
left context (whose harmonic source is reused exactly) and right look-ahead covering its receptive field;
its harmonic phase carries across chunks and its source noise is indexed by absolute sample like the
flow's. Each stage computes a little past the chunk end and cross-fades the start of that provisional
tail into the next chunk's head, so seams neither click nor repeat.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

import numpy as np

from function.artifact import Artifact
from function.errors import InvalidRequest, UnknownSpeaker
from function.flow import Flow
from function.frontend import TextTokenizer, normalize_text, prepare_text
from function.graphs import available_cpus
from function.llm import LLM
from function.options import Mode, SynthesisOptions
from function.vocoder import SourceState, Vocoder

if TYPE_CHECKING:
    from function.prompt import PromptEncoder

ENDOFPROMPT = "<|endofprompt|>"
CHUNK_TOKENS = (25, 50, 100)  # chunk sizes in speech tokens; the last one repeats
TOKEN_CONTEXT = 20  # tokens before a chunk the flow also sees (at least)
TOKEN_LOOKAHEAD = 10  # tokens after a chunk the flow waits for (and computes provisionally)
MEL_FADE = 8  # provisional mel frames of a window cross-faded into the next window's head
AUDIO_FADE = 4  # provisional audio frames cross-faded; the rest of the look-ahead is only context
ALIGN_SEARCH = 8  # extra context tokens a window may take to start on a well-aligned frame
VOCODER_CONTEXT = 8  # mel frames of left context for the vocoder
VOCODER_LOOKAHEAD = 14  # provisional mel frames past the chunk end the vocoder sees (its receptive field)
WARM_UP_TOKENS = 10  # enough to run every graph once; the flow's cost grows with it
NOISE_BLOCK = 256  # noise is drawn in blocks of rows (frames, samples), so chunking does not change it


@dataclass(frozen=True)
class Voice:
    """Everything that says who speaks and how: the resolved inputs of the LLM and the flow."""

    llm_embedding: np.ndarray  # [n, 192], n = 0 (instruct) or 1
    flow_embedding: np.ndarray  # [1, 192]
    prompt_text_tokens: np.ndarray  # [1, Tp] int64 (instruction or prompt transcript)
    llm_prompt_tokens: np.ndarray  # [1, P] int64 speech tokens of the prompt, for the LLM
    flow_prompt_tokens: np.ndarray  # [1, P] int64, for the flow
    prompt_mel: np.ndarray  # [1, Tm, 80]


class _NoiseField:
    """Standard-normal noise rows [position, width] indexed by absolute position, drawn in fixed blocks:
    the values at a position do not depend on how the positions were asked for."""

    def __init__(self, rng: np.random.Generator, width: int, block: int) -> None:
        self._rng = rng
        self._width = width
        self._block = block
        self._noise = np.zeros((0, width), dtype=np.float32)

    def rows(self, start: int, stop: int) -> np.ndarray:
        while self._noise.shape[0] < stop:
            block = self._rng.standard_normal((self._block, self._width), dtype=np.float32)
            self._noise = np.concatenate([self._noise, block])
        return self._noise[start:stop]


def _fade(previous_tail: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Cross-fade the start of `head` with the provisional `previous_tail` along the last axis."""
    n = min(previous_tail.shape[-1], head.shape[-1])
    if n == 0:
        return head
    ramp = np.linspace(0.0, 1.0, n + 2, dtype=np.float32)[1:-1]
    out = head.copy()
    out[..., :n] = previous_tail[..., :n] * (1.0 - ramp) + head[..., :n] * ramp
    return out


class _SegmentStream:
    """Turns one text segment's speech tokens into audio chunks (see the module docstring)."""

    def __init__(self, engine: Engine, voice: Voice, rngs: tuple[np.random.Generator, ...]) -> None:
        self.engine = engine
        self.voice = voice
        self.prompt_noise = rngs[1].standard_normal(
            (1, engine.flow.params.n_mels, voice.prompt_mel.shape[1]), dtype=np.float32
        )
        self.flow_noise = _NoiseField(rngs[1], engine.flow.params.n_mels, NOISE_BLOCK)
        hop = engine.vocoder.params.upsample_factor
        self.source_noise = _NoiseField(rngs[2], engine.vocoder.n_sines, NOISE_BLOCK * hop)
        self.frames_per_token = (
            engine.vocoder.params.sample_rate
            / engine.vocoder.params.upsample_factor
            / (engine.flow.params.input_frame_rate)
        )
        self.mel_tail = np.zeros((1, engine.flow.params.n_mels, 0), dtype=np.float32)
        self.mel_history = np.zeros((1, engine.flow.params.n_mels, 0), dtype=np.float32)
        self.source_history = np.zeros((1, 0, engine.vocoder.params.nb_harmonics + 1), dtype=np.float32)
        self.source_state = SourceState.initial(engine.vocoder.params.nb_harmonics, rngs[2])
        self.audio_tail = np.zeros(0, dtype=np.float32)
        self.emitted_frames = 0  # final mel frames turned into audio so far

    def frame(self, token_index: int) -> int:
        """First mel frame of a token (the whole utterance's frames, rounded down like upstream)."""
        return int(token_index * self.frames_per_token)

    def window_start(self, start: int) -> int:
        """First token the flow sees for a chunk starting at `start`: at least TOKEN_CONTEXT earlier, on an
        even frame (the estimator's stride-2 U-Net then samples the frames a whole-utterance run samples;
        an odd start changes every output frame), and as close as possible to a token boundary."""
        latest = max(0, start - TOKEN_CONTEXT)
        candidates = [a for a in range(max(0, latest - ALIGN_SEARCH), latest + 1) if self.frame(a) % 2 == 0]
        return min(candidates, key=lambda a: (a * self.frames_per_token - self.frame(a), -a))

    def mel(self, tokens: np.ndarray, start: int, end: int, final: bool) -> np.ndarray:
        """Final mel frames for tokens [start, end); keeps the provisional frames after them."""
        n = tokens.shape[1]
        a = self.window_start(start)
        b = n if final else min(n, end + TOKEN_LOOKAHEAD)
        fa, fb = self.frame(a), self.frame(b)
        noise = np.concatenate([self.prompt_noise, self.flow_noise.rows(fa, fb).T[None]], axis=2)
        mel = self.engine.flow(
            tokens[:, a:b],
            self.voice.flow_prompt_tokens,
            self.voice.prompt_mel,
            self.voice.flow_embedding,
            noise,
            frames=fb - fa,
        )
        first = min(self.frame(start) - fa, mel.shape[2])
        last = mel.shape[2] if final else min(self.frame(end) - fa, mel.shape[2])
        chunk = _fade(self.mel_tail[:, :, :MEL_FADE], mel[:, :, first:last])
        self.mel_tail = mel[:, :, last:]
        return chunk

    def audio(self, mel: np.ndarray, final: bool) -> np.ndarray:
        """Waveform for `mel` (the chunk's final frames), continuous with what came before."""
        vocoder = self.engine.vocoder
        hop = vocoder.params.upsample_factor
        context = self.mel_history[:, :, -VOCODER_CONTEXT:] if self.mel_history.shape[2] else self.mel_history
        lookahead = np.zeros_like(mel[:, :, :0]) if final else self.mel_tail[:, :, :VOCODER_LOOKAHEAD]
        window = np.concatenate([context, mel, lookahead], axis=2)
        f0 = vocoder.f0(window)
        n_context, n_new = context.shape[2], mel.shape[2]
        source_context = self.source_history[:, self.source_history.shape[1] - n_context * hop :, :]
        n_ahead = window.shape[2] - n_context - n_new
        first, ahead = self.emitted_frames * hop, (self.emitted_frames + n_new) * hop
        noise_new = self.source_noise.rows(first, ahead)[None]
        noise_ahead = self.source_noise.rows(ahead, ahead + n_ahead * hop)[None]
        source_new = vocoder.sine_waves(f0[:, n_context : n_context + n_new], noise_new, self.source_state)
        source_ahead = vocoder.sine_waves(f0[:, n_context + n_new :], noise_ahead, self.source_state.copy())
        source = np.concatenate([source_context, source_new, source_ahead], axis=1)
        wave = vocoder.generate(window, source)
        emitted = _fade(
            self.audio_tail[: AUDIO_FADE * hop], wave[n_context * hop : (n_context + n_new) * hop]
        )
        self.audio_tail = wave[(n_context + n_new) * hop :]
        self.mel_history = np.concatenate([self.mel_history, mel], axis=2)[:, :, -VOCODER_CONTEXT:]
        self.source_history = np.concatenate([self.source_history, source_new], axis=1)[
            :, -VOCODER_CONTEXT * hop :, :
        ]
        self.emitted_frames += n_new
        return emitted

    def chunks(self, tokens: np.ndarray, start: int, end: int, final: bool) -> np.ndarray:
        mel = self.mel(tokens, start, end, final)
        return self.audio(mel, final)


class Engine:
    """A loaded model. Create once per process (see function.model.get_engine); requests only borrow it."""

    def __init__(
        self,
        artifact: Artifact,
        llm: LLM,
        flow: Flow,
        vocoder: Vocoder,
        tokenizer: TextTokenizer,
        prompt_encoder: PromptEncoder | None,
    ) -> None:
        self.artifact = artifact
        self.llm = llm
        self.flow = flow
        self.vocoder = vocoder
        self.tokenizer = tokenizer
        self.prompt_encoder = prompt_encoder
        self.speaker_embeddings = {
            name: np.asarray(embedding, dtype=np.float32)[None]
            for name, embedding in artifact.manifest.speakers.items()
        }
        self._entropy = np.random.SeedSequence()

    @classmethod
    def load(cls, artifact: Artifact, threads: int | None = None) -> Engine:
        """Create every session. They are built concurrently: session creation releases the GIL."""
        from function.prompt import PromptEncoder

        with ThreadPoolExecutor(max_workers=available_cpus()) as pool:
            flow = pool.submit(Flow.load, artifact, threads)  # the estimator is the slowest: first
            llm = pool.submit(LLM.load, artifact, threads)
            vocoder = pool.submit(Vocoder.load, artifact, threads)
            tokenizer = pool.submit(
                TextTokenizer.from_buffer, artifact.file(artifact.manifest.tokenizer.file)
            )
            prompt = (
                pool.submit(PromptEncoder.load, artifact, threads)
                if PromptEncoder.available(artifact)
                else None
            )
            return cls(
                artifact,
                llm.result(),
                flow.result(),
                vocoder.result(),
                tokenizer.result(),
                prompt.result() if prompt is not None else None,
            )

    @property
    def sample_rate(self) -> int:
        return self.artifact.manifest.sample_rate

    @property
    def speakers(self) -> list[str]:
        return sorted(self.speaker_embeddings)

    def reseed(self) -> None:
        """Fresh entropy for unseeded requests: call after a snapshot restore, so clones differ."""
        self._entropy = np.random.SeedSequence()

    def _seeds(self, seed: int | None) -> np.random.SeedSequence:
        return np.random.SeedSequence(seed) if seed is not None else self._entropy.spawn(1)[0]

    def _tokens(self, text: str) -> np.ndarray:
        return np.asarray([self.tokenizer.encode(text)], dtype=np.int64).reshape(1, -1)

    def voice(self, options: SynthesisOptions) -> Voice:
        n_mels = self.flow.params.n_mels
        empty_tokens = np.zeros((1, 0), dtype=np.int64)
        if options.mode in (Mode.ZERO_SHOT, Mode.CROSS_LINGUAL):
            if self.prompt_encoder is None:
                raise InvalidRequest(
                    "this deployment's artifact has no prompt models (campplus.onnx, "
                    "speech_tokenizer_v1.onnx): voice cloning is unavailable"
                )
            assert options.prompt_audio is not None
            prompt = self.prompt_encoder.encode(options.prompt_audio, options.prompt_text)
            zero_shot = options.mode is Mode.ZERO_SHOT
            prompt_text = normalize_text(options.prompt_text or "") if zero_shot else ""
            return Voice(
                llm_embedding=prompt.embedding,
                flow_embedding=prompt.embedding,
                prompt_text_tokens=self._tokens(prompt_text) if zero_shot else empty_tokens,
                llm_prompt_tokens=prompt.speech_tokens if zero_shot else empty_tokens,
                flow_prompt_tokens=prompt.speech_tokens,
                prompt_mel=prompt.mel,
            )
        assert options.speaker is not None
        embedding = self.speaker_embeddings.get(options.speaker)
        if embedding is None:
            known = ", ".join(self.speakers) or "none (this model has no built-in speakers; use prompt audio)"
            raise UnknownSpeaker(f"unknown speaker {options.speaker!r}; known speakers: {known}")
        instruct = options.mode is Mode.INSTRUCT
        instruction = normalize_text(options.instruct or "") + ENDOFPROMPT if instruct else ""
        return Voice(
            llm_embedding=np.zeros((0, embedding.shape[1]), dtype=np.float32) if instruct else embedding,
            flow_embedding=embedding,
            prompt_text_tokens=self._tokens(instruction) if instruct else empty_tokens,
            llm_prompt_tokens=empty_tokens,
            flow_prompt_tokens=empty_tokens,
            prompt_mel=np.zeros((1, 0, n_mels), dtype=np.float32),
        )

    def stream(self, options: SynthesisOptions) -> Iterator[np.ndarray]:
        """Audio as float32 mono chunks in [-1, 1]. With options.stream, the first chunk comes early."""
        options.validated(max_text_chars=None)  # the edge that built the options enforced its own limit
        voice = self.voice(options)
        segments = prepare_text(options.text, self.tokenizer)
        if not segments:
            raise InvalidRequest("text has nothing to speak (only punctuation or symbols)")
        seeds = self._seeds(options.seed)
        for segment in segments:
            # Fresh generators per segment (LLM, flow noise, vocoder source): what one segment draws
            # cannot shift the next one's randomness, whatever the chunking.
            rngs = tuple(np.random.default_rng(child) for child in seeds.spawn(3))
            yield from self._segment(segment, voice, rngs, options)

    def _segment(
        self, text: str, voice: Voice, rngs: tuple[np.random.Generator, ...], options: SynthesisOptions
    ) -> Iterator[np.ndarray]:
        text_tokens = self._tokens(text)
        generated = self.llm.generate(
            text_tokens, voice.prompt_text_tokens, voice.llm_embedding, voice.llm_prompt_tokens, rngs[0]
        )
        stream = _SegmentStream(self, voice, rngs)
        if not options.stream or options.speed != 1.0:
            tokens = np.asarray([list(generated)], dtype=np.int64).reshape(1, -1)
            if tokens.shape[1] == 0:
                return
            mel = stream.mel(tokens, 0, tokens.shape[1], final=True)
            yield stream.audio(_change_speed(mel, options.speed), final=True)
            return
        collected: list[int] = []
        start, chunk_index = 0, 0
        for token in generated:
            collected.append(token)
            size = CHUNK_TOKENS[min(chunk_index, len(CHUNK_TOKENS) - 1)]
            if len(collected) >= start + size + TOKEN_LOOKAHEAD:
                tokens = np.asarray([collected], dtype=np.int64)
                yield stream.chunks(tokens, start, start + size, final=False)
                start, chunk_index = start + size, chunk_index + 1
        if len(collected) > start:
            tokens = np.asarray([collected], dtype=np.int64)
            yield stream.chunks(tokens, start, len(collected), final=True)

    def synthesize(self, options: SynthesisOptions) -> np.ndarray:
        chunks = list(self.stream(options))
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)

    def warm_up(self) -> None:
        """Every graph once on a short input, so the first request finds mapped pages and primed kernels.

        The LLM is cut at WARM_UP_TOKENS: a full synthesis of even one word can run to 20 tokens per text
        token, seconds that on-demand INIT (10 s cap) and snapshot creation should not spend.
        """
        embedding = np.zeros((1, 192), dtype=np.float32)  # base models have no built-in speaker
        empty = np.zeros((1, 0), dtype=np.int64)
        voice = Voice(
            embedding, embedding, empty, empty, empty, np.zeros((1, 0, self.flow.params.n_mels), np.float32)
        )
        rngs = tuple(np.random.default_rng(child) for child in np.random.SeedSequence(0).spawn(3))
        generated = self.llm.generate(self._tokens("Hello."), empty, embedding, empty, rngs[0])
        tokens = np.asarray([list(islice(generated, WARM_UP_TOKENS))], dtype=np.int64)
        stream = _SegmentStream(self, voice, rngs)
        stream.audio(stream.mel(tokens, 0, tokens.shape[1], final=True), final=True)


def _change_speed(mel: np.ndarray, speed: float) -> np.ndarray:
    """Tempo change by resampling mel frames in time (upstream does the same with linear interpolation)."""
    if speed == 1.0:
        return mel
    frames = mel.shape[2]
    target = max(1, int(frames / speed))
    positions = (np.arange(target, dtype=np.float64) + 0.5) * frames / target - 0.5
    positions = np.clip(positions, 0, frames - 1)
    low = np.floor(positions).astype(np.int64)
    high = np.minimum(low + 1, frames - 1)
    weight = (positions - low).astype(np.float32)
    return mel[:, :, low] * (1 - weight) + mel[:, :, high] * weight


__all__ = ["Engine", "Voice"]
