"""Word speech marks, estimated: each word of a spoken piece placed inside the piece's audio by its
expected spoken length.

The model has no alignment between its text and its audio, but a piece's start and end in the audio are
exact (its `sentence` mark, and its last non-silent sample). Inside that span each word gets a share of
the time by its weight: one per letter, three per Chinese or Japanese character (a syllable each), and
two per punctuation mark between words (a pause), so a word's `time` is where its share starts. A piece
with nothing but words of one length spreads them evenly. The marks are estimates, in order, one per word,
inside their piece; their `start` and `end` are UTF-8 byte offsets into the request's text, exact when
the piece's text is its span of the input (plain text) and scaled into that span otherwise (SSML whose
piece holds tags, or an alias said in place of its words).
"""

from __future__ import annotations

import re

from function.core.script import SpeechMark

# A word: one Chinese character or kana (scripts written without spaces, a syllable each), or a run of
# letters and digits with inner apostrophes, hyphens or dots ("don't", "e-mail", "3.5").
_SYLLABIC = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_SYLLABIC}]|(?:(?![{_SYLLABIC}])[^\W_])+(?:['’.\-](?:(?![{_SYLLABIC}])[^\W_])+)*")
_SYLLABLE = re.compile(rf"[{_SYLLABIC}]")
_PAUSE = re.compile(r"[^\w\s]")
SYLLABLE_WEIGHT, LETTER_WEIGHT, PAUSE_WEIGHT = 3, 1, 2


def _weight(word: str) -> int:
    syllables = len(_SYLLABLE.findall(word))
    return syllables * SYLLABLE_WEIGHT + (len(word) - syllables) * LETTER_WEIGHT


def word_marks(sentence: SpeechMark, end_ms: int) -> list[SpeechMark]:
    """The `word` marks of a `sentence` mark's piece, whose audio runs from its time to `end_ms`."""
    text = sentence.value
    words = list(_WORD.finditer(text))
    if not words:
        return []
    # Each word's weight, with the pauses written before it (after the first word) added to its start.
    starts, total, previous = [], 0, 0
    for index, match in enumerate(words):
        if index:
            total += PAUSE_WEIGHT * len(_PAUSE.findall(text, previous, match.start()))
        starts.append(total)
        total += _weight(match.group())
        previous = match.end()
    span_ms = max(end_ms - sentence.time, 0)
    encoded = len(text.encode())
    span_bytes = sentence.end - sentence.start

    def offset(index: int) -> int:
        at = len(text[:index].encode())
        exact = encoded == span_bytes
        return sentence.start + (at if exact else round(at * span_bytes / max(encoded, 1)))

    return [
        SpeechMark(
            sentence.time + span_ms * start // total,
            "word",
            offset(match.start()),
            offset(match.end()),
            match.group(),
        )
        for match, start in zip(words, starts, strict=True)
    ]


__all__ = ["word_marks"]
