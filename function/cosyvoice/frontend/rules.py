"""The readings WeText's graphs get wrong, written out before the graphs run (they pass words through).

Each rule answers one measured fault (tests/function/cosyvoice/frontend/normalize_cases.py has the sentences):
- both languages: titles and abbreviations the graphs keep as written (Prof., St., etc., vs., Inc.; in
  Chinese text all of them), "COVID-19" read as COVID minus nineteen, the full stops of "a.m." kept;
  versions ("3.2.1" read 三。二点一, the first dot a sentence stop, or "three.two point one"); letter+digit
  codes ("CA1234", "UA857", "RTX4090") read as amounts where a listener expects digit by digit (four in
  pairs in English, as "forty ninety"); power, charge, data-rate, frequency and sound units (`units`)
  misread or left as letters;
- both languages: zero minor units said ("￥88.00" as 八十八点零零元, "¥100.00" as one hundred point zero
  zero yen, "5.00 dollars"), and a Chinese amount's trailing zero too (八十八点五零元); dollars with a
  country's letters ("HK$100" as HKone hundred dollars, HK一百美元); K, M, B, bn after a number, with a
  currency sign or without ("3.4M users" as three.four M users, "$2.5B" as two point five dollarsB,
  营收$2.5B as 二点五美元B), said as the scale it names (three point four million users, two point five
  billion dollars, 二十五亿美元) unless it is part of a name ("Seat 12B", "4K video", "a 10K run");
- both languages: fixed expressions read as fractions, products or amounts ("24/7", "50/50", "9/11",
  "4x4", "1080p"), and numbers that name something after the words that introduce them (代码, 邮编, 验证码,
  账号, 订单号; zip code, order number, PIN, "ending in") read as amounts where a listener expects digit by
  digit;
- Chinese: "第2名" read 第两名, "第3-5章" 第三减五章, "2台" 二台, "No.1" left as written; dialled
  service numbers ("拨110") read as amounts, where a listener expects 幺幺零; e-mail addresses and web
  addresses left unspoken; a clock time with AM/PM said with a second period word (晚上8:00 PM as
  晚上下午八点) or with Latin letters left; the day "2日" read 两日; a fraction after 约 or 人均 read with
  the modifier inside it (约1/3 as 三分之约一);
- English: money ("$3.99" as three point nine nine dollars, "$1,200" as "thousand two hundred"),
  four-digit numbers outside measures read as years ("1234 books" as twelve thirty four, "1905" as
  nineteen zero five), year pairs after "between", "in" or "since" ("between 1980 and 1989") read as
  amounts, "1990s" as 1990 seconds, "5 m" as five minutes, dialled numbers ("Dial 911") read as amounts,
  "mph" after a spelled-out number left as letters, and a "+" before a number that empties the whole
  sentence in the graphs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from function.cosyvoice.frontend.currency import CODES, CURRENCIES, EN_NAMES, ZH_NAMES
from function.cosyvoice.frontend.language import Language
from function.cosyvoice.frontend.numbers import (
    en_cardinal,
    en_digits,
    en_number,
    en_year,
    read_integer,
    times_ten_to,
    zh_amount,
    zh_cardinal,
    zh_digits,
)
from function.cosyvoice.frontend.units import SPELLINGS, UNITS

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,]*\d)")

# Titles come before a name and never end a sentence: their full stop is dropped.
_TITLES = {"Dr": "Doctor", "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor"}
# These may end a sentence: their full stop stays when the text ends or a new sentence starts after it.
_ABBREVIATIONS = {"etc": "et cetera", "Inc": "Incorporated", "Ltd": "Limited", "Corp": "Corporation"}
_MONTHS = {
    "Jan": "January",
    "Feb": "February",
    "Mar": "March",
    "Apr": "April",
    "Jun": "June",
    "Jul": "July",
    "Aug": "August",
    "Sep": "September",
    "Sept": "September",
    "Oct": "October",
    "Nov": "November",
    "Dec": "December",
}
_SENTENCE_AFTER = r"(?=$|\s+[A-Z\u4e00-\u9fff])"


def _words(words: Iterable[str]) -> str:
    """An alternation that tries the longest word first."""
    return "|".join(sorted(words, key=len, reverse=True))


_SHARED: list[Rule] = [
    (re.compile(rf"\b({_words(_TITLES)})\.\s*(?=\w)"), lambda m: _TITLES[m.group(1)] + " "),
    # "St. Louis" is a saint; "Baker St." a street.
    (re.compile(r"\bSt\.\s*(?=[A-Z])"), lambda m: "Saint "),
    (re.compile(r"(?<=[A-Za-z] )St\.(?=\s|$)"), lambda m: "Street"),
    (
        re.compile(rf"\b({_words(_ABBREVIATIONS)})\.({_SENTENCE_AFTER})?"),
        lambda m: _ABBREVIATIONS[m.group(1)] + ("." if m.group(2) is not None else ""),
    ),
    (re.compile(r"\bvs\.?(?=\s)"), lambda m: "versus"),
    (re.compile(rf"\b({_words(_MONTHS)})\.?(?=\s*\d)"), lambda m: _MONTHS[m.group(1)]),
    # "7 a.m." keeps no full stop: it would end the sentence there.
    (re.compile(r"(?<=\d)\s*([ap])\.m\.", re.IGNORECASE), lambda m: f" {m.group(1).upper()}M"),
    # A code's hyphen is no minus sign: "COVID-19" is COVID nineteen.
    (re.compile(r"(?<=[A-Za-z]{2})-(?=\d)"), lambda m: " "),
]

# "3.2.1": two dots or more make a version (one makes a decimal, which the graphs read); a leading
# four-digit part is a date ("2024.03.05") and four parts of up to three digits an IP address, which
# they read too.
_VERSION = re.compile(r"(?<![\d.])(?!\d{4}\.|(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d))\d+(?:\.\d+){2,}(?!\.?\d)")


def _version(point: str, language: Language) -> Callable[[re.Match[str]], str]:
    # A long part is a build number, said digit by digit ("10.0.19041").
    digits = zh_digits if language == "zh" else en_digits

    def part(number: str) -> str:
        return read_integer(number, language) if len(number) <= 3 else digits(number)

    return lambda m: point.join(part(number) for number in m.group().split("."))


# Capitals glued to three digits or more are a code (a flight, a room, a model), said digit by digit;
# currency codes are amounts ("USD100").
_CODE = re.compile(rf"(?<![A-Za-z\d])(?!(?:{_words(CODES)})\d)([A-Z]{{1,4}})(\d{{3,}})(?![\d²³]|\.\d)")

# A number and a unit symbol of `units`; a one-letter symbol (W, V) only glued to it ("5 W" may be west).
_UNIT = re.compile(
    r"(\b[Aa]n?\s+)?(?<![A-Za-z\d.])(\d+(?:\.\d+)?)"
    rf"(?:\s?({_words(s for s in SPELLINGS if len(s) > 1)})|({_words(s for s in SPELLINGS if len(s) == 1)}))"
    r"(?![A-Za-z\d²³/])"
)


def _zh_unit(m: re.Match[str]) -> str:
    article, number, symbol, letter = m.groups()
    return (article or "") + zh_amount(number) + UNITS[SPELLINGS[symbol or letter]].zh


def _en_unit(m: re.Match[str]) -> str:
    article, number, symbol, letter = m.groups()
    unit = UNITS[SPELLINGS[symbol or letter]]
    # After "a" the measure describes a noun: "a 20W charger" is a twenty watt charger.
    # The number in words too: the graphs read a four-digit one left alone as a year.
    return f"{article or ''}{en_number(number)} {unit.en_one if article or number == '1' else unit.en_many}"


# Numbers that name something, not a fraction, a date, a product or an amount: (Chinese, English). The
# graphs read "24/7" as twenty four sevenths, "9/11" as 十一分之九 and "1080p" as one thousand eighty p.
_FIXED_EXPRESSIONS: dict[str, tuple[str, str]] = {
    "24/7/365": ("二十四七三百六十五", "twenty four seven three sixty five"),
    "24/7": ("二十四七", "twenty four seven"),
    "24x7": ("二十四乘七", "twenty four seven"),
    "7x24": ("七乘二十四", "seven by twenty four"),
    "50/50": ("五十五十", "fifty fifty"),
    "20/20": ("二十二十", "twenty twenty"),
    "9/11": ("九一一", "nine eleven"),
    "4x4": ("四乘四", "four by four"),
    "480p": ("四八零P", "four eighty p"),
    "720p": ("七二零P", "seven twenty p"),
    "1080p": ("一零八零P", "ten eighty p"),
    "1440p": ("一四四零P", "fourteen forty p"),
}
_FIXED_EXPRESSION = re.compile(
    rf"(?<![A-Za-z\d/.])({_words(re.escape(written).replace('x', '[x×]') for written in _FIXED_EXPRESSIONS)})"
    r"(?![A-Za-z\d/]|\.\d)",
    re.IGNORECASE,
)


def _fixed_expression(language: Language) -> Rule:
    index = 0 if language == "zh" else 1
    return _FIXED_EXPRESSION, lambda m: _FIXED_EXPRESSIONS[m.group().lower().replace("×", "x")][index]


# A currency sign before an amount ("$", "HK$"); "HK$" is one sign, not HK and "$".
_SIGN = rf"(?<![A-Za-z])(?:{_words(re.escape(sign) for sign in CURRENCIES)})"

# Scale letters after a number ("3.4M users", "$2.5B", "£3bn", "$50K"): the power of ten each names.
# A lower-case "m" or "b" is one only after a currency sign ("£5m"): alone it is a metre or a bit.
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_SCALE_LETTERS = {
    "K": "thousand",
    "k": "thousand",
    "M": "million",
    "m": "million",
    "mn": "million",
    "mln": "million",
    "B": "billion",
    "b": "billion",
    "bn": "billion",
    "T": "trillion",
    "tn": "trillion",
}
_MONEY_SCALE = rf"(?:\s?({_words(_SCALES)})\b|({_words(_SCALE_LETTERS)})(?![A-Za-z\d])|\s(bn|mn|mln|tn)\b)"
# Without a sign the letters may be part of a name: a seat, a room or a gate ("Seat 12B", "房间12B", "12B座"),
# a race or a screen ("a 10K run", "4K video", "4K电视"), and a one-digit K with no word after it ("in 4K").
_BARE_SCALE = re.compile(
    r"((?:\b(?i:seat|gate|room|row|apartment|apt|flat|unit|suite|platform|terminal|floor|level|block|bay"
    r"|section|question|part|figure|table)\.?\s+|(?:座位|房间|座|室|号|登机口|展位)\s*))?"
    r"(?<![A-Za-z\d.$€£¥])(\d+(?:\.\d+)?)(?:([KkMB])|\s?(bn|mn|mln))(?![A-Za-z\d])"
)
_NAME_AFTER = re.compile(
    r"\s?(?:[座号室栋楼层排区门]|电视|屏|分辨率|视频|显示器|(?i:runs?|races?|walks?|resolution|displays?|screens?"
    r"|monitors?|tvs?|videos?|content|footage|streaming|hdr|uhd)\b)"
)
_WORD_AFTER = re.compile(r"\s?[a-z\u4e00-\u9fff]")


def _scale(m: re.Match[str]) -> str | None:
    """The scale word of a bare number's letters, or None where they are part of a name."""
    place, number, letter, abbreviation = m.groups()
    if place or _NAME_AFTER.match(m.string, m.end()):
        return None
    if letter in ("K", "k") and len(number) == 1 and not _WORD_AFTER.match(m.string, m.end()):
        return None
    return _SCALE_LETTERS[letter or abbreviation]


