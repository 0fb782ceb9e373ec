"""HiFT vocoder at run time: mel → f0 (graph) → harmonic source (numpy) → magnitude/phase (graph) → iSTFT.

The source is built here rather than in a graph because it is stateful: each harmonic's phase keeps
running from one stream chunk to the next (`SourceState`), so a chunked utterance gets the same
excitation as a whole one. Its randomness (initial phases, noise) is explicit: pass the draws or an rng.
Semantics follow upstream's v1 SineGen, with the running phase kept in float64 (upstream accumulates
it in float32, which drifts by ~1e-3 cycles over a few seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import HIFT_F0, HIFT_GENERATOR
from function.cosyvoice.graphs import Graph
from function.cosyvoice.params import VocoderParams


@dataclass
class SourceState:
    """Where each harmonic's oscillator is: its random initial phase and the cycles run so far (mod 1)."""

    initial_phase: np.ndarray  # [n_sines] radians; the fundamental's is 0
    cycles: np.ndarray  # [n_sines] float64 in [0, 1)

    @classmethod
    def initial(
        cls, nb_harmonics: int, rng: np.random.Generator | None = None, phase: np.ndarray | None = None
    ) -> SourceState:
        """A new utterance: initial phases given, or drawn U(-π, π) with the fundamental's at 0."""
        n_sines = nb_harmonics + 1
        if phase is None:
            phase = (rng or np.random.default_rng()).uniform(-np.pi, np.pi, n_sines)
            phase[0] = 0.0
        phase = np.asarray(phase, dtype=np.float64).reshape(-1)
        if phase.shape != (n_sines,):
            raise ValueError(f"phase must hold {n_sines} values (one per harmonic), got {phase.shape}")
        return cls(initial_phase=phase, cycles=np.zeros(n_sines))

    def copy(self) -> SourceState:
        return SourceState(self.initial_phase.copy(), self.cycles.copy())


