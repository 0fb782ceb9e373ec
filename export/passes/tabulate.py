"""Elementwise work that ends in a uint8 tensor, replaced by a lookup table per channel.

In the statically quantised vocoder, the Snake activation after each residual block's first convolution
reads a uint8 tensor (the QLinearConv's output) and ends in a QuantizeLinear (the next QLinearConv's
input). In between, onnxruntime makes seven passes over the tensor in fp32 (DequantizeLinear, Mul, Sin,
Pow, Mul, Add, QuantizeLinear), and on AVX-512 cores those passes cost more than the convolutions. Each
output code depends only on the input code and the channel, so the region is a function of 256 values per
channel: the export evaluates it once at every code, and the graph reads the answer with one Cast and one
GatherElements, a fraction of the seven passes' time. The table is the region's own output,
computed by onnxruntime's own kernels, so the graph's result does not change.

A region qualifies when it starts at DequantizeLinear nodes of one uint8 tensor [1, C, T], ends at one
QuantizeLinear to uint8, holds only elementwise operators whose other inputs are constants per channel
([1, C, 1]) or scalars, and nothing else reads its intermediate tensors.

The Snake before each residual block's first convolution reads the fp32 residual stream and ends in that
convolution's QuantizeLinear. Its input is not a code, but its output is one of 256 and rises with the
input (x + sin²(αx)/α has slope 1 + sin(2αx) ≥ 0): per channel, every input below some value gives code 0,
every input above another gives 255, and the codes rise in between. The export finds that stretch by
evaluating the region densely over a wide range, checks that the codes never fall and that both ends
saturate, and tabulates the region at `FINE_CODES` evenly spaced inputs across it; the graph rounds its
input to that grid (a uint16 QuantizeLinear per channel), clips and reads the table, again in a fraction
of the passes' time. Only an input within half a grid step of a code's boundary can get the neighbouring
code: a few codes in a hundred move by one, and the vocoder's waveform SNR against fp32 barely moves
(`python -m export`'s quality report gives it). A region qualifies when it holds only elementwise
operators with constants per channel or scalars, reads one fp32 tensor [1, C, T] and nothing else reads
its intermediate tensors.

Both kinds run on the optimised graph, where constants are folded and the convolutions are QLinearConv.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from export.passes.rewrite import rebuilt

CODES = 256  # the values a uint8 tensor can hold
FINE_CODES = 4096  # grid points per channel where a region reads fp32 (a table of 4 KiB per channel)
SCAN_POINTS = 1 << 16  # inputs per channel at which the export looks for an fp32 region's stretch
SCAN_REACH = 4.0  # how far the scan reaches beyond the output's range, in output ranges, on either side
ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "Sin", "Cos", "Tanh", "Sigmoid", "Exp", "Neg", "Abs", "Relu"}
)
CHANNEL_AXIS = 1
GATHER_AXIS = 2  # GatherElements along the last axis: codes in the table, time steps in the indices
CONTRIB = "com.microsoft"  # its QuantizeLinear writes uint16 at the graphs' opset 17


@dataclass(frozen=True)
class _Region:
    source: str  # the tensor the region reads, [1, C, T]: uint8 codes, or fp32 where reads_codes is False
    nodes: tuple[onnx.NodeProto, ...]  # graph order, ending with the QuantizeLinear
    channels: int
    reads_codes: bool


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
        infos = (*inferred.graph.value_info, *inferred.graph.input)
        self.shapes = {
            info.name: [
                d.dim_value if d.HasField("dim_value") else None for d in info.type.tensor_type.shape.dim
            ]
            for info in infos
        }
        self.types = {info.name: info.type.tensor_type.elem_type for info in infos}

    def scalar(self, name: str) -> bool:
        return name in self.constants and self.constants[name].size == 1

    def uint8_scalars(self, node: onnx.NodeProto) -> bool:
        """A (De)QuantizeLinear with one scale and a uint8 zero point."""
        if len(node.input) < 3 or not (self.scalar(node.input[1]) and self.scalar(node.input[2])):
            return False
        return self.constants[node.input[2]].dtype == np.uint8

    def region_ending_at(self, quantize: onnx.NodeProto) -> _Region | None:
        """The qualifying region whose last node is `quantize`, if there is one: from uint8 codes where
        there is such a region, else from one fp32 tensor."""
        if not self.uint8_scalars(quantize):
            return None
        return self._region_from_codes(quantize) or self._region_from_fp32(quantize)

    def _region_from_codes(self, quantize: onnx.NodeProto) -> _Region | None:
        walked = self._walk_back_to_codes(quantize)
        if walked is None:
            return None
        members, sources, channels = walked
        if len(sources) != 1:
            return None
        (source,) = sources
        count = self._channels_of(source, channels)
        if count is None:
            return None
        inside = set(members) | {id(quantize)}
        for node in members.values():
            if node.op_type == "DequantizeLinear":
                continue  # it may feed other readers too; it stays while they do
            if self._read_outside(node, inside):
                return None
        return _Region(source, self._in_order(inside), count, reads_codes=True)

    def _region_from_fp32(self, quantize: onnx.NodeProto) -> _Region | None:
        """Back from `quantize` through elementwise nodes, stopping at any tensor read outside the nodes
        passed: their one fp32 input, if they have one."""
        boundary: set[str] = set()
        while True:
            members, sources, channels = self._walk_back_to(quantize, boundary)
            inside = set(members) | {id(quantize)}
            leaks = {
                out for node in members.values() if self._read_outside(node, inside) for out in node.output
            }
            if not leaks:
                break
            boundary |= leaks  # read elsewhere: the region starts there, or further down
        if not members or len(sources) != 1:
            return None
        (source,) = sources
        count = self._channels_of(source, channels)
        if count is None or self.types.get(source) != TensorProto.FLOAT:
            return None
        return _Region(source, self._in_order(inside), count, reads_codes=False)

    def _channels_of(self, source: str, constant_channels: set[int]) -> int | None:
        """C for a source of shape [1, C, T] whose constants all have C channels; None for anything else."""
        dims = self.shapes.get(source)
        if dims is None or len(dims) != 3 or dims[0] != 1:
            return None
        count = dims[CHANNEL_AXIS]
        if count is None or constant_channels - {count}:
            return None
        return count

    def _read_outside(self, node: onnx.NodeProto, inside: set[int]) -> bool:
        return any(
            out in self.outputs or any(id(r) not in inside for r in self.readers.get(out, []))
            for out in node.output
        )

    def _in_order(self, inside: set[int]) -> tuple[onnx.NodeProto, ...]:
        return tuple(node for node in self.nodes if id(node) in inside)

    def _per_channel_constants(self, node: onnx.NodeProto) -> set[int] | None:
        """The channel counts of `node`'s constant inputs; None if one is neither a scalar nor [1, C, 1]."""
        channels: set[int] = set()
        for name in node.input:
            if name in self.constants and self.constants[name].size > 1:
                shape = self.constants[name].shape
                if len(shape) != 3 or shape[0] != 1 or shape[2] != 1:
                    return None  # not one value per channel
                channels.add(shape[CHANNEL_AXIS])
        return channels

    def _walk_back_to_codes(
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
            met = self._per_channel_constants(node) if node.op_type in ELEMENTWISE else None
            if met is None:
                return None
            channels |= met
            pending.extend(name for name in node.input if name not in self.constants)
        return members, sources, channels

    def _walk_back_to(
        self, quantize: onnx.NodeProto, boundary: set[str]
    ) -> tuple[dict[int, onnx.NodeProto], set[str], set[int]]:
        """From `quantize` up through elementwise nodes with per-channel constants: the nodes passed, the
        tensors where the way up stopped (at `boundary`, a graph input or other work) and the constants'
        channel counts."""
        members: dict[int, onnx.NodeProto] = {}
        sources: set[str] = set()
        channels: set[int] = set()
        pending = [quantize.input[0]]
        while pending:
            name = pending.pop()
            node = self.producer.get(name)
            met = None
            if name not in boundary and node is not None and node.op_type in ELEMENTWISE:
                met = self._per_channel_constants(node)
            if node is None or met is None:
                sources.add(name)
                continue
            if id(node) in members:
                continue
            members[id(node)] = node
            channels |= met
            pending.extend(name for name in node.input if name not in self.constants)
        return members, sources, channels


def _evaluate(
    region: _Region, graph: _Graph, opset: list[onnx.OperatorSetIdProto], inputs: np.ndarray
) -> np.ndarray:
    """The region's output codes for `inputs` [1, C, n] (its source's dtype), by onnxruntime's kernels."""
    used = {name for node in region.nodes for name in node.input if name in graph.constants}
    dtype = TensorProto.UINT8 if region.reads_codes else TensorProto.FLOAT
    output = region.nodes[-1].output[0]
    model = helper.make_model(
        helper.make_graph(
            list(region.nodes),
            "region",
            [helper.make_tensor_value_info(region.source, dtype, list(inputs.shape))],
            [helper.make_tensor_value_info(output, TensorProto.UINT8, list(inputs.shape))],
            [numpy_helper.from_array(graph.constants[name], name) for name in sorted(used)],
        ),
        opset_imports=opset,
    )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the kernels as run
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {region.source: np.ascontiguousarray(inputs)})[0]


