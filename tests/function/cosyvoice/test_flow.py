"""function.cosyvoice.flow on the tiny artifact, torch-free: speech tokens → mel for the new tokens only.

GIVEN the tiny artifact's flow (one thread) and inputs drawn from a seed
WHEN it runs with and without a prompt, with its own frame count, and on malformed inputs
THEN the mel has the frames it was asked for, the same inputs give the same mel and other noise another,
and every malformed input is refused by name before the encoder or the estimator runs.
(The Euler loop against v1's: test_flow_steps.py; the rows side by side: test_flow_rows.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.flow import Flow

TOKENS = 24


@pytest.fixture(scope="module")
def flow(tiny_artifact: Path) -> Flow:
    return Flow.load(Artifact.open(tiny_artifact), threads=1)


def inputs(flow: Flow, tokens: int = TOKENS, seed: int = 0, prompt: int = 0) -> dict[str, np.ndarray]:
    """Tokens, speaker and noise for the new frames drawn from `seed`; a prompt of `prompt` tokens (with
    its frames of mel and of noise) from another rng, so a prompt changes nothing else."""
    rng, prompt_rng = np.random.default_rng(seed), np.random.default_rng(seed + 1000)
    prompt_frames = flow.mel_frames(prompt)
    return {
        "tokens": rng.integers(0, 100, (1, tokens), dtype=np.int64),
        "speaker_embedding": rng.standard_normal((1, 192), dtype=np.float32),
        "prompt_tokens": prompt_rng.integers(0, 100, (1, prompt), dtype=np.int64),
        "prompt_mel": prompt_rng.standard_normal((1, prompt_frames, flow.params.n_mels), dtype=np.float32),
        "noise": np.concatenate(
            [flow.sample_noise(prompt_rng, prompt_frames), flow.sample_noise(rng, flow.mel_frames(tokens))],
            axis=2,
        ),
    }


class Calls:
    """Counts the runs of a graph (monkeypatched over its `run`)."""

    def __init__(self, run: Any) -> None:
        self.run, self.count = run, 0

    def __call__(self, **feed: np.ndarray) -> dict[str, np.ndarray]:
        self.count += 1
        return self.run(**feed)


def test_the_mel_has_the_frames_of_the_new_tokens(flow: Flow) -> None:
    mel = flow(**inputs(flow))
    assert mel.shape == (1, flow.params.n_mels, flow.mel_frames(TOKENS)) and mel.dtype == np.float32
    assert np.isfinite(mel).all()


def test_a_prompt_conditions_the_mel_but_is_not_returned(flow: Flow) -> None:
    without = inputs(flow, seed=3)
    prompted = inputs(flow, seed=3, prompt=10)
    mel = flow(**prompted)
    assert mel.shape == (1, flow.params.n_mels, flow.mel_frames(TOKENS))
    # The same tokens, speaker and noise for the new frames, now after a prompt: another mel.
    new_frames = np.s_[:, :, -flow.mel_frames(TOKENS) :]
    assert np.array_equal(prompted["noise"][new_frames], without["noise"][new_frames])
    assert not np.allclose(mel, flow(**without))


def test_a_window_may_ask_for_one_frame_more_than_its_own_tokens_make(flow: Flow) -> None:
    feed = inputs(flow)
    frames = flow.mel_frames(TOKENS) + 1
    feed["noise"] = flow.sample_noise(np.random.default_rng(1), frames)
    assert flow(**feed, frames=frames).shape == (1, flow.params.n_mels, frames)


def test_the_same_inputs_give_the_same_mel_and_other_noise_another(flow: Flow) -> None:
    feed = inputs(flow, seed=5)
    first, again = flow(**feed), flow(**feed)
    assert np.array_equal(first, again)
    other = {**feed, "noise": flow.sample_noise(np.random.default_rng(6), feed["noise"].shape[2])}
    assert not np.allclose(first, flow(**other))


def test_the_noise_is_drawn_from_the_callers_rng_alone(flow: Flow) -> None:
    one = flow.sample_noise(np.random.default_rng(9), 40)
    two = flow.sample_noise(np.random.default_rng(9), 40)
    assert one.shape == (1, flow.params.n_mels, 40) and one.dtype == np.float32
    assert np.array_equal(one, two)
    assert abs(float(one.mean())) < 0.1 and 0.9 < float(one.std()) < 1.1  # standard normal


def test_the_estimator_runs_once_per_euler_step_and_the_encoder_once(
    flow: Flow, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder, last_step = Calls(flow.encoder.run), Calls(flow.estimator.run)
    steps_before = Calls(flow.estimator.run_again_soon)
    monkeypatch.setattr(flow.encoder, "run", encoder)
    monkeypatch.setattr(flow.estimator, "run", last_step)
    monkeypatch.setattr(flow.estimator, "run_again_soon", steps_before)
    flow(**inputs(flow), steps=4)
    # The arena keeps its regions from step to step and gives back what is idle after the last.
    assert (encoder.count, steps_before.count, last_step.count) == (1, 3, 1)


def _malformed(flow: Flow) -> list[tuple[dict[str, Any], str]]:
    good = inputs(flow)
    n_mels = flow.params.n_mels
    return [
        ({"tokens": good["tokens"][0]}, "tokens must be"),
        ({"tokens": np.zeros((1, 0), np.int64)}, "tokens must be"),
        ({"tokens": np.zeros((2, TOKENS), np.int64)}, "tokens must be"),
        ({"prompt_tokens": np.zeros((1, 4), np.int64)}, "both be given or both be empty"),
        ({"prompt_mel": np.zeros((1, 0, n_mels + 1), np.float32)}, "prompt_mel must be"),
        ({"noise": good["noise"][:, :, 1:]}, "noise must be"),
        ({"steps": 0}, "steps must be a positive integer"),
    ]


def test_malformed_inputs_are_refused_before_any_graph_runs(
    flow: Flow, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder, estimator = Calls(flow.encoder.run), Calls(flow.estimator.run)
    monkeypatch.setattr(flow.encoder, "run", encoder)
    monkeypatch.setattr(flow.estimator, "run", estimator)
    for change, message in _malformed(flow):
        with pytest.raises(ValueError, match=message):
            flow(**{**inputs(flow), **change})
    assert (encoder.count, estimator.count) == (0, 0)
