"""SSML `<say-as interpret-as>`: a span read in the mode its writer names instead of the rules' guess.

Each mode turns the span into words the normaliser then leaves as they are; `date` and `time` take the
ISO shapes (2024-03-05, 14:30 or 14:30:15) and anything else goes to the normaliser's own date and time rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from function.core.errors import InvalidRequest
from function.cosyvoice.frontend.language import Language
from function.cosyvoice.frontend.numbers import en_cardinal, en_digits, en_year, zh_cardinal, zh_digits

_EN_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_EN_ORDINAL_ENDINGS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
_ISO_DATE = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_DIGITS = re.compile(r"\d+")


def _characters(text: str, language: Language) -> str:
    """One character at a time: letters as letters, digits as digit words."""
    read = zh_digits if language == "zh" else en_digits
    pieces = [read(c) if c.isdigit() else c.upper() for c in text if not c.isspace()]
    return ("" if language == "zh" else " ").join(pieces)


def _digits(text: str, language: Language) -> str:
    read = zh_digits if language == "zh" else en_digits
    return _DIGITS.sub(lambda m: f" {read(m.group())} ", text).strip()


def _cardinal(text: str, language: Language) -> str:
    digits = text.replace(",", "").strip()
    if not digits.isdigit():
        raise InvalidRequest(f'<say-as interpret-as="cardinal"> needs a whole number, got {text!r}')
    return zh_cardinal(digits) if language == "zh" else en_cardinal(digits)


def en_ordinal(digits: str) -> str:
    """'21' → 'twenty-first', '100' → 'one hundredth'."""
    words = en_cardinal(digits)
    head, last = re.match(r"(.*?)([a-z]+)$", words).groups()  # type: ignore[union-attr]
    if last in _EN_ORDINAL_ENDINGS:
        return head + _EN_ORDINAL_ENDINGS[last]
    return head + (last[:-1] + "ieth" if last.endswith("y") else last + "th")


def _ordinal(text: str, language: Language) -> str:
    digits = text.strip().rstrip(".").removesuffix("st").removesuffix("nd").removesuffix("rd")
    digits = digits.removesuffix("th").removeprefix("第")
    if not digits.isdigit():
        raise InvalidRequest(f'<say-as interpret-as="ordinal"> needs a whole number, got {text!r}')
    return "第" + zh_cardinal(digits) if language == "zh" else en_ordinal(digits)


def _telephone(text: str, language: Language) -> str:
    """Digit by digit, each group of the written number a group of the reading."""
    groups = _DIGITS.findall(text)
    read = zh_digits if language == "zh" else en_digits
    return ("，" if language == "zh" else ", ").join(read(group) for group in groups) or text


def _date(text: str, language: Language) -> str:
    match = _ISO_DATE.fullmatch(text.strip())
    if match is None:
        return text
    year, month, day = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        raise InvalidRequest(f'<say-as interpret-as="date"> got an impossible date {text!r}')
    if language == "zh":
        return f"{zh_digits(year)}年{zh_cardinal(month)}月{zh_cardinal(day)}日"
    return f"{_EN_MONTHS[int(month) - 1]} {en_ordinal(day)}, {en_year(year)}"


def _time(text: str, language: Language) -> str:
    match = _CLOCK.fullmatch(text.strip())
    if match is None:
        return text
    hour, minute, second = match.groups()
    if int(hour) > 23 or int(minute) > 59 or (second is not None and int(second) > 59):
        raise InvalidRequest(f'<say-as interpret-as="time"> got an impossible time {text!r}')
    if language == "zh":
        spoken = f"{zh_cardinal(hour)}点" + (f"{zh_cardinal(minute)}分" if int(minute) else "")
        return spoken + (f"{zh_cardinal(second)}秒" if second and int(second) else "")
    if int(minute) == 0:
        spoken = f"{en_cardinal(hour)} o'clock"
    else:
        spoken = f"{en_cardinal(hour)} {'oh ' if int(minute) < 10 else ''}{en_cardinal(minute)}"
    return spoken + (f" and {en_cardinal(second)} seconds" if second and int(second) else "")


SAY_AS: dict[str, Callable[[str, Language], str]] = {
    "characters": _characters,
    "spell-out": _characters,
    "digits": _digits,
    "cardinal": _cardinal,
    "ordinal": _ordinal,
    "telephone": _telephone,
    "date": _date,
    "time": _time,
}


def read_as(text: str, mode: str, language: Language) -> str:
    """`text` in words, read as `mode` (a key of SAY_AS) in `language`."""
    return SAY_AS[mode](text, language)


__all__ = ["SAY_AS", "en_ordinal", "read_as"]
