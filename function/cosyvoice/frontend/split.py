"""Split normalised text into synthesis segments, as upstream's `split_paragraph` does for v1.

Sentences end at the language's stop marks (a closing quote right after one stays with its sentence);
sentences are packed into segments of about `MIN_UNITS`..`MAX_UNITS` units (characters for Chinese,
text tokens for English), and a tail shorter than `MERGE_UNITS` joins the previous segment.

Unlike upstream, a sentence longer than `LONG_UNITS` (an unpunctuated transcript, a comma-only
paragraph) is first cut at its commas, and what is still too long at its spaces (or, without any,
every `MAX_UNITS` characters): upstream keeps it whole, and its speech can then outrun the LLM's
5000-position context (about 300 Chinese characters of speech at a slow pace).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from function.cosyvoice.frontend.language import Language

MAX_UNITS = 80  # upstream token_max_n
MIN_UNITS = 60  # token_min_n
MERGE_UNITS = 20  # merge_len
STOPS: dict[Language, str] = {"zh": "。？！；：、.?!;", "en": ".?!;:"}  # comma_split=False
CLOSING_QUOTES = '"”'
LONG_UNITS = 300  # a sentence longer than this is cut into pieces (see the module docstring)
COMMAS = "，,"


def split_paragraph(text: str, language: Language, units: Callable[[str], int]) -> list[str]:
    """`units` measures a piece: len for Chinese, the number of text tokens for English."""
    if not text:
        return []
    stops = STOPS[language]
    if text[-1] not in stops:
        text += "。" if language == "zh" else "."
    sentences: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char not in stops:
            continue
        if i > start:
            sentences.append(text[start : i + 1])
        # Runs of stop marks ("?!") keep only the first, like upstream.
        start = i + 1
        if i + 1 < len(text) and text[i + 1] in CLOSING_QUOTES and sentences:
            sentences[-1] += text[i + 1]
            start = i + 2
    segments: list[str] = []
    current = ""
    for sentence in (piece for whole in sentences for piece in _pieces(whole, units)):
        if units(current + sentence) > MAX_UNITS and units(current) > MIN_UNITS:
            segments.append(current)
            current = ""
        current += sentence
    if current:
        if units(current) < MERGE_UNITS and segments:
            segments[-1] += current
        else:
            segments.append(current)
    return segments


def _pieces(sentence: str, units: Callable[[str], int]) -> list[str]:
    """`sentence` itself, or, if longer than LONG_UNITS, cut after its commas and then between words."""
    if units(sentence) <= LONG_UNITS:
        return [sentence]
    pieces = []
    for clause in re.findall(rf"[^{COMMAS}]+[{COMMAS}]*|[{COMMAS}]+", sentence):
        if units(clause) <= LONG_UNITS:
            pieces.append(clause)
            continue
        words = re.findall(r"\s*\S+", clause) if " " in clause.strip() else list(clause)
        piece = ""
        for word in words:
            if piece and units(piece + word) > MAX_UNITS:
                pieces.append(piece)
                piece = ""
            piece += word
        pieces.append(piece)
    return pieces


__all__ = ["LONG_UNITS", "MAX_UNITS", "MERGE_UNITS", "MIN_UNITS", "split_paragraph"]
