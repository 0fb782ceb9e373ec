"""A script spoken by the real engine on the tiny artifact (Engine.speak): breaks are exact
silence in the decoded audio, prosody is speed and gain, and each mark's time is where its piece starts."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile

from function.audio.encode import encode
from function.core.options import SynthesisOptions
from function.core.script import SpeechMark
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.engine import Engine
from function.cosyvoice.frontend.say_as import expletive_seconds
from function.markup.ssml import parse_ssml, text_script

pytestmark = pytest.mark.engine
SPEAKER = "英文女"


@pytest.fixture(scope="module")
def engine(tiny_artifact: Path) -> Engine:
    return Engine.load(Artifact.open(tiny_artifact), threads=1)


def ssml_options(document: str, seed: int = 5, **fields: object) -> SynthesisOptions:
    script = parse_ssml(document)
    return SynthesisOptions(text=script.spoken_text, speaker=SPEAKER, seed=seed, script=script, **fields)  # type: ignore[arg-type]


def performed(
    engine: Engine, options: SynthesisOptions
) -> tuple[list[np.ndarray], list[SpeechMark], list[int]]:
    """The audio chunks, the marks, and for each mark the number of samples yielded before it."""
    chunks: list[np.ndarray] = []
    marks: list[SpeechMark] = []
    before: list[int] = []
    for item in engine.speak(engine.prepare(options)):
        if isinstance(item, SpeechMark):
            marks.append(item)
            before.append(sum(chunk.size for chunk in chunks))
        else:
            chunks.append(item)
    return chunks, marks, before


def test_a_break_is_exact_silence_in_the_decoded_audio_and_marks_fall_on_piece_starts(engine: Engine) -> None:
    options = ssml_options('<speak>Hello.<break time="300ms"/><mark name="two"/>Good bye.</speak>')
    chunks, marks, before = performed(engine, options)
    rate = engine.sample_rate
    assert [(m.type, m.value) for m in marks] == [
        ("sentence", "Hello."),
        ("ssml", "two"),
        ("sentence", "Good bye."),
    ]
    first, pause = before[1] - 300 * rate // 1000, 300 * rate // 1000
    wav = encode(chunks, options.output(rate))
    decoded, decoded_rate = soundfile.read(io.BytesIO(wav), dtype="int16")
    assert decoded_rate == rate
    assert first > 0 and np.any(decoded[:first] != 0)
    assert np.all(decoded[first : first + pause] == 0)  # exact digital silence, its exact length
    assert decoded[first + pause :].size > 0 and np.any(decoded[first + pause : first + pause + 2000] != 0)
    # Times are the samples before each mark, in ms: the first at 0, the mark and the next sentence at the
    # end of the silence.
    after_pause = round((first + pause) * 1000 / rate)
    assert [m.time for m in marks] == [0, after_pause, after_pause]
    # The same audio as the unmarked stream, and as the same seed again.
    assert np.array_equal(np.concatenate(chunks), engine.synthesize(options))
    again, again_marks, _ = performed(engine, options)
    assert np.array_equal(np.concatenate(again), np.concatenate(chunks)) and again_marks == marks


def test_a_break_between_sentences_inserts_silence_and_changes_nothing_else(engine: Engine) -> None:
    plain, marks, before = performed(engine, ssml_options("<speak><s>Hello.</s><s>Good bye.</s></speak>"))
    paused = engine.synthesize(
        ssml_options('<speak><s>Hello.</s><break strength="strong"/><s>Good bye.</s></speak>')
    )
    audio, split = np.concatenate(plain), before[1]
    silence = np.zeros(round(0.7 * engine.sample_rate), dtype=np.float32)
    assert np.array_equal(paused, np.concatenate([audio[:split], silence, audio[split:]]))
    assert marks[1].time == round(split * 1000 / engine.sample_rate)


def test_prosody_volume_is_a_gain_on_the_same_audio(engine: Engine) -> None:
    plain = engine.synthesize(ssml_options("<speak>Hello there.</speak>"))
    soft = engine.synthesize(ssml_options('<speak><prosody volume="-6dB">Hello there.</prosody></speak>'))
    np.testing.assert_allclose(soft, plain * np.float32(10 ** (-6 / 20)), atol=1e-6)
    silent = engine.synthesize(ssml_options('<speak><prosody volume="silent">Hello there.</prosody></speak>'))
    assert silent.size == plain.size and not silent.any()


def test_prosody_rate_is_the_segments_speed(engine: Engine) -> None:
    plain = engine.synthesize(ssml_options("<speak>Hello there.</speak>"))
    slow = engine.synthesize(ssml_options('<speak><prosody rate="50%">Hello there.</prosody></speak>'))
    assert slow.size / plain.size == pytest.approx(2.0, rel=0.02)  # the same tokens, mel stretched ×2


def test_text_marks_are_one_sentence_per_piece_and_leave_the_audio_as_it_is(engine: Engine) -> None:
    plain = SynthesisOptions(text="Hello there.", speaker=SPEAKER, seed=2)
    chunks, marks, _ = performed(engine, plain)
    assert marks == []  # no script, no marks
    marked = replace(plain, script=text_script(plain.text))
    marked_chunks, marks, _ = performed(engine, marked)
    assert marks == [SpeechMark(0, "sentence", 0, len(b"Hello there."), "Hello there.")]
    assert np.array_equal(np.concatenate(marked_chunks), np.concatenate(chunks))


def test_punctuation_after_a_closing_tag_is_performed_with_the_piece_before(engine: Engine) -> None:
    options = ssml_options('<speak>Say it <prosody rate="fast">quickly</prosody>.</speak>')
    chunks, marks, before = performed(engine, options)
    assert [(m.type, m.value) for m in marks] == [("sentence", "Say it"), ("sentence", "quickly.")]
    audio = np.concatenate(chunks)
    assert 0 < before[1] < audio.size and np.any(audio[: before[1]]) and np.any(audio[before[1] :])


def test_an_expletive_is_exact_silence_of_the_words_length(engine: Engine) -> None:
    options = ssml_options('<speak>Hello <say-as interpret-as="expletive">heck</say-as> there.</speak>')
    chunks, marks, before = performed(engine, options)
    assert [m.value for m in marks] == ["Hello", "there."]
    audio, silence = np.concatenate(chunks), round(expletive_seconds("heck") * engine.sample_rate)
    assert np.any(audio[: before[1] - silence]) and not np.any(audio[before[1] - silence : before[1]])
    assert np.any(audio[before[1] : before[1] + 2000])
