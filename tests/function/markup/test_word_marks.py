"""Word speech marks (function.markup.words, collected by function.markup.marks.MarkCollector): estimates,
but one per word, in order, inside their sentence's text and its span of audio, a break after it excluded."""

from __future__ import annotations

import numpy as np

from function.core.script import SpeechMark
from function.markup.marks import MarkCollector
from function.markup.words import word_marks

RATE = 1000  # one sample a millisecond


def sentence(text: str, time: int, start: int = 0) -> SpeechMark:
    return SpeechMark(time, "sentence", start, start + len(text.encode()), text)


def test_one_mark_per_word_in_order_inside_the_span() -> None:
    marks = word_marks(sentence("Hello, big world. Don't stop!", 100, start=7), 1100)
    assert [m.value for m in marks] == ["Hello", "big", "world", "Don't", "stop"]
    times = [m.time for m in marks]
    assert times[0] == 100 and times == sorted(times) and times[-1] < 1100
    text = "Hello, big world. Don't stop!"
    assert all(text.encode()[m.start - 7 : m.end - 7].decode() == m.value for m in marks)
    # longer words take longer: "Hello," holds more of the span than "big"
    assert times[1] - times[0] > times[2] - times[1]


def test_chinese_is_a_word_per_character() -> None:
    marks = word_marks(sentence("你好世界。", 0), 400)
    assert [m.value for m in marks] == ["你", "好", "世", "界"]
    assert [m.time for m in marks] == [0, 100, 200, 300]
    assert [m.end - m.start for m in marks] == [3, 3, 3, 3]


def test_a_piece_whose_text_is_not_its_span_is_scaled_into_it() -> None:
    # SSML: the piece says "World Wide Web" for <sub alias="World Wide Web">WWW</sub>, a 36-byte span
    piece = SpeechMark(0, "sentence", 10, 46, "World Wide Web")
    marks = word_marks(piece, 900)
    assert all(10 <= m.start < m.end <= 46 for m in marks)
    assert [m.start for m in marks] == sorted(m.start for m in marks)


def test_nothing_to_say_gives_no_words_and_no_time_never_goes_back() -> None:
    assert word_marks(sentence("...", 50), 60) == []
    assert [m.time for m in word_marks(sentence("a b", 50), 10)] == [50, 50]


def test_the_collector_places_words_in_the_voiced_span_before_the_next_mark() -> None:
    voiced, pause = np.ones(1000, np.float32), np.zeros(500, np.float32)
    items = [
        sentence("one two", 0),
        voiced,
        pause,  # a <break>: digital silence, not the sentence's
        SpeechMark(1500, "ssml", 20, 40, "here"),
        sentence("three", 1500, start=41),
        voiced,
    ]
    collector = MarkCollector(items, ("sentence", "ssml", "word"), RATE)
    assert sum(chunk.size for chunk in collector.audio()) == 2500
    found = [(m.type, m.value, m.time) for m in collector.marks]
    assert found == [
        ("sentence", "one two", 0),
        ("word", "one", 0),
        ("word", "two", 500),
        ("ssml", "here", 1500),
        ("sentence", "three", 1500),
        ("word", "three", 1500),
    ]


def test_words_alone_are_kept_without_their_sentences() -> None:
    collector = MarkCollector([sentence("one two", 0), np.ones(100, np.float32)], ("word",), RATE)
    list(collector.audio())
    assert [m.type for m in collector.marks] == ["word", "word"]
