"""Event routing and the direct-invoke edge, in-process: importing them runs no INIT and loads no model.

GIVEN the event files in events/ (the shapes `sam local generate-event` writes) and shapes Lambda may send
WHEN they are classified, or answered without an engine
THEN each lands on its path, unknown shapes are refused by name, and bad requests come back as JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from function.awslambda.events import UnsupportedEvent, direct_invoke, event_kind
from function.core.errors import OutputTooLarge
from function.core.options import SynthesisOptions
from function.shared import model
from function.shared.reply import reply_audio
from function.shared.settings import Settings
from function.shared.storage import Written

EVENTS = Path(__file__).resolve().parents[3] / "events"
KIND_BY_PREFIX = {
    "alb-": "http",
    "function-url-": "http",
    "http-api-": "http",
    "rest-api-": "http",
    "sqs-": "sqs",
    "direct-": "direct",
}
SETTINGS = Settings(artifact="unused/by/these/tests", max_response_bytes=40 * 1024)


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def test_importing_the_routing_runs_no_init() -> None:
    assert "function.awslambda.handler" not in sys.modules
    assert model.loaded_engine() is None


@pytest.mark.parametrize("name", sorted(path.name for path in EVENTS.glob("*.json")))
def test_every_event_file_lands_on_its_path(name: str) -> None:
    (kind,) = [kind for prefix, kind in KIND_BY_PREFIX.items() if name.startswith(prefix)]
    assert event_kind(load(name)) == kind


@pytest.mark.parametrize(
    "event",
    [
        {"detail-type": "Scheduled Event", "source": "aws.events"},
        {"Records": [{"eventSource": "aws:sqs"}, {"EventSource": "aws:sns"}]},  # a mixed batch
        {"Records": []},
        {"requestContext": {"accountId": "1"}},  # neither HTTP nor ALB
        ["text"],
        "text",
    ],
)
def test_other_shapes_are_not_served(event: Any) -> None:
    assert event_kind(event) is None


def test_an_unsupported_event_names_its_keys_and_the_shapes_served() -> None:
    error = UnsupportedEvent.of({"source": "aws.events", "detail-type": "Scheduled Event"})
    assert error.code == "unsupported_event" and error.status == 400
    assert "['detail-type', 'source']" in error.message and "SQS" in error.message
    assert "list" in UnsupportedEvent.of([1]).message


@pytest.mark.parametrize(
    ("event", "code"),
    [
        ({**load("direct-tts.json"), "speed": "fast"}, "invalid_request"),
        ({**load("direct-tts.json"), "text": ""}, "invalid_request"),
        ({**load("direct-tts.json"), "format": "aiff"}, "unsupported_format"),
    ],
)
def test_a_bad_direct_request_comes_back_as_json_without_loading_the_model(
    event: dict[str, Any], code: str
) -> None:
    reply = direct_invoke(event, SETTINGS)
    assert reply["error"]["code"] == code
    assert model.loaded_engine() is None


def tone(samples: int) -> Iterator[np.ndarray]:
    """What the engine's stream would yield: `samples` of a quiet tone at the model's rate."""
    yield 0.1 * np.sin(np.arange(samples, dtype=np.float32) / 10)


def untouched() -> Iterator[np.ndarray]:
    raise AssertionError("synthesised although the audio could never fit")
    yield  # a generator, like the engine's stream: nothing runs until it is iterated


OPTIONS = SynthesisOptions(text="hello", speaker="someone", format="wav")
WAV = OPTIONS.output(22050)


def test_audio_that_fits_is_returned_whole() -> None:
    data = reply_audio(OPTIONS, WAV, tone(100), SETTINGS)
    assert data[:4] == b"RIFF"


def test_audio_too_large_points_to_the_batch_path() -> None:
    with pytest.raises(OutputTooLarge, match="batch path") as raised:
        reply_audio(OPTIONS, WAV, tone(22050), SETTINGS)
    assert "COSYVOICE_OUTPUT_BUCKET" not in raised.value.message
    with pytest.raises(OutputTooLarge, match="COSYVOICE_OUTPUT_BUCKET"):  # a direct invoke could spill
        reply_audio(OPTIONS, WAV, tone(22050), SETTINGS, spill="direct")


def test_a_text_whose_audio_cannot_fit_is_refused_before_synthesis() -> None:
    options = SynthesisOptions(text="word " * 40, speaker="someone", format="wav")  # ~13 s: ~590 KB
    with pytest.raises(OutputTooLarge, match="would be ~") as raised:
        reply_audio(options, options.output(22050), untouched(), SETTINGS)
    assert "/v1/jobs" in raised.value.message


def test_audio_too_large_spills_to_the_output_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    stored: list[tuple[Any, ...]] = []
    monkeypatch.setattr("function.shared.reply.store", lambda *args: stored.append(args))
    settings = Settings(artifact="unused", output_bucket="out", max_response_bytes=20 * 1024)
    written = reply_audio(OPTIONS, WAV, tone(22050), settings, spill="direct")
    assert isinstance(written, Written) and not written.existed
    assert written.bucket == "out" and written.key.startswith("tts/direct/") and written.key.endswith(".wav")
    ((bucket, key, data, output),) = stored
    assert (bucket, key, output) == ("out", written.key, WAV) and data[:4] == b"RIFF"
