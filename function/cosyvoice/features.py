"""Prompt audio features in numpy: resampling, Kaldi fbank (CAM++), whisper log-mel (speech tokenizer) and the
flow's mel spectrogram. Each reproduces the function upstream calls; comments name it.
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil, gcd

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from function.cosyvoice.params import MelParams

# torchaudio.functional.resample defaults (upstream resamples prompts with torchaudio.transforms.Resample).
RESAMPLE_ZEROS = 6  # lowpass_filter_width: sinc zero crossings on each side
RESAMPLE_ROLLOFF = 0.99

# torchaudio.compliance.kaldi.fbank as upstream calls it: 80 bins, 16 kHz, dither 0, otherwise defaults.
FBANK_RATE = 16000
FBANK_BINS = 80
FBANK_FRAME = 400  # 25 ms
FBANK_SHIFT = 160  # 10 ms
FBANK_FFT = 512  # frame rounded up to a power of two
FBANK_LOW_HZ = 20.0
FBANK_PREEMPHASIS = 0.97
FLOAT32_EPS = float(np.finfo(np.float32).eps)  # Kaldi's log floor

# whisper.audio.log_mel_spectrogram(audio, n_mels=128)
WHISPER_RATE = 16000
WHISPER_FFT = 400
WHISPER_HOP = 160
WHISPER_MELS = 128


def resample(audio: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """Band-limited resampling with torchaudio's default kernel (Hann-windowed sinc, 6 zero crossings,
    cut-off 0.99 × the lower Nyquist). Output length is ceil(len × new / orig), as torchaudio's.

    torchaudio convolves with one kernel per output phase at once; this evaluates the same kernel
    phase by phase over strided views of the input, so it needs no (new × orig)-sized kernel for odd
    rate pairs. The results agree to float32 rounding (tests/parity/test_audio_features.py).
    """
    audio = np.asarray(audio, dtype=np.float32)
    if orig_rate == new_rate:
        return audio.copy()
    common = gcd(orig_rate, new_rate)
    orig, new = orig_rate // common, new_rate // common
    n_out = -(-new * len(audio) // orig)
    weights, first, reach = _resample_kernel(orig, new)
    taps = weights.shape[1]
    padded = np.pad(audio, (reach, reach + taps + orig))
    windows = sliding_window_view(padded, taps)  # [positions, taps], a view
    out = np.empty(n_out, dtype=np.float32)
    for phase in range(min(new, n_out)):
        # Outputs phase, phase + new, ... read inputs starting at q * orig + first[phase].
        rows = windows[first[phase] + reach :: orig][: len(range(phase, n_out, new))]
        out[phase::new] = rows @ weights[phase]
    return out


@lru_cache(maxsize=8)
def _resample_kernel(orig: int, new: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per output phase p: weights over the inputs first[p] .. first[p] + taps - 1 (relative to q·orig)."""
    cutoff = min(orig, new) * RESAMPLE_ROLLOFF
    reach = ceil(RESAMPLE_ZEROS * orig / cutoff)
    phase = np.arange(new)
    first = phase * orig // new - reach
    inputs = first[:, None] + np.arange(2 * reach + 2)[None, :]
    # Distance from the output instant, in units of the cut-off period (torchaudio's `t`).
    t = (inputs * new - phase[:, None] * orig) / (orig * new) * cutoff
    window = np.cos(np.pi * np.clip(t, -RESAMPLE_ZEROS, RESAMPLE_ZEROS) / (2 * RESAMPLE_ZEROS)) ** 2
    weights = np.where(np.abs(t) < RESAMPLE_ZEROS, np.sinc(t) * window * (cutoff / orig), 0.0)
    return weights.astype(np.float32), first, reach


def kaldi_fbank(audio: np.ndarray) -> np.ndarray:
    """[T, 80] log mel filterbank of 16 kHz audio; T = 1 + (N - 400) // 160 (snip edges), 0 if N < 400."""
    audio = np.asarray(audio, dtype=np.float64)
    if len(audio) < FBANK_FRAME:
        return np.zeros((0, FBANK_BINS), dtype=np.float32)
    frames = sliding_window_view(audio, FBANK_FRAME)[::FBANK_SHIFT]  # [T, 400]
    frames = frames - frames.mean(axis=1, keepdims=True)  # remove DC per frame
    previous = np.concatenate([frames[:, :1], frames[:, :-1]], axis=1)  # first sample repeats
    frames = (frames - FBANK_PREEMPHASIS * previous) * _povey_window(FBANK_FRAME)
    power = np.abs(np.fft.rfft(frames, n=FBANK_FFT, axis=1)) ** 2  # [T, 257]
    energies = power @ _kaldi_mel_banks().T  # [T, 80]
    return np.log(np.maximum(energies, FLOAT32_EPS)).astype(np.float32)


