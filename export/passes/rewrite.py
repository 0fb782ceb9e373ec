"""A graph with some of its nodes replaced: what export.passes.tabulate and export.passes.split_products
both build."""

from __future__ import annotations

from collections.abc import Sequence

import onnx


def rebuilt(
    model: onnx.ModelProto,
    nodes: list[onnx.NodeProto],
    added: Sequence[onnx.TensorProto],
    opset: Sequence[onnx.OperatorSetIdProto] | None = None,
) -> onnx.ModelProto:
    """A copy of `model` with `nodes` in place of its own and the `added` constants; the constants that only
    removed nodes read and the shapes of tensors no node produces any more are gone. `opset`, when given,
    replaces the model's operator set imports."""
    read = {name for node in nodes for name in node.input}
    produced = {out for node in nodes for out in node.output}
    orphans = {name for node in model.graph.node for name in node.input} - read
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    if opset is not None:
        del copy.opset_import[:]
        copy.opset_import.extend(opset)
    kept = [tensor for tensor in copy.graph.initializer if tensor.name not in orphans]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend([*kept, *added])
    shapes = [info for info in copy.graph.value_info if info.name in produced]
    del copy.graph.value_info[:]
    copy.graph.value_info.extend(shapes)
    return copy


__all__ = ["rebuilt"]
