"""boto3's real `polly` client against /polly over a real socket (uvicorn), with moto_server for S3 and SQS:
a program written for Amazon Polly changes only endpoint_url (and its keys).

Every operation, the exception classes the SDK raises for Polly's errors, the four refused signatures, a
custom voice created and used (here and on /v1/tts), and a task completed through the queue.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.auth
import httpx
import numpy as np
import pytest
import soundfile
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from bench.workload import recording
from function.local.invoke import LocalLambda
from tests.function.jobs.test_jobs import poll_while_visible
from tests.function.support import EVENTS, job_storage, local_lambda, moto_client, serving

pytestmark = pytest.mark.engine

KEY_ID, SECRET = "AKIAPOLLYTEST0001", "polly-test-secret/0123456789"
TEXT = "Hello there. This is a test, spoken twice."
# TEXT's word marks' values, in order
TEXT_WORDS = ["Hello", "there", "This", "is", "a", "test", "spoken", "twice"]
MODEL_RATE = 22050


def polly_client(url: str, key_id: str = KEY_ID, secret: str = SECRET, **config: Any) -> Any:
    return boto3.client(
        "polly",
        endpoint_url=f"{url}/polly",
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=300, **config),
    )


@pytest.fixture(scope="module")
def storage(moto_endpoint: str) -> dict[str, str]:
    return job_storage(moto_endpoint)


@pytest.fixture(scope="module")
def url(
    artifact_location: str, storage: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("polly")
    (folder / "sigv4-keys").write_text(f"{KEY_ID}:{SECRET}\n")
    env = {
        **storage,
        "COSYVOICE_SIGV4_KEYS_FILE": str(folder / "sigv4-keys"),
        "COSYVOICE_MAX_TEXT_CHARS": "200",
    }
    with serving(artifact_location, folder / "server.log", **env) as served:
        yield served


@pytest.fixture(scope="module")
def polly(url: str) -> Any:
    return polly_client(url)


def speak(polly: Any, **fields: Any) -> dict[str, Any]:
    request = {"Text": TEXT, "VoiceId": "Joanna", "OutputFormat": "mp3", **fields}
    return dict(polly.synthesize_speech(**request))


def marks(polly: Any, **fields: Any) -> list[dict[str, Any]]:
    reply = speak(polly, OutputFormat="json", **fields)
    assert reply["ContentType"] == "application/x-json-stream"
    return [json.loads(line) for line in reply["AudioStream"].read().decode().splitlines()]


def refused(call: Any, code: str, status: int = 400) -> str:
    """The SDK raised the ClientError of Polly's `code` (its own class where the model has one)."""
    with pytest.raises(ClientError) as raised:
        call()
    error = raised.value.response
    assert error["Error"]["Code"] == code, error
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    return str(error["Error"]["Message"])


# --- SynthesizeSpeech ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "engine", "rate", "content_type"),
    [
        ("mp3", None, 22050, "audio/mpeg"),
        ("mp3", "neural", 24000, "audio/mpeg"),
        ("ogg_vorbis", "standard", 22050, "audio/ogg"),
        ("ogg_opus", None, 48000, "audio/ogg"),
    ],
)
def test_audio_formats_have_pollys_content_type_and_default_rate(
    polly: Any, fmt: str, engine: str | None, rate: int, content_type: str
) -> None:
    reply = speak(polly, OutputFormat=fmt, **({"Engine": engine} if engine else {}))
    assert reply["ContentType"] == content_type
    assert reply["RequestCharacters"] == len(TEXT)
    audio, found_rate = soundfile.read(io.BytesIO(reply["AudioStream"].read()), dtype="float32")
    assert found_rate == rate and audio.ndim == 1 and np.abs(audio).max() > 0


def test_pcm_is_16khz_by_default_and_takes_8khz(polly: Any) -> None:
    for rate in ("16000", "8000", None):
        reply = speak(polly, OutputFormat="pcm", Engine="neural", **({"SampleRate": rate} if rate else {}))
        assert reply["ContentType"] == "audio/pcm"
        assert reply["ResponseMetadata"]["HTTPHeaders"]["x-sample-rate"] == (rate or "16000")
        pcm = reply["AudioStream"].read()
        assert len(pcm) % 2 == 0 and np.abs(np.frombuffer(pcm, "<i2")).max() > 0


