"""The LLM part of the export: llm.pt → llm_prefill, llm_decode, llm_positions; optional weight quantisation.

`export_graphs` returns in-memory ModelProtos (initializers embedded); export/writer.py moves the big
tensors into weights.bin and stores tensors both graphs share (every decoder weight) once.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping
from typing import Any, cast

import numpy as np
import onnx
import torch

from export.config import LLMConfig
from export.errors import CheckpointMismatch
from export.graphs.samples import Samples
from export.graphs.sessions import in_memory_graph
from export.modules.cached_attention import CONTRIB_DOMAIN
from export.modules.llm import DecodeStep, Positions, Prefill, TransformerLM
from export.passes.quantize import quantize_matmuls
from function.cosyvoice.contract import (
    LLM_CACHE_KINDS,
    LLM_POSITIONS,
    LLM_PREFILL,
    LLM_STEP_KINDS,
    OPSET,
    llm_decode_spec,
)
from function.cosyvoice.llm import LLM
from function.cosyvoice.params import LLMParams

OUTPUT_SCALE = 8.0
# The decode graph's axes sized at run time. With the batch axis not fixed at 1, onnxruntime's optimiser
# (export.optimize) no longer folds a [1, 1, k] MatMul and its bias Add into a Gemm, nor the last residual
# Add into the final LayerNormalization: the arithmetic is the same, the logits move by float32 rounding.
DECODE_DYNAMIC_AXES = ("batch", "capacity")


def random_state_dict(config: LLMConfig, seed: int) -> dict[str, torch.Tensor]:
    """A seeded state dict in upstream's key layout: default torch init, LayerNorms jittered around 1/0,
    the output layer widened (OUTPUT_SCALE)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = TransformerLM(config)
        generator = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for name, tensor in module.named_parameters():
                if "norm" in name or ".embed.out.1." in name:  # LayerNorms: test their affine too
                    base = 1.0 if name.endswith("weight") else 0.0
                    tensor.copy_(base + 0.1 * torch.randn(tensor.shape, generator=generator))
            # Default init leaves the next-token distribution nearly flat (logit std ~0.6); a trained model's
            # is peaked. A wider output layer makes parity and quantisation numbers say something.
            module.llm_decoder.weight.mul_(OUTPUT_SCALE)
    return {key: value.detach().clone() for key, value in module.state_dict().items()}


@contextlib.contextmanager
def _on_meta_uninitialised() -> Iterator[None]:
    """Modules built on the meta device, nn.init.normal_ left out: a meta tensor has no values to draw, the
    checkpoint's replace them all, and normal_ on one (nn.Embedding's initialisation) goes through
    torch._refs, whose first call imports torch._dynamo: ~1 s of CPU in every export for nothing."""
    normal = torch.nn.init.normal_
    torch.nn.init.normal_ = lambda tensor, *args, **kwargs: tensor  # type: ignore[assignment]
    try:
        with torch.device("meta"):
            yield
    finally:
        torch.nn.init.normal_ = normal


def load_module(state_dict: Mapping[str, torch.Tensor], config: LLMConfig) -> TransformerLM:
    """Our module with the checkpoint's tensors; CheckpointMismatch names every key or shape that does
    not fit."""
    with _on_meta_uninitialised():
        module = TransformerLM(config)
    expected = {key: tuple(value.shape) for key, value in module.state_dict().items()}
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    wrong = sorted(
        f"{key} {tuple(state_dict[key].shape)} (config says {expected[key]})"
        for key in set(expected) & set(state_dict)
        if tuple(state_dict[key].shape) != expected[key]
    )
    problems = [
        f"{label}: {', '.join(items[:8])}{' …' if len(items) > 8 else ''}"
        for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", wrong))
        if items
    ]
    if problems:
        raise CheckpointMismatch("llm.pt does not match cosyvoice.yaml's llm: " + "; ".join(problems))
    module.load_state_dict({k: v.float() for k, v in state_dict.items()}, strict=True, assign=True)
    return module.eval()


def _export(
    module: torch.nn.Module,
    args: tuple,
    inputs: list[str],
    outputs: list[str],
    axes: dict[str, dict[int, str]],
) -> onnx.ModelProto:
    buffer = io.BytesIO()
    torch.onnx.export(
        module,
        args,
        # The TorchScript exporter writes to any binary file object; only the public signature is
        # narrowed to paths (dynamo's). Keeping the graph in memory spares a temporary file.
        cast(Any, buffer),
        dynamo=False,
        opset_version=OPSET,
        custom_opsets={
            CONTRIB_DOMAIN: 1
        },  # the decode's GroupQueryAttention (export.modules.cached_attention)
        do_constant_folding=True,
        input_names=inputs,
        output_names=outputs,
        dynamic_axes=axes,
    )
    module.eval()  # the exporter may leave submodules in train mode
    return onnx.load_from_string(buffer.getvalue())


