"""<say-as> modes (function.cosyvoice.frontend.say_as), in English and Chinese, and what the normaliser then
leaves of them."""

from __future__ import annotations

import pytest

from function.core.errors import InvalidRequest
from function.cosyvoice.frontend.normalize import normalize
from function.cosyvoice.frontend.say_as import en_ordinal, read_as


@pytest.mark.parametrize(
    ("mode", "written", "en", "zh"),
    [
        ("characters", "AB1", "A B one", "AB一"),
        ("spell-out", "cat", "C A T", "CAT"),
        ("digits", "2024", "two zero two four", "二零二四"),
        ("cardinal", "1,234", "one thousand, two hundred and thirty-four", "一千二百三十四"),
        ("ordinal", "21", "twenty-first", "第二十一"),
        ("ordinal", "3rd", "third", "第三"),
        ("telephone", "555-0123", "five five five, zero one two three", "五五五，零一二三"),
        ("date", "2024-03-05", "March fifth, twenty twenty-four", "二零二四年三月五日"),
        ("time", "14:05", "fourteen oh five", "十四点五分"),
        ("time", "9:00", "nine o'clock", "九点"),
    ],
)
def test_each_mode_reads_in_english_and_chinese(mode: str, written: str, en: str, zh: str) -> None:
    assert read_as(written, mode, "en") == en
    assert read_as(written, mode, "zh") == zh


def test_what_a_mode_reads_is_left_alone_by_the_normaliser() -> None:
    # Read as a number, 2024 would be "two thousand and twenty-four": the mode's words survive.
    assert "two zero two four" in normalize("Code " + read_as("2024", "digits", "en") + ".", "en")
    assert "二零二四" in normalize("编号" + read_as("2024", "digits", "zh") + "。", "zh")


@pytest.mark.parametrize(
    ("digits", "words"), [("1", "first"), ("12", "twelfth"), ("40", "fortieth"), ("100", "one hundredth")]
)
def test_english_ordinals(digits: str, words: str) -> None:
    assert en_ordinal(digits) == words


def test_values_a_mode_cannot_read_are_refused() -> None:
    for mode, written in [
        ("cardinal", "twelve"),
        ("ordinal", "x"),
        ("date", "2024-13-01"),
        ("time", "25:00"),
    ]:
        with pytest.raises(InvalidRequest, match=mode):
            read_as(written, mode, "en")


def test_unrecognised_date_and_time_shapes_go_to_the_normaliser() -> None:
    assert read_as("March 5", "date", "en") == "March 5"
    assert read_as("noon", "time", "en") == "noon"
