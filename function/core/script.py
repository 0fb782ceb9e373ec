"""A script: what a request says as a sequence of pieces (spoken text, silence, marks), and its speech marks.

SSML (function.markup.ssml) and plain text asking for marks both become a script at the edge; the engine
performs it piece by piece (function.cosyvoice.perform) and reports where each piece starts in the audio.
Offsets (`start`, `end`) are UTF-8 byte offsets into the request's text, as Amazon Polly's speech marks give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MarkType = Literal["sentence", "ssml", "word"]
# What a reply of marks alone gets unless it names its types: the exact ones (word marks are estimates).
MARK_TYPES: tuple[MarkType, ...] = ("sentence", "ssml")
LANGUAGE_TAGS = ("zh", "en", "ja", "yue", "ko")  # the model's <|xx|> language tags


@dataclass(frozen=True)
class Spoken:
    """A run of text read in one go (one `sentence` mark), at one speed, gain and language."""

    text: str  # what to say, before normalisation
    # Byte span of the run in the input, from its first character to its last: punctuation written after
    # a closing tag, a break or a mark closes the run before it (function.markup.ssml), so the span of
    # "quickly." in `<prosody rate="fast">quickly</prosody>.` holds the closing tag too.
    start: int
    end: int
    speed: float = 1.0  # tempo factor, checked against function.core.options' range by the edge
    gain: float = 1.0  # linear amplitude factor
    language: str | None = None  # one of LANGUAGE_TAGS, or None: the front end's own guess

    @property
    def model_text(self) -> str:
        """The text with its language tag in front, as the model's front end reads it."""
        return f"<|{self.language}|>{self.text}" if self.language else self.text


@dataclass(frozen=True)
class Pause:
    """Exact digital silence."""

    seconds: float


@dataclass(frozen=True)
class Mark:
    """A named point (SSML `<mark name>`): reported as an `ssml` speech mark, says nothing."""

    name: str
    start: int
    end: int


Piece = Spoken | Pause | Mark


@dataclass(frozen=True)
class Script:
    pieces: tuple[Piece, ...]

    @property
    def spoken_text(self) -> str:
        """Everything read aloud, space-joined: what length limits count (not markup)."""
        return " ".join(piece.text for piece in self.pieces if isinstance(piece, Spoken))


@dataclass(frozen=True)
class SpeechMark:
    """One Polly-style speech mark: `time` in ms from the start of the audio where the piece begins."""

    time: int
    type: MarkType
    start: int
    end: int
    value: str

    def to_dict(self) -> dict[str, int | str]:
        return {
            "time": self.time,
            "type": self.type,
            "start": self.start,
            "end": self.end,
            "value": self.value,
        }


__all__ = [
    "LANGUAGE_TAGS",
    "MARK_TYPES",
    "Mark",
    "MarkType",
    "Pause",
    "Piece",
    "Script",
    "SpeechMark",
    "Spoken",
]
