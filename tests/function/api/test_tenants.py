"""Tenants against `serve` with moto_server: two tenants, each with an API key and a SigV4 pair, and the
data of a deployment from before tenants, kept by a bare key (the tenant `default`), on every route: jobs,
saved voices, Polly's custom voices, tasks and lexicons.

Nothing crosses between tenants: another tenant's object answers exactly as an id that names nothing, lists
show one's own, and a tenant's objects live under `tenants/{tenant}/` while the bare key's stay where a
deployment kept them before. Held unsigned /polly connections take no synthesis slot, and the log names
the tenant of every change without a key or a secret in it.
"""

from __future__ import annotations

import base64
import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from bench.workload import recording
from function.core.tenant import fingerprint
from tests.function.api.test_polly_client import LEXICON, polly_client
from tests.function.jobs.test_jobs import poll_while_visible
from tests.function.support import SPEAKER, job_storage, local_lambda, moto_client, serving

pytestmark = pytest.mark.engine

API_KEYS = {"alice": "alice-api-key", "bob": "bob-api-key", "default": "old-api-key"}
PAIRS = {
    "alice": ("AKIAALICE", "alice-sigv4-secret"),
    "bob": ("AKIABOB", "bob-sigv4-secret"),
    "default": ("AKIAOLD", "old-sigv4-secret"),
}
SECRETS = [*API_KEYS.values(), *(secret for _, secret in PAIRS.values())]
TEXT = "Hello there."
AUDIO = base64.b64encode(recording()).decode()


@pytest.fixture(scope="module")
def storage(moto_endpoint: str) -> dict[str, str]:
    return job_storage(moto_endpoint)


@pytest.fixture(scope="module")
def served(
    artifact_location: str, storage: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """The server, and its log: the bare key and pair are written as a deployment before tenants had
    them; one synthesis slot and one queue place, so a held connection would show."""
    folder = tmp_path_factory.mktemp("tenants")
    (folder / "pairs").write_text(
        "".join(
            f"{key_id}:{secret}\n" if tenant == "default" else f"{tenant}={key_id}:{secret}\n"
            for tenant, (key_id, secret) in PAIRS.items()
        )
    )
    keys = ",".join(key if tenant == "default" else f"{tenant}={key}" for tenant, key in API_KEYS.items())
    env = {
        **storage,
        "COSYVOICE_API_KEYS": keys,
        "COSYVOICE_SIGV4_KEYS_FILE": str(folder / "pairs"),
        "COSYVOICE_MAX_CONCURRENT": "1",
        "COSYVOICE_MAX_QUEUED": "1",
    }
    log = folder / "server.log"
    with serving(artifact_location, log, **env) as url:
        yield url, log


@pytest.fixture(scope="module")
def url(served: tuple[str, Path]) -> str:
    return served[0]


def api(url: str, tenant: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"X-API-Key": API_KEYS[tenant]}, timeout=300)


def polly(url: str, tenant: str) -> Any:
    key_id, secret = PAIRS[tenant]
    return polly_client(url, key_id, secret)


def error_of(call: Any, **request: Any) -> dict[str, Any]:
    """What a refused Polly call said: its code, status and the members of its body."""
    with pytest.raises(ClientError) as raised:
        call(**request)
    response = raised.value.response
    return {
        "code": response["Error"]["Code"],
        "status": response["ResponseMetadata"]["HTTPStatusCode"],
        "keys": sorted(set(response) - {"ResponseMetadata"}),
    }


def same_answer(theirs: httpx.Response, unknown: httpx.Response) -> None:
    """Another tenant's object answers as an unknown one does: status, body keys, error code."""
    assert theirs.status_code == unknown.status_code, theirs.text
    assert set(theirs.json()) == set(unknown.json())
    assert theirs.json()["error"]["code"] == unknown.json()["error"]["code"]


def keys_under(storage: dict[str, str], prefix: str) -> list[str]:
    s3 = moto_client("s3", storage["AWS_ENDPOINT_URL_S3"])
    found = s3.list_objects_v2(Bucket=storage["COSYVOICE_OUTPUT_BUCKET"], Prefix=prefix)
    return [item["Key"] for item in found.get("Contents", [])]


