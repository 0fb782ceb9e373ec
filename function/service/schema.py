"""Wire shapes of the edges: the HTTP bodies, the SQS messages / direct-invoke event, the error body.

Every edge turns its payload into `SynthesisOptions` here, and value checks (text length, speed range,
format names, mode) stay in `SynthesisOptions.validated`: these models only fix names and JSON types.
Types are strict ("1.0" is not a number), so a client learns about a wrong type instead of a guess.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from function.core.errors import InvalidPromptAudio, InvalidRequest
from function.core.formats import FORMATS
from function.core.options import (
    FAST_FLOW_STEPS,
    MAX_FLOW_STEPS,
    MAX_SPEED,
    MIN_FLOW_STEPS,
    MIN_SPEED,
    SynthesisOptions,
)
from function.core.script import MARK_TYPES, MarkType, Script
from function.core.tenant import DEFAULT_TENANT, TENANT_PATTERN, TENANTS_FOLDER
from function.core.text import clean_text
from function.markup.ssml import looks_like_ssml, parse_ssml, text_script

_FORMAT: dict[str, Any] = {"enum": list(FORMATS)}
_SPEED: dict[str, Any] = {"minimum": MIN_SPEED, "maximum": MAX_SPEED}
_FLOW_STEPS: dict[str, Any] = {"minimum": MIN_FLOW_STEPS, "maximum": MAX_FLOW_STEPS}
# OpenAI's model names already say which tier: its HD model is v1's full solve, its fast one the fast tier;
# any other name leaves the deployment's default (COSYVOICE_FLOW_STEPS).
OPENAI_MODEL_FLOW_STEPS = {"tts-1-hd": MAX_FLOW_STEPS, "tts-1": FAST_FLOW_STEPS}
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # ids become S3 keys: keep them path-safe
# Folders under the output prefix that hold the deployment's own records (jobs, other tenants' objects):
# a caller's output_key names audio beside them, never inside.
RESERVED_FOLDERS = ("jobs", TENANTS_FOLDER.rstrip("/"))
OPENAI_SAMPLE_RATE = 24000  # OpenAI's speech is 24 kHz; its pcm is that rate with no header to say so
# Text as the engine takes it, cleaned on arrival (function.core.text): what a job stores and digests is
# valid UTF-8 whatever the JSON escaped.
Text = Annotated[str, AfterValidator(clean_text)]


class SpeechRequest(BaseModel):
    """POST /v1/tts. Voice: a built-in `speaker` (plus `instruct` on -Instruct models), or `prompt_audio`
    (base64 of any common audio file) to clone, with its transcript `prompt_text` when known."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: Text = Field(description="What to say.", examples=["Hello from CosyVoice."])
    speaker: str | None = Field(
        None, description="A built-in speaker (GET /v1/speakers) or a saved voice's id (POST /v1/voices)."
    )
    instruct: Text | None = Field(None, description="Style instruction (-Instruct models).")
    prompt_audio: str | None = Field(None, description="Base64 audio of the voice to clone.")
    prompt_text: Text | None = Field(None, description="Transcript of prompt_audio (zero-shot cloning).")
    format: str = Field("wav", description="Audio format of the response.", json_schema_extra=_FORMAT)
    speed: float = Field(1.0, description="Tempo factor.", json_schema_extra=_SPEED)
    seed: int | None = Field(None, description="Same seed and options, same audio.")
    stream: bool = Field(
        False, description="Send audio as it is made (chunked: wav, pcm per chunk; opus, ogg per page)."
    )
    flow_steps: int | None = Field(
        None,
        description=(
            f"Euler steps of the flow, {MIN_FLOW_STEPS} to {MAX_FLOW_STEPS}: {MAX_FLOW_STEPS} is CosyVoice"
            f" v1's, {FAST_FLOW_STEPS} the fast tier (about half the flow's time; may sound worse)."
            " Default: the deployment's (COSYVOICE_FLOW_STEPS). X-Flow-Steps says which ran."
        ),
        json_schema_extra=_FLOW_STEPS,
    )
    text_type: Literal["text", "ssml"] = Field("text", description="ssml: text is a <speak> document.")
    speech_marks: list[MarkType] = Field(
        [],
        description=(
            "Speech mark types to return with the audio: sentence, ssml, and word (estimated: the model"
            " has no alignment, so each word is placed inside its sentence by its expected length)."
        ),
    )
    marks_only: bool = Field(False, description="Reply with the speech marks alone, as JSON lines.")

    def mark_types(self) -> tuple[MarkType, ...]:
        """The speech mark types to return: those named, every type for `marks_only`, else none."""
        if self.speech_marks:
            return tuple(self.speech_marks)
        return MARK_TYPES if self.marks_only else ()

    def script(self) -> Script | None:
        """The pieces to perform: the SSML's, or the text's sentences when marks are asked for."""
        if self.text_type == "ssml":
            return parse_ssml(self.text, self.speed)
        if self.speech_marks or self.marks_only:
            script = text_script(self.text, self.speed)
            return script if script.pieces else None
        return None

    def to_options(self) -> SynthesisOptions:
        script = self.script()
        return SynthesisOptions(
            text=self.text if script is None else script.spoken_text,
            script=script,
            speaker=self.speaker,
            instruct=self.instruct,
            prompt_audio=decode_base64_audio(self.prompt_audio) if self.prompt_audio is not None else None,
            prompt_text=self.prompt_text,
            format=self.format,
            speed=self.speed,
            seed=self.seed,
            stream=self.stream,
            flow_steps=self.flow_steps,
        )


