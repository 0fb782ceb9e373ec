"""The whole audio of a synchronous reply: encoded, checked against the response limit, or spilled to S3.

The HTTP routes and direct invokes both answer with the audio itself, and Lambda caps what a synchronous
response can carry (6 MB, base64-encoded). Both edges encode, check the size and refuse in one way here;
a direct invoke may instead spill the audio to the output bucket and reply with its location.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, overload

from function.audio import encode
from function.errors import OutputTooLarge
from function.storage import Written, store

if TYPE_CHECKING:
    from function.engine import Engine
    from function.options import SynthesisOptions
    from function.settings import Settings


@overload
def reply_audio(
    options: SynthesisOptions, engine: Engine, settings: Settings, spill: None = None
) -> bytes: ...
@overload
def reply_audio(
    options: SynthesisOptions, engine: Engine, settings: Settings, spill: str
) -> bytes | Written: ...
def reply_audio(
    options: SynthesisOptions, engine: Engine, settings: Settings, spill: str | None = None
) -> bytes | Written:
    """The encoded audio when it fits a synchronous response. When it does not: with `spill` (a key
    folder) and an output bucket, the object written under it; otherwise OutputTooLarge."""
    data = encode(engine.stream(options), options.format, engine.sample_rate)
    if settings.fits_response(len(data)):
        return data
    if spill is not None and settings.output_bucket is not None:
        key = f"{settings.output_prefix}{spill}/{uuid.uuid4().hex}.{options.format}"
        store(settings.output_bucket, key, data, options.format, engine.sample_rate)
        return Written(settings.output_bucket, key, existed=False)
    bucket_hint = ", set COSYVOICE_OUTPUT_BUCKET to receive it from S3" if spill is not None else ""
    raise OutputTooLarge(
        f"the {options.format} audio is {len(data)} bytes, more than a synchronous Lambda response can"
        f" carry once base64-encoded ({settings.max_response_bytes} bytes); send long texts to the batch"
        f" path (SQS message → audio in S3){bucket_hint}, or choose a compressed format (mp3, ogg)"
    )


__all__ = ["reply_audio"]
