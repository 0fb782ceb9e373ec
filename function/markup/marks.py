"""Speech marks on the wire: Polly's JSON lines, WebVTT captions, and a stream that sends each mark
before the audio it describes.

Marks are `sentence` (where each spoken piece starts), `ssml` (each `<mark>`) and `word`: the model has no
alignment between its text and its audio, so word marks are estimates placed inside their piece's exact
span (function.markup.words), and a piece's word marks are known once its audio has ended: a stream sends
them after that audio, before the next piece's.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import TypeVar

import numpy as np

from function.core.script import MarkType, SpeechMark
from function.markup.words import word_marks

Item = TypeVar("Item", np.ndarray, np.ndarray | SpeechMark)
MARKS_MEDIA_TYPE = "application/x-ndjson"
VTT_MEDIA_TYPE = "text/vtt"


class MarkCollector:
    """Splits the engine's items (function.cosyvoice.engine.Engine.speak): the audio passes on,
    the marks of the chosen types are kept, and `duration_ms` counts the audio seen. With `word` marks,
    a piece's are placed when its audio ends (the next mark, or the end of the audio): it ends at its
    last non-silent sample, so a break after it is not counted in its span."""

    def __init__(
        self, items: Iterable[np.ndarray | SpeechMark], types: Sequence[MarkType], rate: int
    ) -> None:
        self._items = items
        self._types = frozenset(types)
        self._rate = rate
        self._samples = 0
        self.marks: list[SpeechMark] = []
        self._words = "word" in self._types
        self._piece: SpeechMark | None = None  # the sentence whose audio is being drawn (word marks)
        self._voiced = 0  # samples up to the last non-silent one

    def audio(self) -> Iterator[np.ndarray]:
        for item in self._items:
            if isinstance(item, SpeechMark):
                self._place_words()
                if self._words and item.type == "sentence":
                    self._piece = item
                if item.type in self._types:
                    self.marks.append(item)
            else:
                if self._words:
                    voiced = np.flatnonzero(item)
                    if voiced.size:
                        self._voiced = self._samples + int(voiced[-1]) + 1
                self._samples += item.size
                yield item
        self._place_words()

    def _place_words(self) -> None:
        if self._piece is not None:
            self.marks += word_marks(self._piece, round(self._voiced * 1000 / self._rate))
            self._piece = None

    @property
    def samples(self) -> int:
        return self._samples

    @property
    def duration_ms(self) -> int:
        return round(self._samples * 1000 / self._rate)

    def take(self) -> list[SpeechMark]:
        """The marks collected since the last take."""
        taken, self.marks = self.marks, []
        return taken


def drawn_to_first_audio(items: Iterator[Item]) -> Iterator[Item]:
    """`items` with those up to the first audio chunk drawn now: a streamed reply's input errors then
    still become a 4xx instead of a cut stream (a script's first mark comes before any synthesis)."""
    head: list[Item] = []
    for item in items:
        head.append(item)
        if isinstance(item, np.ndarray):
            break
    return chain(head, items)


def _line(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode() + b"\n"


def marks_jsonl(marks: Iterable[SpeechMark]) -> bytes:
    """Polly's speech-mark output: one JSON object per line."""
    return b"".join(_line(mark.to_dict()) for mark in marks)


def _vtt_time(ms: int) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def webvtt(marks: Sequence[SpeechMark], duration_ms: int) -> str:
    """WebVTT captions, one cue per sentence mark, each lasting until the next sentence (or the end)."""
    sentences = [mark for mark in marks if mark.type == "sentence"]
    cues = ["WEBVTT", ""]
    for index, mark in enumerate(sentences):
        end = sentences[index + 1].time if index + 1 < len(sentences) else duration_ms
        cues += [
            str(index + 1),
            f"{_vtt_time(mark.time)} --> {_vtt_time(max(end, mark.time))}",
            mark.value,
            "",
        ]
    return "\n".join(cues)


def marked_lines(pieces: Iterable[bytes], take_marks: Callable[[], list[SpeechMark]]) -> Iterator[bytes]:
    """NDJSON lines: {"mark": {...}} before the audio it describes, {"audio": base64} for each piece of
    encoded audio as it is made (`take_marks` gives the marks collected while that piece was made)."""
    for encoded in pieces:
        yield b"".join(_line({"mark": mark.to_dict()}) for mark in take_marks())
        if encoded:
            yield _line({"audio": base64.b64encode(encoded).decode()})
    yield b"".join(_line({"mark": mark.to_dict()}) for mark in take_marks())


__all__ = [
    "MARKS_MEDIA_TYPE",
    "VTT_MEDIA_TYPE",
    "drawn_to_first_audio",
    "MarkCollector",
    "marked_lines",
    "marks_jsonl",
    "webvtt",
]
