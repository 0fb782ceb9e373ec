"""The text front end: normalise, split into segments, tokenize (whisper's multilingual BPE)."""

from __future__ import annotations

import re

from function.core.text import clean_text
from function.cosyvoice.frontend.fst import load as load_normalizer
from function.cosyvoice.frontend.fst import preload as preload_normalizer
from function.cosyvoice.frontend.language import contains_chinese, is_only_punctuation, language_of
from function.cosyvoice.frontend.normalize import normalize
from function.cosyvoice.frontend.split import split_paragraph
from function.cosyvoice.frontend.tokenizer import TextTokenizer

# Leading special tags such as "<|en|>" (v1 cross-lingual) are not normalised. As in v1, they stay where
# they were written: at the start of the first segment (and count in its length), not on every segment.
_LEADING_TAGS = re.compile(r"^(?:\s*<\|[^<>|\s]+\|>)+")


def prepare_text(text: str, tokenizer: TextTokenizer) -> list[str]:
    """Normalised segments ready to tokenize; punctuation-only pieces are dropped."""
    tags, body = _peel_tags(text)
    if not body:
        return []
    language = language_of(body)
    units = len if language == "zh" else (lambda piece: len(tokenizer.encode(piece)))
    segments = split_paragraph(tags + normalize(body, language), language, units)
    return [segment for segment in segments if not is_only_punctuation(segment.removeprefix(tags))]


def normalize_text(text: str) -> str:
    """The whole text normalised, unsplit (upstream's text_normalize(split=False)): prompts, instructions."""
    tags, body = _peel_tags(text)
    return tags + normalize(body, language_of(body)) if body else tags


def _peel_tags(text: str) -> tuple[str, str]:
    text = clean_text(text).strip()  # the graphs raise on what cannot be encoded (a lone surrogate)
    match = _LEADING_TAGS.match(text)
    if match is None:
        return "", text
    return re.sub(r"\s+", "", match.group()), text[match.end() :].strip()


__all__ = [
    "TextTokenizer",
    "contains_chinese",
    "is_only_punctuation",
    "normalize_text",
    "load_normalizer",
    "preload_normalizer",
    "prepare_text",
]
