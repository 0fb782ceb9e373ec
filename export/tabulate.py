"""Elementwise work between two uint8 tensors, replaced by a lookup table per channel.

In the statically quantised vocoder, the Snake activation after each residual block's first convolution
reads a uint8 tensor (the QLinearConv's output) and ends in a QuantizeLinear (the next QLinearConv's
input). In between, onnxruntime makes seven passes over the tensor in fp32 (DequantizeLinear, Mul, Sin,
Pow, Mul, Add, QuantizeLinear), and on AVX-512 cores those passes cost more than the convolutions. Each
output code depends only on the input code and the channel, so the region is a function of 256 values per
channel: the export evaluates it once at every code, and the graph reads the answer with one Cast and one
GatherElements (a [1, 128, 53k] Snake: 36 → 8.6 ms on 2 threads). The table is the region's own output,
computed by onnxruntime's own kernels, so the graph's result does not change.

A region qualifies when it starts at DequantizeLinear nodes of one uint8 tensor [1, C, T], ends at one
QuantizeLinear to uint8, holds only elementwise operators whose other inputs are constants per channel
([1, C, 1]) or scalars, and nothing else reads its intermediate tensors. Anything else is left alone: a
Snake on the residual stream (its input is fp32) keeps its passes. It runs on the optimised graph, where
constants are folded and the convolutions are QLinearConv.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

CODES = 256  # the values a uint8 tensor can hold
ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "Sin", "Cos", "Tanh", "Sigmoid", "Exp", "Neg", "Abs", "Relu"}
)
CHANNEL_AXIS = 1
GATHER_AXIS = 2  # GatherElements along the last axis: codes in the table, time steps in the indices


@dataclass(frozen=True)
class _Region:
    source: str  # the uint8 tensor the region reads, [1, C, T]
    nodes: tuple[onnx.NodeProto, ...]  # graph order, ending with the QuantizeLinear
    channels: int


class _Graph:
    """Who produces and who reads each tensor, and which tensors are constants."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        self.nodes = list(graph.node)
        self.constants: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        self.producer = {out: node for node in graph.node for out in node.output}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.outputs = {out.name for out in graph.output}
        inferred = onnx.shape_inference.infer_shapes(model)
        self.shapes = {
            info.name: [
                d.dim_value if d.HasField("dim_value") else None for d in info.type.tensor_type.shape.dim
            ]
            for info in (*inferred.graph.value_info, *inferred.graph.input)
        }

    def scalar(self, name: str) -> bool:
        return name in self.constants and self.constants[name].size == 1

    def uint8_scalars(self, node: onnx.NodeProto) -> bool:
        """A (De)QuantizeLinear with one scale and a uint8 zero point."""
        if len(node.input) < 3 or not (self.scalar(node.input[1]) and self.scalar(node.input[2])):
            return False
        return self.constants[node.input[2]].dtype == np.uint8

    def region_ending_at(self, quantize: onnx.NodeProto) -> _Region | None:
        """The qualifying region whose last node is `quantize`, if there is one."""
        walked = self._walk_back(quantize) if self.uint8_scalars(quantize) else None
        if walked is None:
            return None
        members, sources, channels = walked
        if len(sources) != 1:
            return None
        (source,) = sources
        dims = self.shapes.get(source)
        if dims is None or len(dims) != 3 or dims[0] != 1:
            return None
        count = dims[CHANNEL_AXIS]
        if count is None or channels - {count}:
            return None
        inside = set(members) | {id(quantize)}
        for node in members.values():
            if node.op_type == "DequantizeLinear":
                continue  # it may feed other readers too; it stays while they do
            for out in node.output:
                if out in self.outputs or any(id(r) not in inside for r in self.readers.get(out, [])):
                    return None
        order = tuple(node for node in self.nodes if id(node) in inside)
        return _Region(source, order, count)

    def _walk_back(
        self, quantize: onnx.NodeProto
    ) -> tuple[dict[int, onnx.NodeProto], set[str], set[int]] | None:
        """From `quantize` up to its DequantizeLinear nodes: the nodes passed, the uint8 tensors those read
        and the channel counts of the constants met; None where the way up leaves elementwise work."""
        members: dict[int, onnx.NodeProto] = {}
        sources: set[str] = set()
        channels: set[int] = set()
        pending = [quantize.input[0]]
        while pending:
            node = self.producer.get(pending.pop())
            if node is None:
                return None  # a graph input: not a function of one uint8 tensor
            if id(node) in members:
                continue
            members[id(node)] = node
            if node.op_type == "DequantizeLinear":
                if not self.uint8_scalars(node):
                    return None
                sources.add(node.input[0])
                continue
            if node.op_type not in ELEMENTWISE:
                return None
            for name in node.input:
                if name not in self.constants:
                    pending.append(name)
                elif self.constants[name].size > 1:
                    shape = self.constants[name].shape
                    if len(shape) != 3 or shape[0] != 1 or shape[2] != 1:
                        return None  # not one value per channel
                    channels.add(shape[CHANNEL_AXIS])
        return members, sources, channels


