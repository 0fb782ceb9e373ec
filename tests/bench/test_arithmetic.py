"""The flow's and the vocoder's arithmetic floor: multiply-adds counted from profiled graphs, over peaks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from bench.arithmetic import (
    conv_weight_dims,
    count_profile,
    floors,
    flow_floor_at,
    multiply_adds_per_second,
    node_multiply_adds,
)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "expected"),
    [
        ("MatMul", [[2, 3, 4], [4, 5]], [[2, 3, 5]], 2 * 3 * 5 * 4),
        ("DynamicQuantizeMatMul", [[7, 4], [4, 5]], [[7, 5]], 7 * 5 * 4),
        ("Gemm", [[6, 4], [4, 5]], [[6, 5]], 6 * 5 * 4),
        ("Gemm", [[4, 6], [4, 5]], [[6, 5]], 6 * 5 * 4),  # transA
        ("Conv", [[1, 4, 12], [8, 2, 3]], [[1, 8, 10]], 80 * 2 * 3),  # two groups
        ("QLinearConv", [[1, 4, 12], [], [], [8, 2, 3], [8], [8], [], []], [[1, 8, 10]], 80 * 2 * 3),
        ("ConvTranspose", [[1, 4, 10], [4, 3, 2]], [[1, 3, 20]], 40 * 3 * 2),
        # Q·Kᵀ: 5 queries × 7 keys × width 8; A·V: 5 × 7 × value width 6 (key as [B, L, D] or [B, N, L, H])
        ("MultiHeadAttention", [[1, 5, 8], [1, 7, 8], [1, 7, 6]], [[1, 5, 6]], 5 * 7 * 8 + 5 * 7 * 6),
        ("MultiHeadAttention", [[1, 5, 8], [1, 2, 7, 4], [1, 2, 7, 3]], [[1, 5, 6]], 5 * 7 * 8 + 5 * 7 * 6),
        ("Add", [[1, 4], [1, 4]], [[1, 4]], 0),
    ],
)
def test_multiply_adds_of_one_node_from_its_shapes(
    op: str, inputs: list[list[int]], outputs: list[list[int]], expected: int
) -> None:
    assert node_multiply_adds(op, inputs, outputs) == expected


def test_an_onnxruntime_profile_is_counted_per_precision(tmp_path: Path) -> None:
    """A real profile of MatMul [8, 16] × [16, 4] then Conv1d 4 → 6 channels, kernel 3, on 4 frames."""
    from function.cosyvoice.graphs import session_options

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Reshape", ["h", "shape"], ["h3"]),
            helper.make_node("Conv", ["h3", "k"], ["y"]),
        ],
        "counted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 6])],
        [
            numpy_helper.from_array(rng.standard_normal((16, 4), dtype=np.float32), "w"),
            numpy_helper.from_array(np.array([1, 4, 8], dtype=np.int64), "shape"),
            numpy_helper.from_array(rng.standard_normal((6, 4, 3), dtype=np.float32), "k"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = session_options(1, prepack=False, profile_prefix=str(tmp_path / "counted"))
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((8, 16), np.float32)})
    session.run(None, {"x": np.ones((8, 16), np.float32)})
    events = json.loads(Path(session.end_profiling()).read_text())
    per_run = 8 * 4 * 16 + 6 * 6 * 4 * 3
    assert count_profile(events) == {"fp32": 2 * per_run, "int8": 0}


def test_attention_is_counted_from_a_real_profile(tmp_path: Path) -> None:
    """onnxruntime's fused MultiHeadAttention (what the flow estimator runs) over 6 queries and 6 keys of
    width 8 in 2 heads: Q·Kᵀ and A·V, 6 × 6 × 8 each, as fp32."""
    from function.cosyvoice.graphs import session_options

    graph = helper.make_graph(
        [helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft", num_heads=2)],
        "attention",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 6, 8]) for name in ("q", "k", "v")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    options = session_options(1, prepack=False, profile_prefix=str(tmp_path / "attention"))
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {name: np.ones((1, 6, 8), np.float32) for name in ("q", "k", "v")}
    session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    assert count_profile(events) == {"fp32": 2 * 6 * 6 * 8, "int8": 0}


def test_prepacked_convolutions_are_counted_from_the_graphs_weights(tmp_path: Path) -> None:
    """A prepacked weight drops out of the profile's input shapes, so the graph's weights count: a
    statically quantised Conv1d 4 → 6, kernel 3, then a ConvTranspose 6 → 2, kernel 4, stride 2, 8 frames."""
    from export.passes.optimize import optimize_graph
    from export.passes.quantize import quantize_static_int8
    from function.cosyvoice.graphs import session_options

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "k"], ["h"], "conv", pads=[1, 1]),  # named, as exported nodes are
            helper.make_node("ConvTranspose", ["h", "t"], ["y"], "up", strides=[2]),
        ],
        "prepacked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 18])],
        [
            numpy_helper.from_array(rng.standard_normal((6, 4, 3), dtype=np.float32), "k"),
            numpy_helper.from_array(rng.standard_normal((6, 2, 4), dtype=np.float32), "t"),
        ],
    )
    fp32 = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feed = {"x": rng.standard_normal((1, 4, 8), dtype=np.float32)}
    model = optimize_graph(quantize_static_int8(fp32, [feed]))
    options = session_options(1, prepack=True, profile_prefix=str(tmp_path / "prepacked"))
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as for exported graphs
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    weights = conv_weight_dims(model)
    assert weights == {"conv": [6, 4, 3], "up": [6, 2, 4]}
    assert {node.op_type for node in model.graph.node} >= {"QLinearConv", "ConvTranspose"}
    assert count_profile(events, weights) == {"fp32": 6 * 8 * 2 * 4, "int8": 6 * 8 * 4 * 3}


def test_floor_adds_each_precision_over_its_own_peak() -> None:
    counts = {"flow": {"fp32": 2e9, "int8": 8e9}, "vocoder": {"fp32": 3e9, "int8": 0.0}}
    assert floors(counts, {"fp32": 1e9, "int8": 4e9}) == {"flow": 4.0, "vocoder": 3.0}


def test_the_flow_floor_at_fewer_steps_keeps_the_encoder_whole() -> None:
    graph_seconds = {"flow_encoder": 0.2, "flow_estimator": 0.8}
    assert flow_floor_at(10, 10, graph_seconds) == pytest.approx(1.0)
    assert flow_floor_at(5, 10, graph_seconds) == pytest.approx(0.6)  # not half: the encoder runs once


def test_the_tiny_artifacts_stages_are_counted_per_audio_second(tiny_artifact: Path) -> None:
    """fp32 graphs: no integer products; the flow's count per audio second barely depends on the length
    (its cost is per frame), so the count is of the graphs' work, not of a fixed overhead."""
    short = multiply_adds_per_second(tiny_artifact, 1, seconds=1.0)
    long = multiply_adds_per_second(tiny_artifact, 1, seconds=2.0)
    for stage in ("flow", "vocoder"):
        assert short[stage]["fp32"] > 0
        assert short[stage]["int8"] == 0
        assert long[stage]["fp32"] == pytest.approx(short[stage]["fp32"], rel=0.3)


def test_speed_table_puts_flow_and_vocoder_beside_their_arithmetic_floor() -> None:
    from bench.speed import table

    run = {
        "wall": 5.0,
        "audio_seconds": 10.0,
        "stages": {"llm": 3.0, "flow": 6.0, "vocoder": 2.0},
        "step_ms": {"64": 9.0},
    }
    ours = {
        "texts": {"ten_seconds": [run]},
        "first_chunk": {"ten_seconds": 0.5},
        "arithmetic": {"seconds": {"flow": 0.3, "vocoder": 0.1}},
    }
    upstream = {"texts": {"ten_seconds": [run]}, "first_chunk": {"ten_seconds": 2.0}, "arithmetic": None}
    rows = {
        row[0]: row[1:]
        for row in table({"upstream fp32": upstream, "ours int8": ours}, ("ten_seconds",), {}, [], 1).rows
    }
    assert rows["… flow arithmetic floor, s per audio s"][:2] == ("–", "0.30")
    assert rows["… flow ÷ its floor"][1] == "2.00×"
    assert rows["… vocoder ÷ its floor"][1] == "2.00×"
