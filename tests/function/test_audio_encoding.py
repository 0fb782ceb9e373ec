"""Encoders: every format decodes back to the signal's length; wav/pcm stream chunk by chunk."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile

from function.audio import encode, iter_encode, to_pcm16
from function.errors import UnsupportedFormat
from function.formats import FORMATS

RATE = 22050


def chunks() -> list[np.ndarray]:
    t = np.arange(RATE, dtype=np.float32) / RATE
    signal = 0.5 * np.sin(2 * np.pi * 220 * t)
    return [signal[:5000], signal[5000:5001], signal[5001:]]


@pytest.mark.parametrize("fmt", ["wav", "flac", "ogg", "mp3"])
def test_formats_decode_to_the_same_duration(fmt: str) -> None:
    audio, rate = soundfile.read(io.BytesIO(encode(chunks(), fmt, RATE)))
    assert rate == RATE
    assert abs(audio.shape[0] - RATE) <= (2400 if fmt == "mp3" else 0)  # mp3 pads frames


def test_wav_is_exact_and_clipped() -> None:
    loud = [np.array([2.0, -2.0, 0.5], dtype=np.float32)]
    audio, _ = soundfile.read(io.BytesIO(encode(loud, "wav", RATE)), dtype="int16")
    assert audio.tolist() == [32767, -32767, 16384]
    assert encode(loud, "pcm", RATE) == to_pcm16(loud[0])


@pytest.mark.parametrize("fmt", sorted(name for name, f in FORMATS.items() if f.streams))
def test_streaming_yields_per_chunk_and_matches_the_buffered_samples(fmt: str) -> None:
    pieces = list(iter_encode(iter(chunks()), fmt, RATE))
    assert len(pieces) == len(chunks()) + (fmt == "wav")
    streamed, buffered = b"".join(pieces), encode(chunks(), fmt, RATE)
    header = 44 if fmt == "wav" else 0
    assert streamed[header:] == buffered[header:]
    if fmt == "wav":
        assert soundfile.read(io.BytesIO(streamed))[0].shape[0] == RATE


def test_unknown_formats_are_refused() -> None:
    with pytest.raises(UnsupportedFormat):
        encode(chunks(), "aiff", RATE)
