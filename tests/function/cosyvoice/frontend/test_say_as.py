"""<say-as> modes (function.cosyvoice.frontend.say_as), in English and Chinese, what the normaliser then
leaves of them, and how long an expletive's silence is."""

from __future__ import annotations

import pytest

from function.core.errors import InvalidRequest
from function.cosyvoice.frontend.normalize import normalize
from function.cosyvoice.frontend.say_as import SECONDS_PER_SYLLABLE, en_ordinal, expletive_seconds, read_as


@pytest.mark.parametrize(
    ("mode", "written", "en", "zh"),
    [
        ("characters", "AB1", "A B one", "AB一"),
        ("spell-out", "cat", "C A T", "CAT"),
        ("digits", "2024", "two zero two four", "二零二四"),
        ("cardinal", "1,234", "one thousand, two hundred and thirty-four", "一千二百三十四"),
        ("number", "1234", "one thousand, two hundred and thirty-four", "一千二百三十四"),
        ("fraction", "3/20", "three twentieths", "二十分之三"),
        ("fraction", "1/2", "one half", "二分之一"),
        ("fraction", "3/4", "three quarters", "四分之三"),
        ("fraction", "2+1/2", "two and a half", "二又二分之一"),
        ("fraction", "2 1/2", "two and a half", "二又二分之一"),
        ("fraction", "2½", "two and a half", "二又二分之一"),
        ("fraction", "1 1/8", "one and an eighth", "一又八分之一"),
        ("unit", "10km", "ten kilometers", "十公里"),
        ("unit", "1.5 kg", "one point five kilograms", "一点五千克"),
        ("unit", "5000mAh", "five thousand milliamp hours", "五千毫安时"),
        ("unit", "3/4mi", "three quarters of a mile", "四分之三英里"),
        ("unit", "1/2h", "one half of an hour", "二分之一小时"),
        ("unit", "2+1/2km", "two and a half kilometers", "二又二分之一公里"),
        ("ordinal", "21", "twenty-first", "第二十一"),
        ("ordinal", "3rd", "third", "第三"),
        ("telephone", "555-0123", "five five five, zero one two three", "五五五，零一二三"),
        ("date", "2024-03-05", "March fifth, twenty twenty-four", "二零二四年三月五日"),
        ("time", "14:05", "fourteen oh five", "十四点五分"),
        ("time", "9:00", "nine o'clock", "九点"),
        ("time", "1'21\"", "one minute twenty-one seconds", "一分二十一秒"),
        ("time", "2'", "two minutes", "二分"),
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
    ("mode", "written"),
    [("fraction", "2+1/2"), ("unit", "1/2inch"), ("unit", "10km"), ("address", "105 Elm Rd")],
)
def test_the_new_modes_readings_are_left_alone_by_the_normaliser(mode: str, written: str) -> None:
    said = read_as(written, mode, "en")
    assert normalize(f"It is {said}.", "en") == f"It is {said}."
    said = read_as(written, mode, "zh") if mode != "address" else read_as("27号1203室", mode, "zh")
    assert normalize(f"是{said}。", "zh") == f"是{said}。"


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("123 Main St", "one twenty-three Main Street"),
        ("105 Elm Rd.", "one oh five Elm Road"),
        ("1600 Pennsylvania Ave NW", "sixteen hundred Pennsylvania Avenue Northwest"),
        ("2005 W 3rd St", "twenty oh five West third Street"),
        ("350 5th Ave, Apt 4B", "three fifty fifth Avenue, Apartment four B"),
        ("221B Baker St, London.", "two twenty-one B Baker Street, London."),
        ("Washington, DC 20500", "Washington, DC two zero five zero zero"),
    ],
)
def test_english_addresses_read_house_numbers_in_pairs_and_write_out_abbreviations(
    written: str, said: str
) -> None:
    assert read_as(written, "address", "en") == said


def test_chinese_addresses_read_house_numbers_as_numbers_and_rooms_and_postcodes_digit_by_digit() -> None:
    assert read_as("中关村大街27号1203室", "address", "zh") == "中关村大街二十七号一二零三室"
    assert read_as("世纪大道100号5号楼10层，邮编200120", "address", "zh") == (
        "世纪大道一百号五号楼十层，邮编二零零一二零"
    )


def test_an_expletive_lasts_as_long_as_its_syllables() -> None:
    assert expletive_seconds("heck") == expletive_seconds("f**k") == SECONDS_PER_SYLLABLE
    assert expletive_seconds("darnit") == expletive_seconds("混蛋") == 2 * SECONDS_PER_SYLLABLE
    assert expletive_seconds("son of a gun") == 4 * SECONDS_PER_SYLLABLE


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
        ("fraction", "half"),
        ("fraction", "3/0"),
        ("unit", "km"),
        ("unit", "10"),
    ]:
        with pytest.raises(InvalidRequest, match=mode):
            read_as(written, mode, "en")


def test_unrecognised_date_and_time_shapes_go_to_the_normaliser() -> None:
    assert read_as("March 5", "date", "en") == "March 5"
    assert read_as("noon", "time", "en") == "noon"
