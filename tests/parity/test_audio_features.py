"""Prompt features against torch: whisper's own log_mel_spectrogram (loaded from its source archive),
matcha's own mel_spectrogram (with librosa's filter function supplied, since librosa is not installed; the
filters themselves are checked against whisper's shipped librosa filters in test_features.py), and
torchaudio's resampling kernel re-derived with conv1d (torchaudio is not installed)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from function.cosyvoice.features import mel_spectrogram, resample, whisper_log_mel  # noqa: E402
from function.cosyvoice.params import MelParams  # noqa: E402
from tests.parity.torchaudio_reference import torchaudio_resample  # noqa: E402
from tests.parity.upstream_frontend import matcha_mel_spectrogram  # noqa: E402
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
    return matcha_mel_spectrogram()


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


@pytest.mark.parametrize(
    ("orig", "new"), [(16000, 22050), (48000, 16000), (44100, 16000), (24000, 22050), (8000, 16000)]
)
def test_resample_matches_torchaudio_kernel(orig: int, new: int) -> None:
    audio = speechy(1.3, orig, seed=2)
    expected = torchaudio_resample(audio, orig, new)
    ours = resample(audio, orig, new)
    assert ours.shape == expected.shape
    assert np.abs(ours - expected).max() < 1e-5