def _zh_scaled(number: str, scale: str) -> str:
    return zh_amount(times_ten_to(number, _SCALES[scale]))


def _zh_money_scaled(m: re.Match[str]) -> str:
    symbol, number, word, letter, abbreviation = m.groups()
    return _zh_scaled(number, word or _SCALE_LETTERS[letter or abbreviation]) + CURRENCIES[symbol].zh


def _scaled(language: Language) -> Rule:
    def read(m: re.Match[str]) -> str:
        scale = _scale(m)
        if scale is None:
            return m.group()
        number = m.group(2)
        return _zh_scaled(number, scale) if language == "zh" else f"{en_number(number)} {scale}"

    return _BARE_SCALE, read


_MONEY = re.compile(rf"({_SIGN})\s?(\d+(?:\.\d+)?){_MONEY_SCALE}?")
_MONEY_SCALED = re.compile(rf"({_SIGN})\s?(\d+(?:\.\d+)?){_MONEY_SCALE}")


def _amounts(names: Iterable[str]) -> re.Pattern[str]:
    """A decimal amount after a currency sign or code, or before a currency word of `names`."""
    sign = rf"(?:{_SIGN}|(?<![A-Za-z])(?:{_words(CODES)}))\s?"
    return re.compile(rf"({sign})?(?<![\d.])(\d+)\.(\d+)(?!\.?\d)(\s?(?:{_words(names)})(?![A-Za-z]))?")


