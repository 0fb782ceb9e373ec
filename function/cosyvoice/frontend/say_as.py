"""SSML `<say-as interpret-as>`: a span read in the mode its writer names instead of the rules' guess.

Each mode turns the span into words the normaliser then leaves as they are, in English or Chinese, and
refuses a span it cannot read in its mode. `date` and `time` take the ISO shapes (2024-03-05, 14:30 or
14:30:15) and Polly's duration (1'21"), and leave anything else to the normaliser's own date and time
rules. `unit` reads its number and has the normaliser name the unit, as it would after any number.
`expletive` is not read at all: the SSML parser makes it a silence (`expletive_seconds`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from function.core.errors import InvalidRequest
from function.cosyvoice.frontend.language import Language
from function.cosyvoice.frontend.normalize import normalize
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
_DURATION = re.compile(r"(?:(\d+)')?(?:(\d+)\")?")  # Polly's minutes and seconds: 1'21"
_DIGITS = re.compile(r"\d+")
# A whole number, a fraction, or both: 3/20, 2+1/2 (Polly's mixed fraction), 2 1/2, 2½.
_FRACTION = re.compile(r"(?:(\d+)(?:\s*\+\s*|\s+))?(\d+)/(\d+)")
_NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
_MEASURE = re.compile(rf"((?:\d+(?:\s*\+\s*|\s+))?\d+/\d+|{_NUMBER})\s*(\D.*)")
_EN_DENOMINATORS = {2: "half", 4: "quarter"}


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


def _duration(duration: re.Match[str], language: Language) -> str:
    """A match of _DURATION in words: one minute twenty-one seconds, 一分二十一秒."""
    parts = []
    for amount, en_name, zh_name in zip(duration.groups(), ("minute", "second"), ("分", "秒"), strict=True):
        if amount is None:
            continue
        if language == "zh":
            parts.append(zh_cardinal(amount) + zh_name)
        else:
            parts.append(f"{en_cardinal(amount)} {en_name}{'' if int(amount) == 1 else 's'}")
    return ("" if language == "zh" else " ").join(parts)


def _time(text: str, language: Language) -> str:
    duration = _DURATION.fullmatch(text.strip())
    if duration is not None and any(duration.groups()):
        return _duration(duration, language)
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


def _vulgar_fractions_written_out(text: str) -> str:
    """'2½' → '2 1/2': a vulgar fraction character as the digits it stands for."""
    out = []
    for char in text:
        spelled = unicodedata.normalize("NFKC", char)
        out.append(f" {spelled.replace(chr(0x2044), '/')}" if chr(0x2044) in spelled else char)
    return "".join(out).strip()


def _fraction_words(fraction: re.Match[str], language: Language) -> str:
    """A match of _FRACTION in words."""
    whole, numerator, denominator = fraction.groups()
    if int(denominator) == 0:
        raise InvalidRequest(f'<say-as interpret-as="fraction"> has a zero denominator: {denominator!r}')
    if language == "zh":
        proper = f"{zh_cardinal(denominator)}分之{zh_cardinal(numerator)}"
        return f"{zh_cardinal(whole)}又{proper}" if whole else proper
    one = _EN_DENOMINATORS.get(int(denominator), en_ordinal(denominator))  # half, third, twentieth
    if int(numerator) != 1:
        part = f"{en_cardinal(numerator)} {one[:-1] + 'ves' if one == 'half' else one + 's'}"
    elif whole:
        part = f"{'an' if one[0] in 'aeio' else 'a'} {one}"  # two and a half, one and an eighth
    else:
        part = f"one {one}"
    return f"{en_cardinal(whole)} and {part}" if whole else part


def _fraction(text: str, language: Language) -> str:
    """3/20 → three twentieths (二十分之三); 2+1/2, 2 1/2 and 2½ → two and a half (二又二分之一)."""
    match = _FRACTION.fullmatch(_vulgar_fractions_written_out(text))
    if match is None:
        raise InvalidRequest(
            f'<say-as interpret-as="fraction"> needs a fraction like 3/20 or 2+1/2, got {text!r}'
        )
    return _fraction_words(match, language)


def _unit(text: str, language: Language) -> str:
    """A number or a fraction and a unit, as Polly writes them (10km, 1/2inch): the number read, the unit
    named as the normaliser names it after a number ("10 km" → ten kilometers, 十公里)."""
    match = _MEASURE.fullmatch(_vulgar_fractions_written_out(text))
    if match is None:
        raise InvalidRequest(
            f'<say-as interpret-as="unit"> needs a number and a unit, like 10km, got {text!r}'
        )
    number, unit = match.group(1), match.group(2).strip()
    fraction = _FRACTION.fullmatch(number)
    if fraction is None:
        return normalize(f"{number} {unit}", language)
    words = _fraction_words(fraction, language)
    if language == "zh":  # 二分之一英寸: the fraction, then what the normaliser says after 一
        return words + normalize(f"1 {unit}", "zh").removeprefix("一")
    whole = fraction.group(1)
    if whole or int(fraction.group(2)) >= int(fraction.group(3)):  # two and a half inches
        return f"{words} {normalize(f'2 {unit}', 'en').removeprefix('two ')}"
    singular = normalize(f"1 {unit}", "en").removeprefix("one ")  # three quarters of a mile
    article = "an" if singular[:1].lower() in "aeiou" or singular.startswith("hour") else "a"
    return f"{words} of {article} {singular}"


_EN_STREET_WORDS = {
    "apt": "Apartment",
    "ave": "Avenue",
    "av": "Avenue",
    "bldg": "Building",
    "blvd": "Boulevard",
    "cir": "Circle",
    "ct": "Court",
    "dr": "Drive",
    "fl": "Floor",
    "hwy": "Highway",
    "ln": "Lane",
    "pkwy": "Parkway",
    "pl": "Place",
    "rd": "Road",
    "sq": "Square",
    "st": "Street",
    "ste": "Suite",
    "ter": "Terrace",
}
_EN_DIRECTIONS = {
    "N": "North",
    "S": "South",
    "E": "East",
    "W": "West",
    "NE": "Northeast",
    "NW": "Northwest",
    "SE": "Southeast",
    "SW": "Southwest",
}
_EN_ADDRESS_TOKEN = re.compile(r"(\d+)(st|nd|rd|th)\b|(\d+)([A-Za-z]*)|([A-Za-z]+)\.?")


def _en_house_number(digits: str) -> str:
    """As a street number is said: 7, 42, one twenty-three, one oh five, sixteen hundred, twenty oh five;
    five digits and more (a ZIP code) digit by digit."""
    if len(digits) <= 2 or (len(digits) == 4 and int(digits) % 1000 == 0):
        return en_cardinal(digits)
    if len(digits) >= 5:
        return en_digits(digits)
    high, low = digits[:-2], digits[-2:]
    if low == "00":
        return f"{en_cardinal(high)} hundred"
    return f"{en_cardinal(high)} {'oh ' + en_cardinal(low) if low[0] == '0' else en_cardinal(low)}"


def _en_address_token(match: re.Match[str]) -> str:
    ordinal, _, number, letters, word = match.groups()
    if ordinal:  # 5th Ave
        return en_ordinal(ordinal)
    if number:  # 221B
        return _en_house_number(number) + (f" {letters.upper()}" if letters else "")
    if word in _EN_DIRECTIONS:
        return _EN_DIRECTIONS[word]
    return _EN_STREET_WORDS.get(word.lower(), match.group())  # an abbreviation's full stop goes with it


def _zh_address_number(match: re.Match[str]) -> str:
    digits, after = match.group(1), match.group(2)
    if after in ("室", "房") or len(digits) >= 5:  # a room, a postcode: digit by digit
        return zh_digits(digits) + after
    return zh_cardinal(digits) + after


def _address(text: str, language: Language) -> str:
    """A street address: a house number as it is said (one twenty-three Main Street; 二十七号), a room
    or a postcode digit by digit (一二零三室), and English street abbreviations written out."""
    if language == "zh":
        return re.sub(r"(\d+)(\D?)", _zh_address_number, text.strip())
    return _EN_ADDRESS_TOKEN.sub(_en_address_token, text.strip())


SAY_AS: dict[str, Callable[[str, Language], str]] = {
    "characters": _characters,
    "spell-out": _characters,
    "digits": _digits,
    "cardinal": _cardinal,
    "number": _cardinal,
    "ordinal": _ordinal,
    "fraction": _fraction,
    "unit": _unit,
    "telephone": _telephone,
    "date": _date,
    "time": _time,
    "address": _address,
}
EXPLETIVE = "expletive"  # not read: the SSML parser makes it a silence of `expletive_seconds`
INTERPRETATIONS = (*SAY_AS, EXPLETIVE)  # every interpret-as value <say-as> takes
SECONDS_PER_SYLLABLE = 0.22  # conversational speech in English and Mandarin: about 4.5 syllables a second
_SYLLABLES = re.compile(r"[aeiouy]+|[\u4e00-\u9fff]", re.IGNORECASE)
_SAID_ALONE = re.compile(r"[\u4e00-\u9fff]|[^\s\u4e00-\u9fff]+")  # a Chinese character, or a word


def expletive_seconds(word: str) -> float:
    """How long `word` would take to say at speed 1: a syllable for each vowel group of an English word
    (one at least) and for each Chinese character.

    An expletive is silenced rather than bleeped: a bleep is a tone that no voice of the model makes,
    loud against the speech around it and with clicks at its edges unless faded; silence hides the word
    just as well, keeps the sentence's timing and marks, and is what a script's pause already is."""
    syllables = sum(max(1, len(_SYLLABLES.findall(token))) for token in _SAID_ALONE.findall(word))
    return syllables * SECONDS_PER_SYLLABLE


def read_as(text: str, mode: str, language: Language) -> str:
    """`text` in words, read as `mode` (a key of SAY_AS) in `language`."""
    return SAY_AS[mode](text, language)


__all__ = ["EXPLETIVE", "INTERPRETATIONS", "SAY_AS", "en_ordinal", "expletive_seconds", "read_as"]
