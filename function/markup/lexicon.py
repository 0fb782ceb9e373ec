"""Pronunciation lexicons (W3C PLS, as Amazon Polly's PutLexicon takes them), alias lexemes only: each
`<grapheme>` is said as its `<alias>`, a text substitution that works with any voice. A `<phoneme>` cannot
be honoured (the model reads text, not phonemes), so a lexeme without an alias refuses the lexicon.

Applied to a script's spoken pieces (function.core.script), lexicons in the order named, the first that
has a grapheme wins; a grapheme matches case-sensitively, as a whole word where it starts or ends with a
letter or digit. The document is parsed by the standard library's expat with every way outside it
closed, as SSML is (function.markup.ssml): a DOCTYPE or an entity declaration is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from xml.parsers import expat

from function.core.errors import InvalidRequest
from function.core.script import Script, Spoken

MAX_LEXICON_CHARS = 40_000  # Polly's size limit of one lexicon


@dataclass(frozen=True)
class Lexicon:
    """A lexicon's aliases, in document order, and what its root says."""

    aliases: tuple[tuple[str, str], ...]  # (grapheme, alias)
    alphabet: str
    language: str
    lexemes: int


class _Reader:
    def __init__(self) -> None:
        self.parser = expat.ParserCreate()
        self.parser.StartDoctypeDeclHandler = self._refuse_declaration
        self.parser.EntityDeclHandler = self._refuse_declaration
        self.parser.ExternalEntityRefHandler = self._refuse_external
        self.parser.StartElementHandler = self._start
        self.parser.EndElementHandler = self._end
        self.parser.CharacterDataHandler = self._text
        self.root: dict[str, str] | None = None
        self.lexemes: list[tuple[list[str], list[str]]] = []  # (graphemes, aliases)
        self.field: list[str] | None = None  # the text of the grapheme or alias being read

    def _refuse_declaration(self, *_: Any) -> None:
        raise InvalidRequest("a lexicon may not declare a DOCTYPE or entities")

    def _refuse_external(self, *_: Any) -> int:
        raise InvalidRequest("a lexicon may not reference external entities")

    def _start(self, tag: str, attributes: dict[str, str]) -> None:
        name = tag.rpartition(":")[2]
        if self.root is None:
            if name != "lexicon":
                raise InvalidRequest(f"a lexicon's root is <lexicon>, not <{tag}>")
            self.root = attributes
        elif name == "lexeme":
            self.lexemes.append(([], []))
        elif name in ("grapheme", "alias") and self.lexemes:
            self.field = []
        elif name == "phoneme" and self.lexemes:
            return  # read past: only a lexeme with an alias is kept (checked at its end)
        elif name not in ("meta", "metadata", "lexeme"):
            raise InvalidRequest(f"<{tag}> is not an element of a lexicon this API reads")

    def _end(self, tag: str) -> None:
        name = tag.rpartition(":")[2]
        if self.field is not None and name in ("grapheme", "alias"):
            text = " ".join("".join(self.field).split())
            if text:
                self.lexemes[-1][0 if name == "grapheme" else 1].append(text)
            self.field = None
        elif name == "lexeme":
            graphemes, aliases = self.lexemes[-1]
            if not graphemes or not aliases:
                raise InvalidRequest(
                    f"lexeme {len(self.lexemes)} needs a <grapheme> and an <alias>: phoneme lexemes cannot be"
                    " honoured (this model reads text, not phonemes)"
                )

    def _text(self, data: str) -> None:
        if self.field is not None:
            self.field.append(data)


def parse_lexicon(document: str) -> Lexicon:
    """The aliases of a PLS document; InvalidRequest naming what is wrong (and where, for bad XML)."""
    if len(document) > MAX_LEXICON_CHARS:
        raise InvalidRequest(
            f"a lexicon has at most {MAX_LEXICON_CHARS} characters, this one {len(document)}"
        )
    reader = _Reader()
    try:
        reader.parser.Parse(document.encode("utf-8"), True)
    except expat.ExpatError as exc:
        raise InvalidRequest(f"the lexicon is not well-formed XML: {exc}") from None
    root = reader.root or {}
    if not reader.lexemes:
        raise InvalidRequest("the lexicon has no <lexeme>")
    aliases = tuple((grapheme, lexeme[1][0]) for lexeme in reader.lexemes for grapheme in lexeme[0])
    return Lexicon(aliases, root.get("alphabet", ""), root.get("xml:lang", ""), len(reader.lexemes))


def _pattern(grapheme: str) -> str:
    before = r"(?<![A-Za-z0-9])" if grapheme[0].isascii() and grapheme[0].isalnum() else ""
    after = r"(?![A-Za-z0-9])" if grapheme[-1].isascii() and grapheme[-1].isalnum() else ""
    return f"{before}{re.escape(grapheme)}{after}"


def apply_lexicons(script: Script, lexicons: Sequence[Lexicon]) -> Script:
    """`script` with each grapheme of `lexicons` in its spoken pieces said as its alias."""
    table: dict[str, str] = {}
    for lexicon in lexicons:
        for grapheme, alias in lexicon.aliases:
            table.setdefault(grapheme, alias)
    if not table:
        return script
    # Longest first, so "W3C Group" wins over "W3C" where both are graphemes.
    found = re.compile("|".join(_pattern(g) for g in sorted(table, key=len, reverse=True)))
    pieces = (
        replace(piece, text=found.sub(lambda match: table[match.group()], piece.text))
        if isinstance(piece, Spoken)
        else piece
        for piece in script.pieces
    )
    return Script(tuple(pieces))


__all__ = ["MAX_LEXICON_CHARS", "Lexicon", "apply_lexicons", "parse_lexicon"]