# --- saved voices (/v1/voices) and Polly's custom voices --------------------------------------------------


def test_saved_voices_are_their_tenants_alone(url: str, storage: dict[str, str]) -> None:
    alice, bob, old = api(url, "alice"), api(url, "bob"), api(url, "default")
    mine = alice.post("/v1/voices", json={"name": "alice", "audio": AUDIO}).json()["id"]
    before = old.post("/v1/voices", json={"name": "old", "audio": AUDIO}).json()["id"]
    assert keys_under(storage, f"tts/tenants/alice/voices/{mine}/")  # a tenant's own folder
    assert keys_under(storage, f"tts/voices/{before}/")  # the bare key's: where it always was
    unknown = "voice_" + "0" * 32
    for client, theirs in ((bob, mine), (old, mine), (alice, before)):
        same_answer(client.get(f"/v1/voices/{theirs}"), client.get(f"/v1/voices/{unknown}"))
        same_answer(client.delete(f"/v1/voices/{theirs}"), client.delete(f"/v1/voices/{unknown}"))
        speak = {"text": TEXT, "format": "pcm"}
        same_answer(
            client.post("/v1/tts", json={**speak, "speaker": theirs}),
            client.post("/v1/tts", json={**speak, "speaker": unknown}),
        )

    def saved(client: httpx.Client) -> set[str]:
        return {v["id"] for v in client.get("/v1/voices").json()["voices"] if v["type"] == "saved"}

    assert mine in saved(alice) and before not in saved(alice)
    assert before in saved(old) and mine not in saved(old) and not saved(bob) & {mine, before}
    spoken = alice.post("/v1/tts", json={"text": TEXT, "speaker": mine, "format": "pcm"})
    assert spoken.status_code == 200 and spoken.content
    assert alice.get(f"/v1/voices/{mine}").status_code == 200  # still there after bob's DELETE


def test_custom_voices_client_tokens_and_recordings_stay_in_their_tenant(
    url: str, storage: dict[str, str]
) -> None:
    alice, bob, old = polly(url, "alice"), polly(url, "bob"), polly(url, "default")
    bucket = storage["COSYVOICE_OUTPUT_BUCKET"]
    s3 = moto_client("s3", storage["AWS_ENDPOINT_URL_S3"])
    for key in ("tts/tenants/alice/in/me.wav", "tts/tenants/bob/in/me.wav", "tts/in/old.wav"):
        s3.put_object(Bucket=bucket, Key=key, Body=recording())

    def create(client: Any, data: dict[str, str], token: str | None = None) -> dict[str, Any]:
        request = {
            "Name": "narrator",
            "LanguageCode": "en-US",
            "TermsAccepted": True,
            "VoiceCreationData": {"Recordings": [{"Format": "wav", "Data": data}]},
            **({"ClientToken": token} if token else {}),
        }
        return dict(client.create_voice(**request)["Voice"])

    token = uuid.uuid4().hex
    voice = create(alice, {"S3Url": f"s3://{bucket}/tts/tenants/alice/in/me.wav"}, token)
    assert create(alice, {"S3Url": f"s3://{bucket}/tts/tenants/alice/in/me.wav"}, token)["Id"] == voice["Id"]
    assert create(bob, {"S3Url": f"s3://{bucket}/tts/tenants/bob/in/me.wav"}, token)["Id"] != voice["Id"]
    for client, other in (
        (bob, "tenants/alice/in/me.wav"),
        (old, "tenants/alice/in/me.wav"),
        (bob, "in/old.wav"),
    ):
        refused = error_of(create, client=client, data={"S3Url": f"s3://{bucket}/tts/{other}"})
        assert refused["code"] == "ValidationException"
    old_voice = create(old, {"S3Url": f"s3://{bucket}/tts/in/old.wav"})

    unknown = "vc-" + "0" * 29
    for client, theirs in ((bob, voice["Id"]), (old, voice["Id"]), (alice, old_voice["Id"])):
        assert error_of(client.get_voice, VoiceId=theirs) == error_of(client.get_voice, VoiceId=unknown)
        gone = error_of(client.delete_voice, VoiceId=theirs)
        assert gone == error_of(client.delete_voice, VoiceId=unknown)
        described = {v["Id"] for v in client.describe_voices()["Voices"]}
        assert theirs not in described
    assert voice["Id"] in {v["Id"] for v in alice.describe_voices()["Voices"]}
    assert old_voice["Id"] in {v["Id"] for v in old.describe_voices()["Voices"]}
    assert alice.get_voice(VoiceId=voice["Id"])["Voice"]["Id"] == voice["Id"]  # bob's delete did nothing

    saved = api(url, "alice").post("/v1/voices", json={"name": "own", "audio": AUDIO}).json()["id"]
    assert error_of(alice.get_voice, VoiceId=saved)["code"] == "ValidationException"  # vc- ids only
    assert error_of(alice.delete_voice, VoiceId=saved)["code"] == "ValidationException"
    assert api(url, "alice").get(f"/v1/voices/{saved}").status_code == 200


