"""Budgets and deadlines in the engine: refusing what cannot finish, stopping at the limit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from function.core.deadline import Deadline, DeadlineExceeded
from function.core.options import SynthesisOptions
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.budget import OverBudget, SpeedMeter, expected_speech_seconds
from function.cosyvoice.engine import Engine, audio_only
from tests.function.cosyvoice.speaking import llm_threads_end, spoken

SPEAKER = "英文女"
TEXT = "Sentence number one is here. Sentence number two is here as well, and a third one follows it."


@pytest.fixture(scope="module")
def engine(tiny_artifact: Path) -> Engine:
    return Engine.load(Artifact.open(tiny_artifact), threads=1)


def test_expected_speech_reads_chinese_slower_than_letters_and_punctuation_not_at_all() -> None:
    assert expected_speech_seconds(["你好世界。"]) == pytest.approx(4 / 4.5)
    assert expected_speech_seconds(["Hello, world!"]) == pytest.approx(10 / 12)
    assert expected_speech_seconds(["...", "  "]) == 0


def test_an_unmeasured_meter_refuses_nothing_and_a_measured_one_says_what_fits() -> None:
    meter = SpeedMeter()
    short = Deadline.after(2, "a test", margin=0)
    meter.check(["word " * 1000], 5000, 50, short)  # nothing measured yet: nothing refused
    meter.observe(0.5, 10)  # 50 ms a token: 2.5 s per second of speech
    meter.check(["Hi."], 3, 50, short)  # ~0.17 s of speech, ~0.4 s of work: fits
    with pytest.raises(OverBudget) as refused:
        meter.check(["Hello there " * 10], 120, 50, short)  # ~8.3 s of speech, ~21 s of work
    message = refused.value.message
    assert "a test" in message and "/v1/jobs" in message
    fitting = int(message.split("about ")[1].split(" ")[0])
    assert 5 <= fitting <= 15  # 120 characters × 2 s / ~21 s
    assert refused.value.status == 413


def test_the_meter_follows_what_it_measures_and_the_first_synthesis_replaces_the_warm_up() -> None:
    meter = SpeedMeter()
    meter.observe(1.0, 10, warm_up=True)
    meter.observe(0.5, 10)
    assert meter.seconds_per_token == pytest.approx(0.05)
    meter.observe(1.0, 10)
    assert meter.seconds_per_token == pytest.approx(0.065)  # then smoothed
    for _ in range(20):
        meter.observe(0.2, 10)
    assert meter.seconds_per_token == pytest.approx(0.02, rel=0.01)
    meter.observe(0, 0)  # nothing synthesised: nothing learnt
    assert meter.seconds_per_token == pytest.approx(0.02, rel=0.01)


def test_warm_up_and_every_synthesis_measure_the_speed(engine: Engine) -> None:
    engine.speed = SpeedMeter()
    engine.warm_up()
    after_warm_up = engine.speed.seconds_per_token
    assert after_warm_up is not None and after_warm_up > 0
    engine.synthesize(SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=1))
    assert engine.speed.seconds_per_token != after_warm_up


@pytest.mark.parametrize("stream", [False, True])
def test_work_that_cannot_finish_is_refused_before_the_llm_runs(
    engine: Engine, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.speed = SpeedMeter()
    engine.speed.observe(1.0, 1)  # one second a token: nothing of length fits in 5 s
    calls: list[object] = []
    generate = engine.llm.generate
    monkeypatch.setattr(engine.llm, "generate", lambda *args: calls.append(args) or generate(*args))
    options = SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=1, stream=stream)
    with pytest.raises(OverBudget, match="characters fit"):
        next(spoken(engine, options, Deadline.after(5, "a test")))
    assert calls == []


@dataclass(frozen=True)
class PassesAtCheck(Deadline):
    """A deadline on a clock the test holds: it passes at the `passes_at`-th check (one per token drawn)."""

    passes_at: int = 10
    checks: list[int] = field(default_factory=lambda: [0])

    def expired(self) -> bool:
        self.checks[0] += 1
        return self.checks[0] >= self.passes_at


@pytest.mark.parametrize("stream", [False, True])
def test_synthesis_stops_at_the_deadline_and_leaves_no_thread(
    engine: Engine, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.speed = SpeedMeter()  # unmeasured: nothing is refused up front, the deadline still holds
    options = SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=1, stream=stream)
    drawn: list[int] = []
    generate = engine.llm.generate

    def recorded(*args: object) -> Iterator[int]:
        for token in generate(*args):
            drawn.append(token)
            yield token

    monkeypatch.setattr(engine.llm, "generate", recorded)
    assert engine.synthesize(options).size > 0
    whole = len(drawn)  # the tokens of the whole text
    deadline = PassesAtCheck(time.monotonic() + 3600, "a test", 3600)
    with pytest.raises(DeadlineExceeded, match="time limit"):
        list(spoken(engine, options, deadline))
    assert deadline.checks == [deadline.passes_at]  # stopped at the check where it passed, no later
    assert whole > 4 * deadline.passes_at  # far from the end of the text
    assert llm_threads_end()
    monkeypatch.undo()
    assert engine.synthesize(options).size > 0  # and the engine serves the next request


def test_part_of_a_text_gets_the_audio_it_has_in_the_whole(engine: Engine) -> None:
    options = SynthesisOptions(text=" ".join([TEXT] * 5), speaker=SPEAKER, seed=4)  # two segments
    utterance = engine.prepare(options)
    assert len(utterance.segments) >= 2
    whole = list(audio_only(engine.speak(utterance)))
    parts = []
    for index in range(len(utterance.segments)):
        parts += audio_only(engine.speak(utterance.part(range(index, index + 1))))
    assert len(parts) == len(whole)
    for a, b in zip(parts, whole, strict=True):
        assert np.array_equal(a, b)