def _minor_units(language: Language) -> Rule:
    """Zero minor units are not said: ¥88.00 is 八十八元 and $5.00 five dollars. Chinese reads an amount
    as a decimal, so it drops trailing zeros too (¥88.50 is 八十八点五元); English says the cents as a
    count (five dollars and fifty cents) and drops them only when they are all zero."""

    def drop(m: re.Match[str]) -> str:
        sign, whole, fraction, name = m.groups()
        if sign is None and name is None:
            return m.group()
        kept = fraction.rstrip("0") if language == "zh" or not fraction.strip("0") else fraction
        return f"{sign or ''}{whole}{'.' + kept if kept else ''}{name or ''}"

    return _amounts(ZH_NAMES if language == "zh" else EN_NAMES), drop


# --- Chinese -------------------------------------------------------------------------------------------


def _zh_dialled(digits: str) -> str:
    """Digits as dialled: 1 is 幺, so 110 is never heard as 一一零 or 一百一十."""
    return zh_digits(digits).replace("一", "幺")


_ZH_DOT = "点"
_TLD = r"(?:com|cn|net|org|edu|gov|io|co|uk|hk|tw|me|info)"

# Classifiers after which a lone 2 is 两 where the graphs write 二 ("2台电脑", "2点钟").
_ZH_CLASSIFIERS = "个只台本杯件张位条次天岁斤米点辆头把块双瓶碗口家所门部首棵支座间份顿场"

