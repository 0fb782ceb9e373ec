"""Encoders: float32 mono chunks from the engine → bytes of one audio format (function.core.formats lists
them).

The chunks come at the model's rate; `rate` asks for another (OpenAI's route: 24 kHz), and a format that
takes only some rates gets the nearest (`AudioFormat.rate_for`); either way function.audio.resample converts.

wav and pcm are written here with numpy and stream chunk by chunk (a streamed wav header carries the
"unknown length" sizes 0xFFFFFFFF, which players and libsndfile accept). flac, ogg (Vorbis), opus (in
Ogg) and mp3 go through the libsndfile bundled with soundfile. Its Ogg writer only appends pages, so
those stream page by page (about one per second of audio); flac and mp3 get their headers finished on
close (libsndfile seeks back to write them), so streaming those yields one piece at the end.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator

import numpy as np

from function.audio.resample import resample
from function.core.errors import UnsupportedFormat
from function.core.formats import AudioFormat, Output

_UNKNOWN_SIZE = 0xFFFFFFFF


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


def _libsndfile(fmt: AudioFormat) -> tuple[str, str]:
    """The (container, subtype) libsndfile writes `fmt` with, if this build has the container."""
    import soundfile

    assert fmt.soundfile is not None  # only called for the formats libsndfile writes
    container, _ = fmt.soundfile
    if container not in soundfile.available_formats():
        raise UnsupportedFormat(
            f"format {fmt.name!r} is not available in this build (libsndfile lacks {container})"
        )
    return fmt.soundfile


class _Outbox:
    """A file for libsndfile whose bytes can leave as soon as they are written (`take`). Only for the
    formats libsndfile never rewrites (Ogg: page after page); a write behind what has left fails loudly
    rather than send a broken file."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._sent = 0
        self._position = 0

    @property
    def _end(self) -> int:
        return self._sent + len(self._pending)

    def write(self, data: bytes) -> int:
        if self._position != self._end:
            raise RuntimeError("libsndfile rewrote bytes of a streamed file")
        self._pending += data
        self._position += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._end}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        return b""  # libsndfile's writers do not read back what they wrote

    def take(self) -> bytes:
        data = bytes(self._pending)
        self._sent += len(data)
        self._pending.clear()
        return data


def _soundfile_pieces(chunks: Iterable[np.ndarray], fmt: AudioFormat, sample_rate: int) -> Iterator[bytes]:
    """libsndfile's output: as it is written for formats that only append, else whole at the end."""
    import soundfile

    container, subtype = _libsndfile(fmt)
    if not fmt.appends:
        parts = list(chunks)
        samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        buffer = io.BytesIO()
        soundfile.write(buffer, samples, sample_rate, format=container, subtype=subtype)
        yield buffer.getvalue()
        return
    outbox = _Outbox()
    with soundfile.SoundFile(
        outbox, "w", samplerate=sample_rate, channels=1, format=container, subtype=subtype
    ) as sink:
        for chunk in chunks:
            sink.write(chunk)
            if piece := outbox.take():
                yield piece
    yield outbox.take()  # the last page, written on close


def encode(chunks: Iterable[np.ndarray], output: Output) -> bytes:
    """The whole file, with exact sizes in its header, at `output.rate`."""
    converted = resample(chunks, output.source_rate, output.rate)
    if output.format.soundfile is None:
        pcm = b"".join(to_pcm16(chunk) for chunk in converted)
        return (wav_header(output.rate, len(pcm)) if output.name == "wav" else b"") + pcm
    return b"".join(_soundfile_pieces(converted, output.format, output.rate))


def iter_encode(chunks: Iterable[np.ndarray], output: Output) -> Iterator[bytes]:
    """Encoded bytes as the chunks arrive: wav and pcm chunk by chunk, Ogg (Vorbis, Opus) page by page,
    flac and mp3 in one piece at the end."""
    converted = resample(chunks, output.source_rate, output.rate)
    if output.format.soundfile is not None:
        yield from _soundfile_pieces(converted, output.format, output.rate)
        return
    if output.name == "wav":
        yield wav_header(output.rate, None)
    for chunk in converted:
        yield to_pcm16(chunk)


__all__ = [
    "encode",
    "iter_encode",
    "to_pcm16",
    "wav_header",
]
