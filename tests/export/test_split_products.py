"""export.passes.split_products: a weight product whose only reader is a Split becomes one product per
part, with exactly the same outputs; anything else stays as it was."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export.passes.optimize import optimize_graph
from export.passes.quantize import quantize_dynamic_int8
from export.passes.split_products import split_products

DIM, PARTS = 16, (8, 8, 8)


def _product_then_split(sizes: tuple[int, ...] = PARTS, extra_reader: bool = False) -> onnx.ModelProto:
    """x [B, T, 16] @ W [16, Σsizes] → Split(-1) → q, k, v, each then read by an Add (as attention would)."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((DIM, sum(sizes))).astype(np.float32)
    names = [f"part{i}" for i in range(len(sizes))]
    nodes = [
        helper.make_node("MatMul", ["x", "weight"], ["qkv"]),
        helper.make_node("Split", ["qkv", "sizes"], names, axis=-1),
        *(helper.make_node("Add", [name, name], [f"{name}_out"]) for name in names),
    ]
    outputs = [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, None) for n in names]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["qkv"], ["also"]))
        outputs.append(helper.make_tensor_value_info("also", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes,
        "qkv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", DIM])],
        outputs,
        [
            numpy_helper.from_array(weight, "weight"),
            numpy_helper.from_array(np.array(sizes, np.int64), "sizes"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


@pytest.mark.parametrize("quantised", [False, True], ids=["fp32", "int8"])
def test_a_product_cut_by_a_split_becomes_one_product_per_part_with_the_same_values(quantised: bool) -> None:
    model = _product_then_split(sizes=(8, 4, 12))
    if quantised:  # as the export runs it: quantised, then optimised into DynamicQuantizeMatMul
        model = optimize_graph(quantize_dynamic_int8(model))
    product = "DynamicQuantizeMatMul" if quantised else "MatMul"
    assert product in _ops(model)
    before = model.SerializeToString()
    split = split_products(model)
    assert model.SerializeToString() == before  # the input is left untouched
    assert "Split" not in _ops(split) and _ops(split).count(product) == 3
    # The fused weight went; its three slices hold the same bytes.
    weights = [t for t in split.graph.initializer if len(t.dims) == 2]
    assert sorted(tuple(t.dims) for t in weights) == [(DIM, 4), (DIM, 8), (DIM, 12)]
    x = np.random.default_rng(1).standard_normal((2, 30, DIM)).astype(np.float32)
    for want, got in zip(_run(model, x), _run(split, x), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_product_with_another_reader_stays() -> None:
    model = _product_then_split(extra_reader=True)
    assert _ops(split_products(model)) == _ops(model)


def test_a_split_that_is_not_along_the_columns_stays() -> None:
    model = _product_then_split()
    split = next(node for node in model.graph.node if node.op_type == "Split")
    split.attribute[0].i = 0  # the batch axis, rank unknown: not the weight's columns
    assert _ops(split_products(model)) == _ops(model)
