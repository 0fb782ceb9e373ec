"""The flow part of the export: random checkpoints, loading flow.pt, and the two ONNX graphs."""

from __future__ import annotations

import io

import numpy as np
import onnx
import torch

from export.config import FlowConfig
from export.errors import CheckpointMismatch, OptionsError
from export.graphs.samples import Samples
from export.graphs.sessions import runtime_flow
from export.modules.flow import FlowEncoderGraph, FlowModel
from export.passes.quantize import quantize_dynamic_int8
from function.core.options import COMPARED_FLOW_STEPS
from function.cosyvoice.contract import FLOW_ENCODER, FLOW_ESTIMATOR, OPSET, GraphSpec
from function.cosyvoice.flow import Flow

# Axis labels of the contract that vary per call; the others (n_mels, spk_dim) are fixed by the model.
DYNAMIC_AXES = frozenset({"batch", "mel_len", "token_len", "total_mel_len"})


def random_state_dict(config: FlowConfig, seed: int) -> dict[str, torch.Tensor]:
    """A flow.pt-shaped state dict with seeded weights scaled so activations stay O(1)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, like in FlowModel(config).state_dict().items():
        noise = torch.randn(like.shape, generator=generator)
        if name.endswith("pos_bias_u") or name.endswith("pos_bias_v"):
            state[name] = 0.1 * noise
        elif like.dim() == 1:  # every 1-D weight here is a norm scale; the rest are biases
            state[name] = 1.0 + 0.1 * noise if name.endswith("weight") else 0.05 * noise
        else:
            state[name] = noise / like.shape[1:].numel() ** 0.5  # fan-in scaling
    return state


def load_module(state_dict: dict[str, torch.Tensor], config: FlowConfig) -> FlowModel:
    """flow.pt → FlowModel in eval mode; a checkpoint that does not fit the config is CheckpointMismatch."""
    module = FlowModel(config)
    expected = module.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    reshaped = [
        f"{k} {tuple(state_dict[k].shape)} vs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state_dict and state_dict[k].shape != v.shape
    ]
    if missing or unexpected or reshaped:
        details = [
            f"{len(items)} {what} (first: {items[0]})"
            for what, items in (
                ("missing", missing),
                ("unexpected", unexpected),
                ("shape mismatches", reshaped),
            )
            if items
        ]
        raise CheckpointMismatch(f"flow.pt does not match cosyvoice.yaml's flow: {'; '.join(details)}")
    module.load_state_dict({k: v.float() for k, v in state_dict.items()}, strict=True)
    return module.eval()


def _export(model: torch.nn.Module, args: tuple[torch.Tensor, ...], spec: GraphSpec) -> onnx.ModelProto:
    axes = {
        tensor.name: {i: label for i, label in enumerate(tensor.shape) if label in DYNAMIC_AXES}
        for tensor in spec.inputs + spec.outputs
    }
    buffer = io.BytesIO()
    torch.onnx.export(
        model,
        args,
        buffer,  # type: ignore[arg-type]  # a file-like object is accepted
        dynamo=False,  # the TorchScript exporter: dynamic shapes through the size arithmetic
        opset_version=OPSET,
        input_names=spec.input_names,
        output_names=spec.output_names,
        dynamic_axes={name: dims for name, dims in axes.items() if dims},
        do_constant_folding=True,
    )
    return onnx.load_from_string(buffer.getvalue())


def example_encoder_inputs(config: FlowConfig) -> tuple[torch.Tensor, ...]:
    """A prompt plus a long chunk (> 40 tokens), so every branch of the length regulator is traced."""
    prompt, new = 12, 50
    generator = torch.Generator().manual_seed(0)
    return (
        torch.randint(0, config.vocab_size, (1, prompt + new), generator=generator),
        torch.tensor(prompt),
        torch.tensor(config.params().mel_frames(prompt)),
        torch.tensor(config.params().mel_frames(new)),
        torch.randn(1, config.spk_embed_dim, generator=generator),
    )


def example_estimator_inputs(
    config: FlowConfig, batch: int = 2, frames: int = 67
) -> tuple[torch.Tensor, ...]:
    n_mels = config.output_size
    generator = torch.Generator().manual_seed(0)
    return (
        torch.randn(batch, n_mels, frames, generator=generator),
        torch.randn(batch, n_mels, frames, generator=generator),
        torch.rand(batch, generator=generator),
        torch.randn(batch, n_mels, generator=generator),
        torch.randn(batch, n_mels, frames, generator=generator),
    )


def export_graphs(module: FlowModel, config: FlowConfig) -> dict[str, onnx.ModelProto]:
    """{"flow_encoder", "flow_estimator"} as in-memory ModelProtos with embedded initializers."""
    module.eval()
    graphs = {
        FLOW_ENCODER.name: _export(
            FlowEncoderGraph(module).eval(), example_encoder_inputs(config), FLOW_ENCODER
        ),
        FLOW_ESTIMATOR.name: _export(
            module.decoder.estimator, example_estimator_inputs(config), FLOW_ESTIMATOR
        ),
    }
    module.eval()  # the exporter can leave submodules in train mode
    return graphs


def quantize_graphs(
    graphs: dict[str, onnx.ModelProto], mode: str, samples: Samples | None = None
) -> dict[str, onnx.ModelProto]:
    """Both flow graphs with their weight MatMuls int8 (dynamic quantisation, see export.passes.quantize:
    nothing to calibrate, so `samples` goes unused); "int8" is the flow's one mode."""
    if mode != "int8":
        raise OptionsError(f"the flow quantises to int8 only, not {mode!r}")
    return {name: quantize_dynamic_int8(model) for name, model in graphs.items()}


