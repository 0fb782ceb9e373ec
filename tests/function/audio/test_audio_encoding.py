"""Encoders: every format decodes back to the signal's length at its rate (resampled when asked, or when
the codec needs it); wav/pcm stream chunk by chunk; libsndfile's formats are written chunk by chunk, and
flac and mp3 come out as libsndfile writes the whole signal at once."""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
import pytest
import soundfile

from function.audio.encode import _Outbox, encode, iter_encode, to_pcm16
from function.core.errors import UnsupportedFormat
from function.core.formats import FORMATS, Output, audio_format

RATE = 22050


def out(fmt: str, rate: int | None = None) -> Output:
    """A request's output for `fmt` (at `rate`, if asked), for chunks at the model's RATE."""
    return Output.of(fmt, RATE, rate)


DIRECT = {name for name, f in FORMATS.items() if f.soundfile is None}  # written here: wav, pcm
LIBSNDFILE = set(FORMATS) - DIRECT


def chunks() -> list[np.ndarray]:
    t = np.arange(RATE, dtype=np.float32) / RATE
    signal = 0.5 * np.sin(2 * np.pi * 220 * t)
    return [signal[:5000], signal[5000:5001], signal[5001:]]


@pytest.mark.parametrize("rate", [None, 24000], ids=["model-rate", "24khz"])
@pytest.mark.parametrize("fmt", sorted(LIBSNDFILE) + ["wav"])
def test_formats_decode_to_the_same_duration(fmt: str, rate: int | None) -> None:
    audio, decoded_rate = soundfile.read(io.BytesIO(encode(chunks(), out(fmt, rate))))
    assert decoded_rate == out(fmt, rate).rate
    # one second of audio at whatever rate it was written at; mp3 and opus pad their frames
    assert abs(audio.shape[0] - decoded_rate) <= (2400 if fmt in ("mp3", "opus") else 0)


def test_opus_is_written_at_a_rate_it_takes() -> None:
    opus = audio_format("opus")
    assert [opus.rate_for(r) for r in (8000, 22050, 24000, 44100, 96000)] == [
        8000,
        24000,
        24000,
        48000,
        48000,
    ]
    assert audio_format("wav").rate_for(22050) == 22050


def test_resampling_keeps_the_tone() -> None:
    pcm = encode(chunks(), out("pcm", 24000))
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32767
    assert samples.shape[0] == 24000
    spectrum = np.abs(np.fft.rfft(samples))
    assert np.argmax(spectrum) == 220  # 1 s at 24 kHz: bin k is k Hz; the 220 Hz tone stays 220 Hz


def test_wav_is_exact_and_clipped() -> None:
    loud = [np.array([2.0, -2.0, 0.5], dtype=np.float32)]
    audio, _ = soundfile.read(io.BytesIO(encode(loud, out("wav"))), dtype="int16")
    assert audio.tolist() == [32767, -32767, 16384]
    assert encode(loud, out("pcm")) == to_pcm16(loud[0])


@pytest.mark.parametrize("fmt", sorted(DIRECT))
def test_streaming_yields_per_chunk_and_matches_the_buffered_samples(fmt: str) -> None:
    pieces = list(iter_encode(iter(chunks()), out(fmt)))
    assert len(pieces) == len(chunks()) + (fmt == "wav")
    streamed, buffered = b"".join(pieces), encode(chunks(), out(fmt))
    header = 44 if fmt == "wav" else 0
    assert streamed[header:] == buffered[header:]
    if fmt == "wav":
        assert soundfile.read(io.BytesIO(streamed))[0].shape[0] == RATE


@pytest.mark.parametrize("fmt", sorted(DIRECT))
def test_a_resampled_stream_matches_the_resampled_whole(fmt: str) -> None:
    streamed = b"".join(iter_encode(iter(chunks()), out(fmt, 24000)))
    buffered = encode(chunks(), out(fmt, 24000))
    header = 44 if fmt == "wav" else 0
    assert streamed[header:] == buffered[header:] and len(buffered) - header == 2 * 24000


@pytest.mark.parametrize("fmt", sorted(LIBSNDFILE))
def test_ogg_streams_page_by_page_and_the_rest_arrive_whole(fmt: str) -> None:
    signal = np.concatenate(chunks() * 3)  # 3 s
    pieces_of_signal = [signal[start : start + 2205] for start in range(0, signal.shape[0], 2205)]
    pulled = 0

    def source() -> Iterator[np.ndarray]:
        nonlocal pulled
        for piece in pieces_of_signal:
            pulled += 1
            yield piece

    pieces, pulled_at = [], []
    for piece in iter_encode(source(), out(fmt)):
        pieces.append(piece)
        pulled_at.append(pulled)
    streamed, _ = soundfile.read(io.BytesIO(b"".join(pieces)))
    buffered, _ = soundfile.read(io.BytesIO(encode(pieces_of_signal, out(fmt))))
    np.testing.assert_array_equal(streamed, buffered)  # the same audio (Ogg serial numbers are random)
    if FORMATS[fmt].streams:
        assert len(pieces) > 1 and pulled_at[0] < pulled  # a page left before the audio was all made
    else:
        assert len(pieces) == 1


@pytest.mark.parametrize("fmt", ["flac", "mp3"])
def test_headers_finished_on_close_match_the_whole_signal_written_at_once(fmt: str) -> None:
    """libsndfile seeks back into the first bytes to finish flac's and mp3's headers; written chunk by
    chunk, the file is byte for byte the one it writes from the whole signal."""
    whole = io.BytesIO()
    container, subtype = FORMATS[fmt].soundfile or ("", "")
    soundfile.write(whole, np.concatenate(chunks()), RATE, format=container, subtype=subtype)
    assert encode(chunks(), out(fmt)) == whole.getvalue()


def test_a_long_chunk_is_written_to_vorbis_in_pieces() -> None:
    """libsndfile's Vorbis writer puts a write on the C stack: a part's 150 s in one write would crash
    the process, so the encoder hands it over in pieces."""
    long = np.tile(np.concatenate(chunks()), 150)
    audio, rate = soundfile.read(io.BytesIO(b"".join(iter_encode([long], out("ogg")))), dtype="int16")
    assert (rate, audio.shape[0]) == (RATE, long.shape[0])


def test_a_rewrite_of_streamed_bytes_fails_the_stream() -> None:
    """libsndfile swallows what its file's methods raise: the refusal comes back from `take`."""
    outbox = _Outbox()
    outbox.write(b"page")
    outbox.seek(0)
    with pytest.raises(RuntimeError):
        outbox.write(b"PAGE")
    with pytest.raises(RuntimeError, match="rewrote"):
        outbox.take()


def test_unknown_formats_are_refused() -> None:
    with pytest.raises(UnsupportedFormat):
        out("aiff")
    with pytest.raises(UnsupportedFormat, match="AAC encoder.*choose one of wav, flac"):
        out("aac")
