"""`--flow-weights int8`: dynamic int8 MatMuls in the flow graphs, recorded per graph, run by the runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from export.passes.optimize import optimize_graph
from export.passes.quantize import DYNAMIC_INT8, quantize_dynamic_int8
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.flow import Flow
from tests.conftest import run_graph

QUANTISED_OPS = {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"}


def _two_matmuls(weight: np.ndarray) -> onnx.ModelProto:
    """y = (x @ W) @ x^T: one MatMul with a constant weight, one between activations."""
    n, k = weight.shape
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["h", "xt"], ["y"]),
        ],
        "two_matmuls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "t", n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "t", "t"])],
        [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_only_constant_weight_matmuls_are_quantised() -> None:
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((64, 64), dtype=np.float32) / 8
    model = _two_matmuls(weight)
    before = model.SerializeToString()
    quantised = optimize_graph(quantize_dynamic_int8(model))
    assert model.SerializeToString() == before  # the input is left untouched
    ops = [node.op_type for node in quantised.graph.node]
    assert QUANTISED_OPS & set(ops)
    # The activation x activation product stays fp32 (the optimiser folds its Transpose in).
    assert sum(op in ("MatMul", "FusedMatMul") for op in ops) == 1
    x = rng.standard_normal((1, 16, 64), dtype=np.float32)
    expected = run_graph(model, x)
    # 8-bit weights and activations: a per-element error of ~1 % of the output's scale.
    error = np.linalg.norm(run_graph(quantised, x) - expected) / np.linalg.norm(expected)
    assert 0 < error < 0.02


@pytest.fixture(scope="module")
def tiny_int8_artifact(quantised_artifacts: dict[str, Path]) -> Path:
    return quantised_artifacts["flow-int8"]  # --flow-weights int8


def test_manifest_records_flow_quantisation(tiny_int8_artifact: Path) -> None:
    manifest = json.loads((tiny_int8_artifact / "manifest.json").read_text())
    quantisation = {name: entry["quantization"] for name, entry in manifest["graphs"].items()}
    assert quantisation.pop("flow_encoder") == DYNAMIC_INT8
    assert quantisation.pop("flow_estimator") == DYNAMIC_INT8
    assert set(quantisation.values()) == {"fp32"}
    assert manifest["export_options"]["flow_weights"] == "int8"


def test_the_export_measures_what_flow_quantisation_costs(tiny_int8_artifact: Path) -> None:
    quality = json.loads((tiny_int8_artifact / "manifest.json").read_text())["export_options"]["quality"]
    assert set(quality) == {"flow"}  # the LLM stayed fp32: nothing to report for it
    flow = quality["flow"]
    # Same bound as the runtime check below: int8 moves the mel a little; 0 would mean nothing was
    # quantised, ~1 a broken scale or layout.
    assert 0 < flow["mel_relative_l2"] < 0.08
    assert 0 < flow["mel_max_abs"] < flow["mel_peak"]


@pytest.mark.parametrize("name", ["flow_encoder", "flow_estimator"])
def test_no_weight_matmul_left_in_fp32(tiny_int8_artifact: Path, name: str) -> None:
    model = onnx.load(str(tiny_int8_artifact / f"{name}.onnx"), load_external_data=False)
    initializers = {tensor.name for tensor in model.graph.initializer}
    ops = [node.op_type for node in model.graph.node]
    assert QUANTISED_OPS & set(ops)
    weight_matmuls = [
        node.name
        for node in model.graph.node
        if node.op_type in ("MatMul", "Gemm", "FusedMatMul") and node.input[1] in initializers
    ]
    assert weight_matmuls == []


def test_int8_flow_runs_in_the_runtime_close_to_fp32(tiny_artifact: Path, tiny_int8_artifact: Path) -> None:
    reference, quantised = (
        Flow.load(Artifact.open(path), threads=1) for path in (tiny_artifact, tiny_int8_artifact)
    )
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 100, (1, 30))
    prompt_tokens = rng.integers(0, 100, (1, 6))
    prompt_mel = rng.standard_normal((1, reference.mel_frames(6), 80), dtype=np.float32)
    inputs = {value.name: value.shape for value in reference.encoder.session.get_inputs()}
    speaker = rng.standard_normal((1, inputs["speaker_embedding"][-1]), dtype=np.float32)
    noise = reference.sample_noise(rng, prompt_mel.shape[1] + reference.mel_frames(30))
    args = (tokens, prompt_tokens, prompt_mel, speaker, noise)
    expected, got = reference(*args), quantised(*args)
    assert got.shape == expected.shape
    # Each int8 MatMul is off by ~1 % (8-bit weights and activations); through the layers and ten
    # Euler steps that compounds to ~2 % on the full-size random model. 8 % leaves room for the tiny
    # model's different statistics while a wrong scale or layout gives errors of order 100 %.
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert 0 < error < 0.08, error
