"""Prompt features against torch: whisper's own log_mel_spectrogram (loaded from its source archive),
matcha's own mel_spectrogram (with librosa's filter function supplied, since librosa is not installed; the
filters themselves are checked against whisper's shipped librosa filters in test_features.py), and
torchaudio's resampling kernel re-derived with conv1d (torchaudio is not installed)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bench import reference  # noqa: E402  (stubs before any matcha import)
from function.cosyvoice.features import mel_spectrogram, resample, slaney_mel_filters, whisper_log_mel  # noqa: E402
from function.cosyvoice.params import MelParams  # noqa: E402
from tests.parity.whisper_reference import load_whisper_module  # noqa: E402

TOLERANCE = 1e-3


def speechy(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    signal = sum(0.2 / k * np.sin(2 * np.pi * 130 * k * t) for k in range(1, 12))
    signal = signal * (0.5 + 0.5 * np.sin(2 * np.pi * 2 * t)) + 0.01 * rng.standard_normal(len(t))
    return signal.astype(np.float32)


@pytest.mark.parametrize("seconds", [1.0, 2.37, 7.5])
def test_whisper_log_mel_matches_whisper(tmp_path_factory: pytest.TempPathFactory, seconds: float) -> None:
    audio_module = load_whisper_module("audio", tmp_path_factory.mktemp("whisper"))
    audio = speechy(seconds, 16000)
    expected = audio_module.log_mel_spectrogram(torch.from_numpy(audio)[None], n_mels=128).numpy()[0]
    ours = whisper_log_mel(audio)
    assert ours.shape == expected.shape
    assert np.abs(ours - expected).max() < TOLERANCE


@pytest.fixture(scope="module")
def matcha_mel():  # type: ignore[no-untyped-def]
    if "librosa" not in sys.modules:
        reference.stub(
            "librosa.filters",
            mel=lambda sr, n_fft, n_mels, fmin, fmax: slaney_mel_filters(sr, n_fft, n_mels, fmin, fmax),
        )
        reference.stub("librosa", filters=sys.modules["librosa.filters"])
    from matcha.utils.audio import mel_spectrogram as upstream

    return upstream


@pytest.mark.parametrize("seconds", [1.0, 3.3])
def test_flow_mel_matches_matcha(matcha_mel, seconds: float) -> None:  # type: ignore[no-untyped-def]
    p = MelParams()
    audio = speechy(seconds, p.sample_rate, seed=1)
    expected = matcha_mel(
        torch.from_numpy(audio)[None],
        p.n_fft,
        p.num_mels,
        p.sample_rate,
        p.hop_size,
        p.win_size,
        p.fmin,
        p.fmax,
        center=p.center,
    ).numpy()[0]
    ours = mel_spectrogram(audio, p)
    assert ours.shape == expected.shape
    assert np.abs(ours - expected).max() < TOLERANCE


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


@pytest.mark.parametrize(
    ("orig", "new"), [(16000, 22050), (48000, 16000), (44100, 16000), (24000, 22050), (8000, 16000)]
)
def test_resample_matches_torchaudio_kernel(orig: int, new: int) -> None:
    audio = speechy(1.3, orig, seed=2)
    expected = torchaudio_resample(audio, orig, new)
    ours = resample(audio, orig, new)
    assert ours.shape == expected.shape
    assert np.abs(ours - expected).max() < 1e-5
