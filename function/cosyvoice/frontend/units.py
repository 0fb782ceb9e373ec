"""Unit symbols WeText's graphs misread or leave as letters, and how each is said in Chinese and English.

Measured faults: "5000mAh" is read 五千米Ah (metres) and "five thousand mAh", "kWh" 千瓦h, "65W" and
"12V" stay letters in both languages, and the Chinese graph also leaves Mbps, GHz, Hz and dB as written.
Their families (power, charge, data rate, frequency) are here whole, so kW reads like W; units both graphs
read well (kg, km, km², ml, MB/s, ...) are left to them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """How a unit symbol is said after a number."""

    zh: str
    en_one: str  # after "1", and before a noun ("a 20W charger" is a twenty watt charger)
    en_many: str


UNITS: dict[str, Unit] = {
    "mAh": Unit("毫安时", "milliamp hour", "milliamp hours"),
    "mA": Unit("毫安", "milliamp", "milliamps"),
    "kWh": Unit("千瓦时", "kilowatt hour", "kilowatt hours"),
    "Wh": Unit("瓦时", "watt hour", "watt hours"),
    "kW": Unit("千瓦", "kilowatt", "kilowatts"),
    "MW": Unit("兆瓦", "megawatt", "megawatts"),
    "W": Unit("瓦", "watt", "watts"),
    "kV": Unit("千伏", "kilovolt", "kilovolts"),
    "V": Unit("伏", "volt", "volts"),
    "kbps": Unit("千比特每秒", "kilobit per second", "kilobits per second"),
    "Mbps": Unit("兆比特每秒", "megabit per second", "megabits per second"),
    "Gbps": Unit("吉比特每秒", "gigabit per second", "gigabits per second"),
    "Hz": Unit("赫兹", "hertz", "hertz"),
    "kHz": Unit("千赫兹", "kilohertz", "kilohertz"),
    "MHz": Unit("兆赫兹", "megahertz", "megahertz"),
    "GHz": Unit("吉赫兹", "gigahertz", "gigahertz"),
    "dB": Unit("分贝", "decibel", "decibels"),
}
# Other ways the same symbols are written.
SPELLINGS: dict[str, str] = {
    **{symbol: symbol for symbol in UNITS},
    "KWh": "kWh",
    "kwh": "kWh",
    "KW": "kW",
    "Kbps": "kbps",
    "mbps": "Mbps",
    "gbps": "Gbps",
    "KHz": "kHz",
    "mhz": "MHz",
    "ghz": "GHz",
}

__all__ = ["SPELLINGS", "UNITS", "Unit"]
