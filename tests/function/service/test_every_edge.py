"""One request, every edge: the same voice, text and seed give the same audio on every edge that offers
the combination, because every edge goes one way through the service (function.service.synthesis).

GIVEN a server (`python -m function serve`) and a Lambda runtime (function.awslambda.streaming, which also
answers direct invokes and SQS batches), both with voice storage, and a voice saved through the server;
WHEN the same short text is asked for on /v1/tts, the OpenAI route, a direct invoke, a job, an SQS record
and the streaming Function URL, with a built-in speaker, the saved voice or the recording inline, plain,
with speech marks, as SSML or streamed; THEN each edge's audio is /v1/tts's for the same request: the very
samples at the model's rate, and at OpenAI's 24 kHz the same speech resampled.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from bench.workload import recording
from function.audio.resample import resample
from function.local.invoke import LocalLambda
from tests.function.awslambda.test_lambda_streaming import streamed, streaming_lambda, url_event
from tests.function.support import SPEAKER, job_storage, serving, sqs_event

pytestmark = pytest.mark.engine

TEXT = "A short sentence."
SSML = f"<speak>{TEXT}</speak>"
SEED = 7
TRANSCRIPT = "Hello there, this is my voice."
PROMPT = base64.b64encode(recording()).decode()
VOICES = ("speaker", "saved", "inline")
OPENAI_RATE = 24000
MODEL_RATE = 22050


@pytest.fixture(scope="module")
def storage(moto_endpoint: str) -> dict[str, str]:
    return job_storage(moto_endpoint)


@pytest.fixture(scope="module")
def client(
    artifact_location: str, storage: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    log = tmp_path_factory.mktemp("edges") / "server.log"
    with serving(artifact_location, log, **storage) as url, httpx.Client(base_url=url, timeout=300) as http:
        yield http


@pytest.fixture(scope="module")
def runtime(artifact_location: str, storage: dict[str, str]) -> Iterator[LocalLambda]:
    with streaming_lambda(artifact_location, **storage) as runtime:
        runtime.wait_init()
        yield runtime


@pytest.fixture(scope="module")
def saved_voice(client: httpx.Client) -> str:
    response = client.post("/v1/voices", json={"name": "edges", "audio": PROMPT, "transcript": TRANSCRIPT})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture(scope="module")
def who(saved_voice: str) -> dict[str, dict[str, str]]:
    """The request fields that name each kind of voice."""
    return {
        "speaker": {"speaker": SPEAKER},
        "saved": {"speaker": saved_voice},
        "inline": {"prompt_audio": PROMPT, "prompt_text": TRANSCRIPT},
    }


def body(voice: dict[str, str], **fields: Any) -> dict[str, Any]:
    return {"text": TEXT, "seed": SEED, "format": "pcm", **voice, **fields}


def tts(client: httpx.Client, **fields: Any) -> httpx.Response:
    response = client.post("/v1/tts", json=fields)
    assert response.status_code == 200, response.text
    return response


@pytest.fixture(scope="module")
def reference(client: httpx.Client, who: dict[str, dict[str, str]]) -> dict[tuple[str, bool], bytes]:
    """/v1/tts's pcm for each voice, whole and streamed."""
    return {
        (voice, stream): tts(client, **body(who[voice], stream=stream)).content
        for voice in VOICES
        for stream in (False, True)
    }


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32767.0


def assert_resampled(openai_pcm: bytes, model_pcm: bytes) -> None:
    """OpenAI's 24 kHz audio is the model-rate audio resampled (within the 16-bit rounding both went
    through)."""
    expected = np.concatenate(list(resample([samples(model_pcm)], MODEL_RATE, OPENAI_RATE)))
    got = samples(openai_pcm)
    assert abs(got.size - expected.size) <= 1, (got.size, expected.size)
    n = min(got.size, expected.size)
    assert np.max(np.abs(got[:n] - expected[:n])) < 2e-3


def ndjson_audio(lines: bytes) -> tuple[bytes, list[dict[str, Any]]]:
    """The audio and the marks of a streamed reply with speech marks."""
    items = [json.loads(line) for line in lines.splitlines() if line.strip()]
    audio = b"".join(base64.b64decode(item["audio"]) for item in items if "audio" in item)
    return audio, [item["mark"] for item in items if "mark" in item]


# The request fields of each mode a direct invoke and a job offer.
MODES: dict[str, dict[str, Any]] = {
    "plain": {},
    "marks": {"speech_marks": ["sentence"]},
    "ssml": {"text": SSML, "text_type": "ssml"},
}
SENTENCE = {"time": 0, "type": "sentence", "start": 0, "end": len(TEXT.encode()), "value": TEXT}


# --- /v1/tts: marks and SSML give the plain request's audio --------------------------------------------


@pytest.mark.parametrize("voice", VOICES)
def test_tts_with_speech_marks(
    client: httpx.Client, who: dict[str, dict[str, str]], reference: dict[tuple[str, bool], bytes], voice: str
) -> None:
    reply = tts(client, **body(who[voice], speech_marks=["sentence"])).json()
    assert base64.b64decode(reply["audio"]) == reference[voice, False]
    assert reply["marks"] == [SENTENCE]


@pytest.mark.parametrize("voice", VOICES)
def test_tts_ssml(
    client: httpx.Client, who: dict[str, dict[str, str]], reference: dict[tuple[str, bool], bytes], voice: str
) -> None:
    assert tts(client, **body(who[voice], text=SSML, text_type="ssml")).content == reference[voice, False]


