"""The pipeline: text → speech tokens (LLM) → mel (flow) → waveform (vocoder), as a stream of chunks.

Requests flow one way: options → voice (who speaks) → text segments → chunks. Randomness is per request:
one seed spawns, for each text segment, independent generators for the LLM's sampling, the flow's noise and
the vocoder's source, so a seed pins the whole result and neither streaming nor overlap changes what is
drawn.

The stages overlap. The LLM runs on its own thread (function.cosyvoice.run_ahead) through every segment of the
request, at most `RUN_AHEAD_TOKENS` ahead, while this thread turns what it has drawn into audio
(function.cosyvoice.stream): a streamed request's chunk k goes through the flow and the vocoder while the LLM
draws chunk k+1; a whole-utterance request's segment k while the LLM draws segment k+1. The decode is bound by
memory bandwidth and the flow and vocoder by arithmetic. They share two cores poorly, though, so the request's
first chunk holds the LLM while it goes through the flow and the vocoder (first audio before all else).
After its first segment, a whole-utterance request's LLM decodes up to `decode_rows` segments as one batch
(function.cosyvoice.llm): a step reads the decoder's weights once for all its rows, and the segments still
come out in order. Unseeded whole requests running at once share that batch
(function.cosyvoice.shared_decode).

Streaming. Every time enough tokens have arrived for the next chunk (10 tokens, then 50, then 100: 20
tokens drawn before the first chunk instead of upstream's 120), the chunk goes through the flow and the
vocoder with some context either side (see function.cosyvoice.stream). The sizes rest on `python -m bench
chunks`: a smaller first chunk brings the first audio sooner, and with the LLM held during it the listener
waits no longer later on; later sizes that grow more slowly (`python -m bench chunks --schedules
'10,50,100;10,40,60,80,120,160'` alternates the two) make the stream no faster.
A whole-utterance request runs each segment through the flow in one call, as upstream does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from itertools import chain, islice
from typing import TYPE_CHECKING

import numpy as np

from function.core.deadline import Deadline
from function.core.errors import InvalidRequest, UnknownSpeaker
from function.core.options import EncodedPrompt, Mode, SynthesisOptions
from function.core.progress import beat
from function.core.script import Mark, Pause, SpeechMark, Spoken
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.budget import SpeedMeter
from function.cosyvoice.flow import Flow
from function.cosyvoice.frontend import TextTokenizer, normalize_text, prepare_text
from function.cosyvoice.graphs import available_cpus
from function.cosyvoice.llm import LLM, LLMInput
from function.cosyvoice.run_ahead import RunAhead
from function.cosyvoice.shared_decode import SharedDecoder
from function.cosyvoice.stream import TOKEN_LOOKAHEAD, Conditioning, SegmentStream
from function.cosyvoice.utterance import (
    Segment,
    Sentence,
    Step,
    Utterance,
    piece_seeds,
    script_of,
    segment_seeds,
)
from function.cosyvoice.vocoder import Vocoder

if TYPE_CHECKING:
    from function.cosyvoice.prompt import PromptEncoder

# v1's frontend_instruct closes the instruction with this plain text (not a whisper special: it encodes as
# ordinary BPE, as the -Instruct model was trained); "<|endofprompt|>" is the v2/v3 convention.
ENDOFPROMPT = "<endofprompt>"
CHUNK_TOKENS = (10, 50, 100)  # chunk sizes in speech tokens; the last one repeats
RUN_AHEAD_TOKENS = 1000  # how far the LLM may run ahead of the audio (20 s of speech; ints, so cheap)
WARM_UP_TOKENS = 10  # enough to run every graph once; the flow's cost grows with it


@dataclass(frozen=True)
class ModelInput:
    """What one text segment of a request feeds the model: upstream v1's `model_input` (frontend_sft,
    frontend_zero_shot, frontend_cross_lingual, frontend_instruct) plus the LLM's length limits."""

    text: str  # the normalised segment
    text_tokens: np.ndarray  # [1, N] int64
    conditioning: (
        Conditioning  # prompt text tokens, LLM and flow embeddings, prompt speech tokens, prompt mel
    )
    min_tokens: int  # speech tokens drawn before EOS may end the segment
    max_tokens: int  # speech tokens at most


