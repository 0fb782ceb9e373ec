"""SSML → script (function.markup.ssml): each tag's exact meaning, and malformed and hostile documents refused
with their position. No engine."""

from __future__ import annotations

import re
import socket

import pytest

from function.core.errors import InvalidRequest
from function.core.script import Mark, Pause, Spoken
from function.markup.ssml import BREAK_STRENGTHS, looks_like_ssml, parse_ssml, text_script
from function.service.schema import OpenAISpeechRequest, SpeechRequest


def pieces(document: str, speed: float = 1.0) -> list[object]:
    return list(parse_ssml(document, speed).pieces)


def refused(document: str) -> str:
    with pytest.raises(InvalidRequest) as caught:
        parse_ssml(document)
    return caught.value.message


def test_sentences_are_bounded_by_s_and_p_and_keep_their_byte_spans() -> None:
    document = "<speak><p><s>Hello there.</s><s>你好。</s></p><p>Bye.</p></speak>"
    got = pieces(document)
    assert [piece.text for piece in got] == ["Hello there.", "你好。", "Bye."]  # type: ignore[attr-defined]
    raw = document.encode()
    assert [raw[p.start : p.end].decode() for p in got] == ["Hello there.", "你好。", "Bye."]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("attribute", "seconds"), [('time="500ms"', 0.5), ('time="2s"', 2.0), ("", 0.3)])
def test_break_time_is_a_pause_of_that_length(attribute: str, seconds: float) -> None:
    got = pieces(f"<speak>One.<break {attribute}/>Two.</speak>")
    assert got[1] == Pause(seconds)
    assert [type(piece) for piece in got] == [Spoken, Pause, Spoken]


def test_break_strengths_follow_pollys_equivalences() -> None:
    def pause(strength: str) -> float:
        (_, between, _) = pieces(f'<speak>One.<break strength="{strength}"/>Two.</speak>')
        assert isinstance(between, Pause)
        return between.seconds

    assert set(BREAK_STRENGTHS) == {"none", "x-weak", "weak", "medium", "strong", "x-strong"}
    assert pause("none") == pause("x-weak") == 0  # no pause
    assert pause("weak") == pause("medium") == pieces("<speak>One.<break/>Two.</speak>")[1].seconds > 0
    assert pause("medium") < pause("strong") < pause("x-strong")  # a comma's < a sentence's < a paragraph's


def test_bad_breaks_are_refused() -> None:
    assert "500ms or 2s" in refused('<speak>a<break time="soon"/></speak>')
    assert "at most 10s" in refused('<speak>a<break time="11s"/></speak>')
    assert "strength" in refused('<speak>a<break strength="huge"/></speak>')


@pytest.mark.parametrize(("rate", "speed"), [("x-slow", 0.5), ("slow", 0.75), ("fast", 1.25), ("150%", 1.5)])
def test_prosody_rate_is_the_pieces_speed_times_the_requests(rate: str, speed: float) -> None:
    (piece,) = pieces(f'<speak><prosody rate="{rate}">Hi.</prosody></speak>')
    assert isinstance(piece, Spoken) and piece.speed == pytest.approx(speed)
    (piece,) = pieces(f'<speak><prosody rate="{rate}">Hi.</prosody></speak>', speed=1.2)
    assert isinstance(piece, Spoken) and piece.speed == pytest.approx(speed * 1.2)


def test_prosody_rate_outside_the_supported_range_is_refused() -> None:
    assert "outside 0.5..2.0" in refused('<speak><prosody rate="300%">Hi.</prosody></speak>')
    assert "outside 0.5..2.0" in refused(
        '<speak><prosody rate="x-slow"><prosody rate="x-slow">a</prosody></prosody></speak>'
    )


def test_prosody_volume_is_a_gain_and_pitch_is_refused_saying_why() -> None:
    loud, soft, silent = (
        pieces(f'<speak><prosody volume="{v}">Hi.</prosody></speak>')[0] for v in ("+6dB", "soft", "silent")
    )
    assert loud.gain == pytest.approx(10 ** (6 / 20))  # type: ignore[union-attr]
    assert soft.gain == pytest.approx(10 ** (-6 / 20))  # type: ignore[union-attr]
    assert silent.gain == 0.0  # type: ignore[union-attr]
    assert "pitch" in refused('<speak><prosody pitch="high">Hi.</prosody></speak>')
    assert "cannot change its pitch" in refused('<speak><prosody pitch="high">Hi.</prosody></speak>')


