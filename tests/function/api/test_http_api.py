"""The HTTP API over a real socket: uvicorn serving `python -m function serve` on loopback."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile

from tests.function.support import MAX_BODY_BYTES, MAX_TEXT_CHARS, SPEAKER, assert_error

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def client(server: str) -> httpx.Client:
    with httpx.Client(base_url=server, timeout=120) as client:
        yield client


def tts(client: httpx.Client, **fields: Any) -> httpx.Response:
    return client.post("/v1/tts", json={"text": "Hello there.", "speaker": SPEAKER, "seed": 1, **fields})


def decode(data: bytes) -> tuple[np.ndarray, int]:
    return soundfile.read(io.BytesIO(data), dtype="float32")


def test_health_and_readiness_report_startup_phases(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready"
    assert {"runtime_import", "artifact_fetch", "session_creation", "ready"} <= set(ready["phases_ms"])


def test_speakers_lists_the_models_voices(client: httpx.Client) -> None:
    body = client.get("/v1/speakers").json()
    assert SPEAKER in body["speakers"]
    assert body["sample_rate"] > 0


@pytest.mark.parametrize(
    ("fmt", "media"),
    [
        ("wav", "audio/wav"),
        ("flac", "audio/flac"),
        ("ogg", "audio/ogg"),
        ("opus", "audio/ogg; codecs=opus"),
        ("mp3", "audio/mpeg"),
    ],
)
def test_tts_returns_decodable_audio_in_each_format(client: httpx.Client, fmt: str, media: str) -> None:
    response = tts(client, format=fmt)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media
    audio, rate = decode(response.content)
    assert rate == int(response.headers["x-sample-rate"])
    assert audio.size > 0 and np.isfinite(audio).all()


def test_pcm_is_headerless_s16le_matching_the_wav(client: httpx.Client) -> None:
    wav = tts(client, format="wav")
    pcm = tts(client, format="pcm")
    assert pcm.headers["content-type"] == "audio/pcm"
    assert len(pcm.content) % 2 == 0
    assert pcm.content == wav.content[44:]  # same seed → same samples; the wav adds a 44-byte header


def test_a_seed_pins_the_audio(client: httpx.Client) -> None:
    assert tts(client, seed=5).content == tts(client, seed=5).content


def test_stream_is_sent_chunked_and_decodes(client: httpx.Client) -> None:
    with client.stream(
        "POST",
        "/v1/tts",
        json={"text": "Hello there, streaming.", "speaker": SPEAKER, "stream": True, "seed": 2},
    ) as response:
        assert response.status_code == 200
        assert response.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.headers
        data = b"".join(response.iter_bytes())
    audio, _ = decode(data)  # the streamed header says "unknown length"; readers take the data to EOF
    assert audio.size == (len(data) - 44) // 2


def test_openai_route_speaks_with_a_builtin_voice(client: httpx.Client) -> None:
    response = client.post(
        "/v1/audio/speech", json={"model": "tts-1", "input": "Hi there.", "voice": SPEAKER}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/mpeg"  # OpenAI's default format
    assert decode(response.content)[0].size > 0


def test_openapi_document_lists_every_route(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/tts", "/v1/audio/speech", "/v1/speakers", "/healthz", "/readyz"} <= set(paths)
    assert client.get("/docs").status_code == 200


def _wav_bytes() -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros(1600, dtype=np.float32), 16000, format="WAV")
    return buffer.getvalue()


BAD_REQUESTS = {
    "malformed json": (
        dict(content=b'{"text": "hi", ', headers={"content-type": "application/json"}),
        400,
        "invalid_json",
    ),
    "array body": (dict(json=["hi"]), 422, "invalid_request"),
    "wrong type for speed": (
        dict(json={"text": "hi", "speaker": SPEAKER, "speed": "fast"}),
        422,
        "invalid_request",
    ),
    "number as text": (dict(json={"text": 5, "speaker": SPEAKER}), 422, "invalid_request"),
    "missing text": (dict(json={"speaker": SPEAKER}), 422, "invalid_request"),
    "unknown field": (dict(json={"text": "hi", "speaker": SPEAKER, "volume": 3}), 422, "invalid_request"),
    "missing voice": (dict(json={"text": "hi"}), 400, "invalid_request"),
    "empty text": (dict(json={"text": "   ", "speaker": SPEAKER}), 400, "invalid_request"),
    "text too long": (
        dict(json={"text": "a" * (MAX_TEXT_CHARS + 1), "speaker": SPEAKER}),
        413,
        "text_too_long",
    ),
    "body too large": (dict(json={"text": "x" * MAX_BODY_BYTES, "speaker": SPEAKER}), 413, "body_too_large"),
    "unknown speaker": (dict(json={"text": "hi", "speaker": "nobody"}), 400, "unknown_speaker"),
    "unknown format": (
        dict(json={"text": "hi", "speaker": SPEAKER, "format": "aiff"}),
        400,
        "unsupported_format",
    ),
    "speed out of range": (
        dict(json={"text": "hi", "speaker": SPEAKER, "speed": 9.0}),
        400,
        "invalid_request",
    ),
    "negative seed": (dict(json={"text": "hi", "speaker": SPEAKER, "seed": -1}), 400, "invalid_request"),
    "bad base64 prompt": (
        dict(json={"text": "hi", "prompt_audio": "not base64!!"}),
        400,
        "invalid_prompt_audio",
    ),
    "non-audio prompt": (
        dict(json={"text": "hi", "prompt_audio": base64.b64encode(b"definitely not audio" * 50).decode()}),
        400,
        None,  # invalid_prompt_audio, or invalid_request when the artifact has no prompt models
    ),
    "prompt text without audio": (
        dict(json={"text": "hi", "speaker": SPEAKER, "prompt_text": "x"}),
        400,
        "invalid_request",
    ),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS), ids=list(BAD_REQUESTS))
def test_bad_tts_requests_get_json_4xx_and_the_server_keeps_serving(client: httpx.Client, case: str) -> None:
    request, status, code = BAD_REQUESTS[case]
    response = client.post("/v1/tts", **request)
    if code is None:
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] in ("invalid_prompt_audio", "invalid_request")
    else:
        assert_error(response, status, code)
    assert client.get("/v1/speakers").status_code == 200


def test_prompt_audio_clones_or_is_refused_cleanly(client: httpx.Client) -> None:
    prompt = base64.b64encode(_wav_bytes()).decode()
    response = client.post("/v1/tts", json={"text": "hi", "prompt_audio": prompt, "prompt_text": "silence"})
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.json()["error"]["code"] in ("invalid_prompt_audio", "invalid_request")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"model": "tts-1", "input": "hi", "voice": "nobody"}, 400, "unknown_speaker"),
        (
            {"model": "tts-1", "input": "hi", "voice": SPEAKER, "response_format": "aac"},
            400,
            "unsupported_format",
        ),
        ({"model": "tts-1", "input": "hi", "voice": SPEAKER, "speed": 4.0}, 400, "invalid_request"),
        ({"model": "tts-1", "voice": SPEAKER}, 422, "invalid_request"),
        (
            {"model": "tts-1", "input": "hi", "voice": SPEAKER, "stream_format": "chunks"},
            422,
            "invalid_request",
        ),
        ({"model": "tts-1", "input": "hi", "voice": {"name": SPEAKER}}, 422, "invalid_request"),
    ],
)
def test_bad_openai_requests(client: httpx.Client, body: dict[str, Any], status: int, code: str) -> None:
    assert_error(client.post("/v1/audio/speech", json=body), status, code)


def test_unknown_routes_and_methods_are_json_errors(client: httpx.Client) -> None:
    assert_error(client.get("/v2/nothing"), 404, "not_found")
    assert_error(client.get("/v1/tts"), 405, "method_not_allowed")


def test_huge_headers_are_refused_and_the_server_survives(client: httpx.Client, server: str) -> None:
    response = httpx.get(f"{server}/healthz", headers={"x-padding": "a" * 100_000}, timeout=30)
    assert_error(response, 431, "headers_too_large")
    assert tts(client).status_code == 200


def test_a_chunked_body_over_the_limit_is_cut_off(client: httpx.Client) -> None:
    def body() -> object:
        yield b'{"text": "'
        for _ in range(MAX_BODY_BYTES // 4096 + 2):
            yield b"a" * 4096
        yield b'", "speaker": "x"}'

    response = client.post("/v1/tts", content=body(), headers={"content-type": "application/json"})
    assert_error(response, 413, "body_too_large")


def test_a_good_request_after_every_bad_one_still_synthesizes(client: httpx.Client) -> None:
    for request, _, _ in BAD_REQUESTS.values():
        client.post("/v1/tts", **request)
    response = tts(client, format="wav")
    assert response.status_code == 200
    assert decode(response.content)[0].size > 0


def post_escaped(client: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST `body` as JSON with every non-ASCII character escaped: valid JSON even for a lone surrogate."""
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def test_a_lone_surrogate_is_cleaned_away_on_every_route(client: httpx.Client) -> None:
    # The normaliser's graphs raised on "\ud800" (500); the invisible characters are dropped with it.
    lone = {"text": "\ud800 Hello\u200b there\u202e.", "speaker": SPEAKER, "seed": 1}
    response = post_escaped(client, "/v1/tts", lone)
    assert response.status_code == 200, response.text
    assert response.content == tts(client, text=" Hello there.").content
    empty = post_escaped(client, "/v1/tts", {**lone, "text": "\ud800\u200b\x00"})
    assert_error(empty, 400, "invalid_request")  # nothing left to speak
    openai = {"model": "m", "input": lone["text"], "voice": "alloy", "response_format": "wav"}
    assert post_escaped(client, "/v1/audio/speech", openai).status_code == 200
    job = post_escaped(client, "/v1/jobs", {"text": lone["text"], "speaker": SPEAKER})
    assert job.status_code == 202, job.text  # its request.json is stored as UTF-8