def quality_report(
    fp32_graphs: dict[str, onnx.ModelProto],
    quant_graphs: dict[str, onnx.ModelProto],
    config: FlowConfig,
    samples: Samples | None = None,
    seed: int = 0,
    tokens: int = 100,
) -> dict:
    """How far the quantised flow's mel is from fp32's for the same random tokens, speaker and noise
    (all 10 steps, no prompt): relative L2 error and max abs error against fp32's peak."""
    params = config.params()
    reference_flow, candidate_flow = runtime_flow(fp32_graphs, params), runtime_flow(quant_graphs, params)
    inputs = _example(reference_flow, config, seed, tokens)
    reference, candidate = (flow(*inputs).astype(np.float64) for flow in (reference_flow, candidate_flow))
    return {
        "tokens": tokens,
        "mel_relative_l2": _relative_l2(candidate, reference),
        "mel_max_abs": round(float(np.max(np.abs(candidate - reference))), 4),
        "mel_peak": round(float(np.max(np.abs(reference))), 4),
    }


def steps_report(
    graphs: dict[str, onnx.ModelProto],
    config: FlowConfig,
    steps: tuple[int, ...] = COMPARED_FLOW_STEPS,
    seed: int = 0,
    tokens: int = 100,
) -> dict:
    """How far the mel moves when these flow graphs solve in fewer Euler steps than the model's own
    (v1's 10), for the same random tokens, speaker and noise (no prompt): relative L2 against the full
    solve, per step count. Random weights show how far the solve moves, not what a trained model loses
    by it: listen before you ship a fast tier."""
    params = config.params()
    flow = runtime_flow(graphs, params)
    inputs = _example(flow, config, seed, tokens)
    reference = flow(*inputs).astype(np.float64)
    moved = {
        f"mel_relative_l2_at_{count}_steps": _relative_l2(flow(*inputs, steps=count), reference)
        for count in steps
    }
    return {"tokens": tokens, "reference_steps": params.n_timesteps, **moved}


def _example(
    flow: Flow, config: FlowConfig, seed: int, tokens: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random speech tokens, an empty prompt, a random speaker and noise: the flow's positional inputs."""
    rng = np.random.default_rng(seed)
    speech = rng.integers(0, config.vocab_size, size=(1, tokens), dtype=np.int64)
    speaker = rng.standard_normal((1, config.spk_embed_dim), dtype=np.float32)
    noise = flow.sample_noise(rng, flow.mel_frames(tokens))
    no_prompt = (np.zeros((1, 0), dtype=np.int64), np.zeros((1, 0, flow.params.n_mels), dtype=np.float32))
    return speech, *no_prompt, speaker, noise


def _relative_l2(candidate: np.ndarray, reference: np.ndarray) -> float:
    """||candidate - reference|| / ||reference|| in float64, to four places."""
    difference = candidate.astype(np.float64) - reference
    return round(float(np.linalg.norm(difference) / np.linalg.norm(reference)), 4)


__all__ = [
    "export_graphs",
    "load_module",
    "quality_report",
    "quantize_graphs",
    "random_state_dict",
    "steps_report",
]
