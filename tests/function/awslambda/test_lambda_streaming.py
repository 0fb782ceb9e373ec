"""Response streaming on Lambda: function.awslambda.streaming against the local Runtime API, which reads a
streamed reply chunk by chunk (with its arrival times), splits off the HTTP prelude and keeps the trailers.

GIVEN a Function URL event → the reply streams (prelude, then audio chunks as they are made); errors
after the start → the error trailers; every other event → answered whole, as under awslambdaric; the
SnapStart handshake. The first group needs no engine: the ASGI bridge with stand-in apps.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile
from mangum import Mangum

from function.awslambda.streaming.client import HTTP_INTEGRATION, LambdaContext
from function.awslambda.streaming.function_url import INTERNAL_ERROR, is_function_url, prelude, stream_http
from function.local.invoke import LocalLambda, RuntimeFailed
from function.local.runtime_api import HTTPReply, Invocation
from tests.function.support import EVENTS, SPEAKER, aws_env, clean_env, moto_client

FAULTS = Path(__file__).with_name("stream_faults.py")
URL_EVENT = json.loads((EVENTS / "function-url-tts.json").read_text())
TEXT = "Hello there. This sentence is long enough to come out in several chunks as it is made."
TRAILERS = ("Lambda-Runtime-Function-Error-Type", "Lambda-Runtime-Function-Error-Body")


def url_event(payload: Any, path: str = "/v1/tts", method: str = "POST") -> dict[str, Any]:
    """The Function URL event file, asking for `payload` (JSON, or raw bytes) at `path`."""
    event = json.loads(json.dumps(URL_EVENT))
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    event["body"] = base64.b64encode(raw).decode()
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    return event


def tts(**fields: Any) -> dict[str, Any]:
    return {"text": TEXT, "speaker": SPEAKER, "format": "wav", "seed": 4, **fields}


def decode(data: bytes) -> np.ndarray:
    return soundfile.read(io.BytesIO(data), dtype="float32")[0]


def streaming_lambda(
    artifact: str, snapstart: bool = False, fault: str | None = None, **env: str
) -> LocalLambda:
    launcher = (str(FAULTS), fault) if fault else ("-m", "function.local.runtime")
    return LocalLambda(
        clean_env(COSYVOICE_ARTIFACT=artifact, **env), snapstart=snapstart, stream=True, launcher=launcher
    )


def streamed(invocation: Invocation) -> HTTPReply:
    assert invocation.ok and invocation.streamed, invocation.body[:500]
    assert invocation.content_type == HTTP_INTEGRATION
    assert set(TRAILERS) <= set(invocation.declared_trailers)  # declared up front, as HTTP/1.1 requires
    return invocation.http()


# --- the ASGI bridge, with stand-in apps (no engine) ------------------------------------------------------


class Recorder:
    """A ResponseStream that keeps what was written."""

    def __init__(self) -> None:
        self.data = b""
        self.closed: tuple[str | None, Any] | None = None

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self, error_type: str | None = None, error: Any = None) -> None:
        self.closed = (error_type, error)

    def split(self) -> tuple[dict[str, Any], bytes]:
        head, _, body = self.data.partition(b"\0" * 8)
        return json.loads(head), body


def context(seconds: float = 5.0) -> LambdaContext:
    deadline = int((time.time() + seconds) * 1000)
    return LambdaContext("req-1", "arn:aws:lambda:us-east-1:1:function:f", deadline, "f", "1", 3008, "g", "s")


def bridge(app: Any, event: dict[str, Any] | None = None, ctx: LambdaContext | None = None) -> Recorder:
    recorder = Recorder()
    loop = asyncio.new_event_loop()
    try:
        coroutine = stream_http(app, event or url_event(tts()), ctx or context(), lambda: recorder)
        loop.run_until_complete(coroutine)
    finally:
        loop.close()
    return recorder


def test_only_function_url_events_are_streamed() -> None:
    assert is_function_url(URL_EVENT)
    others = [
        json.loads(path.read_text()) for path in EVENTS.glob("*.json") if path.stem != "function-url-tts"
    ]
    assert others and not any(is_function_url(event) for event in others)


def test_the_scope_is_mangums_with_the_event_and_a_live_context() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.update(scope)
        seen["body"] = (await receive())["body"]
        seen["remaining_ms"] = scope["aws.context"].get_remaining_time_in_millis()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    event, ctx = url_event(tts()), context()
    recorder = bridge(app, event, ctx)
    expected = Mangum(app, lifespan="off").infer(event, ctx).scope
    assert {k: v for k, v in seen.items() if k in expected} == expected
    assert seen["aws.event"] is event and seen["aws.context"] is ctx
    assert 0 < seen["remaining_ms"] <= 5000  # read from the invocation's deadline, not a copy
    assert json.loads(seen["body"]) == tts()
    assert recorder.split() == ({"statusCode": 204, "headers": {}, "cookies": []}, b"")


def test_the_prelude_joins_repeated_headers_and_lifts_cookies() -> None:
    headers = [(b"X-A", b"1"), (b"x-a", b"2"), (b"Set-Cookie", b"a=1"), (b"set-cookie", b"b=2")]
    head, end, rest = prelude(201, headers).partition(b"\0" * 8)
    assert (end, rest) == (b"\0" * 8, b"")
    assert json.loads(head) == {"statusCode": 201, "headers": {"x-a": "1,2"}, "cookies": ["a=1", "b=2"]}


def test_an_app_error_before_the_start_is_a_json_500() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom")

    recorder = bridge(app)
    head, body = recorder.split()
    assert head["statusCode"] == 500 and head["headers"]["content-type"] == "application/json"
    assert json.loads(body) == INTERNAL_ERROR and b"boom" not in recorder.data
    assert recorder.closed == (None, None)


def test_an_app_error_after_the_start_becomes_the_error_trailers() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"audio/wav")]}
        )
        await send({"type": "http.response.body", "body": b"RIFF", "more_body": True})
        raise RuntimeError("boom")

    recorder = bridge(app)
    assert recorder.split() == (
        {"statusCode": 200, "headers": {"content-type": "audio/wav"}, "cookies": []},
        b"RIFF",
    )
    assert recorder.closed == ("Function.RuntimeError", INTERNAL_ERROR)


# --- through the runtime process, on the tiny model ---------------------------------------------------------


@pytest.fixture(scope="module")
def output_bucket(moto_endpoint: str) -> dict[str, str]:
    """An output bucket on moto_server, and the environment that points the function at it."""
    env = {**aws_env(moto_endpoint), "COSYVOICE_OUTPUT_BUCKET": f"stream-{time.monotonic_ns()}"}
    moto_client("s3", moto_endpoint).create_bucket(Bucket=env["COSYVOICE_OUTPUT_BUCKET"])
    return env


@pytest.fixture(scope="module")
def runtime(artifact_location: str, output_bucket: dict[str, str]) -> Iterator[LocalLambda]:
    with streaming_lambda(artifact_location, **output_bucket) as runtime:
        runtime.wait_init()
        runtime.invoke(url_event(tts()))  # the web stack loads with the first HTTP event: time warm calls
        yield runtime


@pytest.mark.engine
def test_a_streamed_request_arrives_in_chunks_while_it_is_made(runtime: LocalLambda) -> None:
    text = TEXT * 3  # a dozen seconds of speech: several chunks of 50-100 tokens after the first 25
    whole = runtime.invoke(url_event(tts(text=text)))
    invocation = runtime.invoke(url_event(tts(text=text, stream=True)))
    reply = streamed(invocation)
    assert reply.status == 200
    assert reply.headers["content-type"] == "audio/wav" and reply.headers["x-sample-rate"] == "22050"
    assert "content-length" not in reply.headers and invocation.trailers == {}
    header, first, *rest = reply.chunks  # the wav header leaves with the first audio
    assert header.data.startswith(b"RIFF") and len(rest) >= 2, [len(c.data) for c in reply.chunks]
    # Several writes, not one buffered body. That the first leaves before the last is made: the
    # mid-stream error test below, where the engine fails after its first chunk and the client already
    # has that chunk's audio.
    # A whole-utterance request draws the same tokens: as many samples (streaming moves only the seams).
    assert decode(reply.body).shape == decode(streamed(whole).body).shape


@pytest.mark.engine
def test_the_stream_is_the_one_serve_sends(runtime: LocalLambda, server: str) -> None:
    """Same seed, same bytes as `python -m function serve` streams them: the transport changes nothing."""
    reply = streamed(runtime.invoke(url_event(tts(stream=True))))
    with httpx.stream("POST", f"{server}/v1/tts", json=tts(stream=True), timeout=120) as response:
        assert response.headers["transfer-encoding"] == "chunked"
        assert reply.body == response.read()


@pytest.mark.engine
def test_openai_speech_events_stream_through_the_url(runtime: LocalLambda) -> None:
    speech = {
        "model": "tts-1",
        "input": TEXT,
        "voice": SPEAKER,
        "response_format": "pcm",
        "stream_format": "sse",
    }
    reply = streamed(runtime.invoke(url_event(speech, "/v1/audio/speech")))
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in reply.body.decode().splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events[-1:]] == ["speech.audio.done"] and len(events) > 2
    assert len(reply.chunks) > 2  # event by event, as the audio is made


@pytest.mark.engine
def test_a_non_stream_request_comes_back_whole(runtime: LocalLambda) -> None:
    reply = streamed(runtime.invoke(url_event(tts(format="flac"))))
    assert reply.status == 200 and reply.headers["content-type"] == "audio/flac"
    assert int(reply.headers["content-length"]) == len(reply.body)
    assert decode(reply.body).size > 0


@pytest.mark.engine
@pytest.mark.parametrize(
    ("payload", "path", "method", "status", "code"),
    [
        (tts(speaker="nobody", stream=True), "/v1/tts", "POST", 400, "unknown_speaker"),
        (b"{not json", "/v1/tts", "POST", 400, "invalid_json"),
        (tts(text="x" * 5000, stream=True), "/v1/tts", "POST", 413, "text_too_long"),
        (tts(), "/v1/nothing", "POST", 404, "not_found"),
    ],
    ids=["unknown-speaker", "invalid-json", "text-too-long", "no-route"],
)
def test_client_errors_come_back_as_their_status_with_the_json_error(
    runtime: LocalLambda, payload: Any, path: str, method: str, status: int, code: str
) -> None:
    invocation = runtime.invoke(url_event(payload, path, method))
    reply = streamed(invocation)
    assert reply.status == status and reply.headers["content-type"] == "application/json"
    assert json.loads(reply.body)["error"]["code"] == code
    assert invocation.trailers == {}


@pytest.mark.engine
def test_the_runtime_survives_bad_invocations_and_serves_the_next(runtime: LocalLambda) -> None:
    garbage = runtime.invoke(b"\xff not an event")
    assert not garbage.ok and garbage.json()["errorType"] == "Runtime.UnmarshalError"
    unknown = runtime.invoke({"detail-type": "Scheduled Event", "source": "aws.events"})
    assert not unknown.ok and unknown.error_type == "UnsupportedEvent"
    assert {"errorMessage", "errorType", "requestId", "stackTrace"} <= set(unknown.json())
    assert streamed(runtime.invoke(url_event(tts(stream=True)))).status == 200


@pytest.mark.engine
@pytest.mark.parametrize("name", ["http-api-tts", "rest-api-tts", "alb-speech", "http-api-speakers"])
def test_other_http_events_are_answered_whole_through_mangum(runtime: LocalLambda, name: str) -> None:
    invocation = runtime.invoke(json.loads((EVENTS / f"{name}.json").read_text()))
    assert invocation.ok and not invocation.streamed
    reply = invocation.json()
    assert reply["statusCode"] == 200, reply.get("body")
    if reply["headers"]["content-type"].startswith("audio/"):
        assert decode(base64.b64decode(reply["body"])).size > 0
    else:
        assert SPEAKER in json.loads(reply["body"])["speakers"]


@pytest.mark.engine
def test_direct_invocations_and_sqs_batches_are_answered_whole(runtime: LocalLambda) -> None:
    direct = runtime.invoke(json.loads((EVENTS / "direct-tts.json").read_text()))
    assert direct.ok and not direct.streamed
    assert decode(base64.b64decode(direct.json()["audio"])).size > 0
    batch = runtime.invoke(json.loads((EVENTS / "sqs-batch.json").read_text()))
    assert batch.ok and not batch.streamed
    assert batch.json() == {"batchItemFailures": []}


@pytest.mark.engine
def test_an_error_mid_stream_ends_the_reply_with_the_error_trailers(artifact_location: str) -> None:
    with streaming_lambda(artifact_location, fault="mid_stream") as runtime:
        runtime.wait_init()
        invocation = runtime.invoke(url_event(tts(stream=True)))
        reply = streamed(invocation)  # Lambda takes a reply with error trailers as a successful one
        # The header and the first chunk's audio (past the 44 bytes of header) left before the engine
        # failed on its second.
        assert reply.status == 200 and reply.body.startswith(b"RIFF") and len(reply.body) > 44
        assert set(invocation.trailers) == set(TRAILERS)
        assert invocation.trailers[TRAILERS[0]].startswith("Function.")
        assert json.loads(base64.b64decode(invocation.trailers[TRAILERS[1]])) == INTERNAL_ERROR
        # The next request is served: a client error is answered before any engine stream starts.
        bad = streamed(runtime.invoke(url_event(tts(speaker="nobody", stream=True))))
        assert bad.status == 400


def logged(runtime: LocalLambda, event: str) -> list[dict[str, Any]]:
    """The runtime's log records of `event`, waiting up to 10 s for the first to be read."""
    deadline = time.monotonic() + 10
    while not runtime.log_records(event) and time.monotonic() < deadline:
        time.sleep(0.05)
    return runtime.log_records(event)


