"""export.passes.tabulate: an elementwise region between two uint8 tensors becomes a table per channel,
with the same output; anything that is not such a region stays as it was."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from export.passes.tabulate import FINE_CODES, tabulate_uint8_regions

CHANNELS = 6


def _snake_between_codes(extra_outputs: tuple[str, ...] = (), fp32_input: bool = False) -> onnx.ModelProto:
    """codes [1, C, T] uint8 → DequantizeLinear → x + sin²(αx)/α → QuantizeLinear → uint8, as the int8
    vocoder has it between two QLinearConv; optionally an intermediate read outside, or an fp32 input."""
    rng = np.random.default_rng(3)
    alpha = (0.5 + rng.random((1, CHANNELS, 1))).astype(np.float32)
    nodes = [
        helper.make_node("DequantizeLinear", ["codes", "in_scale", "in_zero"], ["x"]),
        helper.make_node("Mul", ["x", "alpha"], ["ax"]),
        helper.make_node("Sin", ["ax"], ["s"]),
        helper.make_node("Pow", ["s", "two"], ["s2"]),
        helper.make_node("Mul", ["s2", "inverse_alpha"], ["bump"]),
        helper.make_node("Add", ["residual" if fp32_input else "x", "bump"], ["y"]),
        helper.make_node("QuantizeLinear", ["y", "out_scale", "out_zero"], ["out"]),
    ]
    constants = {
        "in_scale": np.float32(0.05),
        "in_zero": np.uint8(120),
        "alpha": alpha,
        "two": np.float32(2.0),
        "inverse_alpha": (1 / alpha).astype(np.float32),
        "out_scale": np.float32(0.07),
        "out_zero": np.uint8(90),
    }
    inputs = [helper.make_tensor_value_info("codes", TensorProto.UINT8, [1, CHANNELS, "t"])]
    if fp32_input:
        inputs.append(helper.make_tensor_value_info("residual", TensorProto.FLOAT, [1, CHANNELS, "t"]))
    outputs = [helper.make_tensor_value_info("out", TensorProto.UINT8, [1, CHANNELS, "t"])]
    outputs += [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, CHANNELS, "t"]) for name in extra_outputs
    ]
    graph = helper.make_graph(
        nodes,
        "snake",
        inputs,
        outputs,
        [numpy_helper.from_array(np.asarray(value), name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def test_a_snake_between_two_uint8_tensors_reads_a_table_and_gives_the_same_codes() -> None:
    model = _snake_between_codes()
    before = model.SerializeToString()
    tabulated = tabulate_uint8_regions(model)
    assert model.SerializeToString() == before  # the input is left untouched
    assert _ops(tabulated) == ["Cast", "GatherElements"]
    # Snake's constants went with its nodes; what is left is the table, one row of 256 codes per channel.
    (table,) = tabulated.graph.initializer
    assert tuple(table.dims) == (1, CHANNELS, 256) and table.data_type == TensorProto.UINT8
    every_code = np.broadcast_to(np.arange(256, dtype=np.uint8), (1, CHANNELS, 256))
    speech_like = np.random.default_rng(0).integers(0, 256, (1, CHANNELS, 1000), dtype=np.uint8)
    for codes in (np.ascontiguousarray(every_code), speech_like):
        (expected,), (got,) = (_run(m, {"codes": codes}) for m in (model, tabulated))
        np.testing.assert_array_equal(got, expected)
    assert len(np.unique(expected)) > 50  # the region is not constant: a wrong table would show


def test_a_region_that_also_reads_an_fp32_tensor_is_left_alone() -> None:
    """Snake on the residual stream: its output depends on more than the codes."""
    model = _snake_between_codes(fp32_input=True)
    assert _ops(tabulate_uint8_regions(model)) == _ops(model)


def test_a_region_whose_intermediate_is_read_elsewhere_is_left_alone() -> None:
    model = _snake_between_codes(extra_outputs=("s",))
    assert _ops(tabulate_uint8_regions(model)) == _ops(model)


def test_a_region_with_a_non_elementwise_operator_is_left_alone() -> None:
    model = _snake_between_codes()
    sin = next(node for node in model.graph.node if node.op_type == "Sin")
    sin.op_type = "Softmax"  # mixes positions: no longer a function of one code
    assert _ops(tabulate_uint8_regions(model)) == _ops(model)


def _snake_on_fp32(snake: bool = True) -> onnx.ModelProto:
    """x [1, C, T] fp32 → x + sin²(αx)/α → QuantizeLinear → uint8, with x also read outside (the residual
    stream's next Add), as the int8 vocoder has it before each residual block's first convolution;
    `snake=False` drops the `x +`, which leaves sin²(αx)/α: it rises and falls."""
    rng = np.random.default_rng(5)
    alpha = (0.3 + 2 * rng.random((1, CHANNELS, 1))).astype(np.float32)
    nodes = [
        helper.make_node("Mul", ["x", "alpha"], ["ax"]),
        helper.make_node("Sin", ["ax"], ["s"]),
        helper.make_node("Pow", ["s", "two"], ["s2"]),
        helper.make_node("Mul", ["s2", "inverse_alpha"], ["bump"]),
        helper.make_node("Add", ["x", "bump"], ["y"])
        if snake
        else helper.make_node("Mul", ["bump", "one"], ["y"]),
        helper.make_node("QuantizeLinear", ["y", "out_scale", "out_zero"], ["out"]),
        helper.make_node("Add", ["x", "x"], ["residual"]),
    ]
    constants = {
        "alpha": alpha,
        "two": np.float32(2.0),
        "one": np.float32(1.0),
        "inverse_alpha": (1 / alpha).astype(np.float32),
        "out_scale": np.float32(0.03 if snake else 0.004),
        "out_zero": np.uint8(130 if snake else 0),
    }
    graph = helper.make_graph(
        nodes,
        "snake_on_fp32",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, "t"])],
        [
            helper.make_tensor_value_info("out", TensorProto.UINT8, [1, CHANNELS, "t"]),
            helper.make_tensor_value_info("residual", TensorProto.FLOAT, [1, CHANNELS, "t"]),
        ],
        [numpy_helper.from_array(np.asarray(value), name) for name, value in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_snake_on_an_fp32_tensor_reads_a_grid_table_and_moves_few_codes_by_one() -> None:
    model = _snake_on_fp32()
    tabulated = tabulate_uint8_regions(model)
    assert sorted(_ops(tabulated)) == ["Add", "Cast", "Clip", "GatherElements", "QuantizeLinear"]
    table = next(t for t in tabulated.graph.initializer if t.name.endswith("_table"))
    assert tuple(table.dims) == (1, CHANNELS, FINE_CODES) and table.data_type == TensorProto.UINT8
    rng = np.random.default_rng(1)
    speech_like = (1.5 * rng.standard_normal((1, CHANNELS, 20_000))).astype(np.float32)
    far = np.concatenate([np.full((1, CHANNELS, 5), -1e4), np.full((1, CHANNELS, 5), 1e4)], 2).astype(
        np.float32
    )
    for x in (speech_like, far):
        (expected, residual), (got, kept) = (_run(m, {"x": x}) for m in (model, tabulated))
        np.testing.assert_array_equal(kept, residual)  # the source is still there for its other reader
        moved = got.astype(int) - expected.astype(int)
        assert np.abs(moved).max() <= 1
        assert np.mean(moved != 0) < 0.03, np.mean(moved != 0)
    np.testing.assert_array_equal(got, expected)  # beyond the stretch: 0 and 255, as the region gives
    assert set(np.unique(expected)) == {0, 255}
    assert len(np.unique(_run(model, {"x": speech_like})[0])) > 100  # most codes are used: the test bites


def test_a_region_on_fp32_whose_codes_fall_somewhere_is_left_alone() -> None:
    """sin²(αx)/α rises and falls: beyond any stretch the export scans it need not stay at 0 or 255."""
    model = _snake_on_fp32(snake=False)
    assert _ops(tabulate_uint8_regions(model)) == _ops(model)
