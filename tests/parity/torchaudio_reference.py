"""torchaudio's two functions upstream's frontend calls, for a machine without torchaudio.

`transforms.Resample`'s kernel is re-derived with conv1d as torchaudio builds it; `compliance.kaldi.fbank`
is kaldi-native-fbank (an independent implementation of Kaldi's compute-fbank-feats, which torchaudio's
matches). `install()` registers them as `torchaudio` so that `cosyvoice.cli.frontend` imports.
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import torch


def torchaudio_resample(audio: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """torchaudio.functional.resample (sinc_interp_hann, width 6, rolloff 0.99): a kernel bank of one
    filter per output phase applied with conv1d at stride orig, as torchaudio builds it."""
    common = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // common, new_rate // common
    base = min(orig, new) * 0.99
    width = math.ceil(6 * orig / base)
    idx = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    t = (torch.arange(0, -new, -1, dtype=torch.float64)[:, None, None] / new + idx) * base
    t = t.clamp(-6, 6)
    window = torch.cos(t * math.pi / 12) ** 2
    t = t * math.pi
    kernels = torch.where(t == 0, torch.tensor(1.0, dtype=torch.float64), t.sin() / t) * window * base / orig
    x = torch.nn.functional.pad(torch.from_numpy(audio.astype(np.float64))[None, None], (width, width + orig))
    out = torch.nn.functional.conv1d(x, kernels, stride=orig).transpose(1, 2).reshape(-1)
    return out[: math.ceil(new * len(audio) / orig)].numpy()


class Resample:
    """torchaudio.transforms.Resample(orig_freq, new_freq)(waveform [channels, samples])."""

    def __init__(self, orig_freq: int, new_freq: int) -> None:
        self.orig_freq, self.new_freq = orig_freq, new_freq

    def __call__(self, waveform: torch.Tensor) -> torch.Tensor:
        rows = [torchaudio_resample(row.numpy(), self.orig_freq, self.new_freq) for row in waveform]
        return torch.from_numpy(np.stack(rows).astype(np.float32))


def fbank(waveform: torch.Tensor, num_mel_bins: int, dither: float, sample_frequency: float) -> torch.Tensor:
    """torchaudio.compliance.kaldi.fbank on channel 0, Kaldi's defaults otherwise."""
    import kaldi_native_fbank as knf

    options = knf.FbankOptions()
    options.frame_opts.dither = dither
    options.frame_opts.samp_freq = sample_frequency
    options.frame_opts.snip_edges = True
    options.mel_opts.num_bins = num_mel_bins
    computer = knf.OnlineFbank(options)
    computer.accept_waveform(sample_frequency, waveform[0].tolist())
    computer.input_finished()
    frames = [computer.get_frame(i) for i in range(computer.num_frames_ready)]
    return torch.from_numpy(np.stack(frames).astype(np.float32))


def install() -> None:
    if "torchaudio" in sys.modules:
        return
    kaldi = types.ModuleType("torchaudio.compliance.kaldi")
    kaldi.fbank = fbank  # type: ignore[attr-defined]
    compliance = types.ModuleType("torchaudio.compliance")
    compliance.kaldi = kaldi  # type: ignore[attr-defined]
    transforms = types.ModuleType("torchaudio.transforms")
    transforms.Resample = Resample  # type: ignore[attr-defined]
    package = types.ModuleType("torchaudio")
    package.compliance, package.transforms = compliance, transforms  # type: ignore[attr-defined]
    for module in (package, compliance, kaldi, transforms):
        sys.modules[module.__name__] = module
