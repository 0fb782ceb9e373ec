"""Run onnxruntime's graph optimiser once, at export, instead of in every cold start.

onnxruntime rewrites a graph when a session is created (constant folding, attention/GELU/LayerNorm
fusions). For the flow estimator that is most of its session's creation. The portable part of that work
(`ORT_ENABLE_EXTENDED`: fusions into onnxruntime's CPU contrib ops, no CPU-specific layouts) is done here
and saved; the runtime then creates the session with optimisation off: the same speed, and the
estimator's session is created several times faster (`python -m bench coldstart` times session creation).
The result is tied to the onnxruntime version that wrote it, which the manifest records and pins.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import onnxruntime as ort

from function.cosyvoice.contract import INLINE_LIMIT

LEVEL_NAME = "extended"
PROTOBUF_LIMIT = 2**31  # a serialised ModelProto must stay below 2 GiB


def optimize_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model after onnxruntime's extended optimisations, with all its tensors in memory."""
    with tempfile.TemporaryDirectory(prefix="cosyvoice-optimize-") as tmp:
        target = Path(tmp) / "out.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(target)
        options.add_session_config_entry("session.disable_prepacking", "1")  # nothing to pack: we only save
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "out.bin")
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", str(INLINE_LIMIT)
        )
        options.log_severity_level = 3
        ort.InferenceSession(_session_source(model, Path(tmp)), options, providers=["CPUExecutionProvider"])
        return onnx.load(str(target), load_external_data=True)


def _session_source(model: onnx.ModelProto, tmp: Path) -> bytes | str:
    """The model as bytes when protobuf allows (faster than the detour through a file, notably for the
    fp32 LLM graphs), else saved with its tensors external."""
    if model.ByteSize() < PROTOBUF_LIMIT:
        return model.SerializeToString()
    staged = onnx.ModelProto()
    staged.CopyFrom(model)  # saving with external data rewrites the proto it is given
    source = tmp / "in.onnx"
    onnx.save_model(
        staged, str(source), save_as_external_data=True, location="in.bin", size_threshold=INLINE_LIMIT
    )
    return str(source)


__all__ = ["LEVEL_NAME", "optimize_graph"]