class Engine:
    """A loaded model. Create once per process (function.instance.model.get_engine); requests borrow it."""

    def __init__(
        self,
        artifact: Artifact,
        llm: LLM,
        flow: Flow,
        vocoder: Vocoder,
        tokenizer: TextTokenizer,
        prompt_encoder: PromptEncoder | None,
        flow_steps: int | None = None,
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
        self.speed = SpeedMeter()  # this instance's measured speed, for refusing what cannot finish
        self.chunk_tokens: tuple[int, ...] = CHUNK_TOKENS  # a streamed segment's sizes, settable
        # The flow's Euler steps for requests that do not choose: the deployment's, else the manifest's.
        self.default_flow_steps = flow.params.n_timesteps if flow_steps is None else flow_steps
        flow.time_grid(self.default_flow_steps)  # refuses a step count the flow cannot run, at load
        self.decode_rows = 1  # segments decoded as one batch, at most: see `batch_decode`
        self.shared_decoder: SharedDecoder | None = None
        # The longest a request waits for its LLM thread's next token before it fails (Stalled): a bound
        # on a wait for another thread, set by the deployment; None: no bound.
        self.stall_seconds: float | None = None

    @classmethod
    def load(cls, artifact: Artifact, threads: int | None = None, flow_steps: int | None = None) -> Engine:
        """Create every session. They are built concurrently: session creation releases the GIL.

        threads: the CPUs the engine may use (None: every one available; function.cosyvoice.threads
        splits them between the stages). flow_steps: the flow's Euler steps for requests that leave
        them to the deployment (None: the manifest's n_timesteps, v1's 10)."""
        from function.cosyvoice.prompt import PromptEncoder

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
                flow_steps,
            )

    def batch_decode(self, rows: int) -> None:
        """Decode up to `rows` segments as one batch (1: one after another, v1's way). Each row holds its
        own decoder cache: memory grows with the rows.

        Unseeded whole-utterance requests that run at once share one batch
        (function.cosyvoice.shared_decode). A seeded request batches only its own segments, so its seed
        gives the same audio whatever else runs; a streamed one decodes on its own, so that its first chunk
        can hold the decode (`_segment`) while the shared batch goes on for the others."""
        if rows < 1:
            raise ValueError(f"rows must be at least 1, got {rows}")
        self.decode_rows = rows
        self.shared_decoder = SharedDecoder(self.llm, rows) if rows > 1 else None

    @property
    def sample_rate(self) -> int:
        return self.artifact.manifest.sample_rate

    @property
    def token_rate(self) -> float:
        """Speech tokens per second of audio."""
        return self.artifact.manifest.params.flow.input_frame_rate

    @property
    def speakers(self) -> list[str]:
        return sorted(self.speaker_embeddings)

    def flow_steps_for(self, options: SynthesisOptions) -> int:
        """The flow's Euler steps a request runs at: its own choice, else the deployment's default."""
        return self.default_flow_steps if options.flow_steps is None else options.flow_steps

    def reseed(self) -> None:
        """Fresh entropy for unseeded requests: call after a snapshot restore, so clones differ."""
        self._entropy = np.random.SeedSequence()

    def _seeds(self, seed: int | None) -> np.random.SeedSequence:
        return np.random.SeedSequence(seed) if seed is not None else self._entropy.spawn(1)[0]

    def _tokens(self, text: str) -> np.ndarray:
        return np.asarray([self.tokenizer.encode(text)], dtype=np.int64).reshape(1, -1)

    def encode_prompt(self, audio: bytes | None, transcript: str | None) -> EncodedPrompt:
        """A prompt recording's speech tokens, speaker embedding and mel (checked as
        function.cosyvoice.prompt.decode_prompt says); InvalidRequest when the artifact cannot clone."""
        if self.prompt_encoder is None:
            raise InvalidRequest(
                "this deployment's artifact has no prompt models (campplus.onnx, "
                "speech_tokenizer_v1.onnx): voice cloning is unavailable"
            )
        assert audio is not None
        return self.prompt_encoder.encode(audio, transcript)

    def conditioning(self, options: SynthesisOptions) -> Conditioning:
        """Who speaks, as the LLM and the flow take it: a built-in speaker (with its instruction), or a
        prompt recording's features (extracted now unless the options bring them). UnknownSpeaker and
        InvalidRequest are the caller's 4xx."""
        n_mels = self.flow.params.n_mels
        empty_tokens = np.zeros((1, 0), dtype=np.int64)
        if options.mode in (Mode.ZERO_SHOT, Mode.CROSS_LINGUAL):
            prompt = options.prompt_features or self.encode_prompt(options.prompt_audio, options.prompt_text)
            zero_shot = options.mode is Mode.ZERO_SHOT
            prompt_text = normalize_text(options.prompt_text or "") if zero_shot else ""
            return Conditioning(
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
        return Conditioning(
            llm_embedding=np.zeros((0, embedding.shape[1]), dtype=np.float32) if instruct else embedding,
            flow_embedding=embedding,
            prompt_text_tokens=self._tokens(instruction) if instruct else empty_tokens,
            llm_prompt_tokens=empty_tokens,
            flow_prompt_tokens=empty_tokens,
            prompt_mel=np.zeros((1, 0, n_mels), dtype=np.float32),
        )

    def segments(self, text: str) -> list[str]:
        """The normalised text segments `text` is synthesised in, one after another; InvalidRequest when
        it has nothing to speak."""
        segments = prepare_text(text, self.tokenizer)
        if not segments:
            raise InvalidRequest("text has nothing to speak (only punctuation or symbols)")
        return segments

    def prepare(self, options: SynthesisOptions) -> Utterance:
        """The request planned once (function.cosyvoice.utterance): the conditioning resolved, every spoken
        piece segmented, each segment's seeds spawned. Raises the caller's errors before any synthesis."""
        options.validated(max_text_chars=None)  # the edge that built the options enforced its own limit
        conditioning = self.conditioning(options)
        script = script_of(options)
        spoken = [piece for piece in script.pieces if isinstance(piece, Spoken)]
        seeds = iter(piece_seeds(options.seed, len(spoken), self._entropy))
        steps: list[Step] = []
        first = 0
        for piece in script.pieces:
            if not isinstance(piece, Spoken):
                steps.append(piece)
                continue
            texts = self.segments(piece.model_text)
            segments = tuple(
                Segment(text, seed)
                for text, seed in zip(texts, segment_seeds(next(seeds), len(texts)), strict=True)
            )
            steps.append(Sentence(piece, segments, first))
            first += len(segments)
        return Utterance(options, conditioning, tuple(steps), marked=options.script is not None)

    def model_inputs(self, utterance: Utterance) -> list[ModelInput]:
        """What each segment the utterance speaks feeds the model, as synthesis uses it.

        Upstream v1 runs text_normalize(split=True) and then one frontend_* call per segment; this is that
        seam, held against upstream's CosyVoiceFrontEnd by tests/parity/test_glue.py."""
        conditioning = utterance.conditioning
        inputs = []
        for step in utterance.steps:
            if not isinstance(step, Sentence):
                continue
            for segment in utterance.chosen(step):
                tokens = self._tokens(segment.text)
                min_tokens, max_tokens = self.llm.length_limits(
                    tokens.shape[1],
                    conditioning.prompt_text_tokens.shape[1],
                    conditioning.llm_prompt_tokens.shape[1],
                )
                inputs.append(ModelInput(segment.text, tokens, conditioning, min_tokens, max_tokens))
        return inputs

    def speak(
        self, utterance: Utterance, deadline: Deadline | None = None
    ) -> Iterator[np.ndarray | SpeechMark]:
        """The utterance's audio as float32 mono chunks in [-1, 1] at the model's rate, and, when it is
        marked, each speech mark just before the audio it describes. With options.stream the first chunk
        comes early.

        deadline: refuse up front (function.cosyvoice.budget.OverBudget) what is not expected to finish by
        it, and stop at it (DeadlineExceeded). A mark's time counts the samples yielded before it, so it
        holds whatever the LLM drew, the speed and the pauses: a mark and the audio agree to the sample."""
        options = utterance.options
        inputs = self.model_inputs(utterance)
        if deadline is not None:
            self.speed.check([item.text for item in inputs], len(options.text), self.token_rate, deadline)
        sentences = [step for step in utterance.steps if isinstance(step, Sentence)]
        generators = [segment.generators() for step in sentences for segment in utterance.chosen(step)]

        llm_inputs = [
            LLMInput(
                item.text_tokens,
                item.conditioning.prompt_text_tokens,
                item.conditioning.llm_embedding,
                item.conditioning.llm_prompt_tokens,
                llm_rng,
            )
            for item, (llm_rng, _, _) in zip(inputs, generators, strict=True)
        ]
        rows = 1 if options.stream else (options.decode_rows or self.decode_rows)
        decoder: LLM | SharedDecoder = self.llm
        if options.seed is None and not options.stream and self.shared_decoder is not None:
            decoder = self.shared_decoder

        def speech_tokens() -> Iterator[int | None]:
            """Every segment's tokens in turn, each segment closed by None (runs on the LLM's thread).

            A streamed request decodes one segment at a time (its first chunk waits on no other row). A
            whole one decodes its first segment alone too: the flow waits for all of it, and in a batch it
            would come later (a step of several rows takes longer). The rest decode up to `decode_rows` at
            a time while the flow and the vocoder work on the first: fewer decode steps, less of the cores
            taken from them. An unseeded whole request's rows are in the batch its process shares."""
            yield from decoder.generate_segments(llm_inputs[:1], 1)
            yield from decoder.generate_segments(llm_inputs[1:], rows)

        samples = 0  # yielded so far, at the model's rate
        busy = 0.0  # while this generator runs, not while its consumer holds it (a slow client)
        with RunAhead(
            speech_tokens(), RUN_AHEAD_TOKENS, name="cosyvoice-llm", patience=self.stall_seconds
        ) as drawn:
            counted = _CountedTokens(drawn, deadline)
            own = iter(generators)
            resumed = time.perf_counter()
            for step, performed in utterance.performed():
                if isinstance(step, Pause):
                    silence = np.zeros(
                        round(step.seconds * self.sample_rate) if performed else 0, dtype=np.float32
                    )
                    items: Iterator[np.ndarray | SpeechMark] = iter([silence] if silence.size else [])
                elif isinstance(step, Mark):
                    mark = SpeechMark(self._ms(samples), "ssml", step.start, step.end, step.name)
                    items = iter([mark] if performed and utterance.marked else [])
                else:
                    items = self._sentence(utterance, step, counted, own, drawn, first=samples == 0)
                    if performed and utterance.marked:
                        piece = step.piece
                        mark = SpeechMark(self._ms(samples), "sentence", piece.start, piece.end, piece.text)
                        items = chain([mark], items)
                for item in items:
                    if isinstance(item, np.ndarray):
                        samples += item.size
                    busy += time.perf_counter() - resumed
                    beat()
                    yield item
                    resumed = time.perf_counter()
            busy += time.perf_counter() - resumed
        self.speed.observe(busy, counted.tokens)

    def _ms(self, samples: int) -> int:
        return round(samples * 1000 / self.sample_rate)

    def _sentence(
        self,
        utterance: Utterance,
        sentence: Sentence,
        counted: _CountedTokens,
        generators: Iterator[tuple[np.random.Generator, ...]],
        drawn: RunAhead[int | None],
        first: bool,
    ) -> Iterator[np.ndarray]:
        """A spoken piece's audio, segment by segment, at its speed and gain. Chunked only where the
        request streams and the tempo is the model's (a tempo change works on a segment's whole mel); the
        request's first chunk holds the LLM (see `_segment`)."""
        piece = sentence.piece
        chunked = utterance.options.stream and piece.speed == 1.0
        steps = self.flow_steps_for(utterance.options)
        for index, _ in enumerate(utterance.chosen(sentence)):
            _, flow_rng, source_rng = next(generators)
            stream = SegmentStream(
                self.flow, self.vocoder, utterance.conditioning, flow_rng, source_rng, steps
            )
            hold = drawn.hold if chunked and first and index == 0 else None
            for audio in self._segment(_until_none(counted), stream, chunked, piece.speed, hold):
                yield np.clip(audio * piece.gain, -1.0, 1.0) if piece.gain != 1.0 else audio

    def _segment(
        self,
        generated: Iterator[int],
        stream: SegmentStream,
        chunked: bool,
        speed: float,
        hold_first: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> Iterator[np.ndarray]:
        """One segment's audio from its tokens as they are drawn: chunk by chunk, or whole at `speed`.

        `hold_first` (the LLM's RunAhead.hold) keeps the LLM from drawing while the first chunk goes
        through the flow and the vocoder. Running beside them, it slows that chunk (the stages share two
        cores poorly), while holding it there costs the rest of the request nothing measurable; holding it
        at every chunk makes the whole stream slower (`python -m bench chunks` records the first chunk
        and the streamed RTF)."""
        if not chunked:
            tokens = np.asarray([list(generated)], dtype=np.int64).reshape(1, -1)
            if tokens.shape[1] == 0:
                return
            mel = stream.mel(tokens, 0, tokens.shape[1], final=True)
            yield stream.audio(_change_speed(mel, speed), final=True)
            return

        def holding(chunk_index: int) -> AbstractContextManager[None]:
            return hold_first() if hold_first is not None and chunk_index == 0 else nullcontext()

        collected: list[int] = []
        start, chunk_index = 0, 0
        for token in generated:
            collected.append(token)
            size = self.chunk_tokens[min(chunk_index, len(self.chunk_tokens) - 1)]
            if len(collected) >= start + size + TOKEN_LOOKAHEAD:
                tokens = np.asarray([collected], dtype=np.int64)
                with holding(chunk_index):
                    audio = stream.chunk(tokens, start, start + size, final=False)
                yield audio
                start, chunk_index = start + size, chunk_index + 1
        if len(collected) > start:
            tokens = np.asarray([collected], dtype=np.int64)
            with holding(chunk_index):
                audio = stream.chunk(tokens, start, len(collected), final=True)
            yield audio

    def synthesize(self, options: SynthesisOptions) -> np.ndarray:
        """The whole audio of `options` in one array (marks dropped): for tools and tests."""
        chunks = list(audio_only(self.speak(self.prepare(options))))
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)

    def warm_up(self) -> None:
        """Every graph once on a short input, so the first request finds mapped pages and primed kernels.

        The LLM is cut at WARM_UP_TOKENS: a full synthesis of even one word can run to 30 tokens per text
        token, seconds that on-demand INIT (10 s cap) and snapshot creation should not spend.
        """
        embedding = np.zeros((1, 192), dtype=np.float32)  # base models have no built-in speaker
        empty = np.zeros((1, 0), dtype=np.int64)
        conditioning = Conditioning(
            embedding, embedding, empty, empty, empty, np.zeros((1, 0, self.flow.params.n_mels), np.float32)
        )
        rngs = tuple(np.random.default_rng(child) for child in np.random.SeedSequence(0).spawn(3))
        started = time.perf_counter()
        generated = self.llm.generate(self._tokens("Hello."), empty, embedding, empty, rngs[0])
        tokens = np.asarray([list(islice(generated, WARM_UP_TOKENS))], dtype=np.int64)
        stream = SegmentStream(
            self.flow, self.vocoder, conditioning, rngs[1], rngs[2], self.default_flow_steps
        )
        stream.audio(stream.mel(tokens, 0, tokens.shape[1], final=True), final=True)
        self.speed.observe(time.perf_counter() - started, tokens.shape[1], warm_up=True)


class _CountedTokens:
    """The drawn tokens, counted, raising DeadlineExceeded once the deadline has passed."""

    def __init__(self, drawn: RunAhead[int | None], deadline: Deadline | None) -> None:
        self._drawn = iter(drawn)
        self._deadline = deadline
        self.tokens = 0

    def __iter__(self) -> Iterator[int | None]:
        return self

    def __next__(self) -> int | None:
        if self._deadline is not None:
            self._deadline.check()
        token = next(self._drawn)
        if token is not None:
            self.tokens += 1
        beat()
        return token


def audio_only(items: Iterator[np.ndarray | SpeechMark]) -> Iterator[np.ndarray]:
    """The audio of `Engine.speak`'s items, the marks dropped."""
    return (item for item in items if isinstance(item, np.ndarray))


def _until_none(tokens: Iterator[int | None]) -> Iterator[int]:
    """The tokens up to the next None (one segment's); leaves the rest for the next segment."""
    for token in tokens:
        if token is None:
            return
        yield token


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


__all__ = ["ENDOFPROMPT", "Engine", "ModelInput", "audio_only"]
