"""The arithmetic floor of the flow and the vocoder, measured on this machine in the same run.

Both stages are bound by arithmetic: their floor is their multiply-adds per second of audio over the
rate this CPU's onnxruntime GEMM reaches at the precision each product runs in. The multiply-adds are
counted from the graphs as they run: every graph of the stage runs once on one segment's audio with
onnxruntime's profiler on, which records each node's operator and its input and output shapes; matrix
products, convolutions and attention's two products (Q·Kᵀ and weights·V, in the flow estimator's fused
MultiHeadAttention) are counted from those shapes (a convolution's weight from the graph file, as a
prepacked one is missing from the profile; everything else, elementwise work, softmax and the Snake's
`Sin` included, is left out, so the floor is a lower bound). Attention grows with the square of a
segment's frames, so its count per audio second grows with the segment: bench.speed counts on the length
of the utterance it times. Products whose kernels are integer (the flow's dynamically quantised MatMuls,
the vocoder's QLinearConv) are counted against the int8 GEMM's rate, the rest against fp32's:
onnxruntime's CPU attention has no integer or bf16 kernel, and its fp16 one computes at the fp32 rate on a
CPU without AVX512-FP16 (measured here: 75 against 80 G multiply-adds/s, 860 frames, one thread). The
rates: a prepacked [M, K] × [K, N] MatMul in fp32 and a u8 × s8 MatMulInteger, on the stage's threads,
best of a few runs in each of a few attempts a second apart (bench.floor.least_of_attempts).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from bench.floor import ATTEMPTS, least_of_attempts
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import FLOW_ENCODER, FLOW_ESTIMATOR, HIFT_F0, HIFT_GENERATOR
from function.cosyvoice.flow import Flow
from function.cosyvoice.graphs import Graph, session_options
from function.cosyvoice.vocoder import Vocoder

SECONDS = 4.0  # the segment's default length: long enough that per-call overheads are small
SETTLE_SECONDS = 1.0  # before the peaks: other sessions' spinning worker threads go idle
STAGES = {"flow": (FLOW_ENCODER.name, FLOW_ESTIMATOR.name), "vocoder": (HIFT_F0.name, HIFT_GENERATOR.name)}
MATRIX = frozenset({"MatMul", "FusedMatMul", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulNBits", "Gemm"})
CONV = frozenset({"Conv", "FusedConv", "ConvInteger", "QLinearConv"})
ATTENTION = frozenset({"MultiHeadAttention"})  # query, key, value as [B, S, D] or [B, N, S, H]
INTEGER = frozenset({"MatMulInteger", "DynamicQuantizeMatMul", "MatMulNBits", "ConvInteger", "QLinearConv"})
CONV_WEIGHT = {"QLinearConv": 3}  # the weight's input index where it is not the second (x, its scale, zero)
SPEAKER_DIM = 192  # the x-vector every v1 speaker embedding is
GEMM = (512, 1024, 1024)  # M, K, N of the peak-rate products: past every cache, as the stages' are


def node_multiply_adds(
    op: str, inputs: list[list[int]], outputs: list[list[int]], weight: list[int] | None = None
) -> int:
    """Multiply-adds of one node from its shapes; 0 for operators that are not products. `weight`: a
    convolution's weight dims, where the shapes lack them."""
    if not inputs or not outputs:
        return 0
    out = math.prod(outputs[0])
    if op == "Gemm":  # A is [M, K] or its transpose: K is what A holds beyond the output's rows
        return out * math.prod(inputs[0]) // outputs[0][0]
    if op in MATRIX:
        return out * inputs[0][-1]
    if op in ATTENTION:  # every query row against every key: Q·Kᵀ over the query's width, then A·V
        keys = inputs[1][-2] if len(inputs[1]) == 4 else inputs[1][1]
        return (math.prod(inputs[0]) + out) * keys
    if op in CONV:  # weight [C_out, C_in / groups, *kernel]: each output sums over all but its first axis
        return out * math.prod((weight or inputs[CONV_WEIGHT.get(op, 1)])[1:])
    if op == "ConvTranspose":  # weight [C_in, C_out / groups, *kernel]: each input is spread over the rest
        return math.prod(inputs[0]) * math.prod((weight or inputs[1])[1:])
    return 0


