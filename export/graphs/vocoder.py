"""The vocoder part of an export: hift.pt → `HiFT` → the `hift_f0` and `hift_generator` graphs, and the
generator's convolutions in int8 (static quantisation, calibrated on the model's own mels)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping

import numpy as np
import onnx
import torch
from torch import nn

from export.config import HiFTConfig
from export.errors import CheckpointMismatch, OptionsError
from export.graphs.samples import Samples
from export.graphs.sessions import in_memory_graph
from export.modules.vocoder import HiFT, Snake, WeightNormed, fold_weight_norm, split_weight_norm
from export.passes.optimize import optimize_graph
from export.passes.quantize import quantize_static_int8
from export.passes.tabulate import tabulate_uint8_regions
from function.cosyvoice.contract import HIFT_F0, HIFT_GENERATOR, OPSET, GraphSpec
from function.cosyvoice.params import VocoderParams
from function.cosyvoice.vocoder import SourceState, Vocoder

# Axis labels of the contract that vary from call to call; the others (n_mels, n_bins, n_sines) are fixed.
DYNAMIC_LABELS = frozenset({"mel_len", "samples", "frames"})
# Weight scales (× 1/sqrt(fan-in)) by parameter name: the f0 head spreads over speech pitch (some frames
# under the voicing threshold), residual branches add little, and the log-magnitude head stays small, so
# random audio is neither silent nor mostly clipped.
GAINS = {"f0_predictor.classifier.": 150.0, ".convs2.": 0.3, "conv_post.": 0.5}
TRACE_FRAMES = 8


def _fan_in(owner: nn.Module, weight: torch.Tensor) -> float:
    if isinstance(owner, nn.ConvTranspose1d):  # each output sample sees in · kernel / stride weights
        return weight.shape[0] * weight.shape[2] / owner.stride[0]
    return math.prod(weight.shape[1:])


def random_state_dict(
    config: HiFTConfig, seed: int, legacy_weight_norm: bool = False
) -> dict[str, torch.Tensor]:
    """A seeded random hift.pt in upstream's key layout: weight-normed layers as (g, v), either layout.

    Weights are scaled by fan-in so activations stay near unit size through the stack (the audio is
    noise, but neither silent nor always clipped); the same seed gives the same folded weights in both
    layouts.
    """
    generator = torch.Generator().manual_seed(seed)
    model = HiFT(config)
    owners = dict(model.named_modules())
    state: dict[str, torch.Tensor] = {}
    for key, like in model.state_dict().items():
        owner_name, _, leaf = key.rpartition(".")
        owner = owners[owner_name]
        if isinstance(owner, Snake):
            state[key] = 0.5 + torch.rand(like.shape, generator=generator)
        elif leaf == "bias":
            state[key] = 0.02 * torch.randn(like.shape, generator=generator)
        else:
            gain = next((g for name, g in GAINS.items() if name in "." + key), 1.0)
            scale = gain / math.sqrt(_fan_in(owner, like))
            weight = scale * torch.randn(like.shape, generator=generator)
            if isinstance(owner, WeightNormed):
                # v is any positive per-row multiple of the weight; folding must undo it.
                v_scale = 0.5 + torch.rand(like.shape[0], generator=generator)
                for suffix, tensor in split_weight_norm(weight, v_scale, legacy_weight_norm).items():
                    state[owner_name + suffix] = tensor
            else:
                state[key] = weight
    return state


def _few(keys: list[str]) -> str:
    return str(keys[:3]) + ("..." if len(keys) > 3 else "")


def load_module(state_dict: dict[str, torch.Tensor], config: HiFTConfig) -> HiFT:
    """Fold weight norm (either layout) and load strictly; a checkpoint that does not fit says how."""
    folded = fold_weight_norm(state_dict)
    module = HiFT(config)
    expected = module.state_dict()
    missing = sorted(expected.keys() - folded.keys())
    unexpected = sorted(folded.keys() - expected.keys())
    if missing or unexpected:
        raise CheckpointMismatch(
            "hift.pt does not match the configured HiFTGenerator:"
            f" missing {_few(missing)}, unexpected {_few(unexpected)}"
        )
    for key, value in expected.items():
        if folded[key].shape != value.shape:
            raise CheckpointMismatch(
                f"hift.pt {key} has shape {tuple(folded[key].shape)},"
                f" the configuration needs {tuple(value.shape)}"
            )
    module.load_state_dict({key: value.float() for key, value in folded.items()})
    return module.eval()


def _dynamic_axes(spec: GraphSpec) -> dict[str, dict[int, str]]:
    tensors = spec.inputs + spec.outputs
    return {t.name: {i: a for i, a in enumerate(t.shape) if a in DYNAMIC_LABELS} for t in tensors}


def _export(module: nn.Module, args: tuple[torch.Tensor, ...], spec: GraphSpec) -> onnx.ModelProto:
    buffer = io.BytesIO()
    torch.onnx.export(
        module,
        args,
        buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes to file objects too
        dynamo=False,  # the TorchScript exporter: dynamic axes by name, no data-dependent control flow here
        opset_version=OPSET,
        input_names=spec.input_names,
        output_names=spec.output_names,
        dynamic_axes=_dynamic_axes(spec),
    )
    return onnx.load_from_string(buffer.getvalue())


def export_graphs(module: HiFT, config: HiFTConfig) -> dict[str, onnx.ModelProto]:
    """Both vocoder graphs as in-memory ModelProtos with their weights embedded."""
    module.eval()
    samples_per_frame = math.prod(config.upsample_rates) * config.istft_hop_len
    mel = torch.randn(1, config.in_channels, TRACE_FRAMES)
    sine_waves = torch.zeros(1, TRACE_FRAMES * samples_per_frame, config.nb_harmonics + 1)
    graphs = {
        HIFT_F0.name: _export(module.f0_predictor, (mel,), HIFT_F0),
        HIFT_GENERATOR.name: _export(module, (mel, sine_waves), HIFT_GENERATOR),
    }
    module.eval()  # the exporter can leave submodules in training mode
    return graphs


def runtime_vocoder(graphs: Mapping[str, onnx.ModelProto], params: VocoderParams, prepack: bool) -> Vocoder:
    """The runtime's Vocoder over in-memory graphs (a statically quantised generator needs `prepack`:
    QLinearConv runs markedly faster packed)."""
    return Vocoder(
        in_memory_graph(graphs[HIFT_F0.name], HIFT_F0, prepack),
        in_memory_graph(graphs[HIFT_GENERATOR.name], HIFT_GENERATOR, prepack),
        params,
    )


def _generator_feed(vocoder: Vocoder, mel: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """The generator's inputs for `mel`, its source drawn as at run time."""
    rng = np.random.default_rng(seed)
    state = SourceState.initial(vocoder.params.nb_harmonics, rng)
    return {"mel": mel, "sine_waves": vocoder.sine_waves(vocoder.f0(mel), rng, state)}


