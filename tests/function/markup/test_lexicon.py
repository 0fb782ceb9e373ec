"""Alias lexicons (function.markup.lexicon): what a PLS document may hold, and the text substitution."""

from __future__ import annotations

import pytest

from function.core.errors import InvalidRequest
from function.core.script import Mark, Script, Spoken
from function.markup.lexicon import apply_lexicons, parse_lexicon


def pls(*lexemes: str) -> str:
    return f'<lexicon version="1.0" alphabet="ipa" xml:lang="en-US">{"".join(lexemes)}</lexicon>'


def lexeme(graphemes: tuple[str, ...], alias: str) -> str:
    return f"<lexeme>{''.join(f'<grapheme>{g}</grapheme>' for g in graphemes)}<alias>{alias}</alias></lexeme>"


def spoken(*texts: str) -> Script:
    return Script(tuple(Spoken(text, 0, len(text)) for text in texts))


def said(script: Script) -> list[str]:
    return [piece.text for piece in script.pieces if isinstance(piece, Spoken)]


def test_graphemes_are_said_as_their_alias_as_whole_words_and_case_sensitively() -> None:
    lexicon = parse_lexicon(pls(lexeme(("W3C", "w3c"), "World Wide Web"), lexeme(("北京",), "Beijing")))
    assert (lexicon.alphabet, lexicon.language, lexicon.lexemes) == ("ipa", "en-US", 2)
    script = apply_lexicons(spoken("W3C and w3c, not W3CX or AW3C; W3c.", "去北京了"), [lexicon])
    assert said(script) == ["World Wide Web and World Wide Web, not W3CX or AW3C; W3c.", "去Beijing了"]


def test_the_first_lexicon_named_wins_the_longest_grapheme_first_marks_untouched() -> None:
    first = parse_lexicon(pls(lexeme(("NY",), "New York")))
    second = parse_lexicon(pls(lexeme(("NY",), "Nowhere"), lexeme(("NY Times",), "the paper")))
    mark = Mark("here", 0, 5)
    script = apply_lexicons(Script((Spoken("NY and NY Times", 0, 15), mark)), [first, second])
    assert said(script) == ["New York and the paper"] and script.pieces[1] == mark


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (pls("<lexeme><grapheme>a</grapheme><phoneme>eI</phoneme></lexeme>"), "phoneme"),
        (pls(), "no <lexeme>"),
        ("<speak/>", "root"),
        ('<!DOCTYPE l [<!ENTITY x "y">]><lexicon/>', "DOCTYPE"),
        (pls("<lexeme><grapheme>a</grapheme>"), "well-formed"),
        (pls("<example>a</example>"), "<example>"),
    ],
)
def test_what_cannot_be_honoured_is_refused_with_its_reason(document: str, reason: str) -> None:
    with pytest.raises(InvalidRequest, match=reason):
        parse_lexicon(document)
