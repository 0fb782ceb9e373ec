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
from function.cosyvoice.budget import expected_speech_seconds
from function.shared.audio import encode
from function.shared.storage import Written, store

PCM_BYTES_PER_SAMPLE = 2  # wav and pcm: s16 mono
# ASGI scope key a server sets when it sends the body as it is made, whatever the body's size (a Function
# URL in RESPONSE_STREAM mode, function.awslambda.streaming): there the buffered-response limit does not
# apply.
STREAMING_TRANSPORT = "cosyvoice.streaming_transport"

if TYPE_CHECKING:
    import numpy as np

    from function.core.formats import Output
    from function.core.options import SynthesisOptions
    from function.shared.settings import Settings


@overload
def reply_audio(
    options: SynthesisOptions,
    output: Output,
    chunks: Iterable[np.ndarray],
    settings: Settings,
    spill: None = None,
) -> bytes: ...
@overload
def reply_audio(
    options: SynthesisOptions,
    output: Output,
    chunks: Iterable[np.ndarray],
    settings: Settings,
    spill: str,
) -> bytes | Written: ...
def reply_audio(
    options: SynthesisOptions,
    output: Output,
    chunks: Iterable[np.ndarray],
    settings: Settings,
    spill: str | None = None,
) -> bytes | Written:
    """`chunks` (the engine's stream for `options`, not started yet) encoded as `output`, when the file
    fits a synchronous response. When it does not: with `spill` (a key folder) and an output bucket, the
    object written under it; otherwise OutputTooLarge, before the stream starts when an uncompressed
    format's expected size is already too large."""
    can_spill = spill is not None and settings.output_bucket is not None
    if not can_spill and output.format.soundfile is None:
        expected = int(expected_speech_seconds([options.text]) * output.rate) * PCM_BYTES_PER_SAMPLE
        # Refused up front only when even half the expected length would not fit: the estimate is a guess.
        if not settings.fits_response(expected // 2):
            raise _too_large(output, settings, f"would be ~{expected} bytes", spill is not None)
    data = encode(chunks, output)
    if settings.fits_response(len(data)):
        return data
    if spill is not None and settings.output_bucket is not None:
        key = f"{settings.output_prefix}{spill}/{uuid.uuid4().hex}.{output.name}"
        store(settings.output_bucket, key, data, output)
        return Written(settings.output_bucket, key, existed=False)
    raise _too_large(output, settings, f"is {len(data)} bytes", spill is not None)


def _too_large(output: Output, settings: Settings, size: str, could_spill: bool) -> OutputTooLarge:
    bucket_hint = ", set COSYVOICE_OUTPUT_BUCKET to receive it from S3" if could_spill else ""
    return OutputTooLarge(
        f"the {output.name} audio {size}, more than a synchronous Lambda response can carry once"
        f" base64-encoded ({settings.max_response_bytes} bytes); send long texts to POST /v1/jobs (the"
        f" batch path: audio in S3){bucket_hint}, or choose a compressed format (mp3, ogg)"
    )


__all__ = ["STREAMING_TRANSPORT", "reply_audio"]