@pytest.mark.engine
def test_snapstart_runs_the_hooks_around_restore_next(artifact_location: str) -> None:
    with streaming_lambda(artifact_location, snapstart=True) as runtime:
        runtime.wait_init()
        (snapshot,) = logged(runtime, "snapshot")  # the before-snapshot hook ran (and warmed up)
        assert "warm_up" in snapshot["phases_ms"]
        assert runtime.log_records("restore") == []
        assert [call.path for call in runtime.api.calls] == ["/2018-06-01/runtime/restore/next"]

        runtime.restore()
        # The after-restore hook ran (its line may reach our reader after the runtime's next poll).
        assert len(logged(runtime, "restore")) == 1
        assert streamed(runtime.invoke(url_event(tts(stream=True)))).status == 200
        paths = [call.path for call in runtime.api.calls]
        assert paths[:2] == ["/2018-06-01/runtime/restore/next", "/2018-06-01/runtime/invocation/next"]


@pytest.mark.engine
def test_a_failing_after_restore_hook_is_reported_and_ends_the_process(artifact_location: str) -> None:
    runtime = streaming_lambda(artifact_location, snapstart=True, fault="after_restore")
    with runtime, pytest.raises(RuntimeFailed, match=r"exit 65\b"):
        runtime.wait_init()
        runtime.restore()
    (error,) = runtime.api.restore_errors
    assert "injected" in json.loads(error)["errorMessage"]


def test_an_init_failure_is_reported_to_the_runtime_api() -> None:
    runtime = streaming_lambda("/nonexistent/artifact")
    with runtime, pytest.raises(RuntimeFailed, match="manifest"):
        runtime.wait_init()
    assert runtime.api.init_errors