_ZH_PERIODS = (
    "凌晨",
    "清晨",
    "早上",
    "早晨",
    "上午",
    "中午",
    "午后",
    "下午",
    "傍晚",
    "晚上",
    "夜里",
    "夜间",
    "深夜",
    "半夜",
)
_ZH_CLOCK = re.compile(
    rf"({'|'.join(_ZH_PERIODS)})?\s*(?<![\d:])(\d{{1,2}})(:\d{{2}}(?::\d{{2}})?)?\s*([AaPp])\.?[Mm]\.?(?![A-Za-z\d])"
)


def _zh_period(hour: int, afternoon: bool) -> str:
    """The period word a Chinese listener hears for a 12-hour clock's hour: 8 PM is 晚上, not 下午."""
    if afternoon:
        return "中午" if hour == 12 else "下午" if hour < 6 else "晚上"
    return "凌晨" if hour < 5 or hour == 12 else "早上" if hour < 9 else "上午"


def _zh_clock(m: re.Match[str]) -> str:
    """AM/PM becomes the period word, or goes where one is already said (上午9:30 AM is 上午九点半) or
    where the hour is a 24-hour clock's (13:00 PM is 十三点)."""
    period, hour, minutes, half = m.groups()
    if period is None and int(hour) <= 12:
        period = _zh_period(int(hour), half in "Pp")
    return (period or "") + hour + (minutes or "点")