@lru_cache(maxsize=1)
def _povey_window(size: int) -> np.ndarray:
    # Kaldi's "povey": a symmetric Hann window to the power 0.85.
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(size) / (size - 1))) ** 0.85


def _kaldi_mel(hz: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(hz, dtype=np.float64) / 700.0)


@lru_cache(maxsize=1)
def _kaldi_mel_banks() -> np.ndarray:
    """[80, 257] Kaldi triangles, equally spaced on 1127·ln(1 + f/700) from 20 Hz to Nyquist."""
    low, high = _kaldi_mel(FBANK_LOW_HZ), _kaldi_mel(FBANK_RATE / 2)
    delta = (high - low) / (FBANK_BINS + 1)
    left = low + delta * np.arange(FBANK_BINS)[:, None]
    center, right = left + delta, left + 2 * delta
    mel = _kaldi_mel(np.arange(FBANK_FFT // 2) * FBANK_RATE / FBANK_FFT)[None, :]
    banks = np.maximum(0.0, np.minimum((mel - left) / (center - left), (right - mel) / (right - center)))
    return np.pad(banks, ((0, 0), (0, 1)))  # the Nyquist bin gets no weight


def whisper_log_mel(audio: np.ndarray, n_mels: int = WHISPER_MELS) -> np.ndarray:
    """[n_mels, N // 160] whisper log-mel of 16 kHz audio (N > 200): centred STFT, last frame dropped,
    log10 clamped at 1e-10, floored at max - 8, then (x + 4) / 4."""
    audio = np.asarray(audio, dtype=np.float64)
    padded = np.pad(audio, WHISPER_FFT // 2, mode="reflect")
    frames = sliding_window_view(padded, WHISPER_FFT)[::WHISPER_HOP][:-1]  # [T, 400]
    power = np.abs(np.fft.rfft(frames * _hann(WHISPER_FFT), axis=1)) ** 2  # [T, 201]
    mel = slaney_mel_filters(WHISPER_RATE, WHISPER_FFT, n_mels, 0.0, WHISPER_RATE / 2) @ power.T
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def mel_spectrogram(audio: np.ndarray, params: MelParams) -> np.ndarray:
    """[num_mels, T] the flow's features (matcha.utils.audio.mel_spectrogram): reflect-pad (n_fft - hop) / 2
    each side, uncentred STFT with a periodic Hann window, magnitude sqrt(re² + im² + 1e-9), slaney mel,
    natural log clamped at 1e-5. T = (N + pad·2 - n_fft) // hop + 1."""
    if params.center:
        raise ValueError("mel_spectrogram implements center=False, as every v1 model uses")
    audio = np.asarray(audio, dtype=np.float64)
    pad = (params.n_fft - params.hop_size) // 2
    padded = np.pad(audio, pad, mode="reflect")
    frames = sliding_window_view(padded, params.n_fft)[:: params.hop_size]  # [T, n_fft]
    spectrum = np.fft.rfft(frames * _stft_window(params.win_size, params.n_fft), axis=1)
    magnitude = np.sqrt(spectrum.real**2 + spectrum.imag**2 + 1e-9)  # [T, n_fft // 2 + 1]
    basis = slaney_mel_filters(params.sample_rate, params.n_fft, params.num_mels, params.fmin, params.fmax)
    return np.log(np.maximum(basis @ magnitude.T, 1e-5)).astype(np.float32)


@lru_cache(maxsize=4)
def _hann(size: int) -> np.ndarray:
    # torch.hann_window's default: periodic.
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(size) / size)


def _stft_window(win_size: int, n_fft: int) -> np.ndarray:
    # torch.stft centres a shorter window inside the n_fft frame.
    left = (n_fft - win_size) // 2
    return np.pad(_hann(win_size), (left, n_fft - win_size - left))


def _slaney_mel(hz: np.ndarray | float) -> np.ndarray:
    """Slaney's mel scale (librosa's default, htk=False): linear to 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / (200.0 / 3)
    log_part = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, log_part, linear)


def _slaney_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    return np.where(mel >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (mel - 15.0)), mel * (200.0 / 3))


@lru_cache(maxsize=4)
def slaney_mel_filters(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    """[n_mels, n_fft // 2 + 1] librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax) with its defaults
    (slaney scale, slaney area normalisation): the filters whisper ships and matcha computes."""
    fft_hz = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    edges = _slaney_hz(np.linspace(_slaney_mel(fmin), _slaney_mel(fmax), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_hz[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    filters *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return filters.astype(np.float32)


__all__ = ["kaldi_fbank", "mel_spectrogram", "resample", "slaney_mel_filters", "whisper_log_mel"]
