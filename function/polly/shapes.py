"""Amazon Polly's request shapes (REST-JSON, member names as Polly's service model spells them) and their
translation into `SynthesisOptions`, with Polly's own error codes for what does not translate.

    Engine         standard → the fast tier (FAST_FLOW_STEPS); neural, long-form, generative → v1's
                   full solve (MAX_FLOW_STEPS); absent → the deployment's default (COSYVOICE_FLOW_STEPS);
                   another: ValidationException
    OutputFormat   mp3, ogg_vorbis, ogg_opus, pcm: audio; json: the speech marks alone, as JSON lines.
                   mulaw and alaw are not written (no such encoder here): ValidationException
    SampleRate     Polly's values per format, and its defaults: mp3 and ogg_vorbis 22050 for the standard
                   engine (and no engine), 24000 for the others; pcm 16000; ogg_opus 48000
    SpeechMarkTypes  sentence, ssml, word (estimates: function.markup.words); only with json. viseme
                   needs an alignment of sounds this model does not have: ValidationException
    LanguageCode   the model's language tag for every sentence of plain text (an SSML document says its
                   own with <lang>); a language of Polly's the model does not speak:
                   LanguageNotSupportedException; a code Polly does not know: ValidationException
    LexiconNames   alias lexicons (function.markup.lexicon), applied to the spoken text; the edge loads
                   them (a name without one: LexiconNotFoundException); tasks take none

A task (StartSpeechSynthesisTask) is a job of function.jobs: its audio is written at the model's rate (a
job's request carries no other), so a task's SampleRate must be that rate or absent.

What a request is billed in Polly, its RequestCharacters, is its text's characters: an SSML document's
spoken text without its tags, counted before any lexicon's aliases replace words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from function.core.errors import InvalidRequest
from function.core.formats import Output
from function.core.options import FAST_FLOW_STEPS, MAX_FLOW_STEPS, SynthesisOptions
from function.core.script import MarkType, Script, Spoken
from function.markup.lexicon import Lexicon, apply_lexicons
from function.markup.ssml import parse_ssml, text_script
from function.polly.errors import PollyError
from function.polly.voices import ENGINES, LANGUAGE_CODES, language_tag
from function.service.schema import SpeechJob, Text

# Polly's output formats → this package's (function.core.formats), with Polly's Content-Type for each.
AUDIO_FORMATS = {"mp3": "mp3", "ogg_vorbis": "ogg", "ogg_opus": "opus", "pcm": "pcm"}
CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "ogg_vorbis": "audio/ogg",
    "ogg_opus": "audio/ogg",
    "pcm": "audio/pcm",
    "json": "application/x-json-stream",
}
MARKS_FORMAT = "json"
UNWRITTEN_FORMATS = ("mulaw", "alaw")
SAMPLE_RATES = {
    "mp3": ("8000", "16000", "22050", "24000", "44100", "48000"),
    "ogg_vorbis": ("8000", "16000", "22050", "24000", "44100", "48000"),
    "pcm": ("8000", "16000"),
    "ogg_opus": ("48000",),
}
STANDARD_ENGINE = "standard"
POLLY_MARK_TYPES: tuple[MarkType, ...] = ("sentence", "ssml", "word")
# A json reply's audio is drawn and dropped: the cheapest format to make.
DRAINED_FORMAT = "pcm"


class PollySpeech(BaseModel):
    """SynthesizeSpeech's body (POST /polly/v1/speech)."""

    model_config = ConfigDict(extra="ignore", strict=True)  # newer SDKs send members we need not know

    Text: Text
    VoiceId: str
    OutputFormat: str
    TextType: str = "text"
    Engine: str | None = None
    SampleRate: str | None = None
    SpeechMarkTypes: list[str] = Field(default_factory=list)
    LanguageCode: str | None = None
    LexiconNames: list[str] = Field(default_factory=list)

    def translated(self, speaker: str, lexicons: Sequence[Lexicon] = ()) -> PollyRequest:
        """The options for `speaker` (a built-in speaker, or a saved voice's id), with `lexicons` (those
        LexiconNames names) applied; the speech marks wanted and the reply's Content-Type."""
        marks = self._mark_types()
        fmt = self._format()
        script = self._script(marks, bool(lexicons))
        billed = len(self.Text) if script is None or self.TextType == "text" else len(script.spoken_text)
        if script is not None and lexicons:
            script = apply_lexicons(script, lexicons)
        options = SynthesisOptions(
            text=self.Text if script is None else script.spoken_text,
            script=script,
            speaker=speaker,
            format=DRAINED_FORMAT if fmt == MARKS_FORMAT else AUDIO_FORMATS[fmt],
            sample_rate=None if fmt == MARKS_FORMAT else int(self._sample_rate(fmt)),
            stream=fmt != MARKS_FORMAT,  # audio leaves as it is made where the transport streams
            flow_steps=self._flow_steps(),
        )
        return PollyRequest(options, marks, CONTENT_TYPES[fmt], billed)

    def _flow_steps(self) -> int | None:
        if self.Engine is None:
            return None
        if self.Engine not in ENGINES:
            raise PollyError(
                "ValidationException", f"Engine {self.Engine!r} is not one of {', '.join(ENGINES)}"
            )
        return FAST_FLOW_STEPS if self.Engine == STANDARD_ENGINE else MAX_FLOW_STEPS

    def _format(self) -> str:
        fmt = self.OutputFormat
        if fmt in UNWRITTEN_FORMATS:
            raise PollyError(
                "ValidationException",
                f"OutputFormat {fmt!r} is not written here (no {fmt} encoder); choose one of"
                f" {', '.join(CONTENT_TYPES)}",
            )
        if fmt not in CONTENT_TYPES:
            raise PollyError(
                "ValidationException", f"OutputFormat {fmt!r} is not one of {', '.join(CONTENT_TYPES)}"
            )
        if (fmt == MARKS_FORMAT) != bool(self.SpeechMarkTypes):
            raise PollyError(
                "MarksNotSupportedForFormatException",
                "speech marks come alone, as OutputFormat json: give SpeechMarkTypes with json, and"
                " neither with an audio format",
            )
        return fmt

    def _sample_rate(self, fmt: str) -> str:
        allowed = SAMPLE_RATES[fmt]
        if self.SampleRate is None:
            if fmt in ("pcm", "ogg_opus"):
                return allowed[-1]
            return "22050" if self.Engine in (None, STANDARD_ENGINE) else "24000"
        if self.SampleRate not in allowed:
            raise PollyError(
                "InvalidSampleRateException",
                f"SampleRate {self.SampleRate!r} is not one {fmt} takes: {', '.join(allowed)}",
            )
        return self.SampleRate

    def _mark_types(self) -> tuple[MarkType, ...]:
        types: list[MarkType] = []
        for name in self.SpeechMarkTypes:
            if name == "viseme":
                raise PollyError(
                    "ValidationException",
                    "viseme speech marks need an alignment of the audio to its sounds, which this model"
                    " does not have; ask for sentence, ssml or word marks",
                )
            found = next((kind for kind in POLLY_MARK_TYPES if kind == name), None)
            if found is None:
                raise PollyError(
                    "ValidationException",
                    f"SpeechMarkTypes {name!r} is not one of {', '.join(POLLY_MARK_TYPES)}",
                )
            types.append(found)
        if "ssml" in types and self.TextType != "ssml":
            raise PollyError(
                "SsmlMarksNotSupportedForTextTypeException",
                "ssml speech marks come from <mark> tags: they need TextType ssml",
            )
        return tuple(dict.fromkeys(types))

    def _script(self, marks: tuple[MarkType, ...], lexicons: bool) -> Script | None:
        """The pieces to perform: the SSML's; plain text's sentences when marks, a language or lexicons
        are asked for; else None (the text as it is)."""
        tag = self._language_tag()
        if self.TextType == "ssml":
            try:
                script = parse_ssml(self.Text)
            except InvalidRequest as exc:
                raise PollyError("InvalidSsmlException", exc.message) from None
        elif self.TextType == "text":
            if not marks and tag is None and not lexicons:
                return None
            script = text_script(self.Text)
        else:
            raise PollyError("ValidationException", f"TextType {self.TextType!r} is not text or ssml")
        if tag is None:
            return script
        pieces = (
            replace(piece, language=piece.language or tag) if isinstance(piece, Spoken) else piece
            for piece in script.pieces
        )
        return Script(tuple(pieces))

    def _language_tag(self) -> str | None:
        if self.LanguageCode is None:
            return None
        if self.LanguageCode not in LANGUAGE_CODES:
            raise PollyError(
                "ValidationException", f"LanguageCode {self.LanguageCode!r} is not one of Polly's"
            )
        tag = language_tag(self.LanguageCode)
        if tag is None:
            raise PollyError(
                "LanguageNotSupportedException",
                f"LanguageCode {self.LanguageCode!r} is not a language of this model (Chinese, English,"
                " Japanese, Cantonese, Korean: cmn-CN, en-US and the other en-*, ja-JP, yue-CN, ko-KR)",
            )
        return tag