# Words after which a number names something (a stock, a postal area, an account, an order, a login) and is
# said digit by digit; before an amount they take a verb ("代码有300行") and the number stays an amount.
_ZH_NAMING_WORDS = (
    "代码",
    "编码",
    "邮编",
    "验证码",
    "校验码",
    "动态码",
    "确认码",
    "取件码",
    "取货码",
    "提货码",
    "兑换码",
    "激活码",
    "邀请码",
    "优惠码",
    "密码",
    "账号",
    "帐号",
    "账户",
    "帐户",
    "卡号",
    "单号",
    "工号",
    "学号",
    "编号",
    "会员号",
    "客户号",
    "序列号",
    "批号",
    "流水号",
    "票号",
)
# The number may be written in groups ("6222 0210 0123"), each said digit by digit.
_NAMED_DIGITS = r"(\d{3,}(?:[ -]\d{3,})*)(?![\d%]|[.,-]\d)"
_ZH_NAMED_NUMBER = re.compile(rf"((?:{_words(_ZH_NAMING_WORDS)})\s*(?:是|为)?\s*[:：]?\s*){_NAMED_DIGITS}")


def _named_digits(number: str, digits: Callable[[str], str], space: str) -> str:
    return space.join(digits(group) for group in re.split("[ -]", number))


# Signs WeText's Chinese graph does not know ("HK$" it reads as HK and 美元).
_ZH_MONEY_WRITTEN_OUT = re.compile(
    rf"(?<![A-Za-z])({_words(re.escape(sign) for sign in CURRENCIES if len(sign) > 1)})\s?(\d+(?:\.\d+)?)"
)

# WeText's number graph takes a leading 约 or 人均 as part of the number, so in a fraction it lands after
# 分之 (约1/3 as 三分之约一); the other modifiers (近, 超过, 不到, 仅) are words of their own and read right.
_ZH_MODIFIED_FRACTION = re.compile(r"(约|人均)(\d+)/(\d+)(?![\d/])")


_ZH: list[Rule] = [
    _fixed_expression("zh"),
    _minor_units("zh"),
    (_MONEY_SCALED, _zh_money_scaled),
    (_ZH_MONEY_WRITTEN_OUT, lambda m: zh_amount(m.group(2)) + CURRENCIES[m.group(1)].zh),
    _scaled("zh"),
    (
        _ZH_MODIFIED_FRACTION,
        lambda m: f"{m.group(1)}{zh_cardinal(m.group(3))}分之{zh_cardinal(m.group(2))}",
    ),
    (_VERSION, _version("点", "zh")),
    (_UNIT, _zh_unit),
    (_CODE, lambda m: m.group(1) + zh_digits(m.group(2))),
    (_ZH_NAMED_NUMBER, lambda m: m.group(1) + _named_digits(m.group(2), zh_digits, "")),
    (_ZH_CLOCK, _zh_clock),
    # The graphs read "2日" as a measure, 两日.
    (re.compile(r"(?<=月)(\d{1,2})(?=[日号])"), lambda m: zh_cardinal(m.group(1))),
    (re.compile(rf"(?<![\d.第])2(?=[{_ZH_CLASSIFIERS}])"), lambda m: "两"),  # 第2个 is an ordinal
    (re.compile(r"\bNo\.\s*(\d+)"), lambda m: "第" + zh_cardinal(m.group(1))),
    (
        re.compile(r"第(\d+)(?:\s*[-~～]\s*(\d+))?"),
        lambda m: "第" + zh_cardinal(m.group(1)) + (f"到{zh_cardinal(m.group(2))}" if m.group(2) else ""),
    ),
    (
        re.compile(r"(拨打|拨|致电|热线|电话是?|号码是?|报警|急救)(\d{3,5})(?![\d.-])"),
        lambda m: m.group(1) + _zh_dialled(m.group(2)),
    ),
    (
        re.compile(r"([\w.+-]+)@([\w-]+(?:\.[\w-]+)+)", re.ASCII),
        lambda m: f"{m.group(1).replace('.', _ZH_DOT)}艾特{m.group(2).replace('.', _ZH_DOT)}",
    ),
    (
        re.compile(rf"\b(?:www\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.{_TLD}\b", re.ASCII),
        lambda m: m.group().replace(".", _ZH_DOT),
    ),
]


