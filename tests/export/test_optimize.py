"""Graphs optimised at export compute what the exported graphs compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from export.checkpoints import load_state_dict
from export.config import load_config
from export.graphs import flow
from export.passes import optimize
from export.passes.optimize import optimize_graph
from tests.conftest import estimator_feed


def run(model_bytes: bytes, feed: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


def test_optimised_estimator_matches(tiny_model_dir: Path) -> None:
    config = load_config(tiny_model_dir).flow
    module = flow.load_module(load_state_dict(tiny_model_dir / "flow.pt"), config)
    exported = flow.export_graphs(module, config)["flow_estimator"]
    optimised = optimize_graph(exported)
    assert len(optimised.graph.node) < len(exported.graph.node)  # the optimiser did rewrite something
    feed = estimator_feed(frames=37)
    expected = run(exported.SerializeToString(), feed)
    np.testing.assert_allclose(run(optimised.SerializeToString(), feed), expected, atol=1e-4, rtol=1e-4)


def test_graphs_past_protobufs_limit_optimise_through_a_file(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graphs of 2 GiB or more cannot be handed over as bytes; the file route must give the same graph."""
    config = load_config(tiny_model_dir).flow
    module = flow.load_module(load_state_dict(tiny_model_dir / "flow.pt"), config)
    exported = flow.export_graphs(module, config)["flow_encoder"]
    before = exported.SerializeToString()
    in_memory = optimize_graph(exported)
    monkeypatch.setattr(optimize, "PROTOBUF_LIMIT", 0)
    through_file = optimize_graph(exported)
    assert exported.SerializeToString() == before  # the input is left untouched either way
    assert through_file.SerializeToString() == in_memory.SerializeToString()