def test_the_engine_chooses_the_flows_steps(polly: Any) -> None:
    steps = {
        engine: speak(polly, Engine=engine)["ResponseMetadata"]["HTTPHeaders"]["x-flow-steps"]
        for engine in ("standard", "neural", "long-form", "generative")
    }
    assert steps == {"standard": "5", "neural": "10", "long-form": "10", "generative": "10"}


def test_ssml_is_spoken_and_a_built_in_speakers_name_is_a_voice(polly: Any) -> None:
    reply = speak(
        polly, TextType="ssml", Text='<speak>Hi <break time="300ms"/> there.</speak>', VoiceId="英文女"
    )
    assert reply["RequestCharacters"] == len("Hi there.")
    assert len(reply["AudioStream"].read()) > 0


def test_sentence_and_word_marks_are_in_order_inside_their_sentence(polly: Any) -> None:
    found = marks(polly, SpeechMarkTypes=["sentence", "word"])
    sentences = [mark for mark in found if mark["type"] == "sentence"]
    words = [mark for mark in found if mark["type"] == "word"]
    assert [mark["value"] for mark in sentences] == ["Hello there.", "This is a test, spoken twice."]
    assert [mark["value"] for mark in words] == TEXT_WORDS
    assert [mark["time"] for mark in found] == sorted(mark["time"] for mark in found)
    encoded = TEXT.encode()
    for word in words:  # each inside its sentence's text and time
        assert encoded[word["start"] : word["end"]].decode() == word["value"]
        sentence = [s for s in sentences if s["start"] <= word["start"] and word["end"] <= s["end"]]
        assert len(sentence) == 1 and word["time"] >= sentence[0]["time"]
    second = sentences[1]["time"]
    assert all(word["time"] < second for word in words[:2]) and all(w["time"] >= second for w in words[2:])
    assert words[1]["time"] > words[0]["time"]  # placed by length, not all at the sentence's start


def test_ssml_marks_need_ssml_and_marks_need_json(polly: Any) -> None:
    document = '<speak>One <mark name="m"/> two.</speak>'
    (mark,) = marks(polly, TextType="ssml", Text=document, SpeechMarkTypes=["ssml"])
    assert mark["type"] == "ssml" and mark["value"] == "m" and mark["time"] > 0
    refused(lambda: marks(polly, SpeechMarkTypes=["ssml"]), "SsmlMarksNotSupportedForTextTypeException")
    refused(lambda: speak(polly, SpeechMarkTypes=["sentence"]), "MarksNotSupportedForFormatException")
    refused(lambda: speak(polly, OutputFormat="json"), "MarksNotSupportedForFormatException")
    assert "viseme" in refused(lambda: marks(polly, SpeechMarkTypes=["viseme"]), "ValidationException")


def test_pollys_errors_are_the_sdks_exception_classes(polly: Any) -> None:
    with pytest.raises(polly.exceptions.InvalidSampleRateException):
        speak(polly, SampleRate="11025")
    with pytest.raises(polly.exceptions.InvalidSsmlException):
        speak(polly, TextType="ssml", Text="<speak>unclosed")
    with pytest.raises(polly.exceptions.TextLengthExceededException):
        speak(polly, Text="word " * 100)
    with pytest.raises(polly.exceptions.LanguageNotSupportedException):
        speak(polly, LanguageCode="fr-FR")  # one of Polly's languages, not this model's
    with pytest.raises(polly.exceptions.LexiconNotFoundException):
        speak(polly, LexiconNames=["names"])
    assert "'Nobody'" in refused(lambda: speak(polly, VoiceId="Nobody"), "ValidationException")
    assert "mulaw" in refused(lambda: speak(polly, OutputFormat="mulaw"), "ValidationException")
    assert "'turbo'" in refused(lambda: speak(polly, Engine="turbo"), "ValidationException")  # as Polly
    assert "'xx-XX'" in refused(lambda: speak(polly, LanguageCode="xx-XX"), "ValidationException")


def test_a_language_code_is_spoken_and_the_server_survives_bad_input(polly: Any) -> None:
    assert len(speak(polly, LanguageCode="en-GB")["AudioStream"].read()) > 0
    assert len(speak(polly)["AudioStream"].read()) > 0


# --- DescribeVoices and lexicons --------------------------------------------------------------------


