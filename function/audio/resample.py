"""Sample-rate conversion of the engine's chunk stream (libsoxr through `soxr`), for formats and routes
whose rate is not the model's: OpenAI's route speaks at 24 kHz, Opus takes no 22,050 Hz.

One resampler state runs across the chunks, so a streamed conversion joins seamlessly and yields the same
samples as converting the whole signal at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np


def resample(chunks: Iterable[np.ndarray], source: int, target: int) -> Iterator[np.ndarray]:
    """float32 mono chunks at `source` Hz → chunks at `target` Hz (the same chunks when the rates match)."""
    if source == target:
        yield from chunks
        return
    import soxr  # only the routes and formats that convert pay for the import

    stream = soxr.ResampleStream(source, target, 1, dtype="float32", quality="HQ")
    for chunk in chunks:
        converted = stream.resample_chunk(np.ascontiguousarray(chunk, dtype=np.float32))
        if converted.size:
            yield converted
    # The filter's delay: the last samples come out only once the stream is told it has ended.
    tail = stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
    if tail.size:
        yield tail


__all__ = ["resample"]
