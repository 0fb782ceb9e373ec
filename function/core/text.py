"""Clean text: what every edge's text becomes before it is measured, stored or spoken.

Valid JSON can carry what no speech needs and what breaks the layers below: a lone surrogate
("\\ud800") cannot be encoded (the FST normaliser, the job's request.json and the logs all raise on it),
controls and noncharacters are noise to the tokenizer, and invisible characters (zero-width spaces, bidi
overrides, BOMs, tag characters) make two texts that look the same differ in their length, digest and
tokens. One rule, applied the same way at every edge and again by the text front end:

- line breaks (CR LF, CR, VT, FF, NEL, U+2028, U+2029) become "\\n"; tab and newline stay;
- other C0/C1 controls and DEL, lone surrogates, noncharacters (U+FDD0-U+FDEF, U+xFFFE, U+xFFFF) and
  format characters (category Cf: U+200B-U+200F, U+202A-U+202E, U+2066-U+2069, U+FEFF, U+E0000 tags, ...)
  are removed.

What is left is valid UTF-8 text, never longer than what came in. A text left with nothing to speak
meets the edge's ordinary "text is empty" error.
"""

from __future__ import annotations

import re

_LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x85\u2028\u2029]")
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane << 16 | 0xFFFE)}{chr(plane << 16 | 0xFFFF)}" for plane in range(17)
)
# Category Cf as of Unicode 14 (Python 3.12's unicodedata); a test holds it to the running interpreter's.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_REMOVED = re.compile(f"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff{_NONCHARACTERS}{_FORMAT}]+")


def clean_text(text: str) -> str:
    """`text` with line breaks made "\\n" and what cannot or should not be spoken removed (see above)."""
    return _REMOVED.sub("", _LINE_BREAKS.sub("\n", text))


def clean_optional(text: str | None) -> str | None:
    return None if text is None else clean_text(text)


__all__ = ["clean_optional", "clean_text"]