# --- lexicons ----------------------------------------------------------------------------------------------


def test_lexicons_are_their_tenants_alone(url: str, storage: dict[str, str]) -> None:
    alice, bob, old = polly(url, "alice"), polly(url, "bob"), polly(url, "default")
    alice.put_lexicon(Name="acronyms", Content=LEXICON.format(alias="World Wide Web"))
    old.put_lexicon(Name="older", Content=LEXICON.format(alias="Consortium"))
    assert keys_under(storage, "tts/tenants/alice/voices/lexicons/acronyms")
    assert keys_under(storage, "tts/voices/lexicons/older")
    for client, theirs in ((bob, "acronyms"), (old, "acronyms"), (alice, "older")):
        assert error_of(client.get_lexicon, Name=theirs) == error_of(client.get_lexicon, Name="nothing")
        assert theirs not in {item["Name"] for item in client.list_lexicons()["Lexicons"]}
        speak = {"Text": "The W3C met.", "VoiceId": "Joanna", "OutputFormat": "mp3"}
        refused = error_of(client.synthesize_speech, **speak, LexiconNames=[theirs])
        assert refused["code"] == "LexiconNotFoundException"
    bob.put_lexicon(Name="acronyms", Content=LEXICON.format(alias="Bob"))  # his own, not a replacement
    assert "World Wide Web" in alice.get_lexicon(Name="acronyms")["Lexicon"]["Content"]
    bob.delete_lexicon(Name="acronyms")
    assert alice.get_lexicon(Name="acronyms")["Lexicon"]["Name"] == "acronyms"
    said = alice.synthesize_speech(
        Text="The W3C met.", VoiceId="Joanna", OutputFormat="mp3", LexiconNames=["acronyms"]
    )
    assert said["RequestCharacters"] == len("The W3C met.")  # billed before the aliases
    assert said["AudioStream"].read()  # to its end: a stream holds its synthesis slot until then


# --- tasks and jobs -----------------------------------------------------------------------------------------