class PollyTask(PollySpeech):
    """StartSpeechSynthesisTask's body (POST /polly/v1/synthesisTasks)."""

    OutputS3BucketName: str
    OutputS3KeyPrefix: str = Field("", pattern=r"^[0-9a-zA-Z/!\-_.*'():;$@=+,?&]{0,800}$")
    SnsTopicArn: str | None = None

    def job(self, task_id: str, speaker: str, model_rate: int) -> tuple[SpeechJob, PollyRequest]:
        """The job that makes this task's output: its audio (or, for json, its speech marks beside the
        audio) under OutputS3KeyPrefix, named by the task's id; and the request as translated."""
        if self.SnsTopicArn is not None:
            raise PollyError(
                "InvalidSnsTopicArnException",
                "tasks send no notifications here: leave SnsTopicArn out and poll GetSpeechSynthesisTask",
            )
        if self.LanguageCode is not None:
            raise PollyError(
                "ValidationException",
                "LanguageCode is applied by SynthesizeSpeech; a task speaks each sentence in the language"
                " the model reads in it: leave LanguageCode out (or use SSML <lang>)",
            )
        if self.LexiconNames:
            raise PollyError(
                "ValidationException", "lexicons are applied by SynthesizeSpeech only: leave LexiconNames out"
            )
        if "word" in self.SpeechMarkTypes:
            raise PollyError(
                "ValidationException", "word speech marks are given by SynthesizeSpeech only, not by tasks"
            )
        # SynthesizeSpeech's rates are not a task's: its own check follows.
        request = self.model_copy(update={"SampleRate": None}).translated(speaker)
        rate = Output.of(request.options.format, model_rate).rate
        if self.SampleRate is not None and self.SampleRate != str(rate):
            raise PollyError(
                "InvalidSampleRateException",
                f"a task's audio is written at the model's rate, {rate} Hz for {self.OutputFormat}: give"
                f" SampleRate {rate} or leave it out (SynthesizeSpeech takes Polly's other rates)",
            )
        fmt = request.options.format
        job = SpeechJob.model_validate(
            {
                "id": task_id,
                "text": self.Text,
                "text_type": self.TextType,
                "speaker": speaker,
                "format": fmt,
                "flow_steps": request.options.flow_steps,
                "speech_marks": list(request.marks),
                "output_key": f"{self.OutputS3KeyPrefix}{task_id}.{fmt}",
            }
        )
        return job, request