def quantize_graphs(
    graphs: dict[str, onnx.ModelProto], mode: str, samples: Samples
) -> dict[str, onnx.ModelProto]:
    """The generator with its convolutions int8 ("int8", the vocoder's one mode), activation ranges from
    `samples`' calibration mels, and each Snake before one of them read from a table
    (export.passes.tabulate). The f0 predictor stays fp32: its output decides what is voiced, and it is a
    small part of the vocoder's time."""
    if mode != "int8":
        raise OptionsError(f"the vocoder quantises to int8 only, not {mode!r}")
    vocoder = runtime_vocoder(graphs, samples.config.hift.params(), prepack=False)
    feeds = [_generator_feed(vocoder, mel, seed) for seed, mel in enumerate(samples.calibration_mels)]
    # Optimised first: the Snakes' constants are folded and the convolutions fused into QLinearConv, so
    # the regions between them are what the runtime will run.
    quantized = optimize_graph(quantize_static_int8(graphs[HIFT_GENERATOR.name], feeds))
    return {HIFT_GENERATOR.name: tabulate_uint8_regions(quantized)}


def quality_report(
    fp32_graphs: dict[str, onnx.ModelProto],
    quant_graphs: dict[str, onnx.ModelProto],
    config: HiFTConfig,
    samples: Samples,
) -> dict:
    """How far the quantised vocoder's waveform is from fp32's for a held-out mel with the same source
    draws: signal-to-noise ratio in dB and relative L2."""
    params = config.params()
    mel = samples.held_out_mel
    reference, candidate = (
        runtime_vocoder(graphs, params, prepack)(mel, np.random.default_rng(0)).astype(np.float64)
        for graphs, prepack in ((fp32_graphs, False), ({**fp32_graphs, **quant_graphs}, True))
    )
    error = np.sum((candidate - reference) ** 2)
    return {
        "frames": int(mel.shape[2]),
        "wave_snr_db": round(float(10 * np.log10(np.sum(reference**2) / error)), 1),
        "wave_relative_l2": round(float(np.sqrt(error / np.sum(reference**2))), 4),
    }


__all__ = [
    "export_graphs",
    "load_module",
    "quality_report",
    "quantize_graphs",
    "random_state_dict",
    "runtime_vocoder",
]
