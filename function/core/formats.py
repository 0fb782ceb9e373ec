"""The audio formats this package writes: one table, read by the options' check, the HTTP schema and
the encoders alike.

wav and pcm are written directly and stream chunk by chunk; the others go through libsndfile (soundfile):
Ogg (Vorbis, Opus) streams page by page, flac and mp3 need the whole signal (libsndfile finishes their
headers on close). A codec that takes only some sample rates (Opus: 8, 12, 16, 24 or 48 kHz) is fed the
nearest one at or above the requested rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from function.core.errors import UnsupportedFormat


@dataclass(frozen=True)
class AudioFormat:
    name: str
    media_type: str
    # libsndfile (container, subtype); None: written directly as s16le (and streamable chunk by chunk)
    soundfile: tuple[str, str] | None = None
    rates: tuple[int, ...] | None = None  # the only sample rates the codec takes; None: any
    # libsndfile only appends to the file (Ogg pages), so its bytes can be sent as they are written;
    # else it seeks back on close to finish a header (flac, mp3) and the file leaves whole
    appends: bool = False

    @property
    def streams(self) -> bool:
        """Whether the file can leave piece by piece as the audio is made."""
        return self.soundfile is None or self.appends

    def rate_for(self, rate: int) -> int:
        """The rate this format is written at when `rate` is asked for."""
        if self.rates is None or rate in self.rates:
            return rate
        return min((r for r in self.rates if r >= rate), default=max(self.rates))


FORMATS: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat("wav", "audio/wav"),
        AudioFormat("flac", "audio/flac", ("FLAC", "PCM_16")),
        AudioFormat("ogg", "audio/ogg", ("OGG", "VORBIS"), appends=True),
        AudioFormat("mp3", "audio/mpeg", ("MP3", "MPEG_LAYER_III")),
        # headerless signed 16-bit little-endian mono; the rate is in X-Sample-Rate
        AudioFormat("pcm", "audio/pcm"),
        AudioFormat(
            "opus",
            "audio/ogg; codecs=opus",
            ("OGG", "OPUS"),
            (8000, 12000, 16000, 24000, 48000),
            appends=True,
        ),
    )
}
# Formats clients ask for that this package does not write, and why (said in the 400).
UNAVAILABLE = {
    "aac": "no AAC encoder on PyPI fits the Lambda package (PyAV bundles all of FFmpeg)",
}


@dataclass(frozen=True)
class Output:
    """What a request's audio leaves as, resolved once at the edge (SynthesisOptions.output): the format
    and the rate it is written at, for the engine's chunks at `source_rate`. Encoders, storage and
    replies take this, never a format's name."""

    format: AudioFormat
    rate: int  # Hz the file is written at: the asked-for rate, or the nearest the codec takes
    source_rate: int  # Hz of the chunks the engine yields (the model's)

    @classmethod
    def of(cls, name: str, source_rate: int, asked_rate: int | None = None) -> Output:
        fmt = audio_format(name)
        return cls(fmt, fmt.rate_for(asked_rate or source_rate), source_rate)

    @property
    def name(self) -> str:
        return self.format.name

    @property
    def media_type(self) -> str:
        return self.format.media_type


def audio_format(name: str) -> AudioFormat:
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        reason = f": {UNAVAILABLE[name]}" if isinstance(name, str) and name in UNAVAILABLE else ""
        raise UnsupportedFormat(
            f"format {name!r} is not supported{reason}; choose one of {', '.join(FORMATS)}"
        ) from None


__all__ = ["FORMATS", "UNAVAILABLE", "AudioFormat", "Output", "audio_format"]
