"""The flow's step count: v1's 10 by default, any count on v1's cosine grid on request.

GIVEN the tiny artifact's flow and one draw of tokens, speaker and noise
WHEN it runs at the default, at 10 steps and at fewer
THEN the default is v1's Euler loop bit for bit, fewer steps call the estimator fewer times and move the mel;
and the engine runs a request at its own `flow_steps`, else the deployment's default, else the manifest's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from function.core.options import SynthesisOptions
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.engine import Engine
from function.cosyvoice.flow import Flow, time_grid

TEXT = "Good morning to you all."
SPEAKER = "英文女"


@pytest.fixture(scope="module")
def flow(tiny_artifact: Path) -> Flow:
    return Flow.load(Artifact.open(tiny_artifact), threads=1)


def _inputs(flow: Flow, tokens: int = 30, seed: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "tokens": rng.integers(0, 100, (1, tokens), dtype=np.int64),
        "prompt_tokens": np.zeros((1, 0), dtype=np.int64),
        "prompt_mel": np.zeros((1, 0, flow.params.n_mels), np.float32),
        "speaker_embedding": rng.standard_normal((1, 192), dtype=np.float32),
        "noise": flow.sample_noise(rng, flow.mel_frames(tokens)),
    }


def _v1_euler(flow: Flow, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """v1's ConditionalCFM.solve_euler written out on its own: the grid of 10 steps as v1 builds it
    (torch.linspace in float32, then 1 - cos(t * 0.5 * pi)), t advanced by dt and dt re-derived."""
    mu, spks = flow.encode(inputs["tokens"], inputs["prompt_tokens"], 0, inputs["speaker_embedding"])
    t_span = np.linspace(0, 1, 11, dtype=np.float32)
    t_span = (1 - np.cos(t_span * np.float32(0.5) * np.float32(np.pi))).astype(np.float32)
    x = inputs["noise"].astype(np.float32)
    zeros = np.zeros_like(mu)
    t, dt = t_span[0], t_span[1] - t_span[0]
    for step in range(1, len(t_span)):
        velocity = flow.estimator.run(
            x=np.concatenate([x, x]),
            mu=np.concatenate([mu, zeros]),
            t=np.array([t, t], dtype=np.float32),
            spks=np.concatenate([spks, np.zeros_like(spks)]),
            cond=np.zeros((2, *mu.shape[1:]), dtype=np.float32),
        )["velocity"]
        x = x + dt * (np.float32(1.7) * velocity[:1] - np.float32(0.7) * velocity[1:])
        t = t + dt
        if step < len(t_span) - 1:
            dt = t_span[step + 1] - t
    return x


def test_the_default_is_v1s_ten_step_euler_loop_bit_for_bit(flow: Flow) -> None:
    inputs = _inputs(flow)
    assert flow.params.n_timesteps == 10
    default = flow(**inputs)
    assert np.array_equal(default, _v1_euler(flow, inputs))
    assert np.array_equal(flow(**inputs, steps=10), default)


def test_fewer_steps_call_the_estimator_that_often_and_move_the_mel(
    flow: Flow, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _inputs(flow)
    calls: list[float] = []
    kept: list[bool] = []
    velocity = flow._velocity

    def counted(more_steps: bool, **batch: np.ndarray) -> np.ndarray:
        calls.append(float(batch["t"][0]))
        kept.append(more_steps)
        return velocity(more_steps, **batch)

    monkeypatch.setattr(flow, "_velocity", counted)
    ten = flow(**inputs)
    assert len(calls) == 10
    assert kept == [True] * 9 + [False]  # the arena's idle regions go back after the last step only
    calls.clear()
    five = flow(**inputs, steps=5)
    np.testing.assert_allclose(calls, time_grid(5)[:-1], rtol=0, atol=1e-6)  # the times it evaluated at
    assert five.shape == ten.shape
    moved = np.linalg.norm(five - ten) / np.linalg.norm(ten)
    assert moved > 1e-3  # another solve of the same ODE: close, not the same


@pytest.mark.parametrize("steps", [1, 2, 5, 7, 10, 16])
def test_the_grid_of_n_steps_is_v1s_cosine_warp_of_n_equal_steps(steps: int) -> None:
    grid = time_grid(steps)
    expected = 1 - np.cos(np.arange(steps + 1) / steps * np.pi / 2)
    assert grid.dtype == np.float32 and grid.shape == (steps + 1,)
    assert grid[0] == 0 and grid[-1] == 1
    np.testing.assert_allclose(grid, expected, rtol=0, atol=1e-6)
    assert not grid.flags.writeable  # shared between calls: nobody may change it


@pytest.mark.parametrize("steps", [0, -3, True, 2.5, "5"])
def test_a_step_count_that_is_not_a_positive_integer_is_refused(flow: Flow, steps: object) -> None:
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        flow(**_inputs(flow, tokens=5), steps=steps)  # type: ignore[arg-type]


# --- the engine ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tiny_artifact: Path) -> Engine:
    return Engine.load(Artifact.open(tiny_artifact), threads=1)


def _with_default(engine: Engine, flow_steps: int | None) -> Engine:
    """The same loaded sessions under another deployment default."""
    return Engine(
        engine.artifact, engine.llm, engine.flow, engine.vocoder, engine.tokenizer, None, flow_steps
    )


def test_a_request_runs_its_own_steps_else_the_deployments_else_the_manifests(engine: Engine) -> None:
    assert engine.default_flow_steps == engine.flow.params.n_timesteps == 10
    fast_by_default = _with_default(engine, 5)
    for deployment, default in ((engine, 10), (fast_by_default, 5)):
        assert deployment.flow_steps_for(SynthesisOptions(text=TEXT, speaker=SPEAKER)) == default
        assert deployment.flow_steps_for(SynthesisOptions(text=TEXT, speaker=SPEAKER, flow_steps=7)) == 7


@pytest.mark.parametrize("stream", [False, True])
def test_fewer_steps_change_the_audio_not_the_tokens(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """The LLM draws from its own generator: at 5 steps the same seed speaks the same tokens, and only the
    flow's solve (and the audio after it) differs."""
    drawn: list[list[int]] = []
    calls: list[int] = []
    generate, velocity = engine.llm.generate, engine.flow._velocity
    monkeypatch.setattr(engine.llm, "generate", lambda *a: _recorded(generate(*a), drawn))
    monkeypatch.setattr(engine.flow, "_velocity", lambda more, **b: (calls.append(1), velocity(more, **b))[1])

    def run(**choice: int) -> tuple[np.ndarray, list[int], int]:
        drawn.clear()
        calls.clear()
        audio = engine.synthesize(
            SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=5, stream=stream, **choice)
        )
        return audio, [token for tokens in drawn for token in tokens], len(calls)

    default, default_tokens, default_calls = run()
    ten, _, _ = run(flow_steps=10)
    five, five_tokens, five_calls = run(flow_steps=5)
    assert np.array_equal(ten, default)
    assert five_tokens == default_tokens
    assert default_calls == 2 * five_calls  # every flow window solved in half the estimator calls
    assert five.shape == default.shape and not np.array_equal(five, default)
    deployment_fast = _with_default(engine, 5)
    assert np.array_equal(
        deployment_fast.synthesize(SynthesisOptions(text=TEXT, speaker=SPEAKER, seed=5, stream=stream)), five
    )


def _recorded(tokens: Iterator[int], into: list[list[int]]) -> Iterator[int]:
    into.append([])
    for token in tokens:
        into[-1].append(token)
        yield token


@pytest.mark.parametrize("steps", [0, -1])
def test_a_deployment_default_the_flow_cannot_run_is_refused_at_load(engine: Engine, steps: int) -> None:
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        _with_default(engine, steps)
