"""The upstream reference: CosyVoice's own v1 classes (`cosyvoice-minicpmo` wheel), built from our configs.

One torch-only home for what the parity tests (tests/parity) and the full-size check (`python -m
bench verify`) compare against, and for what the baseline backend (bench.upstream) imports.

The wheel is installed --no-deps. Its v1 classes need only torch, einops, omegaconf, conformer, diffusers
and scipy, but some of the modules they live beside import heavy or GPU-only packages at import time
(transformers for the v2 LLM, lightning for a logger, torchaudio and TensorRT helpers). Those imports are
satisfied here with inert stand-ins *that the v1 classes never call*, so the code compared against is
upstream's own. Importing this module installs them (that is its purpose), so import it before any
`cosyvoice` or `matcha` module.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import math
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import numpy as np
import torch


def stub(name: str, **attrs: object) -> None:
    """Register an inert module `name` (with `attrs`) unless a real or stand-in one is already imported."""
    if name not in sys.modules:
        module = types.ModuleType(name)
        # A spec lets importlib.util.find_spec (diffusers probes "transformers" with it) see the stub;
        # no distribution metadata backs it, so diffusers still reports the package as absent.
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        module.__dict__.update(attrs)
        sys.modules[name] = module


def _unavailable(*args: object, **kwargs: object) -> None:
    raise RuntimeError("not available in the reference environment")


def install() -> None:
    """Stand in for the heavy neighbours of the v1 classes (done once, on import)."""
    stub("transformers", Qwen2ForCausalLM=object)  # CosyVoice2's LLM only
    stub("lightning")
    stub("lightning.pytorch")
    stub("lightning.pytorch.utilities", rank_zero_only=lambda fn: fn)  # matcha's logger decorator
    # cosyvoice.utils.file_utils imports torchaudio and calls logging.basicConfig at import.
    stub(
        "cosyvoice.utils.file_utils",
        logging=logging,
        convert_onnx_to_trt=_unavailable,
        export_cosyvoice2_vllm=_unavailable,
    )
    # matcha.utils/__init__ imports hydra/rich/lightning helpers; the v1 classes use only its pylogger.
    if "matcha.utils" not in sys.modules:
        spec = importlib.util.find_spec("matcha")
        if spec is None or spec.origin is None:
            raise ImportError("cosyvoice-minicpmo is not installed (make setup installs it --no-deps)")
        package = types.ModuleType("matcha.utils")
        package.__path__ = [str(Path(spec.origin).parent / "utils")]
        sys.modules["matcha.utils"] = package
        matcha: Any = importlib.import_module("matcha")
        matcha.utils = package  # attribute lookups (HyperPyYAML's !name:) see it


install()

if TYPE_CHECKING:
    from cosyvoice.flow.flow import MaskedDiffWithXvec
    from cosyvoice.hifigan.generator import HiFTGenerator
    from cosyvoice.llm.llm import TransformerLM

    from export.config import EncoderConfig, FlowConfig, HiFTConfig, LLMConfig

# The builders import upstream's classes when called: bench.upstream imports this module for its
# stand-ins alone, inside a timed import phase that must not pay for classes it does not use.


def build_encoder(config: EncoderConfig) -> torch.nn.Module:
    """Upstream's Conformer/Transformer encoder as HyperPyYAML builds it from a cosyvoice.yaml node."""
    from cosyvoice.transformer.encoder import ConformerEncoder, TransformerEncoder

    shared = dict(
        input_size=config.input_size,
        output_size=config.output_size,
        attention_heads=config.attention_heads,
        linear_units=config.linear_units,
        num_blocks=config.num_blocks,
        dropout_rate=0.1,  # inactive in eval(); the values are the release's
        positional_dropout_rate=0.1,
        attention_dropout_rate=0.0,
        input_layer=config.input_layer,
        pos_enc_layer_type=config.pos_enc_layer_type,
        selfattention_layer_type="rel_selfattn",
        normalize_before=config.normalize_before,
        static_chunk_size=config.static_chunk_size,
    )
    if config.kind == "transformer":
        return TransformerEncoder(**shared)
    return ConformerEncoder(
        **shared, use_cnn_module=config.use_cnn_module, macaron_style=config.macaron_style
    )


