"""SSML → script (function.markup.ssml): each tag's exact meaning, and malformed and hostile documents refused
with their position. No engine."""

from __future__ import annotations

import time

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
    assert piece.text == "第 二零二四 号"  # type: ignore[union-attr]
    (piece,) = pieces('<speak><sub alias="World Wide Web">WWW</sub></speak>')
    assert piece.text == "World Wide Web"  # type: ignore[union-attr]
    got = pieces(
        '<speak>Hi. <lang xml:lang="ja-JP">こんにちは</lang><lang xml:lang="yue-CN">你好</lang></speak>'
    )
    assert [p.language for p in got] == [None, "ja", "yue"]  # type: ignore[attr-defined]
    assert got[1].model_text == "<|ja|>こんにちは"  # type: ignore[attr-defined]
    assert "not a language" in refused('<speak><lang xml:lang="fr-FR">Bonjour</lang></speak>')
    assert "interpret-as" in refused('<speak><say-as interpret-as="unit">3</say-as></speak>')


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
def test_dtds_and_entities_are_refused_in_milliseconds(document: str) -> None:
    started = time.perf_counter()
    message = refused(document)
    assert time.perf_counter() - started < 0.05
    assert "DOCTYPE" in message


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
