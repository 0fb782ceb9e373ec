"""The one export path: model directory → artifact directory (graphs + one weights file + manifest)."""

from __future__ import annotations

import itertools
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import onnxruntime
import torch

from export.assets import TOKENIZER_ASSET, find_asset
from export.checkpoints import check_model_dir, load_speakers, load_state_dict
from export.config import ModelConfig, load_config
from export.errors import ContractError, OptionsError
from export.graphs import ConfigT, ModuleT, Part, QuantizablePart
from export.graphs.samples import Samples
from export.passes.optimize import LEVEL_NAME as OPTIMIZATION
from export.passes.optimize import optimize_graph
from export.passes.quantize import DYNAMIC_INT8, STATIC_INT8
from export.passes.split_products import split_products
from export.writer import staging_directory, write_graphs
from function.cosyvoice.artifact import FileEntry, GraphEntry, Manifest, WeightSlice, sha256_of
from function.cosyvoice.contract import (
    FORMAT_VERSION,
    GRAPHS,
    MANIFEST_FILE,
    OPTIONAL_GRAPHS,
    WEIGHTS_FILE,
    GraphSpec,
    TensorSpec,
    llm_decode_spec,
)

LLM_WEIGHT_MODES = ("fp32", "int8", "int4")
FLOW_WEIGHT_MODES = ("fp32", "int8")
VOCODER_WEIGHT_MODES = ("fp32", "int8")
_ONNX_DTYPES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.FLOAT16: "float16",
}


@dataclass(frozen=True)
class ExportOptions:
    llm_weights: str = "fp32"  # weight-only quantisation of the LLM's MatMuls: fp32 | int8 | int4
    # what quantising costs against fp32 (top-1 + KL, mel, SNR); how far fewer flow steps move the mel
    quality_report: bool = True
    flow_weights: str = "fp32"  # dynamic int8 quantisation of the flow graphs' MatMuls: fp32 | int8
    vocoder_weights: str = "fp32"  # static int8 quantisation of the vocoder generator's Convs: fp32 | int8

    def to_dict(self) -> dict:
        return {
            "llm_weights": self.llm_weights,
            "flow_weights": self.flow_weights,
            "vocoder_weights": self.vocoder_weights,
        }


@dataclass
class ExportSummary:
    out_dir: Path
    graph_sizes: dict[str, int] = field(default_factory=dict)
    weights_size: int = 0
    deduplicated_bytes: int = 0
    parameter_bytes: int = 0
    seconds: float = 0.0
    quality: dict[str, dict] = field(default_factory=dict)  # per quantised part: its cost against fp32
    flow_steps: dict = field(default_factory=dict)  # how far the mel moves at fewer Euler steps than 10

    def lines(self) -> list[str]:
        rows = [f"artifact {self.out_dir}"]
        rows += [f"  {name:<24} {size / 2**20:10.2f} MiB" for name, size in self.graph_sizes.items()]
        rows.append(f"  {'weights.bin':<24} {self.weights_size / 2**20:10.2f} MiB")
        total = self.weights_size + sum(self.graph_sizes.values())
        ratio = total / self.parameter_bytes if self.parameter_bytes else float("nan")
        rows.append(f"  {'total':<24} {total / 2**20:10.2f} MiB ({ratio:.3f}x the fp32 checkpoint tensors)")
        rows.append(f"  shared tensors stored once: {self.deduplicated_bytes / 2**20:.1f} MiB saved")
        for part, report in self.quality.items():
            rows.append(f"  {part} quantisation vs fp32: " + ", ".join(f"{k}={v}" for k, v in report.items()))
        if self.flow_steps:
            rows.append(
                f"  flow at fewer Euler steps vs {self.flow_steps['reference_steps']}, same tokens and noise:"
                + " "
                + ", ".join(f"{k}={v}" for k, v in self.flow_steps.items() if k != "reference_steps")
            )
            rows.append(
                "    (random weights show how far the solve moves, not what a trained model loses by it:"
                " listen before you ship a fast tier)"
            )
        rows.append(f"  done in {self.seconds:.1f} s")
        return rows


def _progress(step: int, total: int, label: str, started: float) -> None:
    if not sys.stderr.isatty():  # a bar redrawn with \r is noise in logs and captured output
        return
    width = 24
    filled = int(width * step / total)
    bar = "#" * filled + "-" * (width - filled)
    print(
        f"\r[{bar}] {step}/{total} {label:<44} {time.monotonic() - started:6.1f} s", end="", file=sys.stderr
    )
    if step == total:
        print(file=sys.stderr)