def test_describe_voices_lists_the_table_and_filters_by_language(polly: Any) -> None:
    voices = {voice["Id"]: voice for voice in polly.describe_voices()["Voices"]}
    assert voices["Joanna"]["LanguageCode"] == "en-US" and voices["Joanna"]["Gender"] == "Female"
    assert voices["Zhiyu"]["LanguageCode"] == "cmn-CN" and "英文男" in voices
    assert set(voices["Matthew"]["SupportedEngines"]) == {"standard", "neural", "long-form", "generative"}
    chinese = {voice["Id"] for voice in polly.describe_voices(LanguageCode="cmn-CN")["Voices"]}
    assert {"Zhiyu", "中文女", "中文男"} <= chinese and "Joanna" not in chinese
    assert "cmn-CN" in voices["Joanna"]["AdditionalLanguageCodes"]  # every voice speaks every language
    also = {
        voice["Id"]
        for voice in polly.describe_voices(LanguageCode="cmn-CN", IncludeAdditionalLanguageCodes=True)[
            "Voices"
        ]
    }
    assert {"Zhiyu", "Joanna", "Takumi"} <= also
    refused(lambda: polly.describe_voices(Engine="turbo"), "ValidationException")
    refused(lambda: polly.describe_voices(LanguageCode="xx-XX"), "ValidationException")
    assert polly.describe_voices(LanguageCode="fr-FR")["Voices"] == []


LEXICON = (
    '<?xml version="1.0" encoding="UTF-8"?><lexicon version="1.0" alphabet="ipa" xml:lang="en-US"'
    ' xmlns="http://www.w3.org/2005/01/pronunciation-lexicon">'
    "<lexeme><grapheme>W3C</grapheme><alias>{alias}</alias></lexeme></lexicon>"
)


def test_alias_lexicons_are_stored_applied_replaced_and_deleted(polly: Any) -> None:
    polly.put_lexicon(Name="acronyms", Content=LEXICON.format(alias="World Wide Web"))
    listed = {item["Name"]: item["Attributes"] for item in polly.list_lexicons()["Lexicons"]}
    assert listed["acronyms"]["LexemesCount"] == 1 and listed["acronyms"]["Alphabet"] == "ipa"
    said = marks(polly, Text="The W3C met.", SpeechMarkTypes=["word"], LexiconNames=["acronyms"])
    assert [mark["value"] for mark in said] == ["The", "World", "Wide", "Web", "met"]
    polly.put_lexicon(Name="acronyms", Content=LEXICON.format(alias="Consortium"))
    assert "Consortium" in polly.get_lexicon(Name="acronyms")["Lexicon"]["Content"]
    said = marks(polly, Text="The W3C met.", SpeechMarkTypes=["word"], LexiconNames=["acronyms"])
    assert [mark["value"] for mark in said] == ["The", "Consortium", "met"]
    polly.delete_lexicon(Name="acronyms")
    with pytest.raises(polly.exceptions.LexiconNotFoundException):
        polly.get_lexicon(Name="acronyms")
    with pytest.raises(polly.exceptions.LexiconNotFoundException):
        speak(polly, LexiconNames=["acronyms"])


def test_lexicons_this_model_cannot_honour_are_refused_clearly(polly: Any) -> None:
    phonemes = LEXICON.replace("<alias>{alias}</alias>", '<phoneme>"d@b@l.ju: Tri: si:</phoneme>')
    with pytest.raises(polly.exceptions.InvalidLexiconException) as raised:
        polly.put_lexicon(Name="sounds", Content=phonemes)
    assert "phoneme" in str(raised.value)
    with pytest.raises(polly.exceptions.InvalidLexiconException):
        polly.put_lexicon(Name="entities", Content='<!DOCTYPE x [<!ENTITY a "b">]><lexicon/>')
    with pytest.raises(polly.exceptions.LexiconSizeExceededException):
        polly.put_lexicon(Name="huge", Content=LEXICON.format(alias="x" * 40_000))


# --- custom voices ------------------------------------------------------------------------------------


def create(polly: Any, data: dict[str, Any], **fields: Any) -> dict[str, Any]:
    request = {
        "Name": "narrator",
        "LanguageCode": "en-US",
        "TermsAccepted": True,
        "VoiceCreationData": {"Recordings": [{"Format": "wav", "Data": data}]},
        **fields,
    }
    return dict(polly.create_voice(**request)["Voice"])


