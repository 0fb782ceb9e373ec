"""The official `openai` client against POST /v1/audio/speech: over a real socket (uvicorn), and through
the Lambda path (each request becomes an API Gateway event for the real runtime client).

A program written for OpenAI changes only base_url (and model): every OpenAI voice name, every format
(decoded: 24 kHz mono, the duration of the model's own audio), instructions, speed, SSE and chunked
streams, and the errors the SDK raises.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import openai
import pytest
import soundfile
import soxr

from function.core.formats import FORMATS as TABLE
from function.local.invoke import LocalLambda
from function.voices.openai import DEFAULT_VOICES
from tests.function.support import EVENTS, SPEAKER, local_lambda, serving

pytestmark = pytest.mark.engine

RATE = 24000  # OpenAI's speech rate, which the route speaks at
MODEL_RATE = 22050  # the tiny model's (as CosyVoice's), which /v1/tts keeps
TEXT = "Hello there, this is a test."
FORMATS = ("wav", "flac", "ogg", "opus", "mp3", "pcm")
MEDIA_TYPES = {fmt: TABLE[fmt].media_type for fmt in FORMATS}
# What each codec may add or drop at the ends, in samples at 24 kHz (frame padding, Opus pre-skip).
SLACK = {"wav": 0, "pcm": 0, "flac": 0, "ogg": 0, "opus": 960, "mp3": 1152}


API_KEY = "sk-test-0123456789"  # the key of the keyed server below (COSYVOICE_API_KEYS_FILE)


def sdk(base_url: str, api_key: str = "unused", **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120, **kwargs)


def speak(client: openai.OpenAI, **fields: Any) -> Any:
    """client.audio.speech.create with this file's defaults; a seed (our extension) pins the audio."""
    seed = fields.pop("seed", 1)
    request = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "wav", **fields}
    return client.audio.speech.create(**request, extra_body={"seed": seed})


def decode(data: bytes, fmt: str) -> tuple[np.ndarray, int]:
    """[frames, channels] float32 and the rate the file says (pcm: headerless, OpenAI's 24 kHz)."""
    if fmt == "pcm":
        return (np.frombuffer(data, "<i2").astype(np.float32) / 32768.0).reshape(-1, 1), RATE
    return soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)


def sse_events(body: bytes) -> list[dict[str, Any]]:
    lines = body.decode("ascii").split("\n")
    return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]


