"""A weight product whose output is only cut into parts becomes one product per part.

The flow estimator computes q, k and v with one product of the concatenated weights, then a Split; the
Split copies all three out of the product's output, and onnxruntime's attention wants them apart. One
product per part, each with its columns of the weight, gives the same values without the copies, and
an estimator call a little faster in int8 and fp32 alike (`python -m bench speed` times the flow). The
weight is sliced after quantisation, so a part shares the whole weight's scale and the int8 products
compute exactly what their slice of the fused one did (a weight quantised per part would get its own
scale, and the mel would move further from fp32: `python -m export`'s quality report measures it).

A product qualifies when it is a MatMul or a DynamicQuantizeMatMul with a constant 2-D weight (and, for
the latter, a scale and zero point per tensor or per column, and a constant bias if any), and its one
reader is a Split along the last axis whose sizes are constant or equal. Anything else stays.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from export.passes.rewrite import rebuilt

PRODUCTS = frozenset({"MatMul", "DynamicQuantizeMatMul"})
WEIGHT, SCALE, ZERO_POINT, BIAS = 1, 2, 3, 4  # input positions; DynamicQuantizeMatMul has all four


def split_products(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each qualifying product + Split (module docstring) as one product per part."""
    constants = {tensor.name: tensor for tensor in model.graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    producer = {out: node for node in model.graph.node for out in node.output}
    outputs = {out.name for out in model.graph.output}
    ranks = {
        info.name: len(info.type.tensor_type.shape.dim)
        for info in model.graph.value_info
        if info.type.tensor_type.HasField("shape")
    }
    replacements: dict[int, list[onnx.NodeProto]] = {}
    removed: set[int] = set()
    sliced: list[onnx.TensorProto] = []
    for split in model.graph.node:
        product = producer.get(split.input[0]) if split.op_type == "Split" else None
        if product is None or product.output[0] in outputs or readers[product.output[0]] != [split]:
            continue
        bounds = _part_bounds(split, product, constants, ranks.get(product.output[0]))
        if bounds is None:
            continue
        nodes, tensors = _one_product_per_part(product, split, bounds, constants)
        replacements[id(split)] = nodes
        removed.add(id(product))
        sliced.extend(tensors)
    if not replacements:
        return model
    nodes = []
    for node in model.graph.node:
        if id(node) not in removed:
            nodes.extend(replacements.get(id(node), [node]))
    return rebuilt(model, nodes, sliced)


def _part_bounds(
    split: onnx.NodeProto,
    product: onnx.NodeProto,
    constants: dict[str, onnx.TensorProto],
    rank: int | None,
) -> list[tuple[int, int]] | None:
    """The weight's column range for each of the Split's outputs; None where the pair does not qualify."""
    if product.op_type not in PRODUCTS or product.input[WEIGHT] not in constants:
        return None
    weight = constants[product.input[WEIGHT]]
    if len(weight.dims) != 2:
        return None
    columns = weight.dims[1]
    if product.op_type == "DynamicQuantizeMatMul" and not _quantisation_qualifies(
        product, constants, columns
    ):
        return None
    axis = next((a.i for a in split.attribute if a.name == "axis"), 0)
    if axis != -1 and (rank is None or axis != rank - 1):
        return None  # not the product's columns
    if len(split.input) > 1 and split.input[1]:
        if split.input[1] not in constants:
            return None
        sizes = [int(size) for size in numpy_helper.to_array(constants[split.input[1]])]
    elif columns % len(split.output) == 0:
        sizes = [columns // len(split.output)] * len(split.output)
    else:
        return None
    if sum(sizes) != columns or len(sizes) != len(split.output):
        return None
    starts = np.cumsum([0, *sizes[:-1]])
    return [(int(start), int(start) + size) for start, size in zip(starts, sizes, strict=True)]


def _quantisation_qualifies(
    product: onnx.NodeProto, constants: dict[str, onnx.TensorProto], columns: int
) -> bool:
    """Scale, zero point (and bias, if any) constant, each one value or one per column."""
    named = [
        product.input[i] for i in (SCALE, ZERO_POINT, BIAS) if i < len(product.input) and product.input[i]
    ]
    if any(name not in constants for name in named):
        return False
    sizes = [int(np.prod(constants[name].dims)) for name in named]
    return all(size in (1, columns) for size in sizes)


def _one_product_per_part(
    product: onnx.NodeProto,
    split: onnx.NodeProto,
    bounds: list[tuple[int, int]],
    constants: dict[str, onnx.TensorProto],
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    nodes, tensors = [], []
    for index, (output, (start, stop)) in enumerate(zip(split.output, bounds, strict=True)):
        inputs = list(product.input)
        for position in (WEIGHT, SCALE, ZERO_POINT, BIAS):
            if position >= len(inputs) or not inputs[position]:
                continue
            value = numpy_helper.to_array(constants[inputs[position]])
            if position != WEIGHT and value.size == 1:
                continue  # one scale or zero point for the whole weight: shared by every part
            part = value[:, start:stop] if position == WEIGHT else value.reshape(-1)[start:stop]
            name = f"{inputs[position]}_part{index}"
            tensors.append(numpy_helper.from_array(np.ascontiguousarray(part), name))
            inputs[position] = name
        nodes.append(
            helper.make_node(
                product.op_type, inputs, [output], name=f"{product.name}_part{index}", domain=product.domain
            )
        )
    return nodes, tensors


__all__ = ["split_products"]