def count_profile(
    events: Iterable[Mapping[str, Any]], conv_weights: Mapping[str, list[int]] | None = None
) -> dict[str, int]:
    """{"fp32": n, "int8": n}: multiply-adds of the node runs in an onnxruntime profile.

    conv_weights: {node name: weight dims} of the convolutions, from the graph (`conv_weight_dims`): a
    prepacked weight is missing from the profile's input shapes."""
    counts = {"fp32": 0, "int8": 0}
    for event in events:
        args = event.get("args", {})
        if event.get("cat") != "Node" or "op_name" not in args or not event["name"].endswith("_kernel_time"):
            continue
        op = args["op_name"]
        inputs = [_dims(shape) for shape in args.get("input_type_shape", [])]
        outputs = [_dims(shape) for shape in args.get("output_type_shape", [])]
        weight = (conv_weights or {}).get(event["name"].removesuffix("_kernel_time"))
        counts["int8" if op in INTEGER else "fp32"] += node_multiply_adds(op, inputs, outputs, weight)
    return counts


def conv_weight_dims(model: onnx.ModelProto) -> dict[str, list[int]]:
    """{node name: weight dims} of `model`'s convolutions (transposed too) whose weight is an initializer."""
    initializers = {tensor.name: list(tensor.dims) for tensor in model.graph.initializer}
    weights = {
        node.name: node.input[CONV_WEIGHT.get(node.op_type, 1)]
        for node in model.graph.node
        if node.op_type in CONV | {"ConvTranspose"}
    }
    return {node: initializers[weight] for node, weight in weights.items() if weight in initializers}


def _dims(shape: Mapping[str, list[int]]) -> list[int]:
    (dims,) = shape.values()  # {"float": [1, 80, 200]}: one element type, its dimensions
    return [int(d) for d in dims]


def multiply_adds_per_second(artifact_dir: Path, threads: int, seconds: float = SECONDS) -> dict[str, Any]:
    """{stage: {"fp32": n, "int8": n}} per second of audio, counted from one profiled run of each stage."""
    return _by_stage(graph_multiply_adds_per_second(artifact_dir, threads, seconds))


def _by_stage(by_graph: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per-graph counts summed into their stages'."""
    counts: dict[str, dict[str, float]] = {}
    for stage, names in STAGES.items():
        total: dict[str, float] = defaultdict(float)
        for name in names:
            for precision, n in by_graph[name].items():
                total[precision] += n
        counts[stage] = dict(total)
    return counts


def graph_multiply_adds_per_second(
    artifact_dir: Path, threads: int, seconds: float = SECONDS
) -> dict[str, dict[str, float]]:
    """{graph: {"fp32": n, "int8": n}} per second of audio for each graph of the flow and the vocoder, the
    estimator's at the artifact's own Euler steps, counted from one profiled run of each stage."""
    artifact = Artifact.open(artifact_dir)
    params = artifact.manifest.params
    n_tokens = max(1, round(seconds * params.flow.input_frame_rate))
    audio_seconds = n_tokens / params.flow.input_frame_rate
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="arithmetic-") as folder:
        graphs = {
            name: Graph.load(artifact, name, threads, profile_prefix=str(Path(folder) / name))
            for names in STAGES.values()
            for name in names
        }
        flow = Flow(graphs[FLOW_ENCODER.name], graphs[FLOW_ESTIMATOR.name], params.flow)
        vocoder = Vocoder(graphs[HIFT_F0.name], graphs[HIFT_GENERATOR.name], params.vocoder)
        tokens = rng.integers(0, params.llm.speech_token_size, (1, n_tokens))
        speaker = np.zeros((1, SPEAKER_DIM), np.float32)
        no_prompt = np.zeros((1, 0), np.int64), np.zeros((1, 0, params.flow.n_mels), np.float32)
        mel = flow(tokens, *no_prompt, speaker, flow.sample_noise(rng, flow.mel_frames(n_tokens)))
        vocoder(mel, rng)
        counts = {}
        for name, graph in graphs.items():
            profile = Path(graph.session.end_profiling())
            model = onnx.load_from_string(bytes(artifact.file(artifact.graph(name).file)))
            events = json.loads(profile.read_text())
            counts[name] = {
                precision: n / audio_seconds
                for precision, n in count_profile(events, conv_weight_dims(model)).items()
            }
    return counts