def build_llm(config: LLMConfig, state: dict[str, torch.Tensor]) -> TransformerLM:
    """Upstream's TransformerLM from cosyvoice.yaml's `llm:` node, `state` loaded strictly."""
    from cosyvoice.llm.llm import TransformerLM
    from cosyvoice.utils import common

    text_encoder = build_encoder(config.text_encoder)
    model = TransformerLM(
        text_encoder_input_size=config.text_encoder_input_size,
        llm_input_size=config.llm_input_size,
        llm_output_size=config.llm_output_size,
        text_token_size=config.text_token_size,
        speech_token_size=config.speech_token_size,
        text_encoder=text_encoder,
        llm=build_encoder(config.llm),
        sampling=common.ras_sampling,
        spk_embed_dim=config.spk_embed_dim,
    )
    model.load_state_dict(state, strict=True)
    return model.eval()


def llm_teacher_forced(
    model: TransformerLM,
    text: np.ndarray,
    prompt_text: np.ndarray,
    speaker: np.ndarray,
    prompt_speech: np.ndarray,
    teacher: list[int],
) -> list[np.ndarray]:
    """Upstream's log-probabilities, prefill then one per cached step, with `teacher` as the sampled tokens.

    Upstream's `inference` runs unmodified; only its `sampling_ids` is replaced by a recorder that returns
    the teacher tokens (then EOS), so its prefill and its incremental forward_chunk loop produce the logp.
    """
    recorded: list[np.ndarray] = []

    def record(weighted_scores, decoded_tokens, sampling, ignore_eos=True):  # type: ignore[no-untyped-def]
        recorded.append(weighted_scores.detach().numpy().copy())
        step = len(recorded) - 1
        return torch.tensor(teacher[step] if step < len(teacher) else model.speech_token_size)

    model.sampling_ids = record  # type: ignore[method-assign]
    list(
        model.inference(
            torch.tensor(text)[None],
            torch.tensor([len(text)]),
            torch.tensor(prompt_text, dtype=torch.int64)[None],
            torch.tensor([len(prompt_text)]),
            torch.tensor(prompt_speech, dtype=torch.int64)[None],
            torch.tensor([len(prompt_speech)]),
            torch.tensor(speaker, dtype=torch.float32),
        )
    )
    return recorded


def build_flow(config: FlowConfig) -> MaskedDiffWithXvec:
    """The reference as HyperPyYAML builds it from cosyvoice.yaml's `flow:` node."""
    from cosyvoice.flow.decoder import ConditionalDecoder
    from cosyvoice.flow.flow import MaskedDiffWithXvec
    from cosyvoice.flow.flow_matching import ConditionalCFM
    from cosyvoice.flow.length_regulator import InterpolateRegulator
    from omegaconf import DictConfig

    enc, est = config.encoder, config.estimator
    encoder = build_encoder(enc)
    estimator = ConditionalDecoder(
        in_channels=est.in_channels,
        out_channels=est.out_channels,
        channels=list(est.channels),
        dropout=est.dropout,
        attention_head_dim=est.attention_head_dim,
        n_blocks=est.n_blocks,
        num_mid_blocks=est.num_mid_blocks,
        num_heads=est.num_heads,
        act_fn=est.act_fn,
    )
    cfm_params = DictConfig(
        {
            "sigma_min": config.sigma_min,
            "solver": "euler",
            "t_scheduler": config.t_scheduler,
            "training_cfg_rate": 0.2,
            "inference_cfg_rate": config.inference_cfg_rate,
            "reg_loss_type": "l1",
        }
    )
    decoder = ConditionalCFM(
        in_channels=config.decoder_in_channels,
        cfm_params=cfm_params,
        n_spks=1,
        spk_emb_dim=80,
        estimator=estimator,
    )
    return MaskedDiffWithXvec(
        input_size=config.input_size,
        output_size=config.output_size,
        spk_embed_dim=config.spk_embed_dim,
        output_type="mel",
        vocab_size=config.vocab_size,
        input_frame_rate=config.input_frame_rate,
        only_mask_loss=True,
        encoder=encoder,
        length_regulator=InterpolateRegulator(
            channels=config.length_regulator_channels, sampling_ratios=list(config.sampling_ratios)
        ),
        decoder=decoder,
    )