def test_say_as_sub_and_lang() -> None:
    (piece,) = pieces('<speak>Call <say-as interpret-as="telephone">555-0123</say-as> now.</speak>')
    assert piece.text == "Call five five five, zero one two three now."  # type: ignore[union-attr]
    (piece,) = pieces('<speak>第<say-as interpret-as="digits">2024</say-as>号</speak>')
    assert piece.text == "第二零二四号"  # type: ignore[union-attr]  # the reading in the markup's place
    (piece,) = pieces('<speak><sub alias="World Wide Web">WWW</sub></speak>')
    assert piece.text == "World Wide Web"  # type: ignore[union-attr]
    got = pieces(
        '<speak>Hi. <lang xml:lang="ja-JP">こんにちは</lang><lang xml:lang="yue-CN">你好</lang></speak>'
    )
    assert [p.language for p in got] == [None, "ja", "yue"]  # type: ignore[attr-defined]
    assert got[1].model_text == "<|ja|>こんにちは"  # type: ignore[attr-defined]
    assert "not a language" in refused('<speak><lang xml:lang="fr-FR">Bonjour</lang></speak>')
    assert "interpret-as" in refused('<speak><say-as interpret-as="interjection">wow</say-as></speak>')


def test_mark_is_a_named_point_with_its_span() -> None:
    document = '<speak>One.<mark name="here"/>Two.</speak>'
    got = pieces(document)
    mark = got[1]
    assert isinstance(mark, Mark) and mark.name == "here"
    assert document.encode()[mark.start : mark.end] == b'<mark name="here"/>'


def test_an_unsupported_tag_is_refused_with_its_name_and_position() -> None:
    message = refused("<speak>\n  Hello <emphasis>there</emphasis></speak>")
    assert "<emphasis>" in message and "line 2, column 9" in message
    assert "attribute 'level'" in refused('<speak><p level="1">x</p></speak>')
    assert "must be a <speak>" in refused("<p>x</p>")


def test_malformed_xml_is_refused_with_line_and_column() -> None:
    message = refused("<speak>\n<s>Hello</p></speak>")
    assert message.startswith("malformed SSML at line 2, column 11")


