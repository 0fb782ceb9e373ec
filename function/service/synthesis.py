"""The one way through the service: options and what the edge allows in, the reply's audio and marks out.

Every edge (an HTTP route, the OpenAI route, a direct invoke, the streaming Function URL, the job worker, the
command line) translates its wire format into `SynthesisOptions` and an `Allowance`, and calls `prepare`.
That does, once for every edge: the text limit and the other checks, a saved voice's id turned into its
features, the output format and rate, and the engine's plan of the utterance (segmented once). The
`Synthesis` it returns gives the audio in the form the edge's transport takes, with the speech marks
collected on the way:

    pieces()   encoded audio as it is made: a streamed reply, an upload to S3
    whole()    the whole file, within the allowance's response limit, or written to S3 when it does
               not fit and the edge may spill; OutputTooLarge otherwise (before any synthesis when an
               uncompressed file's expected size already cannot fit)
    audio()    the raw chunks of some of the segments: a job's next parts
    drain()    the audio run and dropped: a reply of speech marks alone

The edge then writes what it got in its own wire format (function.api.app, function.awslambda.events,
function.jobs.worker, function.cli.synth); no edge calls the engine, resolves a voice, encodes or checks a
size itself. An edge that stops reading before the end (a client that hung up) calls `close`, on its own
thread, at once: the engine's threads are told to stop then, not whenever the garbage collector finds
what the edge dropped.

Each request is measured here, once for every edge (function.observe.tally): the characters it is billed,
and for each run of the engine its audio, its time to first audio and its compute time.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from function.audio.encode import encode, iter_encode
from function.aws.s3 import Written, location, store
from function.core.deadline import Deadline
from function.core.errors import OutputTooLarge
from function.core.formats import Output
from function.core.options import SynthesisOptions
from function.core.script import MarkType, SpeechMark
from function.cosyvoice.budget import expected_speech_seconds
from function.cosyvoice.engine import Engine
from function.instance.library import voice_library
from function.instance.model import get_engine
from function.markup.marks import MarkCollector, drawn_to_first_audio
from function.observe.tally import current, measured
from function.voices.library import names_saved_voice

PCM_BYTES_PER_SAMPLE = 2  # wav and pcm: s16 mono
RESPONSE_ENVELOPE = 16 * 1024  # room for the status, headers and JSON keys around a base64 body
# ASGI scope key a server sets when it sends the body as it is made, whatever the body's size (a Function
# URL in RESPONSE_STREAM mode, function.awslambda.streaming): there the buffered-response limit does not
# apply.
STREAMING_TRANSPORT = "cosyvoice.streaming_transport"


@dataclass(frozen=True)
class Spill:
    """Where an edge writes audio too large for its synchronous reply: keys under `folder` in `bucket`
    (None: the deployment has no output bucket, and the refusal says how to get one)."""

    bucket: str | None
    folder: str


@dataclass(frozen=True)
class Allowance:
    """What an edge and its transport allow a request."""

    max_text_chars: int | None  # the edge's text limit; None: none (a job's worker, the command line)
    # a buffered reply's size (Lambda's 6 MB payload, base64-encoded); None: the transport streams or
    # takes any size, and a request that asks to stream is streamed
    max_response_bytes: int | None = None
    spill: Spill | None = None  # audio over max_response_bytes goes here instead of being refused

    @property
    def streams(self) -> bool:
        return self.max_response_bytes is None

    def fits(self, audio_bytes: int) -> bool:
        """Whether audio of this size fits a synchronous reply once base64-encoded (4 bytes per 3)."""
        if self.max_response_bytes is None:
            return True
        return 4 * ((audio_bytes + 2) // 3) + RESPONSE_ENVELOPE <= self.max_response_bytes


def reply_audio(
    options: SynthesisOptions, output: Output, chunks: Iterable[np.ndarray], allowance: Allowance
) -> bytes | Written:
    """`chunks` (the audio of `options`, not started yet) encoded as `output`, when the file fits the
    allowance. When it does not: where the edge spills to a bucket, the object written there; otherwise
    OutputTooLarge, before the audio starts when an uncompressed format's expected size is already too
    large."""
    spill = allowance.spill
    can_spill = spill is not None and spill.bucket is not None
    if not can_spill and output.format.soundfile is None:
        expected = int(expected_speech_seconds([options.text]) * output.rate) * PCM_BYTES_PER_SAMPLE
        # Refused up front only when even half the expected length would not fit: the estimate is a guess.
        if not allowance.fits(expected // 2):
            raise _too_large(output, allowance, f"would be ~{expected} bytes")
    data = encode(chunks, output)
    if allowance.fits(len(data)):
        return data
    if spill is not None and spill.bucket is not None:
        key = f"{spill.folder}/{uuid.uuid4().hex}.{output.name}"
        store(spill.bucket, key, data, output)
        return Written(spill.bucket, key, existed=False)
    raise _too_large(output, allowance, f"is {len(data)} bytes")


def _too_large(output: Output, allowance: Allowance, size: str) -> OutputTooLarge:
    bucket_hint = ", set COSYVOICE_OUTPUT_BUCKET to receive it from S3" if allowance.spill is not None else ""
    return OutputTooLarge(
        f"the {output.name} audio {size}, more than a synchronous Lambda response can carry once"
        f" base64-encoded ({allowance.max_response_bytes} bytes); send long texts to POST /v1/jobs (the"
        f" batch path: audio in S3){bucket_hint}, or choose a compressed format (mp3, ogg)"
    )


def with_saved_voice(options: SynthesisOptions, engine: Engine) -> SynthesisOptions:
    """`options` with a saved voice's id turned into its features (function.voices.library), from the
    library of the options' tenant; unchanged when none is named, so a deployment without voice storage
    still serves every other request."""
    return voice_library(options.tenant).apply(options, engine) if names_saved_voice(options) else options


def check(options: SynthesisOptions, allowance: Allowance, engine: Engine | None = None) -> SynthesisOptions:
    """What `prepare` refuses without planning the utterance: the limits, the values, the voice (an
    unknown speaker, a deleted voice, an unusable prompt). For a job accepted now and spoken later."""
    options = options.validated(allowance.max_text_chars)  # before the engine is borrowed
    engine = engine or get_engine()
    options = with_saved_voice(options, engine)
    engine.conditioning(options)
    return options


def prepare(
    options: SynthesisOptions,
    allowance: Allowance,
    deadline: Deadline | None = None,
    engine: Engine | None = None,
    mark_types: Sequence[MarkType] = (),
) -> Synthesis:
    """A request ready to speak: every check done and the utterance planned. `deadline` (the earliest of
    the edge's limits) refuses work up front that would not finish by it, and stops work that runs over;
    `mark_types`: the speech marks wanted (a script's: the options carry one when marks are asked for)."""
    options = options.validated(allowance.max_text_chars)  # before the engine is borrowed
    tally = current()
    tally.characters, tally.tenant = len(options.text), options.tenant  # a script's text is its spoken text
    engine = engine or get_engine()
    return Synthesis(engine, with_saved_voice(options, engine), allowance, deadline, mark_types)


class Synthesis:
    """One request on its way out; see the module docstring for the forms its audio takes. Each form
    runs the engine once: take one per Synthesis (a job's worker takes `audio` once per part)."""

    def __init__(
        self,
        engine: Engine,
        options: SynthesisOptions,
        allowance: Allowance,
        deadline: Deadline | None,
        mark_types: Sequence[MarkType],
    ) -> None:
        self.engine = engine
        self.options = options
        self.allowance = allowance
        self.deadline = deadline
        self.utterance = engine.prepare(options)
        self.output: Output = options.output(engine.sample_rate)
        self._mark_types = tuple(mark_types)
        # Replaced by each run of the engine (`audio`); until then, nothing drawn and no marks.
        self._collector = MarkCollector((), self._mark_types, engine.sample_rate)
        self._speaking: Iterator[np.ndarray | SpeechMark] | None = None  # the engine's current run
        self._tally = current()  # what the edge's unit of work measures
        self._measuring: Iterator[np.ndarray] | None = None  # the current run's audio, measured

    @property
    def headers(self) -> dict[str, str]:
        """What describes the audio to an HTTP client: its rate, and the flow's Euler steps that made it
        (the request's `flow_steps`, an OpenAI model name's, or the deployment's)."""
        steps = self.engine.flow_steps_for(self.options)
        return {"X-Sample-Rate": str(self.output.rate), "X-Flow-Steps": str(steps)}

    @property
    def streamed(self) -> bool:
        """Whether the reply goes out as it is made: asked for, and the transport streams."""
        return self.options.stream and self.allowance.streams

    @property
    def segments(self) -> list[str]:
        """The normalised text segments, in the order they are spoken."""
        return [segment.text for segment in self.utterance.segments]

    @property
    def marks(self) -> list[SpeechMark]:
        """The speech marks of the kept types, as far as the audio has been drawn."""
        return self._collector.marks

    @property
    def samples(self) -> int:
        """Audio samples drawn so far, at the model's rate."""
        return self._collector.samples

    @property
    def duration_ms(self) -> int:
        return self._collector.duration_ms

    def take_marks(self) -> list[SpeechMark]:
        """The marks collected since the last take (a stream sends each before the audio it describes)."""
        return self._collector.take()

    def audio(self, only: range | None = None, deadline: Deadline | None = None) -> Iterator[np.ndarray]:
        """Float32 chunks at the model's rate, marks collected; `only`: just these segments, with the
        audio they have in the whole and the pauses and marks they carry (a job's part, whose marks
        count from its own start); `deadline`: instead of the request's (a job's share of it)."""
        utterance = self.utterance if only is None else self.utterance.part(only)
        self._speaking = self.engine.speak(utterance, deadline or self.deadline)
        self._collector = MarkCollector(self._speaking, self._mark_types, self.engine.sample_rate)
        self._measuring = measured(self._collector.audio(), self._tally, self.engine.sample_rate)
        return self._measuring

    def close(self) -> None:
        """Stop the engine's run where it is (its LLM thread is told to stop); nothing more is drawn.
        Idempotent, and a no-op once the run has ended. Not while another thread draws from it."""
        for run in (self._measuring, self._speaking):  # the measure first: it counts what was drawn
            close = getattr(run, "close", None)
            if close is not None:
                close()

    def pieces(self) -> Iterator[bytes]:
        """Encoded audio as it is made. Drawn up to the first audio now, so an error in the request
        (a 4xx) is raised here rather than cutting a stream that has started."""
        self._tally.streamed = True
        return iter_encode(drawn_to_first_audio(self.audio()), self.output)

    def whole(self) -> bytes | Written:
        """The whole file when it fits the allowance; else, where the edge may spill, the object written;
        else OutputTooLarge (see `reply_audio`)."""
        try:
            return reply_audio(self.options, self.output, self.audio(), self.allowance)
        finally:
            self.close()

    def drain(self) -> None:
        """Run the audio to its end and drop it: its marks are then all collected."""
        try:
            for _ in self.audio():
                pass
        finally:
            self.close()

    def reply(self, marks_only: bool = False) -> dict[str, Any]:
        """A JSON reply: the audio base64 (or where it was written) and the speech marks when any type
        was asked for; with `marks_only`, the marks alone."""
        if marks_only:
            self.drain()
            return {"marks": [mark.to_dict() for mark in self.marks]}
        audio = self.whole()
        document = (
            {
                "format": self.output.name,
                "content_type": self.output.media_type,
                "sample_rate": self.output.rate,
                "audio": base64.b64encode(audio).decode("ascii"),
            }
            if isinstance(audio, bytes)
            else location(audio, self.output)
        )
        if self._mark_types:
            document["marks"] = [mark.to_dict() for mark in self.marks]
        return document


__all__ = [
    "Allowance",
    "STREAMING_TRANSPORT",
    "Spill",
    "Synthesis",
    "check",
    "prepare",
    "reply_audio",
    "with_saved_voice",
]