def flow_mel(
    reference: MaskedDiffWithXvec,
    tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    prompt_mel: np.ndarray,
    embedding: np.ndarray,
    noise: np.ndarray,
) -> np.ndarray:
    """Upstream's flow inference (new frames only), started from `noise`.

    Upstream draws its starting point with torch.randn_like(mu); that draw is replaced by `noise`.
    """

    def given_noise(like: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(noise.copy()).to(like.dtype)

    with torch.inference_mode(), mock.patch.object(torch, "randn_like", given_noise):
        mel, _ = reference.inference(
            token=torch.from_numpy(tokens),
            token_len=torch.tensor([tokens.shape[1]]),
            prompt_token=torch.from_numpy(prompt_tokens),
            prompt_token_len=torch.tensor([prompt_tokens.shape[1]]),
            prompt_feat=torch.from_numpy(prompt_mel),
            prompt_feat_len=torch.tensor([prompt_mel.shape[1]]),
            embedding=torch.from_numpy(embedding),
            flow_cache=torch.zeros(1, prompt_mel.shape[2], 0, 2),
        )
    return mel.numpy()


def build_hift(config: HiFTConfig, state: dict[str, torch.Tensor]) -> HiFTGenerator:
    """Upstream's HiFTGenerator + ConvRNNF0Predictor from cosyvoice.yaml's `hift:` node, `state` loaded."""
    from cosyvoice.hifigan.f0_predictor import ConvRNNF0Predictor
    from cosyvoice.hifigan.generator import HiFTGenerator

    model = HiFTGenerator(
        in_channels=config.in_channels,
        base_channels=config.base_channels,
        nb_harmonics=config.nb_harmonics,
        sampling_rate=config.sampling_rate,
        nsf_alpha=config.nsf_alpha,
        nsf_sigma=config.nsf_sigma,
        nsf_voiced_threshold=config.nsf_voiced_threshold,
        upsample_rates=list(config.upsample_rates),
        upsample_kernel_sizes=list(config.upsample_kernel_sizes),
        istft_params={"n_fft": config.istft_n_fft, "hop_len": config.istft_hop_len},
        resblock_kernel_sizes=list(config.resblock_kernel_sizes),
        resblock_dilation_sizes=[list(d) for d in config.resblock_dilation_sizes],
        source_resblock_kernel_sizes=list(config.source_resblock_kernel_sizes),
        source_resblock_dilation_sizes=[list(d) for d in config.source_resblock_dilation_sizes],
        lrelu_slope=config.lrelu_slope,
        audio_limit=config.audio_limit,
        f0_predictor=ConvRNNF0Predictor(
            num_class=config.f0_num_class,
            in_channels=config.f0_in_channels,
            cond_channels=config.f0_cond_channels,
        ),
    )
    model.load_state_dict(state)  # strict: our random state dict has upstream's exact keys
    return model.eval()


def sine_draws(seed: int, n_sines: int, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """SineGen's draws after torch.manual_seed(seed): phases [n_sines], noise [1, samples, n_sines]."""
    from torch.distributions.uniform import Uniform

    torch.manual_seed(seed)
    phase = Uniform(low=-math.pi, high=math.pi).sample(sample_shape=(1, n_sines, 1))
    phase[:, 0, :] = 0
    noise = torch.randn(1, n_sines, samples)
    return phase.reshape(-1).numpy(), noise.transpose(1, 2).numpy()


__all__ = [
    "build_encoder",
    "build_flow",
    "build_hift",
    "build_llm",
    "flow_mel",
    "install",
    "llm_teacher_forced",
    "sine_draws",
    "stub",
]