@pytest.mark.parametrize(
    "document",
    [
        # billion laughs: ten levels of ten references each
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'
            for i in range(1, 10)
        )
        + "]><speak>&lol9;</speak>",
        '<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>',
        '<!DOCTYPE speak SYSTEM "http://127.0.0.1:9/evil.dtd"><speak>x</speak>',
        '<!DOCTYPE speak [<!ENTITY % p SYSTEM "http://127.0.0.1:9/p">%p;]><speak>x</speak>',
    ],
)
def test_dtds_and_entities_are_refused_at_the_doctype_before_any_is_read(
    document: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused where the DOCTYPE opens: no entity is declared or expanded (the billion laughs never
    grow), no external DTD or entity is fetched, no element is reached."""

    def no_network(*_: object) -> None:
        raise AssertionError("the parser tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    message = refused(document)
    assert "DOCTYPE" in message
    where = re.fullmatch(r"SSML at line 1, column (\d+): .*", message)
    assert where is not None, message
    offset = int(where[1]) - 1  # where the parser stood: before the first declaration and the root
    assert offset < document.index("<speak>")
    assert "<!ENTITY" not in document or offset < document.index("<!ENTITY")


def test_undefined_entities_are_malformed() -> None:
    assert "undefined entity" in refused("<speak>&nbsp;</speak>")
    assert pieces("<speak>Fish &amp; chips</speak>")[0].text == "Fish & chips"  # type: ignore[union-attr]


def test_length_limits_count_the_spoken_text_not_the_markup() -> None:
    markup = "<speak>" + '<mark name="m"/>' * 200 + "Short.</speak>"
    options = SpeechRequest(text=markup, speaker="a", text_type="ssml").to_options()
    assert options.text == "Short."
    options.validated(max_text_chars=100)
    long = SpeechRequest(
        text="<speak>" + "word " * 50 + "</speak>", speaker="a", text_type="ssml"
    ).to_options()
    with pytest.raises(InvalidRequest, match="250|249"):
        long.validated(max_text_chars=100)


def test_the_openai_route_reads_a_speak_document_as_ssml() -> None:
    assert looks_like_ssml("  <speak>Hi</speak>") and not looks_like_ssml("Hi <speak>")
    body = OpenAISpeechRequest(model="m", input='<speak>Hi.<break time="1s"/>Bye.</speak>', voice="alloy")
    options = body.to_options("a", None)
    assert options.script is not None and Pause(1.0) in options.script.pieces


def test_text_asking_for_marks_is_a_script_of_its_sentences() -> None:
    text = "Hello there. How are you? 你好。"
    got = text_script(text).pieces
    assert [p.text for p in got] == ["Hello there.", "How are you?", "你好。"]  # type: ignore[union-attr]
    assert [text.encode()[p.start : p.end].decode() for p in got] == [p.text for p in got]  # type: ignore[union-attr]


# Documents in the shapes of Amazon Polly's SSML documentation, each with what Polly's neural voices do:
# speak it (then what the engine is asked to say, in order with the pauses and marks), or refuse it with a
# 4xx that names the tag.
def performance(document: str) -> list[tuple[str, object]]:
    """("say", the piece's model text), ("pause", seconds) and ("mark", name), in the script's order."""
    out: list[tuple[str, object]] = []
    for piece in parse_ssml(document).pieces:
        if isinstance(piece, Spoken):
            out.append(("say", piece.model_text))
        elif isinstance(piece, Pause):
            out.append(("pause", pytest.approx(piece.seconds)))
        else:
            out.append(("mark", piece.name))
    return out


SPOKEN_AS_POLLY = [
    # Punctuation after a closing tag, a break or a mark closes the piece before it.
    (
        '<speak>Say it <prosody rate="fast">quickly</prosody>.</speak>',
        [("say", "Say it"), ("say", "quickly.")],
    ),
    (
        '<speak>Mary had a little lamb <break time="300ms"/>.</speak>',
        [("say", "Mary had a little lamb."), ("pause", 0.3)],
    ),
    ('<speak>Hello there <mark name="here"/>.</speak>', [("say", "Hello there."), ("mark", "here")]),
    (
        '<speak>Why didn\'t you say <lang xml:lang="ja-JP">こんにちは</lang>?</speak>',
        [("say", "Why didn't you say"), ("say", "<|ja|>こんにちは?")],
    ),
    ('<speak>(<prosody volume="soft">aside</prosody>)</speak>', [("say", "(aside)")]),
    # <w>: its text; the role is a hint this model cannot take.
    (
        '<speak>The word <w role="amazon:VBD">read</w> is a verb here.</speak>',
        [("say", "The word read is a verb here.")],
    ),
    (
        '<speak>The word <say-as interpret-as="characters">read</say-as> may be the present form '
        '<w role="amazon:VB">read</w>, or the past participle <w role="amazon:VBD">read</w>.</speak>',
        [("say", "The word R E A D may be the present form read, or the past participle read.")],
    ),
    (
        '<speak>A freshwater fish, the <w role="amazon:SENSE_1">bass</w>.</speak>',
        [("say", "A freshwater fish, the bass.")],
    ),
    # The shapes of Polly's own examples of each tag.
    (
        '<speak>Mary had a little <mark name="animal"/>lamb.</speak>',
        [("say", "Mary had a little"), ("mark", "animal"), ("say", "lamb.")],
    ),
    (
        '<speak>Mary had a little lamb <break time="3s"/>Whose fleece was white as snow.</speak>',
        [("say", "Mary had a little lamb"), ("pause", 3.0), ("say", "Whose fleece was white as snow.")],
    ),
    (
        "<speak><p>This is the first paragraph.</p><p>This is the second.</p></speak>",
        [("say", "This is the first paragraph."), ("say", "This is the second.")],
    ),
    (
        '<speak>It might help to <prosody rate="85%">slow the speaking rate slightly.</prosody></speak>',
        [("say", "It might help to"), ("say", "slow the speaking rate slightly.")],
    ),
    (
        '<speak>My favorite chemical element is <sub alias="aluminium">Al</sub>, '
        'but Al prefers <sub alias="magnesium">Mg</sub>.</speak>',
        [("say", "My favorite chemical element is aluminium, but Al prefers magnesium.")],
    ),
    # Every say-as value.
    (
        '<speak>Add <say-as interpret-as="fraction">3/20</say-as> of a cup, '
        'then <say-as interpret-as="fraction">2+1/2</say-as> cups.</speak>',
        [("say", "Add three twentieths of a cup, then two and a half cups.")],
    ),
    (
        '<speak>It is <say-as interpret-as="unit">10km</say-as> away; '
        'cut <say-as interpret-as="unit">1/2inch</say-as>.</speak>',
        [("say", "It is ten kilometers away; cut one half of an inch.")],
    ),
    (
        '<speak>Send it to <say-as interpret-as="address">221B Baker St</say-as>.</speak>',
        [("say", "Send it to two twenty-one B Baker Street.")],
    ),
    (
        '<speak>He said <say-as interpret-as="expletive">heck</say-as> and left.</speak>',
        [("say", "He said"), ("pause", 0.22), ("say", "and left.")],
    ),
    (
        '<speak>What the <say-as interpret-as="expletive">heck</say-as>!</speak>',
        [("say", "What the!"), ("pause", 0.22)],
    ),
    (
        '<speak>加<say-as interpret-as="fraction">3/20</say-as>的水，'
        '走<say-as interpret-as="unit">10km</say-as>，'
        '到<say-as interpret-as="address">中关村大街27号1203室</say-as>。</speak>',
        [("say", "加二十分之三的水，走十公里，到中关村大街二十七号一二零三室。")],
    ),
    (
        '<speak>It took <say-as interpret-as="time">1\'21"</say-as>, '
        'order <say-as interpret-as="number">1234</say-as>, the <say-as interpret-as="ordinal">3rd</say-as>, '
        'code <say-as interpret-as="digits">42</say-as>, '
        'call <say-as interpret-as="telephone">5550123</say-as>, '
        'on <say-as interpret-as="date" format="yyyymmdd">2024-03-05</say-as>, '
        'spelled <say-as interpret-as="spell-out">abc</say-as>, '
        'count <say-as interpret-as="cardinal">12</say-as>.</speak>',
        [
            (
                "say",
                "It took one minute twenty-one seconds, order one thousand, two hundred and thirty-four, "
                "the third, code four two, call five five five zero one two three, "
                "on March fifth, twenty twenty-four, spelled A B C, count twelve.",
            )
        ],
    ),
]


@pytest.mark.parametrize(("document", "said"), SPOKEN_AS_POLLY)
def test_documents_polly_speaks_are_spoken(document: str, said: list[tuple[str, object]]) -> None:
    assert performance(document) == said


REFUSED_AS_POLLY = [
    ('<speak>I <emphasis level="strong">really like</emphasis> that person.</speak>', "<emphasis>"),
    (
        '<speak><amazon:effect name="whispered">If you make any noise,</amazon:effect> she said.</speak>',
        "<amazon:effect>",
    ),
    ('<speak><amazon:effect phonation="soft">Quietly.</amazon:effect></speak>', "<amazon:effect>"),
    ('<speak><amazon:effect vocal-tract-length="+15%">Big.</amazon:effect></speak>', "<amazon:effect>"),
    ("<speak><amazon:auto-breaths>A long speech.</amazon:auto-breaths></speak>", "<amazon:auto-breaths>"),
    ('<speak>Higher <prosody pitch="high">than normal?</prosody></speak>', "<prosody pitch>"),
    ('<speak><prosody amazon:max-duration="2s">Some text.</prosody></speak>', "<prosody> does not take"),
]


@pytest.mark.parametrize(("document", "named"), REFUSED_AS_POLLY)
def test_documents_polly_refuses_are_refused_naming_the_tag(document: str, named: str) -> None:
    assert named in refused(document)


def test_punctuation_after_a_tag_ends_the_piece_before_at_its_speed_and_over_its_span() -> None:
    document = '<speak>Say it <prosody rate="fast">quickly</prosody>.</speak>'
    say, quickly = pieces(document)
    assert isinstance(say, Spoken) and isinstance(quickly, Spoken)
    assert (say.text, say.speed) == ("Say it", 1.0)
    assert (quickly.text, quickly.speed) == ("quickly.", 1.25)
    assert document.encode()[quickly.start : quickly.end] == b"quickly</prosody>."


@pytest.mark.parametrize(
    "document",
    [
        "<speak>.</speak>",
        '<speak><prosody rate="fast">!</prosody>.</speak>',
        '<speak><break time="1s"/>?<mark name="m"/>…</speak>',
        '<speak><say-as interpret-as="expletive">heck</say-as>.</speak>',
    ],
)
def test_a_document_with_nothing_to_speak_is_still_refused(document: str) -> None:
    assert "no text to speak" in refused(document)


def test_an_expletive_is_silence_at_the_pace_around_it_and_w_takes_only_pollys_roles() -> None:
    slow = pieces(
        '<speak>Oh <prosody rate="50%"><say-as interpret-as="expletive">heck</say-as></prosody></speak>'
    )
    assert slow[1] == Pause(pytest.approx(0.44))  # type: ignore[arg-type]
    assert "needs the word" in refused('<speak>Oh <say-as interpret-as="expletive"> </say-as></speak>')
    assert "not one of Polly's roles" in refused('<speak><w role="verb">read</w></speak>')
    assert "takes only text" in refused('<speak><w role="amazon:VB">read<break/></w></speak>')
