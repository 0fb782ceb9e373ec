"""Encoders: float32 mono chunks from the engine → bytes of one audio format (function.core.formats lists
them).

The chunks come at the model's rate; `rate` asks for another (OpenAI's route: 24 kHz), and a format that
takes only some rates gets the nearest (`AudioFormat.rate_for`); either way function.audio.resample converts.

wav and pcm are written here with numpy and stream chunk by chunk (a streamed wav header carries the
"unknown length" sizes 0xFFFFFFFF, which players and libsndfile accept). flac, ogg (Vorbis), opus (in
Ogg) and mp3 go through the libsndfile bundled with soundfile, chunk by chunk, so only the encoded bytes
build up, never the signal. Its Ogg writer only appends pages, so those stream page by page (about one
per second of audio); flac and mp3 get their headers finished on close (libsndfile seeks back into the
file's first bytes to write FLAC's STREAMINFO or mp3's LAME tag, and never reads), so streaming those
yields one piece at the end, and `encode_into` writes them into a file that keeps its head writable
(function.aws.s3.Upload) instead.

libsndfile calls the file's methods from C: an exception raised there is reported as unraisable and
swallowed, and libsndfile sees only a short write or a wrong position (or nothing, on close). A file
that refuses a call must remember it and raise it again when it is finished.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator
from typing import Protocol

import numpy as np

from function.audio.resample import resample
from function.core.errors import UnsupportedFormat
from function.core.formats import AudioFormat, Output

_UNKNOWN_SIZE = 0xFFFFFFFF
# Frames handed to libsndfile per write: its Vorbis writer copies a write onto the C stack (4 bytes a
# frame) and crashes the process once that passes the thread's stack size.
_FRAMES_PER_WRITE = 1 << 16


class Seekable(Protocol):
    """What libsndfile writes a file through (soundfile's virtual IO): no reads."""

    def write(self, data: bytes, /) -> int: ...

    def seek(self, offset: int, whence: int = io.SEEK_SET, /) -> int: ...

    def tell(self) -> int: ...


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
    formats libsndfile never rewrites (Ogg: page after page); a write behind what has left makes the
    next `take` fail rather than send a broken file."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._sent = 0
        self._position = 0
        self._rewritten = False

    @property
    def _end(self) -> int:
        return self._sent + len(self._pending)

    def write(self, data: bytes) -> int:
        if self._position != self._end:
            self._rewritten = True
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

    def take(self) -> bytes:
        if self._rewritten:
            raise RuntimeError("libsndfile rewrote bytes of a streamed file")
        data = bytes(self._pending)
        self._sent += len(data)
        self._pending.clear()
        return data


def _soundfile_writes(
    file: Seekable, chunks: Iterable[np.ndarray], fmt: AudioFormat, rate: int
) -> Iterator[None]:
    """libsndfile writing `chunks` (at `rate`) into `file`, a step after each write of at most
    _FRAMES_PER_WRITE frames; the file is finished (closed) when the steps end."""
    import soundfile

    container, subtype = _libsndfile(fmt)
    with soundfile.SoundFile(
        file, "w", samplerate=rate, channels=1, format=container, subtype=subtype
    ) as sink:
        for chunk in chunks:
            for start in range(0, chunk.shape[0], _FRAMES_PER_WRITE):
                sink.write(chunk[start : start + _FRAMES_PER_WRITE])
                yield


def _direct_pieces(chunks: Iterable[np.ndarray], output: Output) -> Iterator[bytes]:
    """wav (under a header of unknown length) or pcm, chunk by chunk."""
    if output.name == "wav":
        yield wav_header(output.rate, None)
    for chunk in chunks:
        yield to_pcm16(chunk)


def encode(chunks: Iterable[np.ndarray], output: Output) -> bytes:
    """The whole file, with exact sizes in its header, at `output.rate`."""
    if output.format.soundfile is not None:
        buffer = io.BytesIO()
        encode_into(buffer, chunks, output)
        return buffer.getvalue()
    pcm = b"".join(to_pcm16(chunk) for chunk in resample(chunks, output.source_rate, output.rate))
    return (wav_header(output.rate, len(pcm)) if output.name == "wav" else b"") + pcm


def iter_encode(chunks: Iterable[np.ndarray], output: Output) -> Iterator[bytes]:
    """Encoded bytes as the chunks arrive: wav and pcm chunk by chunk, Ogg (Vorbis, Opus) page by page,
    flac and mp3 in one piece at the end."""
    fmt = output.format
    if fmt.soundfile is not None and not fmt.appends:
        yield encode(chunks, output)
        return
    converted = resample(chunks, output.source_rate, output.rate)
    if fmt.soundfile is None:
        yield from _direct_pieces(converted, output)
        return
    outbox = _Outbox()
    for _ in _soundfile_writes(outbox, converted, fmt, output.rate):
        if piece := outbox.take():
            yield piece
    yield outbox.take()  # the last page, written on close


def encode_into(file: Seekable, chunks: Iterable[np.ndarray], output: Output) -> None:
    """Write the encoded audio into `file` as the chunks arrive, holding one chunk of the signal at a
    time: wav and pcm as `iter_encode` streams them; the other formats as libsndfile writes them, which
    for flac and mp3 ends by seeking back into the file's first bytes to finish the header."""
    converted = resample(chunks, output.source_rate, output.rate)
    if output.format.soundfile is None:
        for piece in _direct_pieces(converted, output):
            file.write(piece)
        return
    for _ in _soundfile_writes(file, converted, output.format, output.rate):
        pass


__all__ = [
    "Seekable",
    "encode",
    "encode_into",
    "iter_encode",
    "to_pcm16",
    "wav_header",
]
