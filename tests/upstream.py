"""The upstream reference: CosyVoice's own v1 classes from the `cosyvoice-minicpmo` wheel.

The wheel is installed --no-deps. Its v1 classes need only torch, einops, omegaconf, conformer, diffusers
and scipy, but some of the modules they live beside import heavy or GPU-only packages at import time
(transformers for the v2 LLM, lightning for a logger, torchaudio and TensorRT helpers). Those imports are
satisfied here with inert stand-ins *that the v1 classes never call*, so the code under test is upstream's
own. Import this module before any `cosyvoice` or `matcha` module.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from export.config import EncoderConfig


def _stub(name: str, **attrs: object) -> None:
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
    _stub("transformers", Qwen2ForCausalLM=object)  # CosyVoice2's LLM only
    _stub("lightning")
    _stub("lightning.pytorch")
    _stub("lightning.pytorch.utilities", rank_zero_only=lambda fn: fn)  # matcha's logger decorator
    # cosyvoice.utils.file_utils imports torchaudio and calls logging.basicConfig at import.
    _stub(
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
        importlib.import_module("matcha").utils = package  # attribute lookups (HyperPyYAML's !name:) see it


install()


def build_encoder(config: EncoderConfig) -> torch.nn.Module:
    """Upstream's Conformer/Transformer encoder as HyperPyYAML builds it from a cosyvoice.yaml node."""
    from cosyvoice.transformer.encoder import ConformerEncoder, TransformerEncoder

    common = dict(
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
        return TransformerEncoder(**common)
    return ConformerEncoder(
        **common, use_cnn_module=config.use_cnn_module, macaron_style=config.macaron_style
    )