# --- English -------------------------------------------------------------------------------------------

_EN_MONTH_NAMES = "|".join(dict.fromkeys([*_MONTHS.values(), "May"]))
_NUMBER_WORD = (
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|thirty|forty|fifty"
    r"|sixty|seventy|eighty|ninety|hundred|thousand)"
)
# Before one of these a number is a measure, which the graphs read well ("1200 kg").
_UNITS = r"kg|mg|g|km|cm|mm|m|ml|l|mph|kph|ft|lbs?|oz|[kmgt]?b|[kmg]?hz|kw|w|v|mah"
_SPEED_UNITS = {"mph": "miles per hour", "km/h": "kilometers per hour", "kph": "kilometers per hour"}


# What a number names when it is said digit by digit: "zip code 94105", "order number 98765", "order
# #12345", "PIN 4821"; a bare "number" or "#" is an amount ("the number 42").
_EN_NAMED = (
    r"(?:zip|postal|post|area|verification|security|confirmation|access|promo|coupon|discount|activation"
    r"|login|stock|tracking|reference|booking|reservation|account|order|card|customer|member|membership"
    r"|policy|invoice|ticket|case|serial|routing|model|part|item|product|transaction|employee|student"
    r"|passport|licen[cs]e|claim|receipt|user|ID)"
)
_EN_NAMED_NUMBER = re.compile(
    rf"\b({_EN_NAMED}\s+(?:code|number|no\.|#|ID|PIN)|code|zip|postcode|PIN|OTP|passcode|password"
    r"|ending\s+(?:in|with))"
    rf"((?:\s+(?:is|was))?\s*:?\s*){_NAMED_DIGITS}",
    re.IGNORECASE,
)


def _en_named_number(m: re.Match[str]) -> str:
    name, joint, digits = m.groups()
    name = re.sub(r"\s*(?:no\.|#)$", " number", name, flags=re.IGNORECASE)
    return f"{name}{joint or ' '}{_named_digits(digits, en_digits, ', ')}"


def _en_money(m: re.Match[str]) -> str:
    symbol, number, word, letter, abbreviation = m.groups()
    scale = word or _SCALE_LETTERS.get(letter or abbreviation)
    currency = CURRENCIES[symbol]
    whole, _, fraction = number.partition(".")
    if scale or (fraction and (not currency.en_cent_one or len(fraction) != 2)):
        # Read as a decimal: its trailing zeros are not said (¥100.50 is one hundred point five yen).
        amount = en_number(number.rstrip("0") if fraction else number)
        return f"{amount} {scale + ' ' if scale else ''}{currency.en_many}"
    units, cents = int(whole), int(fraction or "0")
    parts = (
        [f"{en_cardinal(whole)} {currency.en_one if units == 1 else currency.en_many}"]
        if units or not cents
        else []
    )
    if cents:
        parts.append(f"{en_cardinal(str(cents))} {currency.en_cent_one if cents == 1 else currency.en_cents}")
    return " and ".join(parts)


