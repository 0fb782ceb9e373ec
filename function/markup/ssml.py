"""SSML in, a script out (function.core.script): the subset Amazon Polly's callers write, exactly.

`<speak>`, `<p>` and `<s>` bound sentences; `<break time|strength>` is silence; `<prosody rate|volume>` a
speed and a gain (`pitch` is refused: the model cannot change it); `<say-as interpret-as>` is read in that
mode (function.cosyvoice.frontend.say_as), an `expletive` is silence as long as the word it hides;
`<sub alias>` says the alias; `<w role>` says its text (the role, a part of speech or word sense, is a
pronunciation hint this model has no way to take); `<lang xml:lang>` picks the model's language tag;
`<mark name>` is reported as an `ssml` speech mark. Anything else is refused with its name and position
(as Polly's neural voices refuse `<emphasis>`, `<amazon:effect>` and `<prosody pitch>`), malformed XML
with its line and column.

A piece of the document with nothing to speak, by the rule the text front end drops a segment with (only
punctuation and symbols), joins the spoken piece before it (the piece after it when it comes first): the
full stop in `Say it <prosody rate="fast">quickly</prosody>.` ends "quickly." at the prosody's rate, as it
closes the sentence in Polly, where the engine would refuse it on its own. Marks and breaks stay where
they were written.

The standard library's expat parses, with every way to reach outside the document closed: a DOCTYPE (and
so any entity declaration, billion laughs included) is refused the moment it starts, and external
entities are never fetched. Offsets are UTF-8 byte offsets into the document, as Polly's marks give.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any
from xml.parsers import expat

from function.core.errors import InvalidRequest
from function.core.options import MAX_SPEED, MIN_SPEED
from function.core.script import Mark, Pause, Piece, Script, Spoken
from function.cosyvoice.frontend.language import is_only_punctuation, language_of
from function.cosyvoice.frontend.say_as import EXPLETIVE, INTERPRETATIONS, expletive_seconds, read_as

MAX_BREAK_SECONDS = 10.0  # Polly's longest break
# Polly's strengths: none and x-weak add no pause, weak and medium (a bare <break/>) a comma's, strong a
# sentence's, x-strong a paragraph's. Polly gives no lengths; these are ours for those three pauses.
COMMA, SENTENCE, PARAGRAPH = 0.3, 0.7, 1.0
BREAK_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.0,
    "weak": COMMA,
    "medium": COMMA,
    "strong": SENTENCE,
    "x-strong": PARAGRAPH,
}
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "fast": 1.25, "x-fast": 1.5}
VOLUMES_DB = {"silent": None, "x-soft": -12.0, "soft": -6.0, "medium": 0.0, "loud": 6.0, "x-loud": 12.0}
MAX_GAIN_DB = 12.0
LANGUAGES = {"zh-cn": "zh", "en-us": "en", "en-gb": "en", "ja-jp": "ja", "yue-cn": "yue", "ko-kr": "ko"}
# Each tag and the attributes it takes.
TAGS: dict[str, frozenset[str]] = {
    "speak": frozenset({"version", "xmlns", "xml:lang", "xmlns:xsi", "xsi:schemaLocation"}),
    "p": frozenset(),
    "s": frozenset(),
    "break": frozenset({"time", "strength"}),
    "prosody": frozenset({"rate", "volume", "pitch"}),
    "say-as": frozenset({"interpret-as", "format"}),
    "sub": frozenset({"alias"}),
    "w": frozenset({"role"}),
    "lang": frozenset({"xml:lang"}),
    "mark": frozenset({"name"}),
}
_SENTENCE_TAGS = frozenset({"speak", "p", "s"})
# Polly's <w role> values: parts of speech, then word senses.
W_ROLES = frozenset(
    {
        "amazon:VB",
        "amazon:VBD",
        "amazon:DT",
        "amazon:IN",
        "amazon:JJ",
        "amazon:NN",
        "amazon:DEFAULT",
        "amazon:SENSE_1",
    }
)
_TIME = re.compile(r"(\d+(?:\.\d+)?)(ms|s)")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")
_DECIBELS = re.compile(r"([+-]\d+(?:\.\d+)?)dB")
_BLANKS = re.compile(r"\s+")


def looks_like_ssml(text: str) -> bool:
    """True for a `<speak>` document (the OpenAI route's `input` has no text_type to say so)."""
    return text.lstrip().startswith("<speak")


@dataclass(frozen=True)
class _Voice:
    """What the open elements say about how to read."""

    speed: float
    gain: float = 1.0
    language: str | None = None


@dataclass
class _Run:
    """Text read together, as it accumulates."""

    voice: _Voice
    parts: list[str] = field(default_factory=list)
    start: int = -1
    end: int = -1


class _Parser:
    def __init__(self, document: bytes, speed: float) -> None:
        self.document = document
        self.pieces: list[Piece] = []
        self.voices = [_Voice(speed)]
        self.tags: list[str] = []
        self.run: _Run | None = None
        self.unattached: Spoken | None = None  # punctuation before the first speakable piece
        self.verbatim: tuple[str, dict[str, str], int] | None = None  # an open <say-as>, <sub> or <w>
        self.verbatim_text: list[str] = []
        parser = expat.ParserCreate("utf-8")
        parser.buffer_text = False  # one callback per text node keeps byte indices exact
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._doctype
        parser.EntityDeclHandler = self._entity
        parser.ExternalEntityRefHandler = self._external
        parser.ProcessingInstructionHandler = self._instruction
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._text
        self.expat = parser

    def parse(self) -> Script:
        try:
            self.expat.Parse(self.document, True)
        except expat.ExpatError as exc:
            message = expat.ErrorString(exc.code)
            raise InvalidRequest(
                f"malformed SSML at line {exc.lineno}, column {exc.offset + 1}: {message}"
            ) from None
        return Script(tuple(self.pieces))  # punctuation still unattached has no speech to join

    # What expat must never do: read a DTD, declare or fetch an entity.
    def _doctype(self, *_: Any) -> None:
        raise self._refuse("a DOCTYPE is not accepted (no DTDs or entity declarations)")

    def _entity(self, *_: Any) -> None:
        raise self._refuse("entity declarations are not accepted")

    def _external(self, *_: Any) -> int:
        raise self._refuse("external entities are not accepted")

    def _instruction(self, target: str, _: str) -> None:
        if target.lower() != "xml":
            raise self._refuse(f"processing instruction <?{target}?> is not accepted")

    def _where(self) -> str:
        return f"line {self.expat.CurrentLineNumber}, column {self.expat.CurrentColumnNumber + 1}"

    def _refuse(self, message: str) -> InvalidRequest:
        return InvalidRequest(f"SSML at {self._where()}: {message}")

    def _start(self, tag: str, attributes: dict[str, str]) -> None:
        self._close_text()
        if tag not in TAGS:
            supported = ", ".join(f"<{name}>" for name in TAGS)
            raise self._refuse(f"<{tag}> is not supported (supported: {supported})")
        unknown = sorted(set(attributes) - TAGS[tag])
        if unknown:
            raise self._refuse(f"<{tag}> does not take the attribute {unknown[0]!r}")
        if not self.tags and tag != "speak":
            raise self._refuse(f"the document must be a <speak> element, not <{tag}>")
        if self.tags and tag == "speak":
            raise self._refuse("<speak> cannot be nested")
        if self.verbatim is not None:
            raise self._refuse(f"<{self.verbatim[0]}> takes only text, not <{tag}>")
        self.tags.append(tag)
        voice = self.voices[-1]
        if tag in _SENTENCE_TAGS:
            self._flush()
            if "xml:lang" in attributes:
                voice = replace(voice, language=self._language(attributes["xml:lang"]))
        elif tag == "break":
            self._flush()
            self.pieces.append(Pause(self._break(attributes)))
        elif tag == "mark":
            self._flush()
            start = self.expat.CurrentByteIndex
            self.pieces.append(Mark(attributes.get("name", ""), start, self.document.index(b">", start) + 1))
        elif tag == "prosody":
            self._flush()
            voice = self._prosody(voice, attributes)
        elif tag == "lang":
            self._flush()
            voice = replace(voice, language=self._language(attributes.get("xml:lang", "")))
        else:  # say-as, sub, w: their text is read another way
            if tag == "say-as" and attributes.get("interpret-as") not in INTERPRETATIONS:
                modes = ", ".join(INTERPRETATIONS)
                raise self._refuse(
                    f"<say-as interpret-as={attributes.get('interpret-as')!r}> is not supported ({modes})"
                )
            if tag == "sub" and not attributes.get("alias", "").strip():
                raise self._refuse("<sub> needs a non-empty alias")
            if tag == "w" and attributes.get("role") not in W_ROLES:
                roles = ", ".join(sorted(W_ROLES))
                raise self._refuse(
                    f"<w role={attributes.get('role')!r}> is not one of Polly's roles ({roles})"
                )
            self.verbatim = (tag, attributes, self.expat.CurrentByteIndex)
            self.verbatim_text = []
        self.voices.append(voice)

    def _end(self, tag: str) -> None:
        self._close_text()
        self.tags.pop()
        self.voices.pop()
        if self.verbatim is not None and tag == self.verbatim[0]:
            _, attributes, start = self.verbatim
            self.verbatim = None
            written = "".join(self.verbatim_text).strip()
            if tag == "sub":
                said = attributes["alias"]
            elif tag == "w":
                said = written
            elif attributes["interpret-as"] == EXPLETIVE:
                if not written:
                    raise self._refuse(f'<say-as interpret-as="{EXPLETIVE}"> needs the word it hides')
                self._flush()
                self.pieces.append(Pause(expletive_seconds(written) / self.voices[-1].speed))
                return
            else:
                run_text = "".join(self.run.parts) if self.run else ""
                chinese = self.voices[-1].language in ("zh", "yue")
                language = "zh" if chinese else language_of(run_text + written)
                said = read_as(written, attributes["interpret-as"], language)
            self._say(said, start, self.document.index(b">", self.expat.CurrentByteIndex) + 1)
            return
        if tag in _SENTENCE_TAGS or tag in ("prosody", "lang"):
            self._flush()

    def _text(self, data: str) -> None:
        if self.verbatim is not None:
            self.verbatim_text.append(data)
            return
        if data.strip():
            self._say(data, self.expat.CurrentByteIndex, -1)
            self._open_text = True

    _open_text = False

    def _close_text(self) -> None:
        """A text node ends where the next element starts: its end offset is known only then."""
        if self._open_text and self.run is not None:
            self.run.end = self.expat.CurrentByteIndex
        self._open_text = False

    def _say(self, text: str, start: int, end: int) -> None:
        if self.run is None:
            self.run = _Run(self.voices[-1])
        if self.run.start < 0:
            self.run.start = start
        self.run.parts.append(text)
        self.run.end = end

    def _flush(self) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        text = _BLANKS.sub(" ", "".join(run.parts)).strip()  # a reading replaces its markup in place
        if not text:
            return
        # The span without the whitespace around the text.
        raw = self.document[run.start : run.end]
        start = run.start + len(raw) - len(raw.lstrip())
        end = run.end - (len(raw) - len(raw.rstrip()))
        voice = run.voice
        piece = Spoken(text, start, end, voice.speed, voice.gain, voice.language)
        if self.unattached is not None:
            piece = replace(piece, text=self.unattached.text + text, start=self.unattached.start)
            self.unattached = None
        if _speakable(piece.text):
            self.pieces.append(piece)
            return
        # Nothing to speak: it ends the last spoken piece, whatever marks and breaks came between.
        spoken = [index for index, before in enumerate(self.pieces) if isinstance(before, Spoken)]
        if not spoken:
            self.unattached = piece
            return
        last = self.pieces[spoken[-1]]
        assert isinstance(last, Spoken)
        self.pieces[spoken[-1]] = replace(last, text=last.text + text, end=end)

    def _break(self, attributes: dict[str, str]) -> float:
        if "time" in attributes:
            match = _TIME.fullmatch(attributes["time"].strip())
            if match is None:
                raise self._refuse(f"<break time={attributes['time']!r}>: give a time like 500ms or 2s")
            seconds = float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
            if seconds > MAX_BREAK_SECONDS:
                raise self._refuse(f"<break> is at most {MAX_BREAK_SECONDS:g}s, got {attributes['time']}")
            return seconds
        strength = attributes.get("strength", "medium")
        if strength not in BREAK_STRENGTHS:
            raise self._refuse(f"<break strength={strength!r}>: use one of {', '.join(BREAK_STRENGTHS)}")
        return BREAK_STRENGTHS[strength]

    def _prosody(self, voice: _Voice, attributes: dict[str, str]) -> _Voice:
        if "pitch" in attributes:
            raise self._refuse("<prosody pitch> is not supported: this model cannot change its pitch")
        if "rate" in attributes:
            rate = attributes["rate"].strip()
            percent = _PERCENT.fullmatch(rate)
            if rate not in RATES and percent is None:
                raise self._refuse(f"<prosody rate={rate!r}>: use {', '.join(RATES)} or a percentage")
            speed = voice.speed * (RATES[rate] if percent is None else float(percent.group(1)) / 100)
            if not MIN_SPEED <= speed <= MAX_SPEED:
                raise self._refuse(
                    f"<prosody rate={rate!r}> makes the speed {speed:g}, outside {MIN_SPEED}..{MAX_SPEED}"
                )
            voice = replace(voice, speed=speed)
        if "volume" in attributes:
            volume = attributes["volume"].strip()
            decibels = _DECIBELS.fullmatch(volume)
            if volume not in VOLUMES_DB and decibels is None:
                raise self._refuse(f"<prosody volume={volume!r}>: use {', '.join(VOLUMES_DB)} or +NdB / -NdB")
            db = VOLUMES_DB[volume] if decibels is None else float(decibels.group(1))
            if db is not None and db > MAX_GAIN_DB:
                raise self._refuse(f"<prosody volume={volume!r}> is above the +{MAX_GAIN_DB:g}dB allowed")
            voice = replace(voice, gain=0.0 if db is None else voice.gain * 10 ** (db / 20))
        return voice

    def _language(self, name: str) -> str:
        language = LANGUAGES.get(name.strip().lower())
        if language is None:
            raise self._refuse(f"xml:lang={name!r} is not a language of this model ({', '.join(LANGUAGES)})")
        return language


def _speakable(text: str) -> bool:
    """Whether the engine has anything in `text` to speak: the text front end drops a segment made only of
    punctuation and symbols (function.cosyvoice.frontend.prepare_text), blanks aside."""
    return not is_only_punctuation(_BLANKS.sub("", text))


def parse_ssml(document: str, speed: float = 1.0) -> Script:
    """The script of an SSML `<speak>` document, read at `speed` (the request's) times each prosody rate."""
    script = _Parser(document.encode("utf-8"), speed).parse()
    if not script.spoken_text.strip():
        raise InvalidRequest("the SSML has no text to speak")
    return script


_SENTENCE = re.compile(r"[^。！？；!?;\n.]+(?:[。！？；!?;\n]+|\.+(?=\s|$)|$)")


def text_script(text: str, speed: float = 1.0) -> Script:
    """Plain text as a script of its sentences, for `sentence` speech marks on a text request."""
    pieces: list[Piece] = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if not sentence:
            continue
        start = len(text[: match.start() + match.group().index(sentence[0])].encode())
        pieces.append(Spoken(sentence, start, start + len(sentence.encode()), speed))
    return Script(tuple(pieces))


__all__ = [
    "BREAK_STRENGTHS",
    "LANGUAGES",
    "RATES",
    "TAGS",
    "W_ROLES",
    "looks_like_ssml",
    "parse_ssml",
    "text_script",
]
