"""The memory-bandwidth floor of one LLM decode step, measured on this machine in the same run.

A decode step is a matrix-vector product per weight matrix: it must stream every weight byte of the
step from memory once, and little else. The floor is the time onnxruntime's fastest fp32 GEMV path
(prepacked weights) takes to stream the same number of bytes, on the same threads (the least of a few
attempts a second apart, `least_of_attempts`): a chain of
1024 × 1024 MatMuls on a [1, 1024] vector, too large for any cache. The decode's own kernels (int8/int4
blocks, unpacked fp32) read the same bytes; how far above the floor they land is what the speed table
reports.

The step's bytes are those of the weight inputs of its matrix products (MatMul, Gemm, MatMulNBits,
quantised MatMuls), read from the graph and the manifest. Embedding tables are left out: a step gathers
one row of them.

A step at t cached positions also reads the cache: every layer's keys, values and position rows for those
t positions (`cache_bytes_per_position`). At the same measured bandwidth that gives a second floor, of
weights and cache, which grows with the context; the weight floor alone is the one a step cannot go below
at any length.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import LLM_CACHE_KINDS, llm_cache_input
from function.cosyvoice.graphs import session_options

MATRIX_OPS = {"MatMul", "Gemm", "FusedMatMul", "MatMulNBits", "MatMulInteger", "DynamicQuantizeMatMul"}
WIDTH = 1024  # the chain's square matrices: 4 MiB each in fp32
ATTEMPTS = 3  # measurements a floor is the least of
ATTEMPT_SPACING_SECONDS = 1.0


def decode_weight_bytes(artifact_dir: Path, graph: str = "llm_decode") -> int:
    """Bytes of the constant inputs of every matrix product in one decode step."""
    artifact = Artifact.open(artifact_dir)
    entry = artifact.graph(graph)
    external = {tensor.name: tensor.length for tensor in entry.external_tensors}
    model = onnx.load_from_string(bytes(artifact.file(entry.file)))  # external data stays unread
    inline = {init.name: _inline_bytes(init) for init in model.graph.initializer if init.name not in external}
    sizes = {**inline, **external}
    used = {name for node in model.graph.node if node.op_type in MATRIX_OPS for name in node.input}
    return sum(size for name, size in sizes.items() if name in used)


def cache_bytes_per_position(artifact_dir: Path, graph: str = "llm_decode") -> int:
    """Bytes a decode step reads per cached position: each layer's key, value and position row (the
    cache inputs' fixed dimensions, times their element size)."""
    artifact = Artifact.open(artifact_dir)
    model = onnx.load_from_string(bytes(artifact.file(artifact.graph(graph).file)))
    cache_names = {
        llm_cache_input(kind, layer) for kind in LLM_CACHE_KINDS for layer in range(len(model.graph.input))
    }
    total = 0
    for value in model.graph.input:
        if value.name in cache_names:
            tensor = value.type.tensor_type
            fixed = [dim.dim_value for dim in tensor.shape.dim if dim.HasField("dim_value")]
            itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)).itemsize
            total += int(np.prod(fixed)) * itemsize
    return total


def _inline_bytes(tensor: onnx.TensorProto) -> int:
    return int(numpy_helper.to_array(tensor).nbytes)


def gemv_chain(n_bytes: int, seed: int = 0) -> bytes:
    """A model of fp32 GEMVs whose weights hold about `n_bytes` (at least one matrix)."""
    count = max(1, round(n_bytes / (WIDTH * WIDTH * 4)))
    rng = np.random.default_rng(seed)
    nodes, weights, previous = [], [], "x"
    for index in range(count):
        # Scaled so the vector neither grows nor vanishes along the chain.
        weight = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.float32(np.sqrt(WIDTH))
        weights.append(numpy_helper.from_array(weight, f"w{index}"))
        nodes.append(helper.make_node("MatMul", [previous, f"w{index}"], [f"h{index}"]))
        previous = f"h{index}"
    graph = helper.make_graph(
        nodes,
        "gemv_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def least_of_attempts(measure: Callable[[], float], attempts: int = ATTEMPTS) -> float:
    """The least of `attempts` measurements, ATTEMPT_SPACING_SECONDS apart.

    A floor taken during a neighbour's burst is no floor: on the shared test host one process's GEMM
    peaks came out at half the others' in two of three runs. Spaced attempts give the host a few
    chances; the fastest is the one closest to what the hardware allows."""
    best = math.inf
    for attempt in range(attempts):
        if attempt:
            time.sleep(ATTEMPT_SPACING_SECONDS)
        best = min(best, measure())
    return best


def floor_seconds(n_bytes: int, threads: int, runs: int = 20, attempts: int = ATTEMPTS) -> float:
    """Seconds of a prepacked fp32 GEMV chain over `n_bytes` of weights: the median of `runs` (after 3
    warm ones), the least of `attempts` (`least_of_attempts`)."""
    session = ort.InferenceSession(
        gemv_chain(n_bytes), session_options(threads, prepack=True), providers=["CPUExecutionProvider"]
    )
    feed = {"x": np.ones((1, WIDTH), dtype=np.float32)}

    def median_run() -> float:
        times = []
        for index in range(3 + runs):
            start = time.perf_counter()
            session.run(None, feed)
            if index >= 3:
                times.append(time.perf_counter() - start)
        return statistics.median(times)

    return least_of_attempts(median_run, attempts)


def measure(artifact_dir: Path, threads: int, attempts: int = ATTEMPTS) -> dict[str, float]:
    """{"bytes", "ms", "gb_per_s", "cache_bytes_per_position"} of the decode step's floor for this
    artifact, the least of `attempts`."""
    n_bytes = decode_weight_bytes(artifact_dir)
    seconds = floor_seconds(n_bytes, threads, attempts=attempts)
    return {
        "bytes": n_bytes,
        "ms": 1000 * seconds,
        "gb_per_s": n_bytes / seconds / 1e9,
        "cache_bytes_per_position": cache_bytes_per_position(artifact_dir),
    }


def with_cache_ms(floor: dict[str, float], positions: int) -> float:
    """The floor of a step at `positions` cached positions: weights and cache at the measured bandwidth."""
    return floor["ms"] * (floor["bytes"] + positions * floor["cache_bytes_per_position"]) / floor["bytes"]


__all__ = [
    "cache_bytes_per_position",
    "decode_weight_bytes",
    "floor_seconds",
    "gemv_chain",
    "least_of_attempts",
    "measure",
    "with_cache_ms",
]
