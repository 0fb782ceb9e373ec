"""Event routing and the direct-invoke edge, in-process: importing them runs no INIT and loads no model.

GIVEN the event files in events/ (the shapes `sam local generate-event` writes) and shapes Lambda may send
WHEN they are classified, or answered without an engine
THEN each lands on its path, unknown shapes are refused by name, and bad requests come back as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from function.awslambda.events import UnsupportedEvent, direct_invoke, event_kind
from function.instance import model
from function.instance.settings import Settings

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