def export_graphs(module: TransformerLM, config: LLMConfig) -> dict[str, onnx.ModelProto]:
    module.eval()
    heads = config.llm.attention_heads
    head_dim = config.llm.output_size // heads
    layers = config.llm.num_blocks
    prefill = _export(
        Prefill(module),
        (torch.tensor([[1, 2, 3, 4, 5]]), torch.randn(1, config.spk_embed_dim), torch.tensor([[6, 7, 8]])),
        LLM_PREFILL.input_names,
        LLM_PREFILL.output_names,
        {
            "text_tokens": {1: "text_len"},
            "speaker_embedding": {0: "n_speaker"},
            "prompt_speech_tokens": {1: "prompt_len"},
            "cache": {3: "prefix_len"},
        },
    )
    decode_spec = llm_decode_spec(layers)
    # Two rows at different positions, so the exporter keeps the batch and the lengths dynamic.
    capacity, past_len = 16, torch.tensor([11, 6])
    rows = past_len.shape[0]
    past = tuple(
        torch.randn(rows, heads, capacity, head_dim)
        if kind in LLM_STEP_KINDS
        else torch.randn(heads, head_dim, capacity)
        for _ in range(layers)
        for kind in LLM_CACHE_KINDS
    )
    decode = _export(
        DecodeStep(module),
        (torch.tensor([[9], [4]]), past_len, *past),
        decode_spec.input_names,
        decode_spec.output_names,
        {
            spec.name: {spec.shape.index(axis): axis for axis in DECODE_DYNAMIC_AXES if axis in spec.shape}
            for spec in (*decode_spec.inputs, *decode_spec.outputs)
            if any(axis in spec.shape for axis in DECODE_DYNAMIC_AXES)
        },
    )
    positions = _export(
        Positions(module),
        (torch.arange(5, 9),),
        LLM_POSITIONS.input_names,
        LLM_POSITIONS.output_names,
        {"distances": {0: "count"}, "rows": {2: "count"}},
    )
    return {LLM_PREFILL.name: prefill, decode_spec.name: decode, LLM_POSITIONS.name: positions}


def quantize_graphs(
    graphs: dict[str, onnx.ModelProto], mode: str, samples: Samples | None = None
) -> dict[str, onnx.ModelProto]:
    """Weight-only "int8" or "int4" MatMulNBits (blocks: quantize.BLOCK_SIZES) of the MatMul weights;
    weight-only quantisation calibrates nothing, so `samples` goes unused."""
    return {name: quantize_matmuls(model, mode) for name, model in graphs.items()}


def _llm(graphs: dict[str, onnx.ModelProto], config: LLMConfig, prepack: bool) -> LLM:
    decode = llm_decode_spec(config.llm.num_blocks)
    return LLM(
        in_memory_graph(graphs[LLM_PREFILL.name], LLM_PREFILL, prepack),
        in_memory_graph(graphs[decode.name], decode, prepack),
        in_memory_graph(graphs[LLM_POSITIONS.name], LLM_POSITIONS, prepack),
        LLMParams(speech_token_size=config.speech_token_size),
    )


def quality_report(
    fp32_graphs: dict[str, onnx.ModelProto],
    quant_graphs: dict[str, onnx.ModelProto],
    config: LLMConfig,
    samples: Samples | None = None,
    seed: int = 0,
    text_len: int = 16,
    steps: int = 32,
) -> dict:
    """How far the quantised graphs' next-token distribution is from fp32, teacher-forced on fp32's
    greedy continuation of a random text: top-1 agreement and mean KL(fp32 ‖ quantised) in nats."""
    rng = np.random.default_rng(seed)
    text = rng.integers(0, config.text_token_size, size=text_len)
    speaker = rng.standard_normal((1, config.spk_embed_dim)).astype(np.float32)
    prompt = np.zeros(0, dtype=np.int64)
    reference, candidate = _llm(fp32_graphs, config, prepack=False), _llm(quant_graphs, config, prepack=True)
    (ref_logp, ref_cache), (cand_logp, cand_cache) = (
        llm.start(text, speaker, prompt) for llm in (reference, candidate)
    )
    agree, divergences = [], []
    eos = config.speech_token_size
    for step in range(steps + 1):
        if step:
            token = int(np.argmax(ref_logp[:eos]))  # teacher forcing: fp32's best speech token
            ref_logp, cand_logp = reference.step(token, ref_cache), candidate.step(token, cand_cache)
        p = np.exp(ref_logp.astype(np.float64))
        divergences.append(float(np.sum(p * (ref_logp.astype(np.float64) - cand_logp.astype(np.float64)))))
        agree.append(int(np.argmax(ref_logp)) == int(np.argmax(cand_logp)))
    return {
        "positions": len(agree),
        "top1_agreement": round(float(np.mean(agree)), 4),
        "mean_kl": round(float(np.mean(divergences)), 5),
    }


__all__ = ["export_graphs", "load_module", "quality_report", "quantize_graphs", "random_state_dict"]
