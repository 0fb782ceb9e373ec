"""Text normalisation for v1: numbers, dates, times, money and symbols become words; then upstream's clean-up.

Upstream runs `ttsfrd` (closed) or `wetext` (downloads FSTs at run time) and then a few string rules
(`cosyvoice/cli/frontend.py` text_normalize). This module is an offline, regex-only stand-in for the first
step that covers the common written forms, followed by upstream's rules as they are:
Chinese drops newlines and blanks between CJK characters, reads ²/³, turns "." into "。" and " - " into "，",
removes （）【】` and ——, and ends a trailing comma as "。"; English spells every digit run (upstream's
`spell_out_number` with inflect; `numbers.en_cardinal` reproduces inflect's wording).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Literal

from function.frontend.numbers import (
    en_cardinal,
    en_digits,
    en_ordinal,
    en_year,
    zh_cardinal,
    zh_digits,
)

Language = Literal["zh", "en"]

_CHINESE = re.compile(r"[\u4e00-\u9fff]")
# Full-width digits, letters and the symbols the rules below read; CJK punctuation is left alone.
_HALF_WIDTH = str.maketrans(
    {chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F) if chr(c - 0xFEE0).isalnum()}
    | {c: chr(ord(c) - 0xFEE0) for c in "％＄＋－＝＠＆．／"}  # "：" stays: it ends a Chinese clause
    | {"￥": "¥", "\u3000": " "}
)
_EN_PUNCTUATION = str.maketrans(
    {
        "，": ", ",
        "。": ". ",
        "！": "! ",
        "？": "? ",
        "；": "; ",
        "：": ": ",
        "、": ", ",
        "（": " (",
        "）": ") ",
        "【": "(",
        "】": ")",
        "《": '"',
        "》": '"',
        "“": '"',
        "”": '"',
        "‘": "'",
        "’": "'",
        "…": "...",
        "—": " - ",
    }
)

_NUMBER = r"\d+(?:\.\d+)?"
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,]*\d)")
_DATE = re.compile(r"(?<!\d)(\d{4})([-/.年])(\d{1,2})(?:\2|月)(\d{1,2})(?:日|号)?(?!\d)")
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_CURRENCY = re.compile(rf"([$€£¥])\s?({_NUMBER})(?:\s?(thousand|million|billion|trillion|万|亿))?")
_PERCENT = re.compile(rf"(-?)({_NUMBER})\s?([%‰])")
# Lookarounds name ASCII letters and digits: CJK characters are \w too, and "气温-3" is a negative number.
_RANGE = re.compile(rf"(?<![0-9A-Za-z.-])({_NUMBER})\s?[-~～]\s?({_NUMBER})(?![0-9A-Za-z.])")
_NEGATIVE = re.compile(rf"(?<![0-9A-Za-z.])-({_NUMBER})")
_DECIMAL = re.compile(r"(\d+)\.(\d+)")
_DIGITS = re.compile(r"\d+")
_BLANKS = re.compile(r"\s+")

_ZH_CURRENCY = {"$": "美元", "€": "欧元", "£": "英镑", "¥": "元"}
_ZH_SCALES = {"thousand": "千", "million": "百万", "billion": "十亿", "trillion": "万亿"}
_ZH_SYMBOLS = {
    "℃": "摄氏度",
    "°C": "摄氏度",
    "°F": "华氏度",
    "°": "度",
    "+": "加",
    "=": "等于",
    "×": "乘",
    "÷": "除以",
    "&": "和",
    "~": "到",
    "～": "到",
}
_ZH_YEAR = re.compile(r"(?<!\d)(\d{4})(?=年)")  # "2024年" digit by digit; "20年" (years) is a number
_ZH_FRACTION = re.compile(r"(?<![\d/])(\d+)/(\d+)(?![\d/])")

# English: (singular, plural, cent unit) per currency symbol; yen has no cents.
_EN_CURRENCY = {
    "$": ("dollar", "dollars", "cent"),
    "€": ("euro", "euros", "cent"),
    "£": ("pound", "pounds", "penny"),
    "¥": ("yen", "yen", ""),
}
_EN_SCALE_WORDS = {"万": "ten thousand", "亿": "hundred million"}
_EN_SYMBOLS = {
    "°C": " degrees Celsius",
    "°F": " degrees Fahrenheit",
    "℃": " degrees Celsius",
    "°": " degrees",
    "&": " and ",
    "+": " plus ",
    "=": " equals ",
    "@": " at ",
    "×": " times ",
}
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
_EN_ORDINAL = re.compile(r"(?<![\d.])(\d+)(?:st|nd|rd|th)\b")
_EN_YUAN = re.compile(rf"({_NUMBER})\s?元")
# "in 1999" reads as a year; a bare 1999 stays a cardinal, as upstream's inflect reads it.
_EN_YEAR = re.compile(r"\b((?:[Ii]n|[Ss]ince|[Uu]ntil|[Yy]ear) )(1[1-9]\d\d|20\d\d)(?![\d%]|[.,]\d)")
_EN_AMPM = re.compile(r"(?<=\d)\s?([ap])\.?m\b", re.IGNORECASE)  # after a number only: "I am" stays


def contains_chinese(text: str) -> bool:
    return _CHINESE.search(text) is not None


def language_of(text: str) -> Language:
    """Upstream's rule: any CJK ideograph makes the text Chinese."""
    return "zh" if contains_chinese(text) else "en"


