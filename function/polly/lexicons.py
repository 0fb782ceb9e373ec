"""Polly's lexicons (PutLexicon, GetLexicon, ListLexicons, DeleteLexicon): alias lexicons
(function.markup.lexicon), each tenant's kept beside its saved voices in its voice library's storage
(function.voices.library), each as `lexicons/{Name}.json`: the document as sent and what GetLexicon
reports of it. SynthesizeSpeech applies the lexicons it names, of its caller's tenant.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from function.core.errors import InvalidRequest
from function.instance.library import voice_library
from function.markup.lexicon import MAX_LEXICON_CHARS, Lexicon, parse_lexicon
from function.polly.errors import PollyError

FOLDER = "lexicons/"
NAME = re.compile(r"^[0-9A-Za-z]{1,20}$")
MAX_NAMED = 5  # lexicons one request may name, as Polly's


def _key(name: str) -> str:
    if NAME.match(name) is None:
        raise PollyError("ValidationException", f"lexicon name {name!r} is not 1 to 20 letters and digits")
    return f"{FOLDER}{name}.json"


def _stored(tenant: str, name: str) -> dict[str, Any]:
    found = voice_library(tenant).objects.read(_key(name))
    if found is None:
        raise PollyError("LexiconNotFoundException", f"no lexicon {name!r} (PutLexicon stores one)")
    return dict(json.loads(found))


def put(tenant: str, name: str, content: str) -> None:
    """Store the lexicon, replacing one of the same name; InvalidLexiconException for what is unusable."""
    key = _key(name)
    try:
        lexicon = parse_lexicon(content)
    except InvalidRequest as exc:
        code = (
            "LexiconSizeExceededException" if len(content) > MAX_LEXICON_CHARS else "InvalidLexiconException"
        )
        raise PollyError(code, exc.message) from None
    attributes = {
        "Alphabet": lexicon.alphabet,
        "LanguageCode": lexicon.language,
        "LastModified": time.time(),
        "LexemesCount": lexicon.lexemes,
        "Size": len(content.encode()),
    }
    objects = voice_library(tenant).objects
    objects.delete([key])  # stored objects are written once: a new version replaces the old
    objects.write(key, json.dumps({"Name": name, "Content": content, "Attributes": attributes}).encode())


def get(tenant: str, name: str) -> dict[str, Any]:
    """GetLexicon's answer."""
    stored = _stored(tenant, name)
    return {
        "Lexicon": {"Name": name, "Content": stored["Content"]},
        "LexiconAttributes": stored["Attributes"],
    }


def listed(tenant: str) -> dict[str, Any]:
    """ListLexicons' answer: every lexicon's name and attributes."""
    objects = voice_library(tenant).objects
    keys = (key for key in objects.keys(FOLDER) if key.endswith(".json"))  # not a file being written
    names = sorted(key.removeprefix(FOLDER).removesuffix(".json") for key in keys)
    return {"Lexicons": [{"Name": name, "Attributes": _stored(tenant, name)["Attributes"]} for name in names]}


def delete(tenant: str, name: str) -> None:
    key = _key(name)
    _stored(tenant, name)  # LexiconNotFoundException for none
    voice_library(tenant).objects.delete([key])


def named(tenant: str, names: Sequence[str]) -> list[Lexicon]:
    """The lexicons a request names, in its order; LexiconNotFoundException for a name without one."""
    if len(names) > MAX_NAMED:
        raise PollyError("ValidationException", f"name at most {MAX_NAMED} lexicons, not {len(names)}")
    return [parse_lexicon(_stored(tenant, name)["Content"]) for name in names]


__all__ = ["delete", "get", "listed", "named", "put"]