class Vocoder:
    def __init__(self, f0: Graph, generator: Graph, params: VocoderParams) -> None:
        if params.n_fft % params.hop_len:
            raise ValueError(f"vocoder: n_fft {params.n_fft} is not a multiple of hop {params.hop_len}")
        self.f0_graph = f0
        self.generator_graph = generator
        self.params = params
        self.n_sines = params.nb_harmonics + 1
        n = np.arange(params.n_fft)
        self.window = 0.5 - 0.5 * np.cos(2 * np.pi * n / params.n_fft)  # periodic Hann, as upstream

    @classmethod
    def load(cls, artifact: Artifact, threads: int | None = None) -> Vocoder:
        return cls(
            Graph.load(artifact, HIFT_F0.name, threads),
            Graph.load(artifact, HIFT_GENERATOR.name, threads),
            artifact.manifest.params.vocoder,
        )

    def f0(self, mel: np.ndarray) -> np.ndarray:
        """mel [1, n_mels, T] → f0 [1, T] in Hz."""
        return self.f0_graph.run(mel=_check_mel(mel))["f0"]

    def draw_noise(self, rng: np.random.Generator, frames: int) -> np.ndarray:
        """Standard-normal source noise [1, samples, n_sines]; consecutive draws concatenate along samples."""
        return rng.standard_normal((1, frames * self.params.upsample_factor, self.n_sines), dtype=np.float32)

    def sine_waves(
        self, f0: np.ndarray, noise: np.random.Generator | np.ndarray, state: SourceState
    ) -> np.ndarray:
        """Upstream's SineGen output [1, samples, n_sines] for f0 [1, T] (Hz per mel frame); advances `state`.

        noise: standard-normal draws [1, T·upsample, n_sines] (scaled here by the voicing-dependent std),
        or an rng to draw them from. Pass `state.copy()` to compute ahead without advancing the state.
        """
        p = self.params
        f0_up = np.repeat(np.asarray(f0, dtype=np.float64).reshape(-1), p.upsample_factor)  # [samples]
        if isinstance(noise, np.random.Generator):
            noise = self.draw_noise(noise, f0_up.size // p.upsample_factor)
        if noise.shape != (1, f0_up.size, self.n_sines):
            raise ValueError(f"noise must be [1, {f0_up.size}, {self.n_sines}], got {list(noise.shape)}")
        harmonics = np.arange(1, self.n_sines + 1)
        # Harmonic h runs h times the fundamental's cycles: one running sum, not one per harmonic.
        cycles = state.cycles + np.cumsum(f0_up / p.sample_rate)[:, None] * harmonics  # [samples, n]
        cycles -= np.floor(cycles)  # mod 1, without np.mod's (slower) sign handling
        if cycles.size:  # an empty chunk (no look-ahead frames) leaves the oscillators where they are
            state.cycles = cycles[-1].copy()
        # The phase reduced to [-π, 3π) is exact enough in float32 (≤ 5e-7 rad), where sin is faster.
        angles = (2 * np.pi * cycles + state.initial_phase).astype(np.float32)
        sines = np.float32(p.sine_amp) * np.sin(angles)
        voiced = (f0_up > p.voiced_threshold)[:, None]
        # Unvoiced noise peaks near sine_amp.
        noise_std = np.where(voiced, np.float32(p.noise_std), np.float32(p.sine_amp / 3))
        return (sines * voiced + noise_std * noise[0])[None]

    def istft(self, magnitude: np.ndarray, phase: np.ndarray) -> np.ndarray:
        """torch.istft(center=True, periodic Hann) of magnitude·e^{i·phase} [bins, F] → [hop·(F-1)]."""
        n_fft, hop = self.params.n_fft, self.params.hop_len
        overlap = n_fft // hop
        frames = np.fft.irfft(magnitude * np.exp(1j * phase), n=n_fft, axis=0).T * self.window  # [F, n_fft]
        count = frames.shape[0]
        # Frame f covers hop blocks f .. f+overlap-1: add each of its blocks at once across all frames.
        signal = np.zeros((count + overlap - 1, hop))
        envelope = np.zeros((count + overlap - 1, hop))
        blocks = frames.reshape(count, overlap, hop)
        window_sq = (self.window**2).reshape(overlap, hop)
        for j in range(overlap):
            signal[j : j + count] += blocks[:, j]
            envelope[j : j + count] += window_sq[j]
        half = n_fft // 2
        signal, envelope = signal.reshape(-1)[half:-half], envelope.reshape(-1)[half:-half]
        return (signal / envelope).astype(np.float32)

    def generate(self, mel: np.ndarray, sine_waves: np.ndarray) -> np.ndarray:
        """mel [1, n_mels, T] + source [1, T·upsample, n_sines] → waveform [T·upsample] in ±audio_limit."""
        out = self.generator_graph.run(
            mel=_check_mel(mel), sine_waves=np.asarray(sine_waves, dtype=np.float32)
        )
        wave = self.istft(out["magnitude"][0], out["phase"][0])
        return np.clip(wave, -self.params.audio_limit, self.params.audio_limit)

    def __call__(
        self,
        mel: np.ndarray,
        rng: np.random.Generator | None = None,
        *,
        phase: np.ndarray | None = None,
        noise: np.ndarray | None = None,
        state: SourceState | None = None,
    ) -> np.ndarray:
        """mel [1, n_mels, T] → waveform [T·upsample] float32 in ±audio_limit.

        A new utterance starts from `phase` (or rng draws) unless `state` continues an earlier chunk;
        `state` is advanced in place. `noise` (standard normal, [1, samples, n_sines]) or rng draws.
        """
        if state is not None and phase is not None:
            raise ValueError("phase starts a new utterance; it cannot be combined with a carried state")
        rng = rng or np.random.default_rng()
        if state is None:
            state = SourceState.initial(self.params.nb_harmonics, rng, phase)
        mel = _check_mel(mel)
        sine_waves = self.sine_waves(self.f0(mel), rng if noise is None else noise, state)
        return self.generate(mel, sine_waves)


def _check_mel(mel: np.ndarray) -> np.ndarray:
    mel = np.ascontiguousarray(mel, dtype=np.float32)
    if mel.ndim != 3 or mel.shape[0] != 1 or mel.shape[2] == 0:
        raise ValueError(f"mel must be [1, n_mels, frames>0], got {list(mel.shape)}")
    return mel


__all__ = ["SourceState", "Vocoder"]