def _tensor_specs(values: list[onnx.ValueInfoProto]) -> tuple[TensorSpec, ...]:
    specs = []
    for value in values:
        tensor_type = value.type.tensor_type
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim
        )
        specs.append(
            TensorSpec(value.name, _ONNX_DTYPES.get(tensor_type.elem_type, str(tensor_type.elem_type)), shape)
        )
    return tuple(specs)


def _external_tensors(model: onnx.ModelProto) -> tuple[WeightSlice, ...]:
    """Where each of the graph's external initializers lies in weights.bin (the writer put it there)."""
    slices = []
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = {item.key: item.value for item in tensor.external_data}
        if where["location"] != WEIGHTS_FILE:
            raise ContractError(f"initializer {tensor.name} lives in {where['location']}, not {WEIGHTS_FILE}")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).name
        slices.append(
            WeightSlice(tensor.name, dtype, tuple(tensor.dims), int(where["offset"]), int(where["length"]))
        )
    return tuple(slices)


def _graph_entry(path: Path, spec: GraphSpec, quantization: str, optimization: str = "none") -> GraphEntry:
    name = spec.name
    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    entry = GraphEntry(
        name=name,
        file=path.name,
        role=GRAPHS[name].role,
        inputs=_tensor_specs(inputs),
        outputs=_tensor_specs(list(model.graph.output)),
        size=path.stat().st_size,
        sha256=sha256_of(path),
        external_tensors=_external_tensors(model),
        quantization=quantization,
        optimization=optimization,
    )
    expected = sorted(spec.input_names)
    if sorted(s.name for s in entry.inputs) != expected:
        raise ContractError(
            f"exported {name} takes {[s.name for s in entry.inputs]}, the contract says {expected}"
        )
    return entry


def conform_io_names(source: Path, target: Path, spec: GraphSpec) -> None:
    """Copy a shipped graph, renaming its inputs/outputs to the contract's names by position.

    Upstream binds campplus and the speech tokenizer by position, so the released files' own names are not
    something we can rely on; the runtime binds by name, so the names are made to match here.
    """
    model = onnx.load(str(source))
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    # Upstream feeds exactly these inputs by position and reads output 0: a graph with more outputs is
    # used the same way (the rest are dropped here); one with other inputs or no output cannot be used.
    if len(inputs) != len(spec.inputs) or len(model.graph.output) < len(spec.outputs):
        raise ContractError(
            f"{source.name} has {len(inputs)} inputs and {len(model.graph.output)} outputs; upstream feeds"
            f" {len(spec.inputs)} inputs by position and reads its first {len(spec.outputs)} output"
        )
    del model.graph.output[len(spec.outputs) :]
    renames = {v.name: want.name for v, want in zip(inputs, spec.inputs, strict=True)}
    renames.update({v.name: want.name for v, want in zip(model.graph.output, spec.outputs, strict=True)})
    renames = {old: new for old, new in renames.items() if old != new}
    if renames:
        for value in list(inputs) + list(model.graph.output):
            value.name = renames.get(value.name, value.name)
        for node in model.graph.node:
            node.input[:] = [renames.get(name, name) for name in node.input]
            node.output[:] = [renames.get(name, name) for name in node.output]
    onnx.save_model(model, str(target))


@dataclass
class _Source:
    """What every artifact of one export run is cut from: the model directory's fp32 graphs."""

    model_dir: Path
    config: ModelConfig
    graphs: dict[str, onnx.ModelProto]
    parameter_bytes: int
    file_hashes: dict[str, str]
    instruct: bool  # an -Instruct model: instructions are applied (function.voices.openai)
    speakers: dict[str, list[float]]  # spk2info.pt's voices
    samples: Samples  # what static quantisation calibrates on, made from these graphs on first use


def is_instruct(model_dir: Path, instruct: bool | None = None) -> bool:
    """Whether `model_dir` holds an -Instruct model: `instruct` when given, else upstream v1's rule,
    "-Instruct" anywhere in the path as given (so a Hugging Face cache snapshot,
    .../models--FunAudioLLM--CosyVoice-300M-Instruct/snapshots/<sha>, counts; a renamed --local-dir
    needs --instruct)."""
    return instruct if instruct is not None else "-Instruct" in os.fspath(model_dir)