@dataclass(frozen=True)
class PollyRequest:
    """A Polly request translated: the options, the speech marks wanted (json), the reply's type, the
    characters it is billed (x-amzn-RequestCharacters)."""

    options: SynthesisOptions
    marks: tuple[MarkType, ...]
    content_type: str
    characters: int

    @property
    def marks_only(self) -> bool:
        return bool(self.marks)


class RecordingData(BaseModel):
    """Where a recording is: exactly one of an S3 URL (in the deployment's bucket) and the bytes."""

    model_config = ConfigDict(extra="forbid", strict=True)

    S3Url: str | None = None
    Bytes: str | None = None  # base64, as Polly's SDKs send a blob in JSON


class Recording(BaseModel):
    """One recording of the speaker; any of the formats is read whatever `Format` says."""

    model_config = ConfigDict(extra="forbid", strict=True)

    Format: Literal["wav", "flac", "ogg_vorbis", "mp3"]
    Data: RecordingData


class VoiceCreationData(BaseModel):
    """The recordings a custom voice is made from."""

    model_config = ConfigDict(extra="forbid", strict=True)

    Recordings: list[Recording] = Field(min_length=1, max_length=10)


class CustomVoiceRequest(BaseModel):
    """CreateVoice's body (POST /polly/v1/voices): the recordings of a speaker; the voice's language."""

    model_config = ConfigDict(extra="ignore", strict=True)

    Name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    LanguageCode: str
    TermsAccepted: bool
    VoiceCreationData: VoiceCreationData
    # The same token returns the same voice (Polly's SDKs send a fresh one when the caller gives none).
    ClientToken: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[!-~]+$")


class LexiconRequest(BaseModel):
    """PutLexicon's body (PUT /polly/v1/lexicons/{LexiconName}): the PLS document."""

    model_config = ConfigDict(extra="ignore", strict=True)

    Content: str


__all__ = [
    "AUDIO_FORMATS",
    "CONTENT_TYPES",
    "CustomVoiceRequest",
    "LexiconRequest",
    "PollyRequest",
    "PollySpeech",
    "PollyTask",
    "Recording",
]