def test_a_custom_voice_is_created_used_everywhere_and_deleted(polly: Any, url: str) -> None:
    voice = create(polly, {"Bytes": recording()})
    assert voice["Id"].startswith("vc-") and len(voice["Id"]) <= 32
    assert voice["Status"] == "active" and voice["Origin"] == "customer" and voice["LanguageCode"] == "en-US"
    assert polly.get_voice(VoiceId=voice["Id"])["Voice"]["Id"] == voice["Id"]
    polly.get_waiter("voice_active").wait(VoiceId=voice["Id"])  # Polly's waiter: active at its first look
    saved = httpx.get(f"{url}/v1/voices").json()["voices"]
    assert voice["Id"] in {v["id"] for v in saved if v["type"] == "saved"}
    assert voice["Id"] in {v["Id"] for v in polly.describe_voices()["Voices"]}
    pcm = speak(polly, VoiceId=voice["Id"], OutputFormat="pcm")["AudioStream"].read()
    assert len(pcm) > 0
    own = httpx.post(
        f"{url}/v1/tts", json={"text": TEXT, "speaker": voice["Id"], "format": "pcm"}, timeout=300
    )
    assert own.status_code == 200 and len(own.content) > 0  # one library: the id works on every route
    polly.delete_voice(VoiceId=voice["Id"])
    with pytest.raises(polly.exceptions.ResourceNotFoundException):
        polly.get_voice(VoiceId=voice["Id"])
    with pytest.raises(polly.exceptions.ResourceNotFoundException):
        speak(polly, VoiceId=voice["Id"])


def test_a_custom_voice_is_read_from_the_deployments_bucket(polly: Any, storage: dict[str, str]) -> None:
    bucket = storage["COSYVOICE_OUTPUT_BUCKET"]
    moto_client("s3", storage["AWS_ENDPOINT_URL_S3"]).put_object(
        Bucket=bucket, Key="tts/in/me.wav", Body=recording()
    )
    voice = create(polly, {"S3Url": f"s3://{bucket}/tts/in/me.wav"})
    assert voice["Status"] == "active"
    message = refused(lambda: create(polly, {"S3Url": "s3://elsewhere/me.wav"}), "ValidationException")
    assert bucket in message
    refused(lambda: create(polly, {"S3Url": f"s3://{bucket}/elsewhere/me.wav"}), "ValidationException")


def test_a_custom_voice_needs_consent_one_recording_and_usable_audio(polly: Any) -> None:
    assert "consent" in refused(
        lambda: create(polly, {"Bytes": recording()}, TermsAccepted=False), "ValidationException"
    )
    two = {"Recordings": [{"Format": "wav", "Data": {"Bytes": recording()}}] * 2}
    refused(lambda: create(polly, {}, VoiceCreationData=two), "ValidationException")
    refused(lambda: create(polly, {"Bytes": recording(amplitude=0.0)}), "ValidationException")
    refused(lambda: create(polly, {"Bytes": recording()}, LanguageCode="de-DE"), "ValidationException")


# --- tasks ----------------------------------------------------------------------------------------------


