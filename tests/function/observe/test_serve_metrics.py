"""`serve` observed: every reply names its request, each request leaves one log line, and /metrics (read
with prometheus_client's own parser) counts what was sent and received."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.function.observe.support import Samples, grew, json_lines, scrape, seconds_of, total
from tests.function.support import SPEAKER, serving

pytestmark = pytest.mark.engine

TENANT_KEY, DEFAULT_KEY = "acme-key-1", "plain-key-1"
MAX_TEXT_CHARS = 120
TEXT = "Hello there, measured."


@pytest.fixture(scope="module")
def server(artifact_location: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("observed") / "server.log"
    keys = f"acme={TENANT_KEY},{DEFAULT_KEY}"
    with serving(
        artifact_location, log, COSYVOICE_API_KEYS=keys, COSYVOICE_MAX_TEXT_CHARS=str(MAX_TEXT_CHARS)
    ) as url:
        yield url, log


def client(url: str, key: str | None = DEFAULT_KEY) -> httpx.Client:
    headers = {} if key is None else {"X-API-Key": key}
    return httpx.Client(base_url=url, headers=headers, timeout=120)


def request_lines(log: Path) -> list[dict[str, Any]]:
    return json_lines(log.read_text().splitlines(), "request")


def line_of(log: Path, request_id: str) -> dict[str, Any]:
    """The request's line: `serve` writes it from a thread of its own, just after the reply."""
    deadline = time.monotonic() + 10
    while not (found := [line for line in request_lines(log) if line["request_id"] == request_id]):
        assert time.monotonic() < deadline, f"no line for {request_id}"
        time.sleep(0.05)
    (line,) = found
    return line


def test_counts_characters_and_audio_are_what_was_sent_and_received(server: tuple[str, Path]) -> None:
    url, log = server
    before = scrape(url)
    with client(url, TENANT_KEY) as acme, client(url) as plain:
        whole = acme.post("/v1/tts", json={"text": TEXT, "speaker": SPEAKER})
        with plain.stream(
            "POST", "/v1/tts", json={"text": TEXT, "speaker": SPEAKER, "stream": True}
        ) as reply:
            streamed = b"".join(reply.iter_bytes())
            assert reply.status_code == 200
        openai = plain.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "input": TEXT, "voice": SPEAKER, "response_format": "wav"},
        )
        invalid = plain.post("/v1/tts", json={"text": 1, "speaker": SPEAKER})
        unknown = plain.get("/no/such/route")
    after = scrape(url)
    assert (whole.status_code, openai.status_code, invalid.status_code, unknown.status_code) == (
        200,
        200,
        422,
        404,
    )

    def requests(route: str, code: str, **labels: str) -> float:
        return grew(before, after, "cosyvoice_requests_total", route=route, code=code, **labels)

    assert requests("/v1/tts", "200", tenant="acme") == 1
    assert requests("/v1/tts", "200", tenant="default") == 1
    assert requests("/v1/audio/speech", "200") == 1
    assert requests("/v1/tts", "422") == 1
    assert requests("other", "404") == 1
    assert grew(before, after, "cosyvoice_request_duration_seconds_count", route="/v1/tts") == 3
    characters = grew(before, after, "cosyvoice_request_characters_total", route="/v1/tts")
    assert characters == 2 * len(TEXT)
    assert grew(before, after, "cosyvoice_request_characters_total", route="/v1/tts", tenant="acme") == len(
        TEXT
    )
    assert grew(before, after, "cosyvoice_request_characters_total", route="/v1/audio/speech") == len(TEXT)
    spoken = grew(before, after, "cosyvoice_audio_seconds_total", route="/v1/tts")
    assert spoken == pytest.approx(seconds_of(whole.content) + seconds_of(streamed), abs=0.01)
    heard = grew(before, after, "cosyvoice_audio_seconds_total", route="/v1/audio/speech")
    assert heard == pytest.approx(seconds_of(openai.content), abs=0.01)  # resampled to 24 kHz: same length
    # Only the streamed reply's first audio is what its caller waited for.
    assert grew(before, after, "cosyvoice_time_to_first_audio_seconds_count", route="/v1/tts") == 1
    assert grew(before, after, "cosyvoice_realtime_factor_count") == 3
    assert grew(before, after, "cosyvoice_realtime_factor_sum") > 0


