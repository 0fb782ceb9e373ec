"""Numbers as words: English (inflect's style, which upstream's `spell_out_number` uses) and Chinese.

Only digit strings come in; the rules that decide *how* a number is read (a year, money, a dialled
number, a version) live in `rules`.
"""

from __future__ import annotations

from decimal import Decimal

from function.cosyvoice.frontend.language import Language

_ONES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ("", "thousand", "million", "billion", "trillion", "quadrillion")
MAX_CARDINAL_DIGITS = 18  # longer digit strings are read digit by digit

_ZH_DIGITS = "零一二三四五六七八九"
_ZH_UNITS = ("", "十", "百", "千")
_ZH_GROUPS = ("", "万", "亿", "万亿")


def _en_below_100(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def _en_below_1000(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        return _en_below_100(rest)
    words = f"{_ONES[hundreds]} hundred"
    return f"{words} and {_en_below_100(rest)}" if rest else words


def en_cardinal(digits: str) -> str:
    """'1234' → 'one thousand, two hundred and thirty-four' (inflect's number_to_words)."""
    n = int(digits)
    if len(digits.lstrip("0")) > MAX_CARDINAL_DIGITS:
        return en_digits(digits)
    if n < 1000:
        return _en_below_1000(n)
    groups: list[str] = []
    scale = 0
    while n:
        n, group = divmod(n, 1000)
        if group:
            name = _SCALES[scale]
            groups.append(f"{_en_below_1000(group)} {name}".rstrip())
        scale += 1
    groups.reverse()
    last = int(digits) % 1000
    # inflect joins groups with ", " but a last group under 100 with " and ".
    if 0 < last < 100:
        return ", ".join(groups[:-1]) + f" and {groups[-1]}"
    return ", ".join(groups)


def en_digits(digits: str) -> str:
    """'007' → 'zero zero seven'."""
    return " ".join(_ONES[int(d)] for d in digits)


def en_number(number: str) -> str:
    """'2.5' → 'two point five', '1200' → 'one thousand, two hundred'."""
    whole, _, fraction = number.partition(".")
    return en_cardinal(whole) + (f" point {en_digits(fraction)}" if fraction else "")


def en_year(digits: str) -> str:
    """'1999' → 'nineteen ninety-nine', '2005' → 'two thousand and five', '1900' → 'nineteen hundred'."""
    n = int(digits)
    if len(digits) != 4 or n < 1000:
        return en_cardinal(digits)
    high, low = divmod(n, 100)
    if 2000 <= n < 2010 or low == 0 and high % 10 == 0:
        return en_cardinal(digits)
    if low == 0:
        return f"{_en_below_100(high)} hundred"
    if low < 10:
        return f"{_en_below_100(high)} oh {_ONES[low]}"
    return f"{_en_below_100(high)} {_en_below_100(low)}"


def _zh_below_10000(n: int, leading: bool) -> str:
    """A four-digit group; `leading` drops the 一 of 一十 (十五, not 一十五)."""
    out: list[str] = []
    pending_zero = False
    for position in range(3, -1, -1):
        digit = (n // 10**position) % 10
        if digit == 0:
            pending_zero = bool(out)
            continue
        if pending_zero:
            out.append("零")
            pending_zero = False
        if not (digit == 1 and position == 1 and leading and not out):
            out.append(_ZH_DIGITS[digit])
        out.append(_ZH_UNITS[position])
    return "".join(out)


def zh_cardinal(digits: str) -> str:
    """'10010' → '一万零一十', '15' → '十五'. Groups of four digits: 万, 亿, 万亿."""
    n = int(digits)
    if n == 0:
        return "零"
    if len(digits.lstrip("0")) > 16:
        return zh_digits(digits)
    groups = []
    while n:
        n, group = divmod(n, 10000)
        groups.append(group)
    out: list[str] = []
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group == 0:
            continue
        higher = index < len(groups) - 1
        # A zero is read where a group does not fill its thousands place or whole groups are skipped.
        if higher and (group < 1000 or groups[index + 1] == 0) and out:
            out.append("零")
        out.append(_zh_below_10000(group, leading=not out) + _ZH_GROUPS[index])
    return "".join(out)


def read_integer(digits: str, language: Language) -> str:
    """A digit string as a number; zero-led and long ones (codes, phone numbers) digit by digit."""
    as_digits = (len(digits) > 1 and digits.startswith("0")) or len(digits) >= 11
    if language == "zh":
        return zh_digits(digits) if as_digits else zh_cardinal(digits)
    return en_digits(digits) if as_digits else en_cardinal(digits)


def zh_amount(number: str) -> str:
    """An amount before a measure word: '2' → '两', '2000' → '两千', '2.5' → '二点五', '22' → '二十二'."""
    whole, _, fraction = number.partition(".")
    if fraction:
        return f"{zh_cardinal(whole)}点{zh_digits(fraction)}"
    spoken = zh_cardinal(whole)
    if spoken == "二" or spoken[:2] in ("二百", "二千", "二万", "二亿"):
        return "两" + spoken[1:]
    return spoken


def times_ten_to(number: str, power: int) -> str:
    """'3.4', 6 → '3400000', '1.2345', 3 → '1234.5': the number with its point moved, in digits."""
    digits = format(Decimal(number).scaleb(power), "f")
    return digits.rstrip("0").rstrip(".") if "." in digits else digits


def zh_digits(digits: str) -> str:
    """'2024' → '二零二四' (years, phone numbers, decimals' fraction part)."""
    return "".join(_ZH_DIGITS[int(d)] for d in digits)


__all__ = [
    "en_cardinal",
    "en_digits",
    "en_number",
    "en_year",
    "read_integer",
    "times_ten_to",
    "zh_amount",
    "zh_cardinal",
    "zh_digits",
]