def is_only_punctuation(text: str) -> bool:
    """True for "" and strings made only of punctuation and symbols (Unicode P* and S*)."""
    return all(unicodedata.category(c)[0] in "PS" for c in text)


def normalize(text: str, language: Language) -> str:
    text = unicodedata.normalize("NFC", text).translate(_HALF_WIDTH)
    text = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), text)
    return _normalize_zh(text) if language == "zh" else _normalize_en(text)


# --- Chinese -------------------------------------------------------------------------------------------


def _zh_number(number: str) -> str:
    """'12' → 十二, '3.05' → 三点零五; long or zero-led digit strings are read digit by digit."""
    whole, _, fraction = number.partition(".")
    head = zh_digits(whole) if _read_as_digits(whole) else zh_cardinal(whole)
    return head + ("点" + zh_digits(fraction) if fraction else "")


def _zh_date(m: re.Match[str]) -> str:
    year, _, month, day = m.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return m.group()
    return f"{zh_digits(year)}年{zh_cardinal(month)}月{zh_cardinal(day)}日"


def _zh_time(m: re.Match[str]) -> str:
    hours, minutes, seconds = m.groups()
    if int(hours) > 24 or int(minutes) > 59 or (seconds and int(seconds) > 59):
        return m.group()
    out = f"{zh_cardinal(hours)}点"
    if int(minutes) or seconds:
        out += ("零" if minutes.startswith("0") and int(minutes) else "") + f"{zh_cardinal(minutes)}分"
    if seconds:
        out += f"{zh_cardinal(seconds)}秒"
    return out


def _zh_currency(m: re.Match[str]) -> str:
    symbol, number, scale = m.groups()
    return _zh_number(number) + (_ZH_SCALES.get(scale, scale) if scale else "") + _ZH_CURRENCY[symbol]


def _zh_percent(m: re.Match[str]) -> str:
    sign, number, mark = m.groups()
    return ("负" if sign else "") + ("百分之" if mark == "%" else "千分之") + _zh_number(number)


def _normalize_zh(text: str) -> str:
    rules: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
        (_DATE, _zh_date),
        (_TIME, _zh_time),
        (_CURRENCY, _zh_currency),
        (_PERCENT, _zh_percent),
        (_ZH_YEAR, lambda m: zh_digits(m.group(1))),
        (_ZH_FRACTION, lambda m: f"{_zh_number(m.group(2))}分之{_zh_number(m.group(1))}"),
        (_RANGE, lambda m: f"{_zh_number(m.group(1))}到{_zh_number(m.group(2))}"),
        (_NEGATIVE, lambda m: "负" + _zh_number(m.group(1))),
        (_DECIMAL, lambda m: _zh_number(m.group())),
        (_DIGITS, lambda m: _zh_number(m.group())),
    ]
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    for symbol, words in _ZH_SYMBOLS.items():
        text = text.replace(symbol, words)
    # Upstream's clean-up after its normaliser, in its order.
    text = text.replace("\n", "")
    text = _remove_blanks_between_non_ascii(text)
    text = text.replace("²", "平方").replace("³", "立方")
    text = text.replace(".", "。").replace(" - ", "，")
    text = text.replace("（", "").replace("）", "").replace("【", "").replace("】", "").replace("`", "")
    text = text.replace("——", " ")
    return re.sub(r"[，,、]+$", "。", text)


