"""Each edge gives synthesis its deadline: refused up front with a 4xx that says what fits, stopped with a
504 when it runs over, and the warm process serves the next request. Over real HTTP (uvicorn) and through
the real Lambda runtime client."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.function.support import EVENTS, SPEAKER, local_lambda, serving

pytestmark = pytest.mark.engine

TEXT = "Sentence number one is here. Sentence number two is here as well, and a third one follows it."


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    return error


def tts(client: httpx.Client, headers: dict[str, str] | None = None, **fields: Any) -> httpx.Response:
    body = {"text": TEXT, "speaker": SPEAKER, "seed": 1, **fields}
    return client.post("/v1/tts", json=body, headers=headers or {})


@contextlib.contextmanager
def client_of(artifact: str, log: Path, **env: str) -> Iterator[httpx.Client]:
    with serving(artifact, log, **env) as url, httpx.Client(base_url=url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def measured(artifact_location: str, tmp_path_factory: pytest.TempPathFactory) -> httpx.Client:
    """A server whose warm-up measured its speed."""
    log = tmp_path_factory.mktemp("deadline") / "server.log"
    with client_of(artifact_location, log) as client:
        yield client


@pytest.mark.parametrize("stream", [False, True])
def test_work_over_the_callers_time_limit_is_refused_up_front(measured: httpx.Client, stream: bool) -> None:
    # 1.02 s less the reply margin: ~20 ms, far less than ~7 s of speech takes on any machine.
    refused = tts(measured, {"X-Request-Timeout": "1.02"}, stream=stream)
    error = assert_error(refused, 413, "exceeds_time_limit")
    assert "X-Request-Timeout" in error["message"] and "/v1/jobs" in error["message"]
    assert "characters fit" in error["message"]
    assert tts(measured, stream=stream).status_code == 200  # the same text without the limit


def test_a_bad_request_timeout_is_a_400(measured: httpx.Client) -> None:
    assert_error(tts(measured, {"X-Request-Timeout": "soon"}), 400, "invalid_request")


def test_the_servers_own_limit_refuses_what_cannot_finish(artifact_location: str, tmp_path: Path) -> None:
    with client_of(artifact_location, tmp_path / "server.log", COSYVOICE_MAX_REQUEST_SECONDS="2") as client:
        error = assert_error(tts(client, text=" ".join([TEXT] * 20)), 413, "exceeds_time_limit")
        assert "this server's longest request" in error["message"]
        assert tts(client, text="Hi.").status_code == 200  # a short text fits the same limit


def test_synthesis_running_over_its_limit_stops_with_a_504(artifact_location: str, tmp_path: Path) -> None:
    # No warm-up: nothing measured, so nothing is refused up front; the deadline still stops the work.
    with client_of(artifact_location, tmp_path / "server.log", COSYVOICE_WARMUP="0") as client:
        error = assert_error(tts(client, {"X-Request-Timeout": "1.0"}), 504, "deadline_exceeded")
        assert "X-Request-Timeout" in error["message"]
        assert tts(client).status_code == 200


def test_a_lambda_invocation_refuses_work_its_remaining_time_cannot_finish(artifact_location: str) -> None:
    event = json.loads((EVENTS / "http-api-tts.json").read_text())
    event["body"] = json.dumps({"text": TEXT, "speaker": SPEAKER, "seed": 7})
    direct = {"text": TEXT, "speaker": SPEAKER, "format": "pcm"}
    with local_lambda(artifact_location) as runtime:
        runtime.wait_init()
        runtime.api.deadline_seconds = 1.05  # the invocation's remaining time, as the Runtime API says
        reply = runtime.invoke(event).json()
        assert reply["statusCode"] == 413, reply
        message = json.loads(reply["body"])["error"]["message"]
        assert "the function's timeout" in message and "/v1/jobs" in message
        assert runtime.invoke(direct).json()["error"]["code"] == "exceeds_time_limit"
        runtime.api.deadline_seconds = 900
        assert runtime.invoke(event).json()["statusCode"] == 200
        assert "audio" in runtime.invoke(direct).json()
        # The gateway took this request 29.5 s ago: whatever the function's timeout, it answers at 30 s.
        event["requestContext"]["timeEpoch"] = int((time.time() - 29.5) * 1000)
        reply = runtime.invoke(event).json()
        assert reply["statusCode"] == 413, reply
        assert "API Gateway's 30 s limit" in json.loads(reply["body"])["error"]["message"]
