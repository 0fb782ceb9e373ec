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
