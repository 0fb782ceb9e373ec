"""The one export path: model directory → artifact directory (graphs + one weights file + manifest)."""

from __future__ import annotations

import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import onnxruntime
import torch

from export.assets import TOKENIZER_ASSET, find_asset
from export.checkpoints import check_model_dir, load_speakers, load_state_dict
from export.config import ModelConfig, load_config
from export.optimize import LEVEL_NAME as OPTIMIZATION
from export.optimize import optimize_graph
from export.quantize import DYNAMIC_INT8
from export.writer import staging_directory, write_graphs
from function.artifact import FileEntry, GraphEntry, Manifest, sha256_of
from function.contract import (
    FLOW_ENCODER,
    FLOW_ESTIMATOR,
    FORMAT_VERSION,
    GRAPHS,
    MANIFEST_FILE,
    OPTIONAL_GRAPHS,
    GraphSpec,
    TensorSpec,
    llm_decode_spec,
)

LLM_WEIGHT_MODES = ("fp32", "int8", "int4")
FLOW_WEIGHT_MODES = ("fp32", "int8")
_ONNX_DTYPES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.FLOAT16: "float16",
}


@dataclass(frozen=True)
class ExportOptions:
    llm_weights: str = "fp32"  # weight-only quantisation of the LLM's MatMuls: fp32 | int8 | int4
    quality_report: bool = True  # measure what quantisation costs against fp32 (LLM: top-1, KL; flow: mel)
    flow_weights: str = "fp32"  # dynamic int8 quantisation of the flow graphs' MatMuls: fp32 | int8

    def to_dict(self) -> dict:
        return {"llm_weights": self.llm_weights, "flow_weights": self.flow_weights}


@dataclass
class ExportSummary:
    out_dir: Path
    graph_sizes: dict[str, int] = field(default_factory=dict)
    weights_size: int = 0
    deduplicated_bytes: int = 0
    parameter_bytes: int = 0
    seconds: float = 0.0
    quality: dict[str, dict] = field(default_factory=dict)  # per quantised part: its cost against fp32

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
        rows.append(f"  done in {self.seconds:.1f} s")
        return rows


def _progress(step: int, total: int, label: str, started: float) -> None:
    if not sys.stderr.isatty():  # a bar redrawn with \r is noise in logs and captured output
        return
    width = 24
    filled = int(width * step / total)
    bar = "#" * filled + "-" * (width - filled)
    print(
        f"\r[{bar}] {step}/{total} {label:<32} {time.monotonic() - started:6.1f} s", end="", file=sys.stderr
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


def _graph_entry(
    path: Path, spec: GraphSpec, external: bool, quantization: str, optimization: str = "none"
) -> GraphEntry:
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
        external_weights=external,
        quantization=quantization,
        optimization=optimization,
    )
    expected = sorted(spec.input_names)
    if sorted(s.name for s in entry.inputs) != expected:
        raise ValueError(
            f"exported {name} takes {[s.name for s in entry.inputs]}, the contract says {expected}"
        )
    return entry


def _conform_io_names(source: Path, target: Path, spec: GraphSpec) -> None:
    """Copy a shipped graph, renaming its inputs/outputs to the contract's names by position.

    Upstream binds campplus and the speech tokenizer by position, so the released files' own names are not
    something we can rely on; the runtime binds by name, so the names are made to match here.
    """
    model = onnx.load(str(source))
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    if len(inputs) != len(spec.inputs) or len(model.graph.output) != len(spec.outputs):
        raise ValueError(
            f"{source.name} has {len(inputs)} inputs and {len(model.graph.output)} outputs;"
            f" expected {len(spec.inputs)} and {len(spec.outputs)}"
        )
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