def check_events(events: list[dict[str, Any]]) -> bytes:
    """OpenAI's shape: deltas of base64 audio, then one done with integer usage. The joined audio."""
    *deltas, done = events
    assert deltas and all(event["type"] == "speech.audio.delta" for event in deltas)
    assert done["type"] == "speech.audio.done"
    usage = done["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    audio = b"".join(base64.b64decode(event["audio"]) for event in deltas)
    seconds = decode(audio, "pcm")[0].shape[0] / RATE
    assert usage["output_tokens"] == pytest.approx(seconds * 50, abs=2)  # 50 speech tokens per second
    return audio


def bad_request(call: Any, code: str) -> str:
    """The SDK raised BadRequestError carrying our error; its message."""
    with pytest.raises(openai.BadRequestError) as raised:
        call()
    assert raised.value.status_code == 400
    assert raised.value.code == code
    assert isinstance(raised.value.body, dict)
    return str(raised.value.body["message"])


# --- over HTTP (uvicorn) -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(server: str) -> openai.OpenAI:
    return sdk(f"{server}/v1")


@pytest.fixture(scope="module")
def by_speaker(client: openai.OpenAI) -> dict[str, bytes]:
    """wav of TEXT (seed 1) per built-in speaker, asked for by its own name."""
    return {name: speak(client, voice=name).content for name in sorted(set(DEFAULT_VOICES.values()))}


def test_the_mapped_speakers_sound_different(by_speaker: dict[str, bytes]) -> None:
    assert len(set(by_speaker.values())) == len(by_speaker) > 1  # so matching one below means something


@pytest.mark.parametrize("voice", sorted(DEFAULT_VOICES))
def test_every_openai_voice_speaks_as_its_mapped_speaker(
    client: openai.OpenAI, by_speaker: dict[str, bytes], voice: str
) -> None:
    assert speak(client, voice=voice).content == by_speaker[DEFAULT_VOICES[voice]]


def test_a_voice_object_names_a_voice_too(client: openai.OpenAI, by_speaker: dict[str, bytes]) -> None:
    assert speak(client, voice={"id": "onyx"}).content == by_speaker[DEFAULT_VOICES["onyx"]]


def test_speakers_lists_the_voice_table(server: str) -> None:
    body = httpx2.get(f"{server}/v1/speakers").json()
    assert body["voices"] == dict(DEFAULT_VOICES)  # the tiny model has every SFT speaker
    assert set(body["voices"].values()) <= set(body["speakers"])
    assert body["instructions"] is False


def test_unknown_voices_are_a_400_naming_speakers_and_voice_names(client: openai.OpenAI) -> None:
    message = bad_request(lambda: speak(client, voice="nobody"), "unknown_speaker")
    assert "'nobody'" in message and SPEAKER in message and "alloy" in message


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_24khz_mono_of_the_models_duration(
    client: openai.OpenAI, by_speaker: dict[str, bytes], fmt: str
) -> None:
    response = speak(client, response_format=fmt)
    audio, rate = decode(response.content, fmt)
    reference, _ = decode(by_speaker[DEFAULT_VOICES["alloy"]], "wav")
    assert rate == RATE and int(response.response.headers["x-sample-rate"]) == RATE
    assert response.response.headers["content-type"] == MEDIA_TYPES[fmt]
    assert audio.shape[1] == 1
    assert abs(audio.shape[0] - reference.shape[0]) <= SLACK[fmt]
    assert np.isfinite(audio).all() and np.abs(audio).max() > 0


def _assert_resampled_from_tts(pcm: Any, server: str, **tts_fields: Any) -> None:
    """`pcm` (OpenAI's route, seed 1, alloy) is /v1/tts's audio of the same request, resampled to 24 kHz."""
    own = httpx2.post(
        f"{server}/v1/tts",
        json={"text": TEXT, "speaker": DEFAULT_VOICES["alloy"], "format": "pcm", "seed": 1, **tts_fields},
    )
    assert own.headers["x-sample-rate"] == str(MODEL_RATE)  # /v1/tts keeps the model's rate and says so
    native = decode(own.content, "pcm")[0][:, 0]
    resampled = decode(pcm.content, "pcm")[0][:, 0]
    assert resampled.shape[0] == round(native.shape[0] * RATE / MODEL_RATE)  # same duration, not 9 % off
    expected = np.clip(soxr.resample(native, MODEL_RATE, RATE), -1, 1)
    assert np.abs(resampled - expected).max() < 4 / 32768  # s16 rounding only


def test_pcm_is_the_models_audio_resampled_to_24khz(client: openai.OpenAI, server: str) -> None:
    pcm = speak(client, model="tts-1-hd", response_format="pcm")  # v1's 10 flow steps, /v1/tts's default
    assert pcm.response.headers["content-type"] == "audio/pcm"
    _assert_resampled_from_tts(pcm, server)


def test_the_model_name_chooses_the_flows_steps(client: openai.OpenAI, server: str) -> None:
    """tts-1 is the fast tier (5 flow steps), tts-1-hd v1's 10: the same tokens, another solve."""
    fast, full = (speak(client, model=model, response_format="pcm") for model in ("tts-1", "tts-1-hd"))
    assert len(fast.content) == len(full.content) and fast.content != full.content
    _assert_resampled_from_tts(fast, server, flow_steps=5)


def test_the_same_pcm_comes_in_a_wav(client: openai.OpenAI) -> None:
    wav, pcm = speak(client, response_format="wav"), speak(client, response_format="pcm")
    assert wav.content[44:] == pcm.content


def test_aac_is_a_400_naming_the_supported_formats(client: openai.OpenAI) -> None:
    message = bad_request(lambda: speak(client, response_format="aac"), "unsupported_format")
    assert "aac" in message and all(fmt in message for fmt in FORMATS)


def test_speed_changes_the_duration(client: openai.OpenAI) -> None:
    normal, fast = (decode(speak(client, speed=s).content, "wav")[0].shape[0] for s in (1.0, 2.0))
    assert fast == pytest.approx(normal / 2, rel=0.02)
    message = bad_request(lambda: speak(client, speed=4.0), "invalid_request")
    assert "0.5" in message and "2.0" in message


def test_instructions_are_reported_ignored_by_a_model_without_instruct_mode(client: openai.OpenAI) -> None:
    instructed = speak(client, instructions="Speak slowly and warmly.")
    assert instructed.response.headers["x-instructions"].startswith("ignored")
    assert instructed.content == speak(client).content
    assert "x-instructions" not in speak(client).response.headers


@pytest.fixture(scope="module")
def instruct_client(
    instruct_artifact: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[openai.OpenAI]:
    """An -Instruct model, served as the manifests run it: with an API key from a mounted Secret file."""
    folder = tmp_path_factory.mktemp("serve-instruct")
    (folder / "api-keys").write_text(f"old-key\n{API_KEY}\n")
    with serving(
        str(instruct_artifact), folder / "server.log", COSYVOICE_API_KEYS_FILE=str(folder / "api-keys")
    ) as url:
        yield sdk(f"{url}/v1", api_key=API_KEY)


def test_a_keyed_server_refuses_the_sdk_without_its_key(instruct_client: openai.OpenAI) -> None:
    base = str(instruct_client.base_url).rstrip("/")
    with pytest.raises(openai.AuthenticationError) as raised:
        speak(sdk(base, api_key="wrong"))
    assert raised.value.status_code == 401
    assert raised.value.response.headers["www-authenticate"] == "Bearer"
    assert raised.value.body["code"] == "unauthorized"
    root = base.removesuffix("/v1")
    assert httpx2.get(f"{root}/healthz").status_code == 200  # probes and docs stay open
    assert httpx2.get(f"{root}/openapi.json").status_code == 200
    assert httpx2.get(f"{base}/speakers").status_code == 401
    assert httpx2.get(f"{base}/speakers", headers={"X-API-Key": API_KEY}).status_code == 200


def test_an_instruct_model_applies_instructions(instruct_client: openai.OpenAI) -> None:
    plain = speak(instruct_client)
    instructed = speak(instruct_client, instructions="Speak slowly and warmly.")
    assert instructed.response.headers["x-instructions"] == "applied"
    assert instructed.content != plain.content  # the instruction went into the LLM's prompt
    assert decode(instructed.content, "wav")[1] == RATE
    speakers = httpx2.get(
        str(instruct_client.base_url).rstrip("/") + "/speakers", headers={"X-API-Key": API_KEY}
    ).json()
    assert speakers["instructions"] is True


def stream(client: openai.OpenAI, **fields: Any) -> tuple[dict[str, str], list[bytes]]:
    """with_streaming_response: the headers and the pieces as they arrived."""
    request = {"model": "tts-1", "voice": "alloy", "input": TEXT, "extra_body": {"seed": 3}, **fields}
    with client.audio.speech.with_streaming_response.create(**request) as response:
        return dict(response.headers), list(response.iter_bytes())


def test_sse_streams_openai_events_that_join_into_the_audio(client: openai.OpenAI) -> None:
    headers, pieces = stream(client, response_format="pcm", stream_format="sse")
    assert headers["content-type"].startswith("text/event-stream")
    assert headers.get("transfer-encoding") == "chunked"
    events = sse_events(b"".join(pieces))
    assert len(events) > 2  # audio delta by delta as it is made, then done
    audio = check_events(events)
    _, chunked = stream(client, response_format="pcm", stream_format="audio")
    assert audio == b"".join(chunked)  # the same stream, base64 in events


def test_sse_of_a_wav_joins_into_a_24khz_file(client: openai.OpenAI) -> None:
    _, pieces = stream(client, response_format="wav", stream_format="sse")
    *deltas, _ = sse_events(b"".join(pieces))
    audio, rate = decode(b"".join(base64.b64decode(event["audio"]) for event in deltas), "wav")
    assert rate == RATE and audio.shape[0] > 0


@pytest.mark.parametrize("fmt", ["wav", "opus"])
def test_stream_format_audio_is_chunked_and_decodes(client: openai.OpenAI, fmt: str) -> None:
    headers, pieces = stream(client, response_format=fmt, stream_format="audio")
    assert headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    audio, rate = decode(b"".join(pieces), fmt)
    assert rate == RATE and audio.shape[0] > 0


# --- through the Lambda path: API Gateway events for the real runtime client ----------------------------

VOICE_OVERRIDE = {"alloy": "中文男"}


def api_gateway_event(request: httpx2.Request) -> dict[str, Any]:
    """The HTTP API (v2) event API Gateway would send for this request."""
    event = json.loads((EVENTS / "http-api-tts.json").read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = request.url.path
    event["requestContext"]["http"]["method"] = request.method
    event["headers"] = {name.lower(): value for name, value in request.headers.items()}
    event["body"] = request.content.decode("utf-8")
    return event


def lambda_transport(runtime: LocalLambda) -> httpx2.MockTransport:
    def handle(request: httpx2.Request) -> httpx2.Response:
        invocation = runtime.invoke(api_gateway_event(request))
        assert invocation.ok, invocation.body
        reply = invocation.json()
        body = reply.get("body", "")
        content = base64.b64decode(body) if reply.get("isBase64Encoded") else body.encode("utf-8")
        return httpx2.Response(reply["statusCode"], headers=reply.get("headers", {}), content=content)

    return httpx2.MockTransport(handle)


@pytest.fixture(scope="module")
def lambda_runtime(artifact_location: str) -> Iterator[LocalLambda]:
    voices = ",".join(f"{name}={speaker}" for name, speaker in VOICE_OVERRIDE.items())
    with local_lambda(artifact_location, COSYVOICE_VOICES=voices) as runtime:
        runtime.wait_init()
        yield runtime


@pytest.fixture(scope="module")
def lambda_client(lambda_runtime: LocalLambda) -> openai.OpenAI:
    http_client = httpx2.Client(transport=lambda_transport(lambda_runtime))
    return sdk("https://id.execute-api.us-east-1.amazonaws.com/v1", http_client=http_client)


@pytest.fixture(scope="module")
def lambda_wav(lambda_client: openai.OpenAI) -> bytes:
    return speak(lambda_client, voice="echo").content


@pytest.mark.parametrize("fmt", FORMATS)
def test_lambda_path_every_format_is_24khz_mono(
    lambda_client: openai.OpenAI, lambda_wav: bytes, fmt: str
) -> None:
    response = speak(lambda_client, voice="echo", response_format=fmt)
    assert response.response.headers["content-type"] == MEDIA_TYPES[fmt]
    audio, rate = decode(response.content, fmt)
    reference, _ = decode(lambda_wav, "wav")
    assert rate == RATE and audio.shape[1] == 1
    assert abs(audio.shape[0] - reference.shape[0]) <= SLACK[fmt]
    if fmt == "pcm":
        assert response.content == lambda_wav[44:]


def test_lambda_path_follows_the_voice_setting(
    lambda_client: openai.OpenAI, lambda_runtime: LocalLambda
) -> None:
    assert speak(lambda_client, voice="alloy").content == speak(lambda_client, voice="中文男").content
    http = httpx2.Client(transport=lambda_transport(lambda_runtime), base_url="https://id.example")
    voices = http.get("/v1/speakers").json()["voices"]
    assert voices["alloy"] == "中文男" and voices["nova"] == DEFAULT_VOICES["nova"]


def test_lambda_path_errors_are_the_sdks_bad_requests(lambda_client: openai.OpenAI) -> None:
    assert "alloy" in bad_request(lambda: speak(lambda_client, voice="nobody"), "unknown_speaker")
    assert "opus" in bad_request(lambda: speak(lambda_client, response_format="aac"), "unsupported_format")


def test_lambda_path_answers_streamed_requests_whole(lambda_client: openai.OpenAI) -> None:
    headers, pieces = stream(lambda_client, response_format="pcm", stream_format="sse")
    assert headers["content-type"].startswith("text/event-stream")
    events = sse_events(b"".join(pieces))
    assert len(events) == 2  # Mangum buffers the response: the whole audio in one delta
    audio = check_events(events)
    headers, pieces = stream(lambda_client, response_format="pcm", stream_format="audio")
    assert int(headers["content-length"]) == len(b"".join(pieces))
    assert b"".join(pieces) == audio