def export_artifacts(
    model_dir: Path,
    targets: Mapping[Path, ExportOptions],
    force: bool = False,
    progress: Callable[[int, int, str, float], None] = _progress,
    instruct: bool | None = None,
) -> list[ExportSummary]:
    """Several artifacts (e.g. fp32, int8, int4) from one pass through torch.

    The torch export is most of an export's time and the same for every variant; each artifact then
    quantises, optimises and writes its own copy of the fp32 graphs, which are left untouched.
    `instruct` says whether the model is an -Instruct one (None: `is_instruct`'s rule on the path).
    """
    for options in targets.values():
        if options.llm_weights not in LLM_WEIGHT_MODES:
            raise OptionsError(f"--llm-weights must be one of {', '.join(LLM_WEIGHT_MODES)}")
        if options.flow_weights not in FLOW_WEIGHT_MODES:
            raise OptionsError(f"--flow-weights must be one of {', '.join(FLOW_WEIGHT_MODES)}")
        if options.vocoder_weights not in VOCODER_WEIGHT_MODES:
            raise OptionsError(f"--vocoder-weights must be one of {', '.join(VOCODER_WEIGHT_MODES)}")
    for out_dir in targets:
        if out_dir.exists() and not force:
            raise FileExistsError(f"{out_dir} exists; pass --force to replace it")
    started = time.monotonic()
    total_steps = _TORCH_STEPS + sum(_artifact_steps(options) for options in targets.values())
    steps = itertools.count(1)

    def advance(label: str) -> None:
        progress(next(steps), total_steps, label, started)

    source = _export_fp32(model_dir, is_instruct(model_dir, instruct), advance)
    summaries = []
    for out_dir, options in targets.items():
        summary = _write_artifact(source, out_dir, options, force, advance)
        summary.seconds = time.monotonic() - started
        summaries.append(summary)
    return summaries


_TORCH_STEPS = 6  # each part: checkpoint loaded, graphs exported


def _artifact_steps(options: ExportOptions) -> int:
    quantised = (options.llm_weights, options.flow_weights, options.vocoder_weights)
    return 3 + sum(mode != "fp32" for mode in quantised)


def _export_fp32(model_dir: Path, instruct: bool, advance: Callable[[str], None]) -> _Source:
    from export.graphs import flow, llm, vocoder  # torch-heavy; imported when an export actually runs

    check_model_dir(model_dir)
    config = load_config(model_dir)
    find_asset(TOKENIZER_ASSET, model_dir)  # fail before the slow part, not after it
    graphs: dict[str, onnx.ModelProto] = {}
    parameter_bytes = 0
    parameter_bytes += _export_part("llm", llm, config.llm, model_dir, graphs, advance)
    parameter_bytes += _export_part("flow", flow, config.flow, model_dir, graphs, advance)
    parameter_bytes += _export_part("hift", vocoder, config.hift, model_dir, graphs, advance)
    file_hashes = {path.name: sha256_of(path) for path in sorted(model_dir.iterdir()) if path.is_file()}
    speakers = load_speakers(model_dir / "spk2info.pt")
    samples = Samples(graphs, config, list(speakers.values()))
    return _Source(model_dir, config, graphs, parameter_bytes, file_hashes, instruct, speakers, samples)


def _export_part(
    name: str,
    part: Part[ConfigT, ModuleT],
    config: ConfigT,
    model_dir: Path,
    graphs: dict[str, onnx.ModelProto],
    advance: Callable[[str], None],
) -> int:
    """Load `name`.pt into the part's module and add its graphs; returns the checkpoint's fp32 bytes."""
    state = load_state_dict(model_dir / f"{name}.pt")
    parameter_bytes = sum(t.numel() * 4 for t in state.values() if t.is_floating_point())
    module = part.load_module(state, config)
    advance(f"{name}.pt loaded")
    with torch.inference_mode(False), torch.no_grad():
        graphs.update(part.export_graphs(module, config))
    del module, state
    advance(f"{name} exported")
    return parameter_bytes


@dataclass
class _Quantized:
    """One artifact's graphs on their way to the writer: a quantised part's copies replace its fp32 ones."""

    graphs: dict[str, onnx.ModelProto]
    quality: dict[str, dict] | None  # part → what quantising cost against fp32; None: not measured
    samples: Samples
    schemes: dict[str, str] = field(default_factory=dict)  # graph → the manifest's name for its scheme

    def add(
        self, name: str, part: QuantizablePart[ConfigT, ModuleT], config: ConfigT, mode: str, scheme: str
    ) -> bool:
        """Quantise part `name` to `mode` (nothing for fp32); True when it did."""
        if mode == "fp32":
            return False
        fp32 = {graph: model for graph, model in self.graphs.items() if GRAPHS[graph].role == name}
        quantized = part.quantize_graphs(fp32, mode, self.samples)
        if self.quality is not None:
            self.quality[name] = part.quality_report(fp32, quantized, config, self.samples)
        self.graphs.update(quantized)
        self.schemes.update(dict.fromkeys(quantized, scheme))
        return True


