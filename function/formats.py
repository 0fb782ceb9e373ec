"""The audio formats this package writes: one table, read by the options' check, the HTTP schema and
the encoders alike.

wav and pcm are written directly and stream chunk by chunk; the others go through libsndfile (soundfile),
which finishes its headers on close, so they need the whole signal.
"""

from __future__ import annotations

from dataclasses import dataclass

from function.errors import UnsupportedFormat


@dataclass(frozen=True)
class AudioFormat:
    name: str
    media_type: str
    # libsndfile (container, subtype); None: written directly as s16le (and streamable chunk by chunk)
    soundfile: tuple[str, str] | None = None

    @property
    def streams(self) -> bool:
        return self.soundfile is None


FORMATS: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat("wav", "audio/wav"),
        AudioFormat("flac", "audio/flac", ("FLAC", "PCM_16")),
        AudioFormat("ogg", "audio/ogg", ("OGG", "VORBIS")),
        AudioFormat("mp3", "audio/mpeg", ("MP3", "MPEG_LAYER_III")),
        # headerless signed 16-bit little-endian mono; the rate is in X-Sample-Rate
        AudioFormat("pcm", "audio/pcm"),
    )
}


def audio_format(name: str) -> AudioFormat:
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise UnsupportedFormat(
            f"format {name!r} is not supported; choose one of {', '.join(FORMATS)}"
        ) from None


__all__ = ["FORMATS", "AudioFormat", "audio_format"]