def _remove_blanks_between_non_ascii(text: str) -> str:
    """Upstream's replace_blank: a space survives only between two non-space ASCII characters."""
    out = []
    for i, c in enumerate(text):
        if c == " ":
            before = text[i - 1] if i > 0 else " "
            after = text[i + 1] if i + 1 < len(text) else " "
            if not (before.isascii() and before != " " and after.isascii() and after != " "):
                continue
        out.append(c)
    return "".join(out)


# --- English -------------------------------------------------------------------------------------------


def _en_number(number: str) -> str:
    """'12' → twelve, '3.05' → three point zero five."""
    whole, _, fraction = number.partition(".")
    head = en_digits(whole) if _read_as_digits(whole) else en_cardinal(whole)
    return head + (" point " + en_digits(fraction) if fraction else "")


def _en_date(m: re.Match[str]) -> str:
    year, separator, month, day = m.groups()
    if separator not in "-/" or not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return m.group()
    return f"{_EN_MONTHS[int(month) - 1]} {en_ordinal(day)}, {en_year(year)}"


def _en_time(m: re.Match[str]) -> str:
    hours, minutes, seconds = m.groups()
    if int(hours) > 24 or int(minutes) > 59 or seconds:
        return m.group()
    if int(minutes) == 0:
        return f"{en_cardinal(hours)} o'clock"
    spoken = en_cardinal(minutes) if int(minutes) >= 10 else f"oh {en_cardinal(minutes)}"
    return f"{en_cardinal(hours)} {spoken}"


def _en_currency(m: re.Match[str]) -> str:
    symbol, number, scale = m.groups()
    singular, plural, cent = _EN_CURRENCY[symbol]
    if scale:
        return f"{_en_number(number)} {_EN_SCALE_WORDS.get(scale, scale)} {plural}"
    whole, _, fraction = number.partition(".")
    units = int(whole)
    parts = [f"{en_cardinal(whole)} {singular if units == 1 else plural}"] if units or not fraction else []
    if fraction and cent and len(fraction) == 2 and int(fraction):
        cents = int(fraction)
        parts.append(f"{en_cardinal(str(cents))} {cent if cents == 1 else _plural_cent(cent)}")
    elif fraction and (not cent or len(fraction) != 2):
        return f"{_en_number(number)} {plural}"
    return " and ".join(parts)


def _plural_cent(cent: str) -> str:
    return "pence" if cent == "penny" else cent + "s"


def _normalize_en(text: str) -> str:
    text = text.translate(_EN_PUNCTUATION)
    rules: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
        (_DATE, _en_date),
        (_EN_AMPM, lambda m: f" {m.group(1).upper()}M"),
        (_TIME, _en_time),
        (_CURRENCY, _en_currency),
        (_EN_YEAR, lambda m: m.group(1) + en_year(m.group(2))),
        (_EN_YUAN, lambda m: f"{_en_number(m.group(1))} yuan"),
        (
            _PERCENT,
            lambda m: (
                ("minus " if m.group(1) else "")
                + _en_number(m.group(2))
                + (" percent" if m.group(3) == "%" else " per mille")
            ),
        ),
        (_EN_ORDINAL, lambda m: en_ordinal(m.group(1))),
        (_RANGE, lambda m: f"{_en_number(m.group(1))} to {_en_number(m.group(2))}"),
        (_NEGATIVE, lambda m: "minus " + _en_number(m.group(1))),
        (_DECIMAL, lambda m: _en_number(m.group())),
        (_DIGITS, lambda m: _en_number(m.group())),
    ]
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    for symbol, words in _EN_SYMBOLS.items():
        text = text.replace(symbol, words)
    text = _BLANKS.sub(" ", text).strip()
    return re.sub(r" ([,.!?;:])", r"\1", text)


def _read_as_digits(whole: str) -> bool:
    # "007", phone numbers and other long strings are read digit by digit.
    return (len(whole) > 1 and whole.startswith("0")) or len(whole) >= 11


__all__ = ["Language", "contains_chinese", "is_only_punctuation", "language_of", "normalize"]