class JobRequest(SpeechRequest):
    """POST /v1/jobs: the /v1/tts fields, for texts up to COSYVOICE_JOB_MAX_TEXT_CHARS, plus an optional
    `id`. The same id with the same content is the same job (submitting it again reports it); the same
    id with other content is refused. `stream` is accepted and ignored: a job's segments are synthesised
    whole, as /v1/tts does without it."""

    id: str | None = Field(
        None, pattern=JOB_ID_PATTERN, description="Job id (idempotency key); default: a fresh one."
    )

    @field_validator("speech_marks")
    @classmethod
    def _no_word_marks(cls, types: list[MarkType]) -> list[MarkType]:
        if "word" in types:  # a job's worker collects the exact types only
            raise ValueError("word marks are given by synchronous requests only (POST /v1/tts), not by jobs")
        return types


class SpeechJob(JobRequest):
    """A raw SQS message body, or a direct-invoke event: a job given whole. The audio goes to
    s3://$COSYVOICE_OUTPUT_BUCKET/$COSYVOICE_OUTPUT_PREFIX{output_key or id + "." + format}
    (function.jobs.store has the layout); a redelivery of the same message is the same job."""

    output_key: str | None = Field(
        None, min_length=1, max_length=1024, description="Key under the output prefix; default id.format."
    )

    def output_name(self) -> str:
        if self.output_key is not None:
            if self.output_key.startswith("/") or ".." in self.output_key.split("/"):
                raise InvalidRequest("output_key must be a relative key without '..' segments")
            if self.output_key.split("/", 1)[0] in RESERVED_FOLDERS:
                raise InvalidRequest(f"output_key must not start with {'/, '.join(RESERVED_FOLDERS)}/")
            return self.output_key
        if self.id is None:
            raise InvalidRequest("give an id (or an output_key) to write the audio to S3")
        return f"{self.id}.{self.format}"


class JobMessage(BaseModel):
    """An SQS message naming a stored job (function.jobs.store): sent by POST /v1/jobs (no part: plan the
    job and start it), and by the workers for each of its parts (function.jobs.worker)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    job: str = Field(pattern=JOB_ID_PATTERN)
    part: int | None = Field(default=None, ge=0)
    tenant: str = Field(default=DEFAULT_TENANT, pattern=f"^{TENANT_PATTERN}$")


class JobAccepted(BaseModel):
    """POST /v1/jobs's answer; GET status_url for the job's state."""

    id: str
    status: str = Field(examples=["queued"])
    status_url: str = Field(examples=["/v1/jobs/7f3e9c"])


class OpenAIVoice(BaseModel):
    """OpenAI's voice object ({"id": "voice_1234"}); here the id is a voice name like the string form."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str


