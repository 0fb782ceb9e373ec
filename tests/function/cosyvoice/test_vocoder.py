"""function.cosyvoice.vocoder on the tiny artifact, torch-free: mel → f0 → harmonic source → waveform.

GIVEN the tiny artifact's vocoder and mel drawn from a seed
WHEN it voices a whole mel, the same mel in two chunks with its state carried, and malformed inputs
THEN the waveform has upsample_factor samples per frame within ±audio_limit, the same draws give the same
waveform, the oscillators carry across chunks as if the mel were one, the numpy iSTFT inverts an STFT,
and every malformed input is refused by name. (Against upstream's HiFTGenerator: tests/parity/test_hift.py.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.vocoder import SourceState, Vocoder

FRAMES = 20


@pytest.fixture(scope="module")
def vocoder(tiny_artifact: Path) -> Vocoder:
    return Vocoder.load(Artifact.open(tiny_artifact), threads=1)


def mel(vocoder: Vocoder, frames: int = FRAMES, seed: int = 0) -> np.ndarray:
    """A mel shaped like the flow's: [1, 80, frames], around the log-mel range of speech."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((1, 80, frames)) - 5.0).astype(np.float32)


def test_the_waveform_has_upsample_factor_samples_per_frame_within_the_limit(vocoder: Vocoder) -> None:
    wave = vocoder(mel(vocoder), np.random.default_rng(1))
    assert wave.shape == (FRAMES * vocoder.params.upsample_factor,) and wave.dtype == np.float32
    assert np.isfinite(wave).all() and np.abs(wave).max() <= vocoder.params.audio_limit


def test_the_same_draws_give_the_same_waveform_and_other_draws_another(vocoder: Vocoder) -> None:
    features = mel(vocoder)
    first = vocoder(features, np.random.default_rng(2))
    assert np.array_equal(first, vocoder(features, np.random.default_rng(2)))
    assert not np.allclose(first, vocoder(features, np.random.default_rng(3)))
    # Phases and noise given explicitly are the draws an rng would have made.
    phase = SourceState.initial(vocoder.params.nb_harmonics, np.random.default_rng(4)).initial_phase
    noise = vocoder.draw_noise(np.random.default_rng(5), FRAMES)
    given = vocoder(features, phase=phase, noise=noise)
    assert np.array_equal(given, vocoder(features, phase=phase.copy(), noise=noise.copy()))


def test_a_new_utterance_starts_the_fundamental_at_phase_zero(vocoder: Vocoder) -> None:
    state = SourceState.initial(vocoder.params.nb_harmonics, np.random.default_rng(0))
    assert state.initial_phase.shape == (vocoder.n_sines,) and state.initial_phase[0] == 0.0
    assert np.all(np.abs(state.initial_phase) <= np.pi) and not np.any(state.cycles)
    copy = state.copy()
    copy.cycles += 0.5
    assert not np.any(state.cycles)  # a copy computes ahead without moving the original
    with pytest.raises(ValueError, match="one per harmonic"):
        SourceState.initial(vocoder.params.nb_harmonics, phase=np.zeros(vocoder.n_sines - 1))


def test_consecutive_noise_draws_are_one_draw_cut_along_samples(vocoder: Vocoder) -> None:
    rng, again = np.random.default_rng(7), np.random.default_rng(7)
    parts = np.concatenate([vocoder.draw_noise(rng, 3), vocoder.draw_noise(rng, 5)], axis=1)
    assert np.array_equal(parts, vocoder.draw_noise(again, 8))


def test_the_source_carried_across_chunks_is_the_source_of_the_whole(vocoder: Vocoder) -> None:
    features = mel(vocoder, frames=30, seed=8)
    f0 = vocoder.f0(features)
    assert f0.shape == (1, 30) and (f0 > vocoder.params.voiced_threshold).any()  # some frames voiced
    noise = vocoder.draw_noise(np.random.default_rng(9), 30)
    start = SourceState.initial(vocoder.params.nb_harmonics, np.random.default_rng(10))
    whole_state, chunked_state = start.copy(), start.copy()
    whole = vocoder.sine_waves(f0, noise, whole_state)
    cut = 11 * vocoder.params.upsample_factor
    head = vocoder.sine_waves(f0[:, :11], noise[:, :cut], chunked_state)
    tail = vocoder.sine_waves(f0[:, 11:], noise[:, cut:], chunked_state)
    np.testing.assert_allclose(np.concatenate([head, tail], axis=1), whole, rtol=0, atol=1e-5)
    np.testing.assert_allclose(chunked_state.cycles, whole_state.cycles, rtol=0, atol=1e-9)
    # An empty chunk (no look-ahead frames) leaves the oscillators where they are.
    before = chunked_state.cycles.copy()
    empty = vocoder.sine_waves(f0[:, :0], noise[:, :0], chunked_state)
    assert empty.shape == (1, 0, vocoder.n_sines) and np.array_equal(chunked_state.cycles, before)


def test_the_istft_inverts_a_centred_stft(vocoder: Vocoder) -> None:
    n_fft, hop = vocoder.params.n_fft, vocoder.params.hop_len
    signal = np.random.default_rng(11).standard_normal(hop * 50)
    padded = np.pad(signal, n_fft // 2)
    starts = range(0, padded.size - n_fft + 1, hop)
    spectrum = np.stack([np.fft.rfft(padded[s : s + n_fft] * vocoder.window) for s in starts], axis=1)
    rebuilt = vocoder.istft(np.abs(spectrum), np.angle(spectrum))
    assert rebuilt.shape == signal.shape
    np.testing.assert_allclose(rebuilt, signal, rtol=0, atol=1e-5)


def test_malformed_inputs_are_refused_by_name(vocoder: Vocoder) -> None:
    features = mel(vocoder)
    for bad in (features[0], features[:, :, :0], np.concatenate([features, features])):
        with pytest.raises(ValueError, match="mel must be"):
            vocoder(bad, np.random.default_rng(0))
    with pytest.raises(ValueError, match="noise must be"):
        vocoder(features, noise=vocoder.draw_noise(np.random.default_rng(0), FRAMES - 1))
    state = SourceState.initial(vocoder.params.nb_harmonics, np.random.default_rng(0))
    with pytest.raises(ValueError, match="cannot be combined"):
        vocoder(features, phase=state.initial_phase, state=state)
