"""The service path's size limits, without an engine: a synchronous reply carries the whole file when it
fits the edge's allowance, spills it to the output bucket where the edge may, and refuses otherwise, up
front when the text alone shows the file cannot fit. (The service path with the engine, on every edge:
test_every_edge.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from function.aws.s3 import Written
from function.core.errors import OutputTooLarge
from function.core.options import SynthesisOptions
from function.service.synthesis import Allowance, Spill, reply_audio

BUFFERED = Allowance(None, max_response_bytes=40 * 1024)  # a reply Lambda buffers, with a small limit
OPTIONS = SynthesisOptions(text="hello", speaker="someone", format="wav")
WAV = OPTIONS.output(22050)


def test_a_streaming_transport_takes_any_size() -> None:
    streaming = Allowance(None)
    assert streaming.streams and streaming.fits(10**9)
    assert not BUFFERED.streams and BUFFERED.fits(1000) and not BUFFERED.fits(40 * 1024)


def tone(samples: int) -> Iterator[np.ndarray]:
    """What the engine's stream would yield: `samples` of a quiet tone at the model's rate."""
    yield 0.1 * np.sin(np.arange(samples, dtype=np.float32) / 10)


def untouched() -> Iterator[np.ndarray]:
    raise AssertionError("synthesised although the audio could never fit")
    yield  # a generator, like the engine's stream: nothing runs until it is iterated


def test_audio_that_fits_is_returned_whole() -> None:
    data = reply_audio(OPTIONS, WAV, tone(100), BUFFERED)
    assert data[:4] == b"RIFF"


def test_audio_too_large_points_to_the_batch_path() -> None:
    with pytest.raises(OutputTooLarge, match="batch path") as raised:
        reply_audio(OPTIONS, WAV, tone(22050), BUFFERED)
    assert "COSYVOICE_OUTPUT_BUCKET" not in raised.value.message
    no_bucket = replace(BUFFERED, spill=Spill(None, "tts/direct"))  # a direct invoke could spill
    with pytest.raises(OutputTooLarge, match="COSYVOICE_OUTPUT_BUCKET"):
        reply_audio(OPTIONS, WAV, tone(22050), no_bucket)


def test_a_text_whose_audio_cannot_fit_is_refused_before_synthesis() -> None:
    options = SynthesisOptions(text="word " * 40, speaker="someone", format="wav")  # ~13 s: ~590 KB
    with pytest.raises(OutputTooLarge, match="would be ~") as raised:
        reply_audio(options, options.output(22050), untouched(), BUFFERED)
    assert "/v1/jobs" in raised.value.message


def test_audio_too_large_spills_to_the_output_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    stored: list[tuple[Any, ...]] = []
    monkeypatch.setattr("function.service.synthesis.store", lambda *args: stored.append(args))
    spilling = Allowance(None, max_response_bytes=20 * 1024, spill=Spill("out", "tts/direct"))
    written = reply_audio(OPTIONS, WAV, tone(22050), spilling)
    assert isinstance(written, Written) and not written.existed
    assert written.bucket == "out" and written.key.startswith("tts/direct/") and written.key.endswith(".wav")
    ((bucket, key, data, output),) = stored
    assert (bucket, key, output) == ("out", written.key, WAV) and data[:4] == b"RIFF"
