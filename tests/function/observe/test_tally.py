"""What a unit of work measures (function.observe.tally), how its line is shaped (function.observe.lines)
and what a reply's error says (function.api.request_ids), without a model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from starlette.testclient import TestClient

from function.api.request_ids import naming
from function.instance import settings as settings_module
from function.instance.settings import Settings
from function.observe.lines import text_line
from function.observe.tally import Tally, current, measured, taken, tallying

RATE = 1000


def chunks(count: int, size: int = 500) -> Iterator[np.ndarray]:
    for _ in range(count):
        yield np.zeros(size, np.float32)


@pytest.fixture(autouse=True)
def settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "_settings", Settings(artifact="unused"))


def test_a_run_adds_its_audio_and_first_audio_to_the_tally() -> None:
    work = Tally()
    drawn = list(measured(chunks(3), work, RATE))
    assert len(drawn) == 3
    assert work.audio_seconds == 1.5 and work.compute_seconds > 0
    assert work.first_audio_seconds is not None and work.first_audio_seconds <= work.elapsed()
    assert work.realtime_factor == work.compute_seconds / 1.5
    list(measured(chunks(1), work, RATE))  # a second run (a job's next part) adds to the first
    assert work.audio_seconds == 2.0


def test_a_run_closed_early_counts_what_was_drawn() -> None:
    work = Tally()
    run = measured(chunks(4), work, RATE)
    next(run)
    run.close()
    assert work.audio_seconds == 0.5
    assert Tally().realtime_factor is None  # no audio, no factor


def test_work_without_an_edge_s_tally_is_the_thread_s_until_taken() -> None:
    own = current()
    own.characters = 7
    assert taken() is own and current() is not own and current().characters == 0
    edge = Tally()
    with tallying(edge):
        assert current() is edge
        seen: list[Tally] = []
        thread = threading.Thread(target=lambda: seen.append(current()))
        thread.start()
        thread.join()
        assert seen[0] is not edge  # a thread started by hand has a context of its own
    assert current() is not edge


def test_an_error_body_names_its_request_and_other_bodies_pass_unchanged() -> None:
    named, code = naming(json.dumps({"error": {"code": "busy", "message": "later"}}).encode(), "r-1")
    assert json.loads(named) == {"error": {"code": "busy", "message": "later", "request_id": "r-1"}}
    assert code == "busy"
    for body in (b"not json", b'{"detail": "x"}', b"[1]"):
        assert naming(body, "r-1") == (body, None)


def test_a_text_line_is_readable_and_leaves_out_what_is_empty() -> None:
    line = {"event": "request", "request_id": "r-1", "route": "/v1/tts", "status": 200, "code": None}
    line |= {"path": "/a b", "duration_ms": 1.5}
    assert text_line(line) == 'request request_id=r-1 route=/v1/tts status=200 path="/a b" duration_ms=1.5'


def test_metrics_off_means_no_metrics_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from function.api.app import app

    monkeypatch.setattr(settings_module, "_settings", Settings(artifact="unused", metrics=False))
    off = TestClient(app).get("/metrics")
    assert off.status_code == 404 and off.json()["error"]["request_id"] == off.headers["x-request-id"]
    monkeypatch.setattr(settings_module, "_settings", Settings(artifact="unused"))
    on = TestClient(app).get("/metrics")
    assert on.status_code == 200 and "cosyvoice_requests_total" in on.text