def test_tasks_are_completed_through_the_queue(
    polly: Any, storage: dict[str, str], artifact_location: str
) -> None:
    bucket = storage["COSYVOICE_OUTPUT_BUCKET"]
    s3 = moto_client("s3", storage["AWS_ENDPOINT_URL_S3"])
    start = {"Text": TEXT, "VoiceId": "Matthew", "OutputS3BucketName": bucket, "OutputS3KeyPrefix": "books/"}
    audio = polly.start_speech_synthesis_task(**start, OutputFormat="mp3")["SynthesisTask"]
    assert audio["TaskStatus"] == "scheduled" and audio["RequestCharacters"] == len(TEXT)
    assert audio["OutputUri"].endswith(f"/{bucket}/tts/books/{audio['TaskId']}.mp3")
    marked = polly.start_speech_synthesis_task(**start, OutputFormat="json", SpeechMarkTypes=["sentence"])
    marked = marked["SynthesisTask"]
    gone = create(polly, {"Bytes": recording()})["Id"]
    orphan = polly.start_speech_synthesis_task(**{**start, "VoiceId": gone}, OutputFormat="mp3")[
        "SynthesisTask"
    ]
    polly.delete_voice(VoiceId=gone)  # before the worker reaches the task
    listed = polly.list_speech_synthesis_tasks(Status="scheduled")["SynthesisTasks"]
    assert {audio["TaskId"], marked["TaskId"]} <= {t["TaskId"] for t in listed}
    paged = [
        page["SynthesisTasks"]
        for page in polly.get_paginator("list_speech_synthesis_tasks").paginate(
            PaginationConfig={"PageSize": 1}
        )
    ]  # a page at a time, newest first
    assert [[task["TaskId"] for task in page] for page in paged] == [
        [orphan["TaskId"]],
        [marked["TaskId"]],
        [audio["TaskId"]],
    ]
    sqs = moto_client("sqs", storage["AWS_ENDPOINT_URL_SQS"])
    runtime: LocalLambda
    with local_lambda(artifact_location, **storage) as runtime:
        poll_while_visible(runtime, sqs, storage["COSYVOICE_JOB_QUEUE_URL"])
    done = polly.get_speech_synthesis_task(TaskId=audio["TaskId"])["SynthesisTask"]
    assert done["TaskStatus"] == "completed" and done["OutputUri"] == audio["OutputUri"]
    written = s3.get_object(Bucket=bucket, Key=f"tts/books/{audio['TaskId']}.mp3")["Body"].read()
    assert soundfile.read(io.BytesIO(written))[1] == MODEL_RATE
    marks_done = polly.get_speech_synthesis_task(TaskId=marked["TaskId"])["SynthesisTask"]
    assert marks_done["TaskStatus"] == "completed"
    key = marks_done["OutputUri"].split(f"/{bucket}/", 1)[1]
    assert key.startswith(f"tts/books/{marked['TaskId']}")
    lines = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()
    assert [json.loads(line)["value"] for line in lines] == ["Hello there.", "This is a test, spoken twice."]
    failed = polly.get_speech_synthesis_task(TaskId=orphan["TaskId"])["SynthesisTask"]
    assert failed["TaskStatus"] == "failed" and "deleted" in failed["TaskStatusReason"]
    completed = polly.list_speech_synthesis_tasks(Status="completed")["SynthesisTasks"]
    assert {audio["TaskId"], marked["TaskId"]} <= {t["TaskId"] for t in completed}


def test_tasks_refuse_another_bucket_and_unknown_ids(polly: Any, storage: dict[str, str]) -> None:
    with pytest.raises(polly.exceptions.InvalidS3BucketException):
        polly.start_speech_synthesis_task(
            Text=TEXT, VoiceId="Joanna", OutputFormat="mp3", OutputS3BucketName="elsewhere"
        )
    bucket = storage["COSYVOICE_OUTPUT_BUCKET"]
    with pytest.raises(polly.exceptions.InvalidSampleRateException):
        polly.start_speech_synthesis_task(
            Text=TEXT, VoiceId="Joanna", OutputFormat="pcm", SampleRate="16000", OutputS3BucketName=bucket
        )
    with pytest.raises(polly.exceptions.SynthesisTaskNotFoundException):
        polly.get_speech_synthesis_task(TaskId="nothing-here")
    with pytest.raises(polly.exceptions.InvalidNextTokenException):
        polly.list_speech_synthesis_tasks(NextToken="not-a-token")


# --- signatures ------------------------------------------------------------------------------------------


def test_the_four_refused_signatures(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = polly_client(url, secret="not-the-secret")
    assert "signature" in refused(wrong.describe_voices, "InvalidSignatureException", 403)
    unknown = polly_client(url, key_id="AKIAUNKNOWN")
    assert "AKIAUNKNOWN" in refused(unknown.describe_voices, "UnrecognizedClientException", 403)
    missing = polly_client(url, signature_version=UNSIGNED)
    refused(missing.describe_voices, "MissingAuthenticationTokenException", 403)
    stale = polly_client(url)
    late = datetime.now(UTC) - timedelta(minutes=6)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: late.replace(tzinfo=None))
    assert "expired" in refused(stale.describe_voices, "InvalidSignatureException", 403)


def test_a_body_changed_after_signing_is_refused(url: str) -> None:
    client = polly_client(url)

    def tamper(request: Any, **_: Any) -> None:  # the signed request on its way out, same length
        request.body = request.body.replace(b"Hello", b"Jello")

    client.meta.events.register("before-send.polly.SynthesizeSpeech", tamper)
    refused(lambda: speak(client), "InvalidSignatureException", 403)


def test_without_key_pairs_pollys_api_is_off_and_other_routes_are_open(server: str) -> None:
    message = refused(polly_client(server).describe_voices, "UnrecognizedClientException", 403)
    assert "COSYVOICE_SIGV4_KEYS" in message
    assert httpx.get(f"{server}/v1/speakers").status_code == 200


