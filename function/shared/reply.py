"""The whole audio of a synchronous reply: encoded, checked against the response limit, or spilled to S3.

The HTTP routes and direct invokes both answer with the audio itself, and Lambda caps what a synchronous
response can carry (6 MB, base64-encoded). Both edges encode, check the size and refuse in one way here;
a direct invoke may instead spill the audio to the output bucket and reply with its location.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, overload

from function.core.errors import OutputTooLarge
from function.core.formats import audio_format
from function.cosyvoice.budget import expected_speech_seconds
from function.shared.audio import encode, output_rate
from function.shared.storage import Written, store

PCM_BYTES_PER_SAMPLE = 2  # wav and pcm: s16 mono
# ASGI scope key a server sets when it sends the body as it is made, whatever the body's size (a Function
# URL in RESPONSE_STREAM mode, function.awslambda.streaming): there the buffered-response limit does not
# apply.
STREAMING_TRANSPORT = "cosyvoice.streaming_transport"

if TYPE_CHECKING:
    import numpy as np

    from function.core.options import SynthesisOptions
    from function.cosyvoice.engine import Engine
    from function.shared.settings import Settings


@overload
def reply_audio(
    options: SynthesisOptions,
    engine: Engine,
    settings: Settings,
    spill: None = None,
    chunks: Iterable[np.ndarray] | None = None,
) -> bytes: ...
@overload
def reply_audio(
    options: SynthesisOptions,
    engine: Engine,
    settings: Settings,
    spill: str,
    chunks: Iterable[np.ndarray] | None = None,
) -> bytes | Written: ...
def reply_audio(
    options: SynthesisOptions,
    engine: Engine,
    settings: Settings,
    spill: str | None = None,
    chunks: Iterable[np.ndarray] | None = None,
) -> bytes | Written:
    """The encoded audio when it fits a synchronous response. When it does not: with `spill` (a key
    folder) and an output bucket, the object written under it; otherwise OutputTooLarge, up front when
    an uncompressed format's expected size is already too large. `chunks`: the engine's stream for
    `options`, when the caller holds it already (to measure it, or to give it a deadline)."""
    can_spill = spill is not None and settings.output_bucket is not None
    rate = output_rate(options.format, engine.sample_rate, options.sample_rate)
    if not can_spill and audio_format(options.format).soundfile is None:
        expected = int(expected_speech_seconds([options.text]) * rate) * PCM_BYTES_PER_SAMPLE
        # Refused up front only when even half the expected length would not fit: the estimate is a guess.
        if not settings.fits_response(expected // 2):
            raise _too_large(options, settings, f"would be ~{expected} bytes", spill is not None)
    audio = engine.stream(options) if chunks is None else chunks
    data = encode(audio, options.format, engine.sample_rate, options.sample_rate)
    if settings.fits_response(len(data)):
        return data
    if spill is not None and settings.output_bucket is not None:
        key = f"{settings.output_prefix}{spill}/{uuid.uuid4().hex}.{options.format}"
        store(settings.output_bucket, key, data, options.format, rate)
        return Written(settings.output_bucket, key, existed=False)
    raise _too_large(options, settings, f"is {len(data)} bytes", spill is not None)


def _too_large(options: SynthesisOptions, settings: Settings, size: str, could_spill: bool) -> OutputTooLarge:
    bucket_hint = ", set COSYVOICE_OUTPUT_BUCKET to receive it from S3" if could_spill else ""
    return OutputTooLarge(
        f"the {options.format} audio {size}, more than a synchronous Lambda response can carry once"
        f" base64-encoded ({settings.max_response_bytes} bytes); send long texts to POST /v1/jobs (the"
        f" batch path: audio in S3){bucket_hint}, or choose a compressed format (mp3, ogg)"
    )


__all__ = ["STREAMING_TRANSPORT", "reply_audio"]
