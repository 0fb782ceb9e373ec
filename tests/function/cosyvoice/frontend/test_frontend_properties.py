"""The text front end takes any `str` (hypothesis over all of Unicode, lone surrogates included): it never
raises, and what it makes is at most a small multiple of what it was given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from function.cosyvoice.frontend import TextTokenizer, normalize_text, prepare_text

ROOT = Path(__file__).resolve().parents[4]
ASSETS = Path(os.environ.get("COSYVOICE_WHISPER_ASSETS", ROOT / ".cache" / "whisper-assets"))
VOCAB = ASSETS / "multilingual.tiktoken"
# Numbers are what grows: "7" is "seven", a digit of a long code "zero " and a Chinese 万 a few
# characters; a symbol may become a word ("%" → "percent").
GROWTH = 12

# Every code point, surrogates included (hypothesis leaves them out unless asked), mixed with the
# characters the graphs read (digits, units, dates), so both the odd and the ordinary paths are walked.
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
READ_CHARS = st.sampled_from(list("0123456789.,:/-%$¥kg年月日时分 \n\tabcAB你好。！？<|>"))
TEXTS = st.text(st.one_of(ANY_CHAR, READ_CHARS), max_size=80)


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    if not VOCAB.is_file():
        pytest.skip(f"{VOCAB} missing: run `make setup`")
    return TextTokenizer.from_file(VOCAB)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS)
def test_prepare_text_never_raises_and_stays_bounded(tokenizer: TextTokenizer, text: str) -> None:
    segments = prepare_text(text, tokenizer)
    assert sum(len(segment) for segment in segments) <= GROWTH * len(text) + 16
    for segment in segments:
        segment.encode("utf-8")  # what reaches the tokenizer can be encoded
        tokenizer.encode(segment)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_normalize_text_never_raises_and_stays_bounded(text: str) -> None:
    normalized = normalize_text(text)
    normalized.encode("utf-8")
    assert len(normalized) <= GROWTH * len(text) + 16


def test_a_lone_surrogate_is_dropped_not_raised() -> None:
    assert normalize_text("\ud800 lone") == "lone"