def _timed_best(session: ort.InferenceSession, feed: dict[str, np.ndarray], runs: int = 20) -> float:
    session.run(None, feed)
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        best = min(best, time.perf_counter() - start)
    return best


def gemm_model(precision: str) -> bytes:
    """An [M, K] × [K, N] product with a constant right side: fp32 MatMul, or u8 × s8 MatMulInteger."""
    m, k, n = GEMM
    rng = np.random.default_rng(0)
    if precision == "fp32":
        weight = numpy_helper.from_array(rng.standard_normal((k, n), dtype=np.float32), "b")
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        a_type, y_type = TensorProto.FLOAT, TensorProto.FLOAT
    else:
        weight = numpy_helper.from_array(rng.integers(-127, 128, (k, n), dtype=np.int8), "b")
        node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
        a_type, y_type = TensorProto.UINT8, TensorProto.INT32
    graph = helper.make_graph(
        [node],
        f"gemm_{precision}",
        [helper.make_tensor_value_info("a", a_type, [m, k])],
        [helper.make_tensor_value_info("y", y_type, [m, n])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def gemm_peak(precision: str, threads: int, attempts: int = ATTEMPTS) -> float:
    """Multiply-adds per second of onnxruntime's prepacked GEMM at `precision` on `threads`, the best of
    `attempts`."""
    m, k, n = GEMM
    session = ort.InferenceSession(
        gemm_model(precision), session_options(threads, prepack=True), providers=["CPUExecutionProvider"]
    )
    a = np.ones((m, k), np.float32) if precision == "fp32" else np.full((m, k), 3, np.uint8)
    return m * k * n / least_of_attempts(lambda: _timed_best(session, {"a": a}), attempts)


def floors(counts: Mapping[str, Mapping[str, float]], peaks: Mapping[str, float]) -> dict[str, float]:
    """{stage: seconds per audio second} that the stage's multiply-adds need at the measured peaks."""
    return {stage: sum(n / peaks[precision] for precision, n in by.items()) for stage, by in counts.items()}


def measure(
    artifact_dir: Path, threads: int, seconds: float = SECONDS, attempts: int = ATTEMPTS
) -> dict[str, Any]:
    """Multiply-adds per audio second of a `seconds`-long segment, the GEMM peaks (each the best of
    `attempts`) and the floors, for bench.speed's table."""
    by_graph = graph_multiply_adds_per_second(artifact_dir, threads, seconds)
    counts = _by_stage(by_graph)
    # The stages' sessions keep their worker threads spinning for a while after a run; measured at once,
    # the peak shared the cores with them (one run's fp32 peak came out at 37 G/s against 97 G/s in the
    # next process). Let them park first.
    time.sleep(SETTLE_SECONDS)
    peaks = {precision: gemm_peak(precision, threads, attempts) for precision in ("fp32", "int8")}
    return {
        "multiply_adds": counts,
        "peaks": peaks,
        "seconds": floors(counts, peaks),
        "graph_seconds": floors(by_graph, peaks),
    }


def flow_floor_at(steps: int, reference_steps: int, graph_seconds: Mapping[str, float]) -> float:
    """The flow's arithmetic floor, seconds per audio second, at `steps` Euler steps, from the per-graph
    floors measured at `reference_steps`: the encoder runs once whatever the steps, the estimator once a
    step."""
    estimator = graph_seconds[FLOW_ESTIMATOR.name] * steps / reference_steps
    return graph_seconds[FLOW_ENCODER.name] + estimator


__all__ = [
    "count_profile",
    "floors",
    "flow_floor_at",
    "graph_multiply_adds_per_second",
    "gemm_peak",
    "measure",
    "multiply_adds_per_second",
    "node_multiply_adds",
]