def test_every_reply_names_its_request_and_errors_say_it_in_the_body(server: tuple[str, Path]) -> None:
    url, log = server
    with client(url) as plain:
        replies = [
            plain.get("/healthz"),
            plain.post("/v1/tts", json={"text": TEXT, "speaker": SPEAKER}),
            plain.post("/v1/tts", json={"speaker": SPEAKER}),
            plain.get("/v1/jobs/nothing-here"),
            plain.delete("/v1/tts"),
        ]
        own = plain.get("/healthz", headers={"X-Request-Id": "caller-chosen.1"})
        insane = plain.get("/healthz", headers={"X-Request-Id": "a b"})
    ids = [reply.headers["X-Request-Id"] for reply in replies]
    assert all(ids) and len(set(ids)) == len(ids)
    for reply in replies:
        if reply.status_code >= 400:
            assert reply.json()["error"]["request_id"] == reply.headers["X-Request-Id"]
            assert int(reply.headers["content-length"]) == len(reply.content)
    assert own.headers["X-Request-Id"] == "caller-chosen.1"
    assert insane.headers["X-Request-Id"] not in ("a b", "")
    for reply in [*replies, own]:
        line = line_of(log, reply.headers["X-Request-Id"])
        assert line["status"] == reply.status_code
    line = line_of(log, ids[1])
    assert (line["route"], line["tenant"], line["characters"]) == ("/v1/tts", "default", len(TEXT))
    assert line["audio_seconds"] == pytest.approx(seconds_of(replies[1].content), abs=0.001)
    assert line["duration_ms"] > 0 and line["first_audio_ms"] is None  # a whole reply
    assert TEXT not in log.read_text() and DEFAULT_KEY not in log.read_text()
    assert line_of(log, ids[3])["route"] == "/v1/jobs/{job_id}"  # the template, not the path


def test_refusals_are_counted_by_reason(server: tuple[str, Path]) -> None:
    url, _ = server
    before = scrape(url)
    with client(url) as plain, client(url, key=None) as anonymous:
        long = plain.post("/v1/tts", json={"text": "x" * (MAX_TEXT_CHARS + 1), "speaker": SPEAKER})
        refused = anonymous.post("/v1/tts", json={"text": TEXT, "speaker": SPEAKER})
        unsigned = anonymous.post(
            "/polly/v1/speech", json={"Text": TEXT, "VoiceId": "Joanna", "OutputFormat": "mp3"}
        )
    after = scrape(url)
    assert (long.status_code, refused.status_code, unsigned.status_code) == (413, 401, 403)
    assert grew(before, after, "cosyvoice_rejected_total", reason="too_long") == 1
    assert grew(before, after, "cosyvoice_rejected_total", reason="unauthorized") == 2
    assert grew(before, after, "cosyvoice_requests_total", route="/polly/v1/speech", code="403") == 1
    assert unsigned.headers["x-amzn-RequestId"] and "request_id" not in unsigned.json()  # Polly's shape


def test_the_instance_describes_itself(server: tuple[str, Path]) -> None:
    url, _ = server
    samples: Samples = scrape(url)
    (build,) = [labels for name, labels, _ in samples if name == "cosyvoice_build_info"]
    assert set(build) == {"version", "artifact", "llm_weights", "flow_weights", "vocoder_weights"}
    assert len(build["artifact"]) == 12 and build["llm_weights"] in ("fp32", "int8", "fp32+int8")
    assert total(samples, "cosyvoice_slots_busy") == 0 and total(samples, "cosyvoice_requests_waiting") == 0
    assert total(samples, "process_cpu_seconds_total") > 0  # prometheus_client's process collector
    assert any(name == "python_info" for name, _, _ in samples)  # and its platform collector