class OpenAISpeechRequest(BaseModel):
    """POST /v1/audio/speech, as OpenAI's API takes it. `voice`: an OpenAI voice name (mapped onto a
    built-in speaker, see GET /v1/speakers), a built-in speaker or a saved voice's id (POST /v1/voices);
    `model` chooses the flow's steps (OPENAI_MODEL_FLOW_STEPS: tts-1-hd v1's 10, tts-1 the fast tier's 5,
    any other name the deployment's default); the model itself is the deployment's one. The audio is
    24 kHz, as OpenAI's is. `seed` is this API's own addition."""

    model_config = ConfigDict(extra="ignore", strict=True)  # newer SDKs send fields we need not know

    model: str = Field(
        examples=["tts-1-hd", "tts-1"],
        description="tts-1-hd: the flow's full 10 steps (v1); tts-1: 5 (faster); other: the deployment's.",
    )
    input: Text = Field(examples=["Hello from CosyVoice."])
    voice: str | OpenAIVoice = Field(examples=["alloy"])
    instructions: Text | None = Field(
        None, description="Style prompt: used by -Instruct models; elsewhere ignored (X-Instructions says)."
    )
    response_format: str = Field("mp3", json_schema_extra=_FORMAT)
    speed: float = Field(1.0, json_schema_extra=_SPEED)
    stream_format: Literal["audio", "sse"] | None = Field(
        None, description="audio: chunked bytes as made; sse: speech.audio.delta events. Absent: whole."
    )
    seed: int | None = Field(None, description="Same seed and options, same audio (not in OpenAI's API).")

    @property
    def voice_name(self) -> str:
        return self.voice if isinstance(self.voice, str) else self.voice.id

    def to_options(self, speaker: str, instruct: str | None) -> SynthesisOptions:
        """The options for `speaker` (resolved by function.voices.openai) and the instruction to apply;
        an `input` that is a <speak> document is SSML."""
        script = parse_ssml(self.input, self.speed) if looks_like_ssml(self.input) else None
        return SynthesisOptions(
            text=self.input if script is None else script.spoken_text,
            script=script,
            speaker=speaker,
            instruct=instruct,
            format=self.response_format,
            sample_rate=OPENAI_SAMPLE_RATE,
            speed=self.speed,
            seed=self.seed,
            stream=self.stream_format is not None,
            flow_steps=OPENAI_MODEL_FLOW_STEPS.get(self.model),
        )


class VoiceRequest(BaseModel):
    """POST /v1/voices: a recording to clone once, then named by the returned id as a speaker or voice."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Text = Field(description="What to call the voice.", examples=["narrator"])
    audio: str = Field(description="Base64 WAV, FLAC, OGG or MP3: 1 to 30 s of the voice, not silent.")
    transcript: Text | None = Field(
        None, description="What the recording says; without it the voice speaks cross-lingually."
    )

    def recording(self) -> bytes:
        return decode_base64_audio(self.audio, "audio")


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


def decode_base64_audio(data: str, field: str = "prompt_audio") -> bytes:
    try:
        audio = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidPromptAudio(f"{field} is not valid base64") from None
    if not audio:
        raise InvalidPromptAudio(f"{field} is empty")
    return audio


def describe(error: ValidationError | list[dict[str, Any]]) -> str:
    """Pydantic's error list → one line a person can act on: 'speed: Input should be a valid number'."""
    items = error.errors() if isinstance(error, ValidationError) else error
    parts = []
    for item in items:
        location = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
        parts.append(
            f"{location}: {item.get('msg', 'invalid')}" if location else str(item.get("msg", "invalid"))
        )
    return "; ".join(parts) or "invalid request"


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate a payload of the SQS / direct-invoke edges, turning type errors into InvalidRequest."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequest(describe(exc)) from None


__all__ = [
    "ErrorBody",
    "JOB_ID_PATTERN",
    "JobAccepted",
    "JobMessage",
    "JobRequest",
    "OPENAI_MODEL_FLOW_STEPS",
    "OPENAI_SAMPLE_RATE",
    "OpenAISpeechRequest",
    "OpenAIVoice",
    "SpeechJob",
    "SpeechRequest",
    "VoiceRequest",
    "decode_base64_audio",
    "describe",
    "parse",
]
