"""function.core.text: the one rule that makes every edge's text the engine's."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from function.core.errors import InvalidRequest
from function.core.options import SynthesisOptions
from function.core.text import clean_text


def _every_char() -> list[str]:
    return [chr(code) for code in range(sys.maxunicode + 1)]


def test_removes_every_format_character_of_this_interpreters_unicode() -> None:
    formats = [c for c in _every_char() if unicodedata.category(c) == "Cf"]
    assert formats and clean_text("".join(formats)) == ""


def test_removes_lone_surrogates_controls_and_noncharacters() -> None:
    controls = [c for c in _every_char() if unicodedata.category(c) == "Cc" and c not in "\t\n\r\x0b\x0c\x85"]
    surrogates = [chr(code) for code in range(0xD800, 0xE000)]
    nonchars = [chr(code) for code in range(0xFDD0, 0xFDF0)] + [
        chr(plane << 16 | low) for plane in range(17) for low in (0xFFFE, 0xFFFF)
    ]
    assert clean_text("".join(controls + surrogates + nonchars)) == ""
    assert clean_text("\ud800 lone") == " lone"
    assert clean_text("a\x00b\x1bc\x7fd\x9fe") == "abcde"


def test_keeps_what_is_spoken_and_unifies_line_breaks() -> None:
    text = "Hello,\tworld! 你好。 Ünïcödé 😀 ½ ①"
    assert clean_text(text) == text
    assert clean_text("a\r\nb\rc\x0bd\x0ce\x85f\u2028g\u2029h") == "a\nb\nc\nd\ne\nf\ng\nh"


def test_removes_invisible_characters_that_make_equal_looking_texts_differ() -> None:
    # zero-width space and joiner, LRM, an RLO...PDF override, an isolate, a BOM, a tag character
    assert clean_text("pa\u200bss\u200dw\u200eo\u202erd\u202c \u2067x\u2069\ufeff\U000e0041") == "password x"


def test_every_edge_s_options_are_cleaned_before_their_length_is_checked() -> None:
    options = SynthesisOptions(text="\ud800hi\u200b", speaker="s", instruct="calm\x00", prompt_text=None)
    assert (options.text, options.instruct, options.prompt_text) == ("hi", "calm", None)
    options.validated(max_text_chars=2)  # two characters are left: within the limit
    with pytest.raises(InvalidRequest, match="text is empty"):
        SynthesisOptions(text="\ud800\u200b\x00", speaker="s").validated()