def test_tasks_are_their_tenants_alone_and_paged_newest_first(url: str, storage: dict[str, str]) -> None:
    alice, bob, old = polly(url, "alice"), polly(url, "bob"), polly(url, "default")
    bucket = storage["COSYVOICE_OUTPUT_BUCKET"]

    def start(client: Any, **fields: Any) -> str:
        task = client.start_speech_synthesis_task(
            Text=TEXT, VoiceId="Joanna", OutputFormat="mp3", OutputS3BucketName=bucket, **fields
        )["SynthesisTask"]
        return str(task["TaskId"])

    first, second, third = (start(alice, OutputS3KeyPrefix="books/") for _ in range(3))
    before = start(old)
    s3 = moto_client("s3", storage["AWS_ENDPOINT_URL_S3"])
    for key in keys_under(storage, "tts/polly/task-index/"):  # as a task stored before the index
        s3.delete_object(Bucket=bucket, Key=key)
    assert keys_under(storage, f"tts/tenants/alice/books/{first}") == []  # queued, not yet written
    assert keys_under(storage, f"tts/tenants/alice/jobs/{first}/")
    assert keys_under(storage, f"tts/polly/tasks/{before}.json")
    assert error_of(start, client=old, OutputS3KeyPrefix="tenants/alice/")["code"] == "InvalidS3KeyException"
    assert error_of(start, client=alice, OutputS3KeyPrefix="a/../../")["code"] == "InvalidS3KeyException"

    for client, theirs in ((bob, first), (old, first), (alice, before)):
        get = client.get_speech_synthesis_task
        assert error_of(get, TaskId=theirs) == error_of(get, TaskId="nothing-here")
    assert bob.list_speech_synthesis_tasks()["SynthesisTasks"] == []
    assert [t["TaskId"] for t in old.list_speech_synthesis_tasks()["SynthesisTasks"]] == [before]
    assert keys_under(storage, "tts/polly/task-index/")  # put in the index when first listed

    page = alice.list_speech_synthesis_tasks(MaxResults=2)
    assert [task["TaskId"] for task in page["SynthesisTasks"]] == [third, second]
    fourth = start(alice)  # arrives between two pages: the next page still starts where this one ended
    rest = alice.list_speech_synthesis_tasks(MaxResults=2, NextToken=page["NextToken"])
    assert [task["TaskId"] for task in rest["SynthesisTasks"]] == [first] and "NextToken" not in rest
    newest = alice.list_speech_synthesis_tasks(MaxResults=1)["SynthesisTasks"]
    assert [task["TaskId"] for task in newest] == [fourth]


def test_a_tenants_task_speaks_in_its_own_custom_voice_through_the_queue(
    url: str, storage: dict[str, str], artifact_location: str
) -> None:
    """The worker takes the tenant from the queue's message: the job's saved voice is looked up in the
    tenant's library, and its audio written in the tenant's folder."""
    alice = polly(url, "alice")
    recorded = {"Recordings": [{"Format": "wav", "Data": {"Bytes": recording()}}]}
    voice = alice.create_voice(
        Name="own", LanguageCode="en-US", TermsAccepted=True, VoiceCreationData=recorded
    )["Voice"]["Id"]
    bucket = storage["COSYVOICE_OUTPUT_BUCKET"]
    task = alice.start_speech_synthesis_task(
        Text=TEXT, VoiceId=voice, OutputFormat="mp3", OutputS3BucketName=bucket, OutputS3KeyPrefix="own/"
    )["SynthesisTask"]
    sqs = moto_client("sqs", storage["AWS_ENDPOINT_URL_SQS"])
    with local_lambda(artifact_location, **storage) as runtime:
        poll_while_visible(runtime, sqs, storage["COSYVOICE_JOB_QUEUE_URL"])
    done = alice.get_speech_synthesis_task(TaskId=task["TaskId"])["SynthesisTask"]
    assert done["TaskStatus"] == "completed", done.get("TaskStatusReason")
    assert keys_under(storage, f"tts/tenants/alice/own/{task['TaskId']}.mp3")


def test_jobs_are_their_tenants_alone(url: str, storage: dict[str, str]) -> None:
    alice, bob, old = api(url, "alice"), api(url, "bob"), api(url, "default")
    job = {"id": "book-1", "text": TEXT, "speaker": SPEAKER}
    assert alice.post("/v1/jobs", json=job).status_code == 202
    assert old.post("/v1/jobs", json={**job, "id": "book-0"}).status_code == 202
    assert keys_under(storage, "tts/tenants/alice/jobs/book-1/")
    assert keys_under(storage, "tts/jobs/book-0/")
    for client, theirs in ((bob, "book-1"), (old, "book-1"), (alice, "book-0")):
        same_answer(client.get(f"/v1/jobs/{theirs}"), client.get("/v1/jobs/nothing-here"))
    # Ids are unique per tenant: bob's book-1 is his own, whatever alice's says.
    assert bob.post("/v1/jobs", json={**job, "text": "Other words."}).status_code == 202
    assert alice.get("/v1/jobs/book-1").json()["status"] == "queued"
    conflict = alice.post("/v1/jobs", json={**job, "text": "Other words."})
    assert conflict.status_code == 409
    message = conflict.json()["error"]["message"]
    assert "sha256" not in message and not any(len(word) >= 12 for word in message.split() if word.isalnum())


