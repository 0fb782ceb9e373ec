"""Prompt features in numpy: resampling, Kaldi fbank, whisper log-mel, the flow's mel. No torch.

Kaldi fbank is checked against kaldi-native-fbank (an independent C++ implementation of Kaldi's
compute-fbank-feats, which torchaudio.compliance.kaldi also matches); the mel filters against the ones whisper
ships (librosa's). Torch references for the STFT-based features: tests/parity/test_audio_features.py.
"""

from __future__ import annotations

import os
from math import ceil
from pathlib import Path

import numpy as np
import pytest

from function.cosyvoice.features import (
    RESAMPLE_ROLLOFF,
    RESAMPLE_ZEROS,
    kaldi_fbank,
    mel_spectrogram,
    resample,
    slaney_mel_filters,
    whisper_log_mel,
)
from function.cosyvoice.params import MelParams

ROOT = Path(__file__).resolve().parents[3]
ASSETS = Path(os.environ.get("COSYVOICE_WHISPER_ASSETS", ROOT / ".cache" / "whisper-assets"))


def tone(freq: float, rate: int, seconds: float, amplitude: float = 0.5) -> np.ndarray:
    return (amplitude * np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate)).astype(np.float32)


def noise(seconds: float, rate: int = 16000, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(rate * seconds))).astype(np.float32)


# --- resampling ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("orig", "new"), [(16000, 22050), (44100, 16000), (48000, 16000), (8000, 16000), (44101, 16000)]
)
def test_resample_keeps_the_passband(orig: int, new: int) -> None:
    audio = tone(1000.0, orig, 1.01)
    out = resample(audio, orig, new)
    assert len(out) == ceil(new * len(audio) / orig) and out.dtype == np.float32
    inner = slice(new // 10, -new // 10)  # away from the zero-padded edges
    expected = tone(1000.0, new, len(out) / new)[: len(out)]
    # torchaudio's short kernel (6 zero crossings) ripples slightly in the passband.
    assert np.abs(out[inner] - expected[inner]).max() < 1e-3


def test_resample_removes_what_the_new_rate_cannot_hold() -> None:
    out = resample(tone(12000.0, 48000, 1.0), 48000, 16000)
    assert np.sqrt(np.mean(out[1600:-1600] ** 2)) < 0.01 * 0.5 / np.sqrt(2)


def test_resample_matches_the_windowed_sinc_sum() -> None:
    """Each output is sum_j x[j]·h(j/orig − n/new) with torchaudio's Hann-windowed sinc h, evaluated here
    one sample at a time in float64 for an odd rate pair (no common factor)."""
    orig, new = 44101, 16000
    x = noise(0.2, orig, seed=3)
    out = resample(x, orig, new)
    cutoff = min(orig, new) * RESAMPLE_ROLLOFF
    j = np.arange(len(x))
    for n in (0, 1, 7, 1234, 2000, len(out) - 1):
        t = (j / orig - n / new) * cutoff
        h = np.where(
            np.abs(t) < RESAMPLE_ZEROS,
            np.sinc(t) * np.cos(np.pi * t / (2 * RESAMPLE_ZEROS)) ** 2 * cutoff / orig,
            0.0,
        )
        assert out[n] == pytest.approx(float(h @ x), abs=1e-5)


def test_resample_same_rate_is_a_copy() -> None:
    x = noise(0.1)
    out = resample(x, 16000, 16000)
    assert np.array_equal(out, x) and out is not x


# --- Kaldi fbank ---------------------------------------------------------------------------------------


def test_fbank_matches_kaldi_native_fbank() -> None:
    knf = pytest.importorskip("kaldi_native_fbank")
    options = knf.FbankOptions()
    options.frame_opts.dither = 0.0
    options.frame_opts.samp_freq = 16000
    options.frame_opts.snip_edges = True
    options.mel_opts.num_bins = 80
    audio = noise(2.345, seed=1) + tone(220.0, 16000, 2.345, 0.2)
    reference = knf.OnlineFbank(options)
    reference.accept_waveform(16000, audio.tolist())
    reference.input_finished()
    expected = np.stack([reference.get_frame(i) for i in range(reference.num_frames_ready)])
    ours = kaldi_fbank(audio)
    assert ours.shape == expected.shape == (1 + (len(audio) - 400) // 160, 80)
    assert np.abs(ours - expected).max() < 1e-3


def test_fbank_of_short_or_silent_audio() -> None:
    assert kaldi_fbank(np.zeros(399, dtype=np.float32)).shape == (0, 80)
    silent = kaldi_fbank(np.zeros(16000, dtype=np.float32))
    assert np.allclose(silent, np.log(np.finfo(np.float32).eps))  # Kaldi's floor, not -inf


# --- mel filters, whisper log-mel, flow mel ------------------------------------------------------------


@pytest.mark.parametrize("n_mels", [80, 128])
def test_slaney_filters_match_whispers(n_mels: int) -> None:
    path = ASSETS / "mel_filters.npz"
    if not path.is_file():
        pytest.skip(f"{path} missing: run `make setup`")
    with np.load(path) as shipped:
        expected = shipped[f"mel_{n_mels}"]
    assert np.abs(slaney_mel_filters(16000, 400, n_mels, 0.0, 8000.0) - expected).max() < 1e-7


def test_flow_mel_filters_cover_up_to_fmax() -> None:
    p = MelParams()
    filters = slaney_mel_filters(p.sample_rate, p.n_fft, p.num_mels, p.fmin, p.fmax)
    hz = np.linspace(0, p.sample_rate / 2, p.n_fft // 2 + 1)
    assert filters.shape == (80, 513)
    assert np.all(filters[:, hz > p.fmax] == 0) and np.all(filters.max(axis=1) > 0)
    peaks = hz[filters.argmax(axis=1)]
    assert np.all(np.diff(peaks) >= 0)  # centres rise with the bin index


def test_whisper_log_mel_semantics() -> None:
    audio = tone(1000.0, 16000, 3.0) + noise(3.0) * 0.01
    mel = whisper_log_mel(audio)
    assert mel.shape == (128, len(audio) // 160) and mel.dtype == np.float32
    # log10 floored at max − 8, then (x + 4) / 4: values span at most 2.
    assert mel.max() - mel.min() <= 2.0 + 1e-6
    loudest = whisper_log_mel(tone(1000.0, 16000, 3.0)).mean(axis=1).argmax()
    centre = np.linspace(0, 8000, 201)[slaney_mel_filters(16000, 400, 128, 0.0, 8000.0)[loudest].argmax()]
    assert abs(centre - 1000.0) < 100.0


def test_flow_mel_frames_and_peak() -> None:
    p = MelParams()
    audio = tone(440.0, p.sample_rate, 1.5)
    mel = mel_spectrogram(audio, p)
    pad = (p.n_fft - p.hop_size) // 2
    assert mel.shape == (80, (len(audio) + 2 * pad - p.n_fft) // p.hop_size + 1)
    assert mel.min() >= np.log(1e-5) - 1e-6
    hz = np.linspace(0, p.sample_rate / 2, p.n_fft // 2 + 1)
    filters = slaney_mel_filters(p.sample_rate, p.n_fft, p.num_mels, p.fmin, p.fmax)
    assert abs(hz[filters[mel.mean(axis=1).argmax()].argmax()] - 440.0) < 60.0
