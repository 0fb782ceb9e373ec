"""The voice library over uvicorn and through the Lambda runtime: saving, listing, deleting, and a saved
voice giving the very bytes its recording gives inline, for the same seed, on every route."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.workload import recording
from tests.function.support import job_storage, local_lambda, moto_client, serving

TRANSCRIPT = "Hello there, this is my voice."


PROMPT = base64.b64encode(recording()).decode()


@pytest.fixture(scope="module")
def storage_env(moto_endpoint: str) -> dict[str, str]:
    return job_storage(moto_endpoint)


@pytest.fixture(scope="module")
def client(
    artifact_location: str, storage_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    log = tmp_path_factory.mktemp("voices") / "server.log"
    with (
        serving(artifact_location, log, **storage_env) as url,
        httpx.Client(base_url=url, timeout=300) as http,
    ):
        yield http


@pytest.fixture(scope="module")
def voice(client: httpx.Client) -> dict[str, Any]:
    response = client.post("/v1/voices", json={"name": "narrator", "audio": PROMPT, "transcript": TRANSCRIPT})
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_a_saved_voice_is_described_listed_and_found(client: httpx.Client, voice: dict[str, Any]) -> None:
    assert voice["name"] == "narrator" and voice["transcript"] is True
    assert voice["duration_seconds"] == pytest.approx(2.0)
    assert voice["id"].startswith("voice_") and len(voice["id"]) == len("voice_") + 32
    assert client.get(f"/v1/voices/{voice['id']}").json() == voice
    listed = client.get("/v1/voices").json()["voices"]
    assert {**voice, "type": "saved"} in listed
    assert {"speaker", "openai", "saved"} <= {item["type"] for item in listed}


def test_ids_are_random(client: httpx.Client, voice: dict[str, Any]) -> None:
    other = client.post("/v1/voices", json={"name": "narrator", "audio": PROMPT}).json()
    assert other["id"] != voice["id"] and other["transcript"] is False


@pytest.mark.parametrize("stream", [False, True])
def test_a_saved_voice_speaks_as_its_recording_inline_on_tts(
    client: httpx.Client, voice: dict[str, Any], stream: bool
) -> None:
    common = {"text": "A short sentence.", "seed": 7, "format": "wav", "stream": stream}
    inline = client.post("/v1/tts", json={**common, "prompt_audio": PROMPT, "prompt_text": TRANSCRIPT})
    saved = client.post("/v1/tts", json={**common, "speaker": voice["id"]})
    assert inline.status_code == 200 and saved.status_code == 200, saved.text
    assert len(saved.content) > 1000 and saved.content == inline.content


def test_a_voice_without_transcript_speaks_cross_lingually_as_inline(client: httpx.Client) -> None:
    voice = client.post("/v1/voices", json={"name": "x", "audio": PROMPT}).json()
    common = {"text": "Another one.", "seed": 3, "format": "pcm"}
    inline = client.post("/v1/tts", json={**common, "prompt_audio": PROMPT})
    saved = client.post("/v1/tts", json={**common, "speaker": voice["id"]})
    assert saved.status_code == 200 and saved.content == inline.content


def test_a_saved_voice_speaks_on_openais_route(client: httpx.Client, voice: dict[str, Any]) -> None:
    body = {"model": "tts-1", "input": "A short sentence.", "voice": voice["id"], "seed": 7}
    first = client.post("/v1/audio/speech", json={**body, "response_format": "pcm"})
    tts = client.post(
        "/v1/tts", json={"text": "A short sentence.", "seed": 7, "format": "pcm", "speaker": voice["id"]}
    )
    assert first.status_code == 200, first.text
    assert first.headers["x-sample-rate"] == "24000" and len(first.content) > 1000
    # OpenAI's route is /v1/tts at 24 kHz: the same voice and seed give the same speech, resampled.
    assert len(first.content) == pytest.approx(len(tts.content) * 24000 / 22050, rel=0.01)
    instructed = client.post("/v1/audio/speech", json={**body, "instructions": "Calm."})
    assert instructed.headers["x-instructions"].startswith("ignored")


BAD_VOICES = [
    ({"name": "a", "audio": "not base64!!"}, 400, "invalid_prompt_audio"),
    ({"name": "a", "audio": base64.b64encode(b"not audio" * 100).decode()}, 400, "invalid_prompt_audio"),
    (
        {"name": "a", "audio": base64.b64encode(recording(amplitude=0.0)).decode()},
        400,
        "invalid_prompt_audio",
    ),
    ({"name": "a", "audio": base64.b64encode(recording(seconds=0.5)).decode()}, 400, "invalid_prompt_audio"),
    ({"name": "a", "audio": base64.b64encode(recording(seconds=31)).decode()}, 400, "invalid_prompt_audio"),
    ({"name": " ", "audio": PROMPT}, 400, "invalid_request"),
    ({"audio": PROMPT}, 422, "invalid_request"),
]


@pytest.mark.parametrize(("body", "status", "code"), BAD_VOICES)
def test_a_bad_recording_is_refused_as_inline_prompt_audio_is(
    client: httpx.Client, body: dict[str, Any], status: int, code: str
) -> None:
    response = client.post("/v1/voices", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    if body.get("name") == "a":  # the same refusal as the recording sent inline
        inline = client.post("/v1/tts", json={"text": "hi", "prompt_audio": body["audio"]})
        assert inline.status_code == status and inline.json()["error"]["code"] == code


def test_a_deleted_voice_is_gone(client: httpx.Client) -> None:
    voice = client.post("/v1/voices", json={"name": "brief", "audio": PROMPT}).json()
    assert client.post("/v1/tts", json={"text": "hi", "speaker": voice["id"], "seed": 1}).status_code == 200
    assert client.delete(f"/v1/voices/{voice['id']}").status_code == 204
    assert client.get(f"/v1/voices/{voice['id']}").json()["error"]["code"] == "voice_not_found"
    assert client.delete(f"/v1/voices/{voice['id']}").status_code == 404
    for path, body in [
        ("/v1/tts", {"text": "hi", "speaker": voice["id"]}),
        ("/v1/audio/speech", {"model": "tts-1", "input": "hi", "voice": voice["id"]}),
        ("/v1/jobs", {"text": "hi", "speaker": voice["id"]}),
    ]:
        response = client.post(path, json=body)
        assert response.status_code == 400, (path, response.text)
        assert (
            response.json()["error"]["code"] == "voice_deleted"
            and "deleted" in response.json()["error"]["message"]
        )
    assert voice["id"] not in {item["id"] for item in client.get("/v1/voices").json()["voices"]}


def test_unknown_ids(client: httpx.Client) -> None:
    unknown = "voice_" + "0" * 32
    assert client.get(f"/v1/voices/{unknown}").status_code == 404
    assert client.get("/v1/voices/../../etc").status_code == 404
    response = client.post("/v1/tts", json={"text": "hi", "speaker": unknown})
    assert response.status_code == 400 and response.json()["error"]["code"] == "unknown_speaker"


def test_through_lambda_a_saved_voice_speaks_as_inline_on_direct_and_sqs(
    artifact_location: str, storage_env: dict[str, str], voice: dict[str, Any], moto_endpoint: str
) -> None:
    common = {"text": "A short sentence.", "seed": 7, "format": "pcm"}
    with local_lambda(artifact_location, **storage_env) as runtime:
        runtime.wait_init()
        inline = runtime.invoke({**common, "prompt_audio": PROMPT, "prompt_text": TRANSCRIPT}).json()
        saved = runtime.invoke({**common, "speaker": voice["id"]}).json()
        as_job = runtime.invoke({**common, "speaker": voice["id"], "id": "voice-job"}).json()
        inline_job = runtime.invoke(
            {**common, "prompt_audio": PROMPT, "prompt_text": TRANSCRIPT, "id": "inline-job"}
        ).json()
    assert "audio" in saved, saved
    assert base64.b64decode(saved["audio"]) == base64.b64decode(inline["audio"])
    assert as_job["status"] == "done" and inline_job["status"] == "done", as_job
    assert httpx.get(as_job["url"]).content == httpx.get(inline_job["url"]).content


def test_stored_layout_names_the_artifact(
    storage_env: dict[str, str], voice: dict[str, Any], artifact_location: str
) -> None:
    s3 = moto_client("s3", storage_env["AWS_ENDPOINT_URL_S3"])
    bucket = storage_env["COSYVOICE_OUTPUT_BUCKET"]
    keys = {
        item["Key"]
        for item in s3.list_objects_v2(Bucket=bucket, Prefix=f"tts/voices/{voice['id']}/")["Contents"]
    }
    sha = hashlib.sha256((Path(artifact_location) / "manifest.json").read_bytes()).hexdigest()
    folder = f"tts/voices/{voice['id']}/"
    assert keys == {folder + "voice.json", folder + "recording", folder + f"features-{sha}.npz"}
    record = json.loads(s3.get_object(Bucket=bucket, Key=folder + "voice.json")["Body"].read())
    assert record["artifact"] == sha and record["transcript"] == TRANSCRIPT
