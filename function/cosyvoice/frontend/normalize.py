"""Text normalisation for v1: what the model is asked to say.

Upstream runs `ttsfrd` (closed) or `wetext` and then a few string rules (`cosyvoice/cli/frontend.py`
text_normalize). Here: Chinese is written in simplified characters (as v1's WeTextProcessing graphs
do), erhua and interjections are kept as written (v1's graphs drop them, although its frontend asks
for erhua to be kept), the input is made half-width except CJK punctuation (v1 asks for no full → half
width conversion), `rules.spell_out` writes out what WeText's graphs
misread, the graphs (`fst`) read the rest (numbers, dates, times, units, phone numbers, money, e-mail),
any digits still left are read as numbers, and upstream's clean-up follows as it is: Chinese drops
newlines and blanks between CJK characters, reads ²/³, turns "." into "。" and " - " into "，", removes
（）【】` and ——, and ends a trailing comma as "。".
"""

from __future__ import annotations

import re
import unicodedata

from function.cosyvoice.frontend.fst import graphs, simplified
from function.cosyvoice.frontend.language import Language
from function.cosyvoice.frontend.numbers import read_integer
from function.cosyvoice.frontend.rules import spell_out

# Full-width digits, letters and the symbols the graphs read; CJK punctuation is left alone.
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
# Symbols the Chinese graphs leave as written (outside the units and math they tag).
_ZH_SYMBOLS = str.maketrans({"+": "加", "=": "等于", "×": "乘", "÷": "除以", "&": "和"})
_DIGITS = re.compile(r"\d+")
# Where a sentence ends for certain: a stop mark, or a full stop before a capital (abbreviations are
# spelled out by then).
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;\n])|(?<=\.)\s+(?=[A-Z])")
_BLANKS = re.compile(r"\s+")


def normalize(text: str, language: Language) -> str:
    text = unicodedata.normalize("NFC", text).translate(_HALF_WIDTH)
    if language == "zh":
        text = simplified(text)
    if language == "en":
        text = text.translate(_EN_PUNCTUATION)
    text = spell_out(text, language)
    # Sentence by sentence: the graphs' time grows faster than the length of their input.
    text = " ".join(_read_sentence(piece, language) for piece in _SENTENCE_END.split(text) if piece.strip())
    # Whatever the graphs left as digits is still read (upstream's spell_out_number does so for English).
    text = _DIGITS.sub(lambda m: read_integer(m.group(), language), text)
    return _clean_zh(text) if language == "zh" else _clean_en(text)


def _read_sentence(sentence: str, language: Language) -> str:
    # wetext's rule: Chinese without a digit has nothing for the graphs to read.
    if language == "zh" and not _DIGITS.search(sentence):
        return sentence.strip()
    return graphs(language).normalize(sentence.strip())


def _clean_zh(text: str) -> str:
    """Symbols the graphs left, then upstream's clean-up after its normaliser, in its order."""
    text = text.translate(_ZH_SYMBOLS).replace("\n", "")
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


def _clean_en(text: str) -> str:
    text = _BLANKS.sub(" ", text).strip()
    return re.sub(r" ([,.!?;:])", r"\1", text)


__all__ = ["normalize"]
