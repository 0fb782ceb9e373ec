"""function.cosyvoice.flow: the guidance batch's two rows side by side give the velocity of one call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.flow import Flow


def _mel(flow: Flow, tokens: int = 12, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 100, (1, tokens), dtype=np.int64)
    empty = np.zeros((1, 0), dtype=np.int64)
    noise = flow.sample_noise(rng, flow.mel_frames(tokens))
    embedding = rng.standard_normal((1, 192), dtype=np.float32)
    return flow(ids, empty, np.zeros((1, 0, flow.params.n_mels), np.float32), embedding, noise)


def test_two_threads_put_the_rows_side_by_side_with_the_same_mel(tiny_artifact: Path) -> None:
    artifact = Artifact.open(tiny_artifact)
    side_by_side = Flow.load(artifact, threads=2)
    one_call = Flow.load(artifact, threads=1)
    assert side_by_side.rows_side_by_side and not one_call.rows_side_by_side
    np.testing.assert_allclose(_mel(side_by_side), _mel(one_call), rtol=0, atol=1e-5)


def test_an_error_in_the_second_row_reaches_the_caller(
    tiny_artifact: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = Flow.load(Artifact.open(tiny_artifact), threads=2)
    run = flow.estimator.run

    def second_row_fails(**inputs: np.ndarray) -> dict[str, np.ndarray]:
        if not inputs["mu"].any():  # the unconditioned row: mu zeroed
            raise RuntimeError("row 1 failed")
        return run(**inputs)

    monkeypatch.setattr(flow.estimator, "run", second_row_fails)
    with pytest.raises(RuntimeError, match="row 1 failed"):
        _mel(flow)