def _table(region: _Region, graph: _Graph, opset: list[onnx.OperatorSetIdProto]) -> np.ndarray:
    """The region's output at every input code, per channel: [1, C, 256] uint8."""
    used = {name for node in region.nodes for name in node.input if name in graph.constants}
    codes = np.broadcast_to(np.arange(CODES, dtype=np.uint8), (1, region.channels, CODES))
    output = region.nodes[-1].output[0]
    model = helper.make_model(
        helper.make_graph(
            list(region.nodes),
            "region",
            [helper.make_tensor_value_info(region.source, TensorProto.UINT8, list(codes.shape))],
            [helper.make_tensor_value_info(output, TensorProto.UINT8, list(codes.shape))],
            [numpy_helper.from_array(graph.constants[name], name) for name in sorted(used)],
        ),
        opset_imports=opset,
    )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the kernels as run
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {region.source: np.ascontiguousarray(codes)})[0]


def tabulate_uint8_regions(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each qualifying region (module docstring) read from a table; input untouched."""
    graph = _Graph(model)
    regions = [
        region
        for node in model.graph.node
        if node.op_type == "QuantizeLinear" and (region := graph.region_ending_at(node)) is not None
    ]
    replaced = {id(node) for region in regions for node in region.nodes if node.op_type != "DequantizeLinear"}
    lookups: dict[int, list[onnx.NodeProto]] = {}  # the region's QuantizeLinear → what takes its place
    tables = []
    for region in regions:
        output = region.nodes[-1].output[0]
        table_name, index_name = f"{output}_table", f"{output}_codes"
        tables.append(numpy_helper.from_array(_table(region, graph, list(model.opset_import)), table_name))
        lookups[id(region.nodes[-1])] = [
            helper.make_node("Cast", [region.source], [index_name], to=TensorProto.INT32),
            helper.make_node("GatherElements", [table_name, index_name], [output], axis=GATHER_AXIS),
        ]
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        nodes.extend(lookups.get(id(node), [] if id(node) in replaced else [node]))
    return _rebuilt(model, _without_dead_inputs(nodes, model.graph.output), tables)


def _without_dead_inputs(
    nodes: list[onnx.NodeProto], outputs: Sequence[onnx.ValueInfoProto]
) -> list[onnx.NodeProto]:
    """Drop the DequantizeLinear and Constant nodes whose every reader went into a table."""
    read = {name for node in nodes for name in node.input} | {out.name for out in outputs}
    return [
        node
        for node in nodes
        if node.op_type not in ("DequantizeLinear", "Constant") or any(out in read for out in node.output)
    ]


def _rebuilt(
    model: onnx.ModelProto, nodes: list[onnx.NodeProto], tables: list[onnx.TensorProto]
) -> onnx.ModelProto:
    """`model` with `nodes`, the tables added, and the constants and shapes of what was removed gone."""
    read = {name for node in nodes for name in node.input}
    produced = {out for node in nodes for out in node.output}
    orphans = {name for node in model.graph.node for name in node.input} - read
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    kept = [tensor for tensor in copy.graph.initializer if tensor.name not in orphans]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend([*kept, *tables])
    shapes = [info for info in copy.graph.value_info if info.name in produced]
    del copy.graph.value_info[:]
    copy.graph.value_info.extend(shapes)
    return copy


__all__ = ["tabulate_uint8_regions"]