def _plural(words: str) -> str:
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def _en_four_digits(m: re.Match[str]) -> str:
    date, context, digits = m.groups()
    if date:  # "March 5, 2024": the graphs read whole dates well
        return m.group()
    return f"{context}{en_year(digits)}" if context else en_cardinal(digits)


_YEAR = r"(?:1[1-9]|20)\d\d"


def _en_code(m: re.Match[str]) -> str:
    letters, digits = m.groups()
    # Four digits are said in pairs, like a year ("RTX4090" forty ninety, "FY2024" twenty twenty-four),
    # but "B2005" is not "two thousand and five".
    in_pairs = len(digits) == 4 and digits[0] != "0" and not 2000 <= int(digits) < 2010
    return f"{letters} {en_year(digits) if in_pairs else en_digits(digits)}"


def _en_year_pair(m: re.Match[str]) -> str:
    context, first, joint, second = m.groups()
    # Years a decade or so apart; "between 1500 and 2000 people" are counts.
    if not 0 < int(second) - int(first) < 100:
        return m.group()
    return f"{context} {en_year(first)} {joint} {en_year(second)}"


_EN: list[Rule] = [
    _fixed_expression("en"),
    _minor_units("en"),
    (_VERSION, _version(" point ", "en")),
    (_UNIT, _en_unit),
    (_CODE, _en_code),
    (_EN_NAMED_NUMBER, _en_named_number),
    # The graphs drop a whole sentence with "+5" in it ("C++11" is a name).
    (re.compile(r"(?<![\w)+])\+(?=\d)"), lambda m: "plus "),
    (re.compile(r"\bNo\.\s*(?=\d)"), lambda m: "number "),
    (_MONEY, _en_money),
    _scaled("en"),
    (
        re.compile(r"\b((?:1\d|20)\d\d)\s?[-–]\s?((?:1\d|20)\d\d)\b"),
        lambda m: f"{en_year(m.group(1))} to {en_year(m.group(2))}",
    ),
    (
        re.compile(r"\b(Dial|Call|Text)\s+(\d{3,})\b(?![-.]?\d)", re.IGNORECASE),
        lambda m: f"{m.group(1)} {en_digits(m.group(2))}",
    ),
    # The graphs read "m" as minutes and "1990s" as 1990 seconds.
    (
        re.compile(r"\b(\d+(?:\.\d+)?)\s?m\b(?![²³/])"),
        lambda m: f"{m.group(1)} {'meter' if m.group(1) == '1' else 'meters'}",
    ),
    (re.compile(r"\b((?:1\d|20)\d0)s\b"), lambda m: _plural(en_year(m.group(1)))),
    (
        re.compile(
            rf"\b(between|from|in|since)\s+({_YEAR})\s+(and|or|to|until|till|through)\s+({_YEAR})\b"
            r"(?![.,:]?\d|\s?[°%])",
            re.IGNORECASE,
        ),
        _en_year_pair,
    ),
    (
        re.compile(
            rf"((?:{_EN_MONTH_NAMES})\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?"
            r"\b((?:in|since|until|by|from|of|year|before|after|around|during|to|circa)\s+)?"
            rf"(?<![\d.,:-])([1-9]\d{{3}})\b(?![.,:-]?\d|\s?(?:{_UNITS})(?![a-z])|\s?[°%])",
            re.IGNORECASE,
        ),
        _en_four_digits,
    ),
    (
        re.compile(rf"\b({_NUMBER_WORD})\s+({_words(_SPEED_UNITS)})(?![\w/])"),
        lambda m: f"{m.group(1)} {_SPEED_UNITS[m.group(2)]}",
    ),
]

_RULES: dict[Language, list[Rule]] = {"zh": _SHARED + _ZH, "en": _SHARED + _EN}


def spell_out(text: str, language: Language) -> str:
    """`text` with what the graphs would misread already in words; the rest is left for them."""
    text = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), text)
    for pattern, replacement in _RULES[language]:
        text = pattern.sub(replacement, text)
    return text


__all__ = ["spell_out"]