def signed(method: str, address: str, body: bytes = b"") -> httpx.Response:
    """A request signed as Polly's SDKs sign one (botocore's SigV4 signer), sent as it is."""
    request = AWSRequest(method=method, url=address, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(KEY_ID, SECRET), "polly", "us-east-1").add_auth(request)
    return httpx.request(method, address, headers=dict(request.headers.items()), content=body, timeout=300)


def test_an_unknown_operation_and_a_bad_body_are_pollys_errors(url: str) -> None:
    unsigned = httpx.get(f"{url}/polly/v2/nothing")
    assert unsigned.status_code == 403  # refused before any route
    assert unsigned.headers["x-amzn-errortype"] == "MissingAuthenticationTokenException"
    assert set(unsigned.json()) == {"message"}
    unknown = signed("GET", f"{url}/polly/v2/nothing")
    assert unknown.status_code == 404 and unknown.headers["x-amzn-errortype"] == "UnknownOperationException"
    broken = signed("POST", f"{url}/polly/v1/speech", b"{not json")
    assert broken.status_code == 400 and broken.headers["x-amzn-errortype"] == "ValidationException"
    assert broken.json() == {"message": "the request body is not valid JSON"}
    wrong_type = signed("POST", f"{url}/polly/v1/speech", json.dumps({"Text": 5}).encode())
    assert wrong_type.status_code == 400 and "VoiceId" in wrong_type.json()["message"]


def test_marks_on_v1_tts_include_estimated_words(url: str) -> None:
    reply = httpx.post(
        f"{url}/v1/tts",
        json={"text": TEXT, "speaker": "英文女", "speech_marks": ["word"], "marks_only": True},
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    words = [json.loads(line) for line in reply.text.splitlines()]
    assert [mark["value"] for mark in words] == TEXT_WORDS
    assert all(mark["type"] == "word" for mark in words)


def test_jobs_refuse_word_marks(url: str) -> None:
    reply = httpx.post(f"{url}/v1/jobs", json={"text": TEXT, "speaker": "英文女", "speech_marks": ["word"]})
    assert reply.status_code == 422 and "word" in reply.text


# --- through Lambda (API Gateway's HTTP API event, Mangum) ------------------------------------------------

API_HOST = "id.execute-api.us-east-1.amazonaws.com"


def gateway_event(method: str, path: str, query: str = "", body: bytes = b"") -> dict[str, Any]:
    """An HTTP API (payload 2.0) event of a request botocore signed for https://API_HOST/polly/..."""
    address = f"https://{API_HOST}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=address, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(KEY_ID, SECRET), "polly", "us-east-1").add_auth(request)
    event = json.loads((EVENTS / "http-api-speakers.json").read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["rawQueryString"] = query
    event["requestContext"]["http"]["method"] = method
    event["headers"] = {name.lower(): value for name, value in request.headers.items()} | {"host": API_HOST}
    if body:
        event["body"] = body.decode()
    return event


def test_pollys_api_is_served_and_verified_through_lambda(artifact_location: str) -> None:
    with local_lambda(artifact_location, COSYVOICE_SIGV4_KEYS=f"{KEY_ID}:{SECRET}") as runtime:
        voices = runtime.invoke(gateway_event("GET", "/polly/v1/voices", "LanguageCode=en-US")).json()
        assert voices["statusCode"] == 200, voices
        assert {voice["LanguageCode"] for voice in json.loads(voices["body"])["Voices"]} == {"en-US"}
        body = json.dumps({"Text": TEXT, "VoiceId": "Joanna", "OutputFormat": "ogg_vorbis"}).encode()
        speech = runtime.invoke(gateway_event("POST", "/polly/v1/speech", body=body)).json()
        assert speech["statusCode"] == 200 and speech["headers"]["content-type"] == "audio/ogg"
        assert soundfile.read(io.BytesIO(base64.b64decode(speech["body"])))[1] == MODEL_RATE
        tampered = gateway_event("POST", "/polly/v1/speech", body=body)
        tampered["body"] = tampered["body"].replace("Hello", "Jello")
        refused = runtime.invoke(tampered).json()
        assert refused["statusCode"] == 403
        assert refused["headers"]["x-amzn-errortype"] == "InvalidSignatureException"
