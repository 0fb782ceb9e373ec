"""The currencies the front end reads, and how each is said in Chinese and English.

A sign before an amount ("$5", "€12", "HK$100") is read by the rules in English; in Chinese WeText's graph
reads the one-character signs and the ISO codes in `CODES`, and the rules the others ("HK$" it reads as
HK and 美元) and every amount they write out themselves (a scale such as "$2.5B"). The rules also find the
amounts whose minor units are zero by these signs, codes and names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Currency:
    """How a currency is named after an amount."""

    zh: str
    en_one: str
    en_many: str
    en_cent_one: str  # "" where the minor unit is not said (yen)
    en_cents: str


CURRENCIES: dict[str, Currency] = {
    "$": Currency("美元", "dollar", "dollars", "cent", "cents"),
    "€": Currency("欧元", "euro", "euros", "cent", "cents"),
    "£": Currency("英镑", "pound", "pounds", "penny", "pence"),
    "¥": Currency("元", "yen", "yen", "", ""),
    "US$": Currency("美元", "US dollar", "US dollars", "cent", "cents"),
    "HK$": Currency("港元", "Hong Kong dollar", "Hong Kong dollars", "cent", "cents"),
    "NT$": Currency("新台币", "New Taiwan dollar", "New Taiwan dollars", "cent", "cents"),
    "A$": Currency("澳元", "Australian dollar", "Australian dollars", "cent", "cents"),
    "C$": Currency("加元", "Canadian dollar", "Canadian dollars", "cent", "cents"),
    "S$": Currency("新加坡元", "Singapore dollar", "Singapore dollars", "cent", "cents"),
}
# Currency codes written before an amount ("HKD100"); WeText's Chinese graph names each but RMB.
CODES = (
    "AED",
    "ARS",
    "AUD",
    "CAD",
    "CHF",
    "CNY",
    "EUR",
    "GBP",
    "HKD",
    "INR",
    "JPY",
    "KRW",
    "RMB",
    "RUB",
    "SAR",
    "SEK",
    "SGD",
    "THB",
    "TRY",
    "USD",
)
# Currency words written after an amount ("88.00元", "5.00 dollars").
ZH_NAMES = ("元", "块", "美元", "欧元", "英镑", "日元", "港元", "港币", "澳元", "加元", "韩元", "人民币")
EN_NAMES = (
    "dollar",
    "dollars",
    "euro",
    "euros",
    "pound",
    "pounds",
    "yen",
    "yuan",
    "rupees",
    "francs",
    *CODES,
)

__all__ = ["CODES", "CURRENCIES", "EN_NAMES", "ZH_NAMES", "Currency"]