# --- slots, request ids and the log ------------------------------------------------------------------------


def held(url: str, head: bytes) -> socket.socket:
    """A connection that sent a request's head and never its body."""
    host, port = url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)))
    connection.sendall(head)
    return connection


def test_held_polly_connections_take_no_slot(url: str) -> None:
    address = f"{url}/polly/v1/speech"
    body = json.dumps({"Text": TEXT, "VoiceId": "Joanna", "OutputFormat": "pcm"}).encode()
    signed = AWSRequest(method="POST", url=address, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(*PAIRS["alice"]), "polly", "us-east-1").add_auth(signed)
    host = url.removeprefix("http://")
    signed_head = "".join(f"{name}: {value}\r\n" for name, value in signed.headers.items())
    heads = [
        f"POST /polly/v1/speech HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n\r\n".encode(),
        f"POST /polly/v1/speech HTTP/1.1\r\nHost: {host}\r\n{signed_head}"
        f"Content-Length: {len(body)}\r\n\r\n".encode(),
    ]
    connections = [held(url, heads[index % 2]) for index in range(4)]  # unsigned, and signed bodyless
    try:
        ready = httpx.get(f"{url}/readyz", timeout=30).json()
        assert ready["status"] == "ready" and (ready["in_flight"], ready["queued"]) == (0, 0)
        reply = polly(url, "alice").synthesize_speech(Text=TEXT, VoiceId="Joanna", OutputFormat="pcm")
        assert reply["AudioStream"].read()
        spoken = api(url, "bob").post("/v1/tts", json={"text": TEXT, "speaker": SPEAKER, "format": "pcm"})
        assert spoken.status_code == 200
    finally:
        for connection in connections:
            connection.close()


def test_replies_carry_request_ids_and_the_log_names_tenants_without_secrets(
    served: tuple[str, Path],
) -> None:
    url, log = served
    reply = polly(url, "bob").describe_voices()
    polly_id = reply["ResponseMetadata"]["RequestId"]
    assert polly_id and reply["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"] == polly_id
    refused = httpx.get(f"{url}/polly/v1/voices")  # unsigned: refused, still named
    assert refused.headers["x-amzn-requestid"] and "x-request-id" not in refused.headers
    mine = api(url, "bob").get("/v1/speakers", headers={"X-Request-Id": "bob-trace-1"})
    assert mine.headers["x-request-id"] == "bob-trace-1"
    assert httpx.get(f"{url}/v1/speakers").headers["x-request-id"]  # a 401 too

    text = log.read_text()
    for secret in SECRETS:
        assert secret not in text
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    requests = {line["request_id"]: line for line in lines if line.get("event") == "request"}
    assert requests[polly_id]["tenant"] == "bob" and requests[polly_id]["path"] == "/polly/v1/voices"
    assert requests["bob-trace-1"]["tenant"] == "bob" and requests["bob-trace-1"]["status"] == 200
    audits = [line for line in lines if line.get("event") == "audit"]
    actions = {(line["tenant"], line["action"]) for line in audits}
    assert {("alice", "voice.created"), ("default", "voice.created"), ("alice", "lexicon.put")} <= actions
    assert {("bob", "lexicon.deleted"), ("alice", "task.started"), ("alice", "job.submitted")} <= actions
    credentials = {line["tenant"]: line["credential"] for line in audits if line["action"] == "lexicon.put"}
    assert credentials["alice"] == fingerprint(PAIRS["alice"][0])
    created = [line for line in audits if line["action"] == "voice.created" and line["tenant"] == "alice"]
    assert fingerprint(API_KEYS["alice"]) in {line["credential"] for line in created}
    assert all(
        set(line) == {"event", "time", "tenant", "action", "id", "credential", "request_id"}
        for line in audits
    )
