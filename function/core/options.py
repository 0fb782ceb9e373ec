"""One frozen options object carries a request from the edge (HTTP, SQS, direct invoke, CLI) to the engine.

Defaults and the mode are resolved here, once; the edges only translate their wire format into this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from function.core.errors import InvalidRequest, TextTooLong
from function.core.formats import Output, audio_format
from function.core.script import Script
from function.core.tenant import DEFAULT_TENANT
from function.core.text import clean_optional, clean_text

MIN_SPEED, MAX_SPEED = 0.5, 2.0
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 8000, 48000
DEFAULT_MAX_TEXT_CHARS = 2000
# Euler steps of the flow's ODE a request or a deployment may choose, on v1's cosine grid. 10 is v1's own
# count: more only costs time for a model released at 10. One step is no solve at all, a single velocity
# from pure noise (the smeared average mel); two is the fewest that takes a second look.
MIN_FLOW_STEPS, MAX_FLOW_STEPS = 2, 10
FAST_FLOW_STEPS = 5  # the fast tier (OpenAI's model name tts-1): about half the flow's work
# Step counts the export's quality report and the bench set beside v1's 10: the fast tier's, and 7, the
# count EPSS (empirically pruned step sampling) runs a flow-matching TTS model at.
COMPARED_FLOW_STEPS = (FAST_FLOW_STEPS, 7)


class Mode(StrEnum):
    SFT = "sft"  # a built-in speaker of the -SFT model
    INSTRUCT = "instruct"  # a built-in speaker plus a style instruction (-Instruct model)
    ZERO_SHOT = "zero_shot"  # clone the voice of prompt audio, given its transcript
    CROSS_LINGUAL = "cross_lingual"  # clone the voice of prompt audio, without its transcript


class EncodedPrompt(Protocol):
    """A prompt recording's features, extracted once (function.cosyvoice.prompt.PromptFeatures): a saved
    voice brings these instead of its recording."""

    @property
    def speech_tokens(self) -> Any: ...  # [1, P] int64

    @property
    def embedding(self) -> Any: ...  # [1, 192] float32

    @property
    def mel(self) -> Any: ...  # [1, Tm, 80] float32


@dataclass(frozen=True)
class SynthesisOptions:
    text: str  # what to say
    speaker: str | None = None  # built-in speaker (SFT, instruct); ignored when prompt_audio is given
    instruct: str | None = None  # style instruction, e.g. "A calm, low voice." (instruct mode)
    prompt_audio: bytes | None = None  # reference recording for voice cloning, any soundfile format
    prompt_text: str | None = None  # transcript of prompt_audio; without it the mode is cross-lingual
    format: str = "wav"  # a name in function.core.formats.FORMATS
    # output rate in Hz; None keeps the model's (22,050); a codec that takes only some rates gets the
    # nearest (function.core.formats.AudioFormat.rate_for). OpenAI's route asks for 24,000.
    sample_rate: int | None = None
    speed: float = 1.0  # tempo factor in [0.5, 2.0]; 1.0 keeps the model's pace
    seed: int | None = None  # the same seed and options give the same audio; None draws fresh entropy
    stream: bool = False  # yield audio chunk by chunk (first chunk early) instead of all at once
    # Euler steps of the flow's ODE, MIN_FLOW_STEPS..MAX_FLOW_STEPS: 10 is v1's; fewer are faster (the
    # flow's time falls about linearly) and may sound worse. None: the deployment's (COSYVOICE_FLOW_STEPS).
    flow_steps: int | None = None
    # segments of a whole request the LLM decodes as one batch, at most; None: the deployment's
    # (COSYVOICE_DECODE_BATCH). A job's plan fixes it, so every part decodes as the job was planned.
    decode_rows: int | None = None
    # pieces to perform in order (SSML, or text asking for speech marks); `text` is then its spoken text
    script: Script | None = None
    # prompt_audio's features already extracted (a saved voice, function.voices.library): used
    # instead of prompt_audio, with prompt_text as its transcript. Arrays: left out of ==, hash and repr.
    prompt_features: EncodedPrompt | None = field(default=None, compare=False, repr=False)
    # whose saved voices a speaker's id names (function.core.tenant): a request names only its tenant's
    tenant: str = DEFAULT_TENANT

    def __post_init__(self) -> None:
        # Every edge's text passes here before it is measured or spoken (function.core.text).
        if isinstance(self.text, str):
            object.__setattr__(self, "text", clean_text(self.text))
        object.__setattr__(self, "instruct", clean_optional(self.instruct))
        object.__setattr__(self, "prompt_text", clean_optional(self.prompt_text))

    @property
    def cloned(self) -> bool:
        """Whether the voice comes from a prompt recording (inline, or a saved voice's features)."""
        return self.prompt_audio is not None or self.prompt_features is not None

    @property
    def mode(self) -> Mode:
        if self.cloned:
            return Mode.ZERO_SHOT if self.prompt_text else Mode.CROSS_LINGUAL
        if self.instruct:
            return Mode.INSTRUCT
        return Mode.SFT

    def output(self, source_rate: int) -> Output:
        """The format and rate this request's audio is written at, for chunks at `source_rate`: the one
        place a request's format name is looked up."""
        return Output.of(self.format, source_rate, self.sample_rate)

    def validated(self, max_text_chars: int | None = DEFAULT_MAX_TEXT_CHARS) -> SynthesisOptions:
        """Check everything that does not need the model; return self so edges can chain it.

        Each edge sets its own text limit (HTTP by API Gateway's 30 s, jobs by a cap of their own); None
        skips it.
        """
        if not isinstance(self.text, str) or not self.text.strip():
            raise InvalidRequest("text is empty: give the words to speak")
        if max_text_chars is not None and len(self.text) > max_text_chars:
            raise TextTooLong(
                f"text has {len(self.text)} characters, the limit is {max_text_chars};"
                " split it (POST /v1/jobs and the SQS queue take far longer texts than a synchronous request)"
            )
        audio_format(self.format)  # refuses an unknown one
        if not isinstance(self.speed, int | float) or not MIN_SPEED <= float(self.speed) <= MAX_SPEED:
            raise InvalidRequest(f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {self.speed!r}")
        rate = self.sample_rate
        if rate is not None and (not isinstance(rate, int) or not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE):
            raise InvalidRequest(
                f"sample_rate must be between {MIN_SAMPLE_RATE} and {MAX_SAMPLE_RATE} Hz, got {rate!r}"
            )
        steps = self.flow_steps
        in_range = (
            isinstance(steps, int)
            and not isinstance(steps, bool)
            and MIN_FLOW_STEPS <= steps <= MAX_FLOW_STEPS
        )
        if steps is not None and not in_range:
            raise InvalidRequest(
                f"flow_steps must be an integer from {MIN_FLOW_STEPS} to {MAX_FLOW_STEPS}"
                f" (10 is CosyVoice v1's, 5 the fast tier), got {steps!r}"
            )
        if self.seed is not None and (not isinstance(self.seed, int) or not 0 <= self.seed < 2**63):
            raise InvalidRequest("seed must be a non-negative integer below 2**63")
        if self.mode in (Mode.SFT, Mode.INSTRUCT) and not self.speaker:
            raise InvalidRequest("speaker is required unless prompt_audio is given")
        if self.prompt_text is not None and not self.cloned:
            raise InvalidRequest("prompt_text was given without prompt_audio")
        return self


__all__ = [
    "COMPARED_FLOW_STEPS",
    "EncodedPrompt",
    "FAST_FLOW_STEPS",
    "MAX_FLOW_STEPS",
    "MAX_SAMPLE_RATE",
    "MAX_SPEED",
    "MIN_FLOW_STEPS",
    "MIN_SAMPLE_RATE",
    "MIN_SPEED",
    "Mode",
    "SynthesisOptions",
]
