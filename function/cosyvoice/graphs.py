"""onnxruntime sessions for the artifact's graphs, computing from the artifact's one weights buffer.

Every external tensor reaches its session as an OrtValue viewing weights.bin where the manifest says it
lies (`add_initializer`: onnxruntime uses the memory as given). So nothing is copied: on disk the weights
stay file-backed and shared between processes, tensors the two LLM graphs share are mapped once, and an
artifact read from S3 into memory is not duplicated (onnxruntime's own loading copies in-memory external
data). Graphs are created with prepacking off, so fp32 kernels read those views directly and a session
starts without copying its weights. The LLM's MatMulNBits graphs ("int8"/"int4") prepack, because their
kernels are far slower without it, and so does the vocoder's statically quantised generator
("int8-static": QLinearConv runs markedly faster packed); the flow's dynamically quantised graphs
("int8-dynamic") run as fast unpacked, and their sessions start sooner. `python -m bench speed` times the
stages and `python -m bench coldstart` the session creation.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from function.core.errors import ArtifactError
from function.cosyvoice.artifact import Artifact, GraphEntry
from function.cosyvoice.contract import GRAPHS, WEIGHTS_FILE, GraphSpec
from function.cosyvoice.memory import RUN_OPTIONS, STEP_RUN_OPTIONS, fix_mmap_threshold

_EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
_PREPACKED = frozenset({"int8", "int4", "int8-static"})  # schemes whose kernels need prepacked weights

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


def session_options(
    threads: int, prepack: bool, profile_prefix: str | None = None, spin_microseconds: int = 0
) -> ort.SessionOptions:
    """Options every graph's session shares; `profile_prefix` turns on onnxruntime's per-node profile
    (what bench.arithmetic counts multiply-adds from), written by `session.end_profiling()`.

    Each session owns a thread pool. By default its workers sleep as soon as they run out of work: spinning
    workers of idle sessions (the pipeline alternates between six graphs) would steal the cores from the
    one that is running. `spin_microseconds` > 0 lets the workers wait that long for the next node's work
    before sleeping, only while a run is under way, for a graph of many small nodes that a worker's
    wake-up would otherwise dominate."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_microseconds else "0")
    if spin_microseconds:
        options.add_session_config_entry("session.intra_op.spin_duration_us", str(spin_microseconds))
        options.add_session_config_entry("session.force_spinning_stop", "1")  # not between runs
    if not prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def _weight_views(artifact: Artifact, entry: GraphEntry) -> list[tuple[str, ort.OrtValue]]:
    if not entry.external_tensors:  # self-contained graph (campplus, speech tokenizer)
        return []
    weights = artifact.weights
    views = []
    for tensor in entry.external_tensors:
        dtype = np.dtype(tensor.dtype)
        array = np.frombuffer(weights, dtype, tensor.length // dtype.itemsize, tensor.offset)
        views.append((tensor.name, ort.OrtValue.ortvalue_from_numpy(array.reshape(tensor.shape))))
    return views


def _create_session(
    artifact: Artifact,
    entry: GraphEntry,
    views: list[tuple[str, ort.OrtValue]],
    threads: int | None,
    profile_prefix: str | None,
    spin_microseconds: int,
) -> ort.InferenceSession:
    fix_mmap_threshold()  # before the first session's threads allocate
    prepack = entry.quantization in _PREPACKED
    options = session_options(threads or available_cpus(), prepack, profile_prefix, spin_microseconds)
    if entry.optimization == "extended":  # optimised at export: nothing left to rewrite, skip the passes
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for name, value in views:
        options.add_initializer(name, value)
    graph = bytes(artifact.file(entry.file))
    try:
        with tempfile.TemporaryDirectory(prefix="cosyvoice-") as stand_in:
            # onnxruntime checks that a graph's external data file exists even when add_initializer supplies
            # every external tensor. An empty stand-in passes the check, and a tensor the manifest missed
            # fails loudly when onnxruntime tries to read it, instead of being read from the real file.
            (Path(stand_in) / WEIGHTS_FILE).touch()
            options.add_session_config_entry(_EXTERNAL_DATA_FOLDER, stand_in)
            return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    except _LOAD_ERRORS as exc:
        raise ArtifactError(f"graph {entry.name} could not be loaded: {exc}") from exc


class Graph:
    """One session, bound by name to its contract: inputs are passed by name and checked."""

    def __init__(
        self, session: ort.InferenceSession, spec: GraphSpec, weights: Sequence[ort.OrtValue] = ()
    ) -> None:
        names = [i.name for i in session.get_inputs()]
        if sorted(names) != sorted(spec.input_names):
            raise ArtifactError(f"graph {spec.name} takes {names}, the contract says {spec.input_names}")
        self.session = session
        self.spec = spec
        self._weights = tuple(weights)  # the session holds raw pointers into these views: keep them alive

    @classmethod
    def load(
        cls,
        artifact: Artifact,
        name: str,
        threads: int | None = None,
        spec: GraphSpec | None = None,
        profile_prefix: str | None = None,
        spin_microseconds: int = 0,
    ) -> Graph:
        """The artifact's graph `name`, bound to `spec` (default: the contract's spec of that name);
        `spin_microseconds` as in `session_options`."""
        entry = artifact.graph(name)
        views = _weight_views(artifact, entry)
        session = _create_session(artifact, entry, views, threads, profile_prefix, spin_microseconds)
        return cls(session, spec or GRAPHS[name], [value for _, value in views])

    def run(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        """The outputs by name; the session's arena gives back what the run left idle."""
        return self._run(inputs, RUN_OPTIONS)

    def run_again_soon(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        """As `run`, for a run that the same shapes follow (the flow's Euler steps but the last): the arena
        keeps its regions for it."""
        return self._run(inputs, STEP_RUN_OPTIONS)

    def _run(self, inputs: dict[str, np.ndarray], options: ort.RunOptions) -> dict[str, np.ndarray]:
        self._check_inputs(inputs)
        outputs = self.session.run(self.spec.output_names, inputs, options)
        return dict(zip(self.spec.output_names, outputs, strict=True))

    def bind(self, into: Mapping[str, np.ndarray], **inputs: np.ndarray) -> BoundRun:
        """A run over these arrays' own memory, repeatable (`BoundRun`): every output is written into its
        array in `into`, so one that is also an input is updated where it lies."""
        self._check_inputs(inputs)
        missing = set(self.spec.output_names) - set(into)
        if missing:
            raise TypeError(f"{self.spec.name}: no arrays for outputs {sorted(missing)}")
        return BoundRun(self, inputs, into)

    def _check_inputs(self, inputs: Mapping[str, np.ndarray]) -> None:
        missing = set(self.spec.input_names) - set(inputs)
        if missing:
            raise TypeError(f"{self.spec.name}: missing inputs {sorted(missing)}")


class BoundRun:
    """One graph's inputs and outputs bound to fixed arrays, run again and again without binding anew.

    Each run reads the input arrays as they are then and writes every output into its array, so a caller
    changes an input by writing into it and reads the outputs where they were bound. A decode step, the
    hottest loop, then binds nothing per run (otherwise 40-odd inputs and 29 outputs, and the outputs
    fetched), and keeps its arena between runs (`STEP_RUN_OPTIONS`)."""

    def __init__(
        self, graph: Graph, inputs: Mapping[str, np.ndarray], into: Mapping[str, np.ndarray]
    ) -> None:
        self._session = graph.session
        self._arrays = [*inputs.values(), *into.values()]  # the session reads and writes their memory
        self._binding = graph.session.io_binding()
        for name, array in inputs.items():
            _bind(self._binding.bind_input, name, array, graph.spec.name)
        for name, array in into.items():
            _bind(self._binding.bind_output, name, array, graph.spec.name)

    def run(self) -> None:
        self._session.run_with_iobinding(self._binding, STEP_RUN_OPTIONS)


def _bind(bind: Callable[..., None], name: str, array: np.ndarray, graph: str) -> None:
    """Bind `array`'s own memory (no copy) to a graph input or output."""
    if not array.flags.c_contiguous:
        raise ValueError(f"{graph}: {name} can only be bound to a C-contiguous array")
    bind(name, "cpu", 0, array.dtype, list(array.shape), array.ctypes.data)


__all__ = ["BoundRun", "Graph", "available_cpus", "session_options"]
