"""The runtime's graph wrapper over an in-memory ModelProto, for measuring a graph during the export."""

from __future__ import annotations

import onnx
import onnxruntime as ort

from function.cosyvoice.contract import GraphSpec
from function.cosyvoice.graphs import Graph, session_options


def in_memory_graph(model: onnx.ModelProto, spec: GraphSpec, prepack: bool, threads: int = 2) -> Graph:
    """A session on `model` (weights embedded, as exported), bound to its contract like the runtime's."""
    session = ort.InferenceSession(
        model.SerializeToString(), session_options(threads, prepack), providers=["CPUExecutionProvider"]
    )
    return Graph(session, spec)


__all__ = ["in_memory_graph"]
