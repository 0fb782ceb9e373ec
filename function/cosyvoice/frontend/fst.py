"""WeTextProcessing's text-normalisation graphs (the `wetext` wheel's prebuilt FSTs), run with kaldifst.

A sentence goes through a tagger ("5kg" → `measure { value: "5kg" }`), its tokens' fields are put in the
order the verbalizer expects, and the verbalizer writes the words ("五千克"). `wetext` itself does this, but
importing it reads all 36 of its graphs (Japanese and inverse normalisation too: time and memory for
nothing this package says), so only the Chinese and English TN graphs are read here, from the installed
wheel's files, and nothing of `wetext` is imported. Nothing is downloaded.

Reading the four graphs takes a while and holds the GIL: `preload()` starts it on a thread of its own
once the model is loaded; `graphs()` waits for it (or reads them itself when nothing preloaded).
"""

from __future__ import annotations

import importlib.util
import re
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from function.cosyvoice.frontend.language import Language

if TYPE_CHECKING:
    import kaldifst

_GRAPH_NAMES = ("tagger", "verbalizer")


def _graph_file(language: Language, name: str) -> str:
    """A TN graph's path inside the wetext package."""
    return f"fsts/{language}/tn/{name}.fst"


# v1's WeTextProcessing graphs write traditional characters as simplified ones before tagging; wetext ships
# that step as a graph of its own.
TRADITIONAL_TO_SIMPLE = "fsts/traditional_to_simple.fst"
# The wheel's graphs this package reads; the deployment zip ships these and drops the others.
GRAPH_FILES = (
    *(_graph_file(language, name) for language in get_args(Language) for name in _GRAPH_NAMES),
    TRADITIONAL_TO_SIMPLE,
)

# Fields the verbalizers read in a fixed order whatever order the tagger wrote them in (wetext's
# TN_ORDERS and EN_TN_ORDERS); `preserve_order: "true"` in a token keeps the tagger's order.
_FIELD_ORDERS: dict[Language, dict[str, tuple[str, ...]]] = {
    "zh": {
        "date": ("year", "month", "day"),
        "fraction": ("denominator", "numerator"),
        "measure": ("denominator", "numerator", "value"),
        "money": ("value", "currency"),
        "time": ("noon", "hour", "minute", "second"),
    },
    "en": {
        "date": ("preserve_order", "text", "day", "month", "year"),
        "money": ("integer_part", "fractional_part", "quantity", "currency_maj"),
    },
}
_VALUE = r'"(?:[^"\\]|\\.)*"'  # values stay escaped as the tagger wrote them: they go back in as they are
_FIELD = re.compile(rf"(\w+):\s*({_VALUE})")
_TOKEN = re.compile(rf"\s*(\w+)\s*\{{((?:\s*\w+:\s*{_VALUE})*)\s*\}}")


class MissingGraphs(RuntimeError):
    """The wetext wheel (a runtime requirement) is not installed, or a graph this package reads is gone."""


@dataclass(frozen=True)
class Graphs:
    """One language's tagger and verbalizer."""

    language: Language
    tagger: kaldifst.TextNormalizer
    verbalizer: kaldifst.TextNormalizer

    @classmethod
    def read(cls, language: Language) -> Graphs:
        import kaldifst

        root = wheel_root()
        paths = [root / _graph_file(language, name) for name in _GRAPH_NAMES]
        for path in paths:
            if not path.is_file():
                raise MissingGraphs(f"{path} is missing: the installed wetext wheel is incomplete")
        tagger, verbalizer = (kaldifst.TextNormalizer(str(path)) for path in paths)
        return cls(language, tagger, verbalizer)

    def normalize(self, text: str) -> str:
        tagged = self.tagger(text)
        # A tagging that does not parse is not verbalized: the text goes on as written, not as markup.
        # No tagging at all (the English tagger's answer to "+5 points") would drop the text: same.
        ordered = reorder(tagged, self.language) if tagged.strip() else None
        return self.verbalizer(ordered).strip() if ordered is not None else text


def wheel_root() -> Path:
    """The installed wetext package's directory, found without importing it (its import reads every graph)."""
    spec = importlib.util.find_spec("wetext")
    if spec is None or not spec.submodule_search_locations:
        raise MissingGraphs("the wetext package is not installed: pip install the runtime requirements")
    return Path(next(iter(spec.submodule_search_locations)))


def reorder(tagged: str, language: Language) -> str | None:
    """The tagger's tokens with their fields in the verbalizer's order; None if `tagged` does not parse."""
    orders = _FIELD_ORDERS[language]
    tokens = []
    end = 0
    for match in _TOKEN.finditer(tagged):
        if match.start() != end:
            return None
        end = match.end()
        name, body = match.groups()
        fields = _FIELD.findall(body)
        canonical = orders.get(name, ())
        if canonical and ("preserve_order", '"true"') not in fields:
            rank = {key: index for index, key in enumerate(canonical)}
            fields.sort(key=lambda field: rank.get(field[0], len(rank)))  # stable: the others keep order
        tokens.append(f"{name} {{" + "".join(f" {key}: {value}" for key, value in fields) + " }")
    return " ".join(tokens) if tagged[end:].strip() == "" else None


# One lock per language: a Chinese request need not wait while the (larger) English graphs are read.
_locks: dict[Language, threading.Lock] = {language: threading.Lock() for language in get_args(Language)}
_graphs: dict[Language, Graphs] = {}


def graphs(language: Language) -> Graphs:
    """The language's graphs, read on the first call (waiting for `preload` if it is reading them)."""
    with _locks[language]:
        if language not in _graphs:
            _graphs[language] = Graphs.read(language)
        return _graphs[language]


_simplifier_lock = threading.Lock()
_simplifier: list[kaldifst.TextNormalizer] = []  # read on first use


def simplified(text: str) -> str:
    """`text` with traditional Chinese characters written as simplified ones (这兒 → 这儿)."""
    with _simplifier_lock:
        if not _simplifier:
            import kaldifst

            path = wheel_root() / TRADITIONAL_TO_SIMPLE
            if not path.is_file():
                raise MissingGraphs(f"{path} is missing: the installed wetext wheel is incomplete")
            _simplifier.append(kaldifst.TextNormalizer(str(path)))
        return _simplifier[0](text)


def load() -> None:
    """Every language's graphs, read now (or joined, where `preload` is reading them)."""
    for language in get_args(Language):
        graphs(language)
    simplified("")


def _read_quietly() -> None:
    # A failure here is raised again, with its message, by the first `graphs()` of a request.
    with suppress(Exception):
        load()


def preload() -> None:
    """Read every language's graphs on a daemon thread, Chinese first (its graphs are the smaller, so the
    first to be ready); returns at once."""
    threading.Thread(target=_read_quietly, name="cosyvoice-text-graphs", daemon=True).start()


__all__ = [
    "GRAPH_FILES",
    "Graphs",
    "MissingGraphs",
    "graphs",
    "load",
    "preload",
    "reorder",
    "simplified",
    "wheel_root",
]
