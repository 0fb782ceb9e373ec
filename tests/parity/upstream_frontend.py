"""Upstream's own CosyVoiceFrontEnd (the pinned cosyvoice-minicpmo wheel), built as v1's CosyVoice builds it.

`CosyVoice.__init__` (cosyvoice/cli/cosyvoice.py at 2c1877a) reads `get_tokenizer`, `feat_extractor` and
`allowed_special` from the model directory's cosyvoice.yaml and hands the frontend campplus.onnx,
speech_tokenizer_v1.onnx and spk2info.pt from the same directory; so does `build` here, on the fake model.
Stand-ins only where this machine lacks a package: whisper's tokenizer and audio modules come from its
source archive, torchaudio from tests.parity.torchaudio_reference, librosa's mel filters from ours (checked
against whisper's shipped ones in test_features.py). The text normaliser is the one v1's frontend builds
(the pinned wheel comments it out): WeTextProcessing's graphs, here as the wetext wheel ships them, with
the traditional → simplified step v1's shipped graphs apply, and inflect for English digits.
"""

from __future__ import annotations

import importlib
import sys
from functools import partial
from pathlib import Path
from typing import Any

from bench import reference
from export.config import CLASS_KEY, read_yaml
from function.cosyvoice.features import slaney_mel_filters
from tests.parity import torchaudio_reference
from tests.parity.whisper_reference import load_whisper_module


def matcha_mel_spectrogram() -> Any:
    """matcha's mel_spectrogram, with librosa's filter function supplied (librosa is not installed)."""
    if "librosa" not in sys.modules:
        reference.stub(
            "librosa.filters",
            mel=lambda sr, n_fft, n_mels, fmin, fmax: slaney_mel_filters(sr, n_fft, n_mels, fmin, fmax),
        )
        reference.stub("librosa", filters=sys.modules["librosa.filters"])
    from matcha.utils.audio import mel_spectrogram

    return mel_spectrogram


def _named(entry: dict[str, Any]) -> Any:
    """A yaml `!name:module.function` entry with its arguments bound, as HyperPyYAML makes it."""
    module, _, name = entry[CLASS_KEY].rpartition(".")
    arguments = {key: value for key, value in entry.items() if key != CLASS_KEY}
    return partial(getattr(importlib.import_module(module), name), **arguments)


def build(model_dir: Path, scratch: Path) -> Any:
    load_whisper_module("tokenizer", scratch)
    sys.modules["whisper"].log_mel_spectrogram = load_whisper_module("audio", scratch).log_mel_spectrogram
    torchaudio_reference.install()
    matcha_mel_spectrogram()
    import inflect
    from cosyvoice.cli.frontend import CosyVoiceFrontEnd
    from wetext import Normalizer

    config = read_yaml(model_dir / "cosyvoice.yaml")
    frontend = CosyVoiceFrontEnd(
        _named(config["get_tokenizer"]),
        _named(config["feat_extractor"]),
        str(model_dir / "campplus.onnx"),
        str(model_dir / "speech_tokenizer_v1.onnx"),
        str(model_dir / "spk2info.pt"),
        config["allowed_special"],
    )
    frontend.use_ttsfrd = False
    frontend.zh_tn_model = Normalizer(lang="zh", operator="tn", traditional_to_simple=True)
    frontend.en_tn_model = Normalizer(lang="en", operator="tn")
    frontend.inflect_parser = inflect.engine()
    return frontend