@pytest.mark.parametrize("voice", VOICES)
def test_tts_streamed_with_speech_marks(
    client: httpx.Client, who: dict[str, dict[str, str]], reference: dict[tuple[str, bool], bytes], voice: str
) -> None:
    audio, marks = ndjson_audio(
        tts(client, **body(who[voice], stream=True, speech_marks=["sentence"])).content
    )
    assert audio == reference[voice, True] and marks == [SENTENCE]


def test_streaming_changes_only_the_seams(reference: dict[tuple[str, bool], bytes]) -> None:
    """Whole and streamed differ (else the streamed cases above would prove nothing more), by length not."""
    for voice in VOICES:
        whole, chunked = reference[voice, False], reference[voice, True]
        assert whole != chunked and len(whole) == len(chunked)


# --- the OpenAI route: built-in speakers by OpenAI's names, saved voices by id ----------------------------


def openai_voice(voice: str, who: dict[str, dict[str, str]]) -> str:
    return "alloy" if voice == "speaker" else who[voice]["speaker"]  # alloy is the tiny model's 英文女


@pytest.mark.parametrize("voice", ["speaker", "saved"])
@pytest.mark.parametrize("mode", ["plain", "ssml", "streamed", "sse"])
def test_openai_route(
    client: httpx.Client,
    who: dict[str, dict[str, str]],
    reference: dict[tuple[str, bool], bytes],
    voice: str,
    mode: str,
) -> None:
    request = {
        "model": "tts-1-hd",  # v1's 10 flow steps, as /v1/tts by default
        "input": SSML if mode == "ssml" else TEXT,
        "voice": openai_voice(voice, who),
        "response_format": "pcm",
        "seed": SEED,
    }
    if mode in ("streamed", "sse"):
        request["stream_format"] = "audio" if mode == "streamed" else "sse"
    response = client.post("/v1/audio/speech", json=request)
    assert response.status_code == 200, response.text
    assert response.headers["x-flow-steps"] == "10"
    audio = response.content
    if mode == "sse":
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
        assert events[-1]["type"] == "speech.audio.done"
    assert_resampled(audio, reference[voice, mode in ("streamed", "sse")])


# --- Lambda: direct invokes, jobs, SQS records, the streaming Function URL ------------------------------


@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize("mode", MODES)
def test_direct_invoke(
    runtime: LocalLambda,
    who: dict[str, dict[str, str]],
    reference: dict[tuple[str, bool], bytes],
    voice: str,
    mode: str,
) -> None:
    reply = runtime.invoke(body(who[voice], **MODES[mode])).json()
    assert "audio" in reply, reply
    assert base64.b64decode(reply["audio"]) == reference[voice, False]
    assert reply.get("marks") == ([SENTENCE] if mode == "marks" else None)


def job_audio(runtime: LocalLambda, request: dict[str, Any]) -> bytes:
    """A job's audio from S3 (a direct invoke with the job's id reports it, done, with its URL)."""
    reply = runtime.invoke(request).json()
    assert reply.get("status") == "done", reply
    return httpx.get(reply["url"]).content


@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize("mode", MODES)
def test_job(
    runtime: LocalLambda,
    who: dict[str, dict[str, str]],
    reference: dict[tuple[str, bool], bytes],
    voice: str,
    mode: str,
) -> None:
    request = body(who[voice], id=f"edge-{uuid.uuid4().hex[:12]}", **MODES[mode])
    assert job_audio(runtime, request) == reference[voice, False]


@pytest.mark.parametrize("voice", VOICES)
def test_sqs_record(
    runtime: LocalLambda, who: dict[str, dict[str, str]], reference: dict[tuple[str, bool], bytes], voice: str
) -> None:
    request = body(who[voice], id=f"sqs-{uuid.uuid4().hex[:12]}")
    assert runtime.invoke(sqs_event(request)).json() == {"batchItemFailures": []}
    assert job_audio(runtime, request) == reference[voice, False]  # done by the record: reported


@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize("mode", ["streamed", "marks"])
def test_function_url(
    runtime: LocalLambda,
    who: dict[str, dict[str, str]],
    reference: dict[tuple[str, bool], bytes],
    voice: str,
    mode: str,
) -> None:
    marks = {"speech_marks": ["sentence"]} if mode == "marks" else {}
    reply = streamed(runtime.invoke(url_event(body(who[voice], stream=True, **marks))))
    assert reply.status == 200, reply.body[:300]
    if mode == "marks":
        audio, got = ndjson_audio(reply.body)
        assert got == [SENTENCE]
    else:
        audio = reply.body
    assert audio == reference[voice, True]


def test_a_saved_voice_with_speech_marks_is_served(client: httpx.Client, saved_voice: str) -> None:
    """Once answered 400 unknown_speaker: the marks path never resolved saved voices."""
    response = client.post(
        "/v1/tts", json={"text": TEXT, "speaker": saved_voice, "speech_marks": ["sentence"]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["marks"] == [SENTENCE]


def test_the_flow_steps_that_ran_are_in_the_header_on_every_http_route(
    client: httpx.Client, reference: dict[tuple[str, bool], bytes]
) -> None:
    assert tts(client, **body({"speaker": SPEAKER})).headers["x-flow-steps"] == "10"
    fast = tts(client, **body({"speaker": SPEAKER}, flow_steps=5))
    assert fast.headers["x-flow-steps"] == "5" and fast.content != reference["speaker", False]
    openai = {"input": TEXT, "voice": "alloy", "response_format": "pcm", "seed": SEED}
    tts1 = client.post("/v1/audio/speech", json={**openai, "model": "tts-1"})
    assert tts1.headers["x-flow-steps"] == "5"
    assert_resampled(tts1.content, fast.content)