def _write_artifact(
    source: _Source, out_dir: Path, options: ExportOptions, force: bool, advance: Callable[[str], None]
) -> ExportSummary:
    from export.graphs import flow, llm, vocoder

    config, model_dir = source.config, source.model_dir
    summary = ExportSummary(out_dir=out_dir, parameter_bytes=source.parameter_bytes)
    # Quantising and optimising make copies: the source stays fp32.
    quality = summary.quality if options.quality_report else None
    variant = _Quantized(dict(source.graphs), quality, source.samples)
    if variant.add("llm", llm, config.llm, options.llm_weights, options.llm_weights):
        advance(f"{out_dir.name}: llm quantised ({options.llm_weights})")
    if variant.add("flow", flow, config.flow, options.flow_weights, DYNAMIC_INT8):
        advance(f"{out_dir.name}: flow quantised ({options.flow_weights})")
    if variant.add("vocoder", vocoder, config.hift, options.vocoder_weights, STATIC_INT8):
        advance(f"{out_dir.name}: vocoder quantised ({options.vocoder_weights})")
    if options.quality_report:  # on the flow graphs this artifact ships, quantised or not
        shipped_flow = {name: graph for name, graph in variant.graphs.items() if GRAPHS[name].role == "flow"}
        summary.flow_steps = flow.steps_report(shipped_flow, config.flow)

    # The decode graph has one cache input per decoder layer, so its contract depends on the depth.
    specs = {**GRAPHS, "llm_decode": llm_decode_spec(config.llm.llm.num_blocks)}
    graphs = {name: split_products(optimize_graph(graph)) for name, graph in variant.graphs.items()}
    advance(f"{out_dir.name}: graphs optimised")
    with staging_directory(out_dir, force) as staging:
        store = write_graphs(staging, graphs)  # moves the tensors of these (optimised) copies out
        advance(f"{out_dir.name}: weights written")
        entries = {
            name: _graph_entry(
                staging / f"{name}.onnx", specs[name], variant.schemes.get(name, "fp32"), OPTIMIZATION
            )
            for name in graphs
        }
        for spec in OPTIONAL_GRAPHS:
            shipped = model_dir / spec.file
            if shipped.is_file():
                conform_io_names(shipped, staging / spec.file, spec)
                entries[spec.name] = _graph_entry(staging / spec.file, spec, "fp32")
        shutil.copyfile(find_asset(TOKENIZER_ASSET, model_dir), staging / TOKENIZER_ASSET)
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            source={"name": model_dir.name, "instruct": source.instruct, "files": source.file_hashes},
            params=config.params(),
            graphs=entries,
            weights=FileEntry(WEIGHTS_FILE, store.size, store.sha256()),  # hashed while written
            tokenizer=FileEntry(
                TOKENIZER_ASSET,
                (staging / TOKENIZER_ASSET).stat().st_size,
                sha256_of(staging / TOKENIZER_ASSET),
            ),
            speakers=source.speakers,
            export_options={
                **options.to_dict(),
                **({"quality": summary.quality} if summary.quality else {}),
                **({"flow_steps": summary.flow_steps} if summary.flow_steps else {}),
            },
            versions={
                "torch": torch.__version__,
                "onnx": onnx.__version__,
                "onnxruntime": onnxruntime.__version__,
                "python": platform.python_version(),
            },
        )
        (staging / MANIFEST_FILE).write_text(manifest.dumps(), encoding="utf-8")
        advance(f"{out_dir.name}: manifest written")
    summary.graph_sizes = {name: entry.size for name, entry in entries.items()}
    summary.weights_size = store.size
    summary.deduplicated_bytes = store.deduplicated_bytes
    return summary


__all__ = [
    "ExportOptions",
    "ExportSummary",
    "FLOW_WEIGHT_MODES",
    "LLM_WEIGHT_MODES",
    "VOCODER_WEIGHT_MODES",
    "export_artifacts",
    "conform_io_names",
    "is_instruct",
]
