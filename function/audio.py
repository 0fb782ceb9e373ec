"""Encoders: float32 mono chunks from the engine → bytes of one audio format (function.formats lists them).

wav and pcm are written here with numpy and stream chunk by chunk (a streamed wav header carries the
"unknown length" sizes 0xFFFFFFFF, which players and libsndfile accept). flac, ogg/vorbis and mp3 go
through the libsndfile bundled with soundfile, which needs the whole signal (its headers are finished
on close), so streaming those yields one piece at the end.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator

import numpy as np

from function.errors import UnsupportedFormat
from function.formats import AudioFormat, audio_format

_UNKNOWN_SIZE = 0xFFFFFFFF


def media_type(fmt: str) -> str:
    return audio_format(fmt).media_type


def to_pcm16(samples: np.ndarray) -> bytes:
    """float in [-1, 1] → s16le, clipped (the vocoder may overshoot slightly)."""
    scaled = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767.0
    return np.rint(scaled).astype("<i2").tobytes()


def wav_header(sample_rate: int, data_bytes: int | None) -> bytes:
    """44-byte PCM WAVE header for mono s16; data_bytes None marks a stream of unknown length."""
    riff_size = _UNKNOWN_SIZE if data_bytes is None else 36 + data_bytes
    data_size = _UNKNOWN_SIZE if data_bytes is None else data_bytes
    return (
        struct.pack("<4sI4s", b"RIFF", riff_size, b"WAVE")
        + struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + struct.pack("<4sI", b"data", data_size)
    )


def _soundfile_encode(samples: np.ndarray, fmt: AudioFormat, sample_rate: int) -> bytes:
    import soundfile

    assert fmt.soundfile is not None  # only called for the formats libsndfile writes
    container, subtype = fmt.soundfile
    if container not in soundfile.available_formats():
        raise UnsupportedFormat(
            f"format {fmt.name!r} is not available in this build (libsndfile lacks {container})"
        )
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, sample_rate, format=container, subtype=subtype)
    return buffer.getvalue()


def encode(chunks: Iterable[np.ndarray], fmt: str, sample_rate: int) -> bytes:
    """The whole file, with exact sizes in its header."""
    audio = audio_format(fmt)
    if audio.streams:
        pcm = b"".join(to_pcm16(chunk) for chunk in chunks)
        return (wav_header(sample_rate, len(pcm)) if fmt == "wav" else b"") + pcm
    parts = list(chunks)
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return _soundfile_encode(samples, audio, sample_rate)


def iter_encode(chunks: Iterable[np.ndarray], fmt: str, sample_rate: int) -> Iterator[bytes]:
    """Encoded bytes as the chunks arrive (wav, pcm); other formats come as one piece at the end."""
    if not audio_format(fmt).streams:
        yield encode(chunks, fmt, sample_rate)
        return
    if fmt == "wav":
        yield wav_header(sample_rate, None)
    for chunk in chunks:
        yield to_pcm16(chunk)


__all__ = [
    "encode",
    "iter_encode",
    "media_type",
    "to_pcm16",
    "wav_header",
]
