"""onnxruntime sessions for the artifact's graphs, created so the weights stay where they are.

Graphs are created with prepacking off: onnxruntime then computes straight from the mapped weights file
(file-backed, shared between processes, ~10 ms to create) instead of copying 1+ GB into packed heap
buffers. The LLM's MatMulNBits graphs ("int8"/"int4") prepack, because their kernels are an order of
magnitude slower without it; the flow's dynamically quantised graphs ("int8-dynamic") measured as fast
unpacked, and their sessions start in less than half the time.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort

from function.artifact import Artifact
from function.contract import GRAPHS, WEIGHTS_FILE, GraphSpec
from function.errors import ArtifactError

_PREPACKED = frozenset({"int8", "int4"})  # quantisation schemes whose kernels need prepacked weights

# What onnxruntime raises for a graph it cannot read (bad bytes, bad model, missing external data).
_ORT_ERRORS = ort.capi.onnxruntime_pybind11_state  # type: ignore[attr-defined]
_LOAD_ERRORS = (
    _ORT_ERRORS.Fail,
    _ORT_ERRORS.InvalidProtobuf,
    _ORT_ERRORS.InvalidArgument,
    _ORT_ERRORS.NoSuchFile,
    RuntimeError,
)


def available_cpus() -> int:
    """CPUs this process may use: affinity mask, capped by a cgroup v2 quota (containers, Lambda)."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            count = min(count, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, count)


def session_options(threads: int, prepack: bool) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # Each session owns a thread pool; spinning workers of idle sessions (the pipeline alternates between
    # six graphs) would steal the cores from the one that is running.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    return options


def create_session(artifact: Artifact, name: str, threads: int | None = None) -> ort.InferenceSession:
    entry = artifact.graph(name)
    options = session_options(threads or available_cpus(), prepack=entry.quantization in _PREPACKED)
    if entry.optimization == "extended":  # optimised at export: nothing left to rewrite, skip the passes
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    providers = ["CPUExecutionProvider"]
    try:
        if artifact.root is not None:
            return ort.InferenceSession(str(artifact.root / entry.file), options, providers=providers)
        if entry.external_weights:
            weights = artifact.weights
            options.add_external_initializers_from_files_in_memory(
                [WEIGHTS_FILE], [np.frombuffer(weights, dtype=np.uint8)], [len(weights)]
            )
        return ort.InferenceSession(bytes(artifact.file(entry.file)), options, providers=providers)
    except _LOAD_ERRORS as exc:
        raise ArtifactError(f"graph {name} could not be loaded: {exc}") from exc


class Graph:
    """One session, bound by name to its contract: inputs are passed by name and checked."""

    def __init__(self, session: ort.InferenceSession, spec: GraphSpec) -> None:
        names = [i.name for i in session.get_inputs()]
        if sorted(names) != sorted(spec.input_names):
            raise ArtifactError(f"graph {spec.name} takes {names}, the contract says {spec.input_names}")
        self.session = session
        self.spec = spec

    @classmethod
    def load(cls, artifact: Artifact, name: str, threads: int | None = None) -> Graph:
        return cls(create_session(artifact, name, threads), GRAPHS[name])

    def run(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        missing = set(self.spec.input_names) - set(inputs)
        if missing:
            raise TypeError(f"{self.spec.name}: missing inputs {sorted(missing)}")
        outputs = self.session.run(self.spec.output_names, inputs)
        return dict(zip(self.spec.output_names, outputs, strict=True))


__all__ = ["Graph", "available_cpus", "create_session", "session_options"]
