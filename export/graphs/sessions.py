"""The runtime's objects over in-memory ModelProtos, for measuring graphs during the export."""

from __future__ import annotations

from collections.abc import Mapping

import onnx
import onnxruntime as ort

from function.cosyvoice.contract import FLOW_ENCODER, FLOW_ESTIMATOR, GraphSpec
from function.cosyvoice.flow import Flow
from function.cosyvoice.graphs import Graph, session_options
from function.cosyvoice.params import FlowParams


def in_memory_graph(model: onnx.ModelProto, spec: GraphSpec, prepack: bool, threads: int = 2) -> Graph:
    """A session on `model` (weights embedded, as exported), bound to its contract like the runtime's."""
    session = ort.InferenceSession(
        model.SerializeToString(), session_options(threads, prepack), providers=["CPUExecutionProvider"]
    )
    return Graph(session, spec)


def runtime_flow(graphs: Mapping[str, onnx.ModelProto], params: FlowParams) -> Flow:
    """The runtime's Flow over in-memory flow graphs."""
    # Unprepacked, as the runtime runs both the fp32 and the dynamically quantised flow graphs.
    encoder, estimator = (
        in_memory_graph(graphs[s.name], s, prepack=False) for s in (FLOW_ENCODER, FLOW_ESTIMATOR)
    )
    return Flow(encoder, estimator, params)


__all__ = ["in_memory_graph", "runtime_flow"]
