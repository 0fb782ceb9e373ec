"""Which language a text is read in, and what counts as nothing to read."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Language = Literal["zh", "en"]

_CHINESE = re.compile(r"[\u4e00-\u9fff]")


def contains_chinese(text: str) -> bool:
    return _CHINESE.search(text) is not None


def language_of(text: str) -> Language:
    """Upstream's rule: any CJK ideograph makes the text Chinese."""
    return "zh" if contains_chinese(text) else "en"


def is_only_punctuation(text: str) -> bool:
    """True for "" and strings made only of punctuation and symbols (Unicode P* and S*)."""
    return all(unicodedata.category(c)[0] in "PS" for c in text)


__all__ = ["Language", "contains_chinese", "is_only_punctuation", "language_of"]