def export_model(
    model_dir: Path,
    out_dir: Path,
    options: ExportOptions = ExportOptions(),
    force: bool = False,
    progress: Callable[[int, int, str, float], None] = _progress,
) -> ExportSummary:
    from export.parts import flow, hift, llm  # torch-heavy; imported when an export actually runs

    if options.llm_weights not in LLM_WEIGHT_MODES:
        raise ValueError(f"--llm-weights must be one of {', '.join(LLM_WEIGHT_MODES)}")
    if options.flow_weights not in FLOW_WEIGHT_MODES:
        raise ValueError(f"--flow-weights must be one of {', '.join(FLOW_WEIGHT_MODES)}")
    started = time.monotonic()
    if out_dir.exists() and not force:
        raise FileExistsError(f"{out_dir} exists; pass --force to replace it")
    check_model_dir(model_dir)
    config: ModelConfig = load_config(model_dir)
    tokenizer_path = find_asset(TOKENIZER_ASSET, model_dir)
    summary = ExportSummary(out_dir=out_dir)
    parts = (("llm", llm, config.llm), ("flow", flow, config.flow), ("hift", hift, config.hift))
    total_steps = len(parts) * 2 + 3 + (options.llm_weights != "fp32") + (options.flow_weights != "fp32")
    step = 0
    graphs: dict[str, onnx.ModelProto] = {}
    quantization: dict[str, str] = {}
    for part_name, part, part_config in parts:
        state = load_state_dict(model_dir / f"{part_name}.pt")
        summary.parameter_bytes += sum(t.numel() * 4 for t in state.values() if t.is_floating_point())
        module = part.load_module(state, part_config)  # type: ignore[attr-defined]
        step += 1
        progress(step, total_steps, f"{part_name}.pt loaded", started)
        with torch.inference_mode(False), torch.no_grad():
            graphs.update(part.export_graphs(module, part_config))  # type: ignore[attr-defined]
        del module, state
        step += 1
        progress(step, total_steps, f"{part_name} exported", started)
    if options.llm_weights != "fp32":
        llm_names = [name for name in graphs if GRAPHS[name].role == "llm"]
        fp32 = {name: graphs[name] for name in llm_names}
        quantized = llm.quantize_graphs(fp32, options.llm_weights)
        if options.quality_report:
            summary.quality["llm"] = llm.quality_report(fp32, quantized, config.llm)
        graphs.update(quantized)
        quantization.update({name: options.llm_weights for name in llm_names})
        step += 1
        progress(step, total_steps, f"llm quantised ({options.llm_weights})", started)
    if options.flow_weights != "fp32":
        fp32 = {name: graphs[name] for name in (FLOW_ENCODER.name, FLOW_ESTIMATOR.name)}
        quantized = flow.quantize_graphs(fp32)
        if options.quality_report:
            summary.quality["flow"] = flow.quality_report(fp32, quantized, config.flow, config.params().flow)
        graphs.update(quantized)
        quantization.update(dict.fromkeys(quantized, DYNAMIC_INT8))
        step += 1
        progress(step, total_steps, "flow quantised (int8)", started)

    # The decode graph has one cache input per decoder layer, so its contract depends on the depth.
    specs = {**GRAPHS, "llm_decode": llm_decode_spec(config.llm.llm.num_blocks)}
    for name in list(graphs):
        graphs[name] = optimize_graph(graphs[name])
    step += 1
    progress(step, total_steps, "graphs optimised", started)
    with staging_directory(out_dir, force) as staging:
        store = write_graphs(staging, graphs)
        step += 1
        progress(step, total_steps, "weights written", started)
        entries = {
            name: _graph_entry(
                staging / f"{name}.onnx", specs[name], True, quantization.get(name, "fp32"), OPTIMIZATION
            )
            for name in graphs
        }
        for spec in OPTIONAL_GRAPHS:
            source = model_dir / spec.file
            if source.is_file():
                _conform_io_names(source, staging / spec.file, spec)
                entries[spec.name] = _graph_entry(staging / spec.file, spec, False, "fp32")
        shutil.copyfile(tokenizer_path, staging / TOKENIZER_ASSET)
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            source={
                "name": model_dir.resolve().name,
                "files": {
                    path.name: sha256_of(path) for path in sorted(model_dir.iterdir()) if path.is_file()
                },
            },
            params=config.params(),
            graphs=entries,
            weights=FileEntry("weights.bin", store.size, store.sha256()),  # hashed while written
            tokenizer=FileEntry(
                TOKENIZER_ASSET,
                (staging / TOKENIZER_ASSET).stat().st_size,
                sha256_of(staging / TOKENIZER_ASSET),
            ),
            speakers=load_speakers(model_dir / "spk2info.pt"),
            export_options={**options.to_dict(), **({"quality": summary.quality} if summary.quality else {})},
            versions={
                "torch": torch.__version__,
                "onnx": onnx.__version__,
                "onnxruntime": onnxruntime.__version__,
                "python": platform.python_version(),
            },
        )
        (staging / MANIFEST_FILE).write_text(manifest.dumps(), encoding="utf-8")
        step += 1
        progress(step, total_steps, "manifest written", started)
    summary.graph_sizes = {name: entry.size for name, entry in entries.items()}
    summary.weights_size = store.size
    summary.deduplicated_bytes = store.deduplicated_bytes
    summary.seconds = time.monotonic() - started
    return summary


__all__ = ["ExportOptions", "ExportSummary", "FLOW_WEIGHT_MODES", "LLM_WEIGHT_MODES", "export_model"]