def _code_lookup(
    region: _Region, graph: _Graph, opset: list[onnx.OperatorSetIdProto]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """A region that reads uint8 codes: its output at every input code, per channel ([1, C, 256])."""
    output = region.nodes[-1].output[0]
    codes = np.broadcast_to(np.arange(CODES, dtype=np.uint8), (1, region.channels, CODES))
    table = numpy_helper.from_array(_evaluate(region, graph, opset, codes), f"{output}_table")
    nodes = [
        helper.make_node("Cast", [region.source], [f"{output}_codes"], to=TensorProto.INT32),
        helper.make_node("GatherElements", [table.name, f"{output}_codes"], [output], axis=GATHER_AXIS),
    ]
    return nodes, [table]


def _fine_lookup(
    region: _Region, graph: _Graph, opset: list[onnx.OperatorSetIdProto]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]] | None:
    """A region that reads fp32: its output on a grid of FINE_CODES inputs per channel across the stretch
    where its codes rise (module docstring); None where it does not rise from code 0 to code 255."""
    quantize = region.nodes[-1]
    scale, zero = float(graph.constants[quantize.input[1]]), int(graph.constants[quantize.input[2]])
    low, high = scale * -zero, scale * (CODES - 1 - zero)  # the outputs that codes 0 and 255 stand for
    reach = SCAN_REACH * (high - low)
    scan = np.linspace(low - reach, high + reach, SCAN_POINTS, dtype=np.float32)
    codes = _evaluate(region, graph, opset, np.broadcast_to(scan, (1, region.channels, SCAN_POINTS)))[0]
    rising = np.all(np.diff(codes.astype(np.int16), axis=1) >= 0)
    if not (rising and np.all(codes[:, 0] == 0) and np.all(codes[:, -1] == CODES - 1)):
        return None  # beyond the scan it might not stay at 0 or 255
    start = np.minimum(scan[np.argmax(codes > 0, axis=1) - 1], 0.0)  # ≤ 0: a uint16 zero point is ≥ 0
    stop = scan[np.argmax(codes == CODES - 1, axis=1)]
    step = ((stop - start) / (FINE_CODES - 2)).astype(np.float32)
    # Grid point k sits at (k - zero)·step: point 0 at or below start, point FINE_CODES - 1 at or above stop.
    zeros = np.ceil(-start / step)
    if np.any(zeros > np.iinfo(np.uint16).max - (FINE_CODES - 1)):
        return None
    grid = (np.arange(FINE_CODES) - zeros[:, None]) * step[:, None].astype(np.float64)
    output = quantize.output[0]
    parts = ("scale", "zero", "codes", "index", "clipped", "first", "last")
    names = {part: f"{output}_grid_{part}" for part in parts}
    tensors = [
        numpy_helper.from_array(
            _evaluate(region, graph, opset, grid[None].astype(np.float32)), f"{output}_table"
        ),
        numpy_helper.from_array(step, names["scale"]),
        numpy_helper.from_array(zeros.astype(np.uint16), names["zero"]),
        numpy_helper.from_array(np.array(0, np.int32), names["first"]),
        numpy_helper.from_array(np.array(FINE_CODES - 1, np.int32), names["last"]),
    ]
    nodes = [
        helper.make_node(
            "QuantizeLinear",
            [region.source, names["scale"], names["zero"]],
            [names["codes"]],
            axis=CHANNEL_AXIS,
            domain=CONTRIB,
        ),
        helper.make_node("Cast", [names["codes"]], [names["index"]], to=TensorProto.INT32),
        helper.make_node("Clip", [names["index"], names["first"], names["last"]], [names["clipped"]]),
        helper.make_node("GatherElements", [f"{output}_table", names["clipped"]], [output], axis=GATHER_AXIS),
    ]
    return nodes, tensors


def tabulate_uint8_regions(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each qualifying region (module docstring) read from a table; input untouched."""
    graph = _Graph(model)
    opset = list(model.opset_import)
    lookups: dict[int, list[onnx.NodeProto]] = {}  # the region's QuantizeLinear → what takes its place
    replaced: set[int] = set()
    tensors: list[onnx.TensorProto] = []
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or (region := graph.region_ending_at(node)) is None:
            continue
        lookup = (_code_lookup if region.reads_codes else _fine_lookup)(region, graph, opset)
        if lookup is None:
            continue
        lookups[id(node)], made = lookup
        tensors.extend(made)
        replaced |= {id(member) for member in region.nodes if member.op_type != "DequantizeLinear"}
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        nodes.extend(lookups.get(id(node), [] if id(node) in replaced else [node]))
    if any(node.domain == CONTRIB for node in nodes) and not any(e.domain == CONTRIB for e in opset):
        opset.append(helper.make_opsetid(CONTRIB, 1))
    return rebuilt(model, _without_dead_inputs(nodes, model.graph.output), tensors, opset)


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


__all__ = ["tabulate_uint8_regions"]
