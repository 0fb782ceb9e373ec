"""Jobs across invocations: POST /v1/jobs → SQS → the worker, checkpointing part by part, on the real
engine (tiny artifact) under the real runtime client, with S3 and SQS on moto_server.

GIVEN a function whose invocations are cut short (the local Runtime API's deadline), and the messages
moto's queue really holds
WHEN a long text is submitted, or batches of raw jobs arrive
THEN the job continues through messages it sends itself until its audio is what one run would have made;
records that cannot start go back in batchItemFailures; ids are bound to their content; failures say why.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import soundfile

from function.aws.s3 import PART_BYTES, store_stream
from function.core.deadline import REPLY_MARGIN_SECONDS
from function.core.formats import Output
from function.jobs.worker import CHECKPOINT_SECONDS
from function.local.invoke import LocalLambda
from tests.function.support import DIRECT, EVENTS, SPEAKER, batch_records, local_lambda, sqs_event

# One sentence of 60-80 text tokens is one segment (the splitter packs sentences up to 80): LONG_TEXT is
# SEGMENTS segments.
SENTENCE = (
    "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
    " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and nobody"
    " in the whole town expects that today will be any different from the long and gentle day before it."
)
SEGMENTS = 3
LONG_TEXT = " ".join([SENTENCE] * SEGMENTS)
SEGMENT_SECONDS = 20.0  # what a segment takes on the clock the worker's deadlines read (job_faults.py)
FAULTS = Path(__file__).with_name("job_faults.py")
SEED = 7  # a seed whose segments the tiny model ends early
PCM = Output.of("pcm", 22050)  # parts and raw audio at the tiny model's rate


def http_event(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    event = json.loads((EVENTS / "http-api-speakers.json").read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    if body is not None:
        event["body"] = json.dumps(body, ensure_ascii=False)
    return event


def call(runtime: LocalLambda, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """(status, JSON body) of an HTTP API request to the function."""
    reply = runtime.invoke(http_event(method, path, body)).json()
    return reply["statusCode"], json.loads(reply["body"])


def job_view(runtime: LocalLambda, job_id: str) -> dict[str, Any]:
    status, view = call(runtime, "GET", f"/v1/jobs/{job_id}")
    assert status == 200, view
    return view


def received(sqs: Any, queue: str, most: int = 2, wait_seconds: int = 2) -> list[dict[str, Any]]:
    """The messages visible on the queue within `wait_seconds`, as Lambda's poller would put them in an
    SQS event."""
    response = sqs.receive_message(
        QueueUrl=queue,
        MaxNumberOfMessages=most,
        WaitTimeSeconds=wait_seconds,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    return response.get("Messages", [])


def dead_lettered(sqs: Any, queue: str) -> list[tuple[Any, dict[str, str]]]:
    """(body as sent, its string attributes) of each message on the dead-letter queue, in sending order."""
    messages = sorted(received(sqs, queue, most=10), key=lambda m: int(m["Attributes"]["SentTimestamp"]))
    return [
        (m["Body"], {name: value["StringValue"] for name, value in m.get("MessageAttributes", {}).items()})
        for m in messages
    ]


def as_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobs",
                "awsRegion": "us-east-1",
            }
            for message in messages
        ]
    }


def poll_once(runtime: LocalLambda, sqs: Any, queue: str, wait_seconds: int = 2) -> dict[str, Any] | None:
    """What Lambda's SQS poller does: one batch in, acked records deleted, failed ones left to reappear.
    None: nothing became visible within `wait_seconds`."""
    messages = received(sqs, queue, wait_seconds=wait_seconds)
    if not messages:
        return None
    reply = runtime.invoke(as_event(messages)).json()
    handed_back = {failure["itemIdentifier"] for failure in reply["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] not in handed_back:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return reply


def poll_while_visible(runtime: LocalLambda, sqs: Any, queue: str) -> None:
    """Poll as Lambda's poller does until no message is visible, for messages queued before the first poll:
    what is handed back waits for its retry or for SQS's redrive, and is left there."""
    while poll_once(runtime, sqs, queue, wait_seconds=0) is not None:
        pass


@pytest.fixture
def jobs_env(bucket: str, queue: str, dead_letters: str, s3_env: dict[str, str]) -> dict[str, str]:
    return dict(
        COSYVOICE_OUTPUT_BUCKET=bucket,
        COSYVOICE_JOB_QUEUE_URL=queue,
        COSYVOICE_DEAD_LETTER_QUEUE_URL=dead_letters,  # as template.yaml sets it
        COSYVOICE_MAX_TEXT_CHARS="3000",  # the one-run reference of LONG_TEXT is a direct invoke
        COSYVOICE_MAX_RESPONSE_BYTES=str(64 * 1024 * 1024),  # and comes back whole
        **s3_env,
    )


@pytest.fixture
def jobs_lambda(artifact_location: str, jobs_env: dict[str, str]) -> Iterator[LocalLambda]:
    with local_lambda(artifact_location, **jobs_env) as runtime:
        runtime.wait_init()
        # A first synthesis: the normaliser is loaded and the speed meter has a real figure.
        assert "audio" in runtime.invoke({"text": "Warm up.", "speaker": SPEAKER, "format": "pcm"}).json()
        yield runtime


@pytest.mark.engine
def test_a_long_text_is_spoken_across_invocations_and_equals_one_run(
    artifact_location: str, jobs_env: dict[str, str], sqs: Any, queue: str
) -> None:
    # Parts of one segment each, one at a time: the worker that finishes a part sends the next.
    one_by_one = {"COSYVOICE_JOB_PART_SECONDS": "1", "COSYVOICE_JOB_PARALLEL": "1"}
    runtime = local_lambda(artifact_location, **jobs_env, **one_by_one, COSYVOICE_WARMUP="0")
    # Deadlines on a clock where each segment takes SEGMENT_SECONDS, as the engine expects: whatever this
    # machine's speed, an invocation with room for one segment and a half makes one.
    runtime.launcher = (str(FAULTS), f"clock:{SEGMENT_SECONDS}")
    with runtime:
        runtime.wait_init()
        one_run = runtime.invoke({"text": LONG_TEXT, "speaker": SPEAKER, "format": "wav", "seed": SEED})
        reference = base64.b64decode(one_run.json()["audio"])
        short = REPLY_MARGIN_SECONDS + CHECKPOINT_SECONDS + 1.5 * SEGMENT_SECONDS

        status, accepted = call(
            runtime, "POST", "/v1/jobs", {"text": LONG_TEXT, "speaker": SPEAKER, "seed": SEED}
        )
        assert status == 202, accepted
        job_id = accepted["id"]
        assert accepted == {"id": job_id, "status": "queued", "status_url": f"/v1/jobs/{job_id}"}
        seen = [job_view(runtime, job_id)]
        runtime.api.deadline_seconds = short
        invocations = 0
        while seen[-1]["status"] != "done":
            assert invocations < 30 and seen[-1]["status"] in ("queued", "running"), seen[-1]
            if poll_once(runtime, sqs, queue) is not None:
                invocations += 1
            seen.append(job_view(runtime, job_id))
        runtime.api.deadline_seconds = 900.0
        outcomes = [record["status"] for record in batch_records(runtime, invocations)]
        done = seen[-1]
        audio = httpx.get(done["url"]).content

    assert seen[0]["status"] == "queued"
    running = [view["progress"] for view in seen if view["status"] == "running"]
    # One part (one segment) per invocation: every view part-way, each invocation but the last sending
    # the next part's message itself, the last joining the parts.
    assert [p["segments_done"] for p in running] == sorted(p["segments_done"] for p in running)
    assert {p["segments_done"] for p in running} == set(range(1, SEGMENTS))
    assert all(p["segments_total"] == SEGMENTS and p["audio_seconds"] > 0 for p in running)
    assert [p["parts_done"] for p in running] == [p["segments_done"] for p in running]
    assert all(p["parts_total"] == SEGMENTS for p in running)
    assert outcomes == ["continued"] * (SEGMENTS - 1) + ["done"], outcomes
    assert done["key"] == f"tts/{job_id}.wav" and done["format"] == "wav" and done["sample_rate"] == 22050
    assert done["progress"]["segments_done"] == SEGMENTS and done["seed"] == SEED
    assert done["progress"]["parts_done"] == done["progress"]["parts_total"] == SEGMENTS
    # The checkpoints lost nothing: the job's audio is the one run's, sample for sample.
    assert audio == reference
    assert done["duration_seconds"] == pytest.approx((len(audio) - 44) / 2 / 22050, abs=1e-3)


@pytest.mark.engine
def test_a_record_not_started_before_the_deadline_goes_back_while_its_neighbour_finishes(
    artifact_location: str, jobs_env: dict[str, str], sqs: Any, dead_letters: str
) -> None:
    long = {"id": "long", "text": SENTENCE, "speaker": SPEAKER}
    short = {"id": "short", "text": "Hi there.", "speaker": SPEAKER, "format": "ogg"}  # parts re-encoded
    runtime = local_lambda(artifact_location, **jobs_env, COSYVOICE_WARMUP="0")
    runtime.launcher = (str(FAULTS), f"clock:{SEGMENT_SECONDS}")  # each segment takes SEGMENT_SECONDS
    with runtime:
        runtime.wait_init()
        # The reply's margin comes off the invocation, then each record has its share less a checkpoint's.
        # The long record comes first and gets half: room for three quarters of its one segment; the
        # short one then has the rest, half a segment's time more than its one segment needs.
        half = SEGMENT_SECONDS / 2
        runtime.api.deadline_seconds = REPLY_MARGIN_SECONDS + 2 * (CHECKPOINT_SECONDS + half) + half
        reply = runtime.invoke(sqs_event(long, short)).json()
        assert reply == {"batchItemFailures": [{"itemIdentifier": "m0"}]}
        finished = job_view(runtime, "short")
        assert finished["status"] == "done" and finished["key"] == "tts/short.ogg"
        audio, rate = soundfile.read(io.BytesIO(httpx.get(finished["url"]).content))
        assert rate == finished["sample_rate"]
        assert audio.size / rate == pytest.approx(finished["duration_seconds"], abs=0.05)
        waiting = job_view(runtime, "long")
        assert waiting["status"] == "queued" and waiting["last_error"]["code"] == "not_started"

        # The queue's last receive: the job says it failed and why (retriable: submitting it again retries
        # it), and this message alone is dead-lettered with the reason.
        runtime.api.deadline_seconds = REPLY_MARGIN_SECONDS + CHECKPOINT_SECONDS + half
        last = sqs_event(long)
        last["Records"][0]["attributes"] = {"ApproximateReceiveCount": "5"}
        assert runtime.invoke(last).json() == {"batchItemFailures": []}
        failed = job_view(runtime, "long")
        assert runtime.invoke(sqs_event(long)).json() == {"batchItemFailures": []}  # failed stays failed
        assert job_view(runtime, "long")["status"] == "failed"
    assert failed["status"] == "failed" and failed["retriable"] is True
    assert failed["error"]["code"] == "not_started" and "part 1 of 1" in failed["error"]["message"]
    (letter,) = dead_lettered(sqs, dead_letters)
    assert json.loads(letter[0]) == long and letter[1]["ErrorCode"] == "not_started"


@pytest.mark.engine
def test_an_id_is_bound_to_its_content(
    jobs_lambda: LocalLambda, sqs: Any, queue: str, dead_letters: str, s3: Any, bucket: str
) -> None:
    body = {"id": "reused", "text": "Same words.", "speaker": SPEAKER}
    assert call(jobs_lambda, "POST", "/v1/jobs", body) == (
        202,
        {"id": "reused", "status": "queued", "status_url": "/v1/jobs/reused"},
    )
    again, existing = call(
        jobs_lambda, "POST", "/v1/jobs", {**body, "format": "wav"}
    )  # the default, spelt out
    assert (again, existing["id"], existing["status"]) == (200, "reused", "queued")
    assert isinstance(job_view(jobs_lambda, "reused")["seed"], int)  # chosen at submission, kept
    conflict, error = call(jobs_lambda, "POST", "/v1/jobs", {**body, "text": "Other words."})
    assert conflict == 409 and error["error"]["code"] == "job_conflict"
    messages = received(sqs, queue)
    assert [json.loads(m["Body"]) for m in messages] == [{"job": "reused"}]  # queued once

    raw = {"id": "raw", "text": "Queued words.", "speaker": SPEAKER}
    assert jobs_lambda.invoke(sqs_event(raw)).json() == {"batchItemFailures": []}
    etag = s3.head_object(Bucket=bucket, Key="tts/raw.wav")["ETag"]
    assert jobs_lambda.invoke(sqs_event(raw)).json() == {"batchItemFailures": []}  # redelivered
    other = sqs_event({**raw, "text": "Different words."}, {**raw, "format": "mp3"})
    assert jobs_lambda.invoke(other).json() == {"batchItemFailures": []}  # refused for good, not retried
    records = batch_records(jobs_lambda, expected=4)
    assert [r["status"] for r in records] == ["done", "exists", "dead_lettered", "dead_lettered"]
    assert [r.get("code") for r in records[2:]] == ["job_conflict", "job_conflict"]
    assert "other content" in records[2]["message"]
    # Kept with the reason, not only logged: the bodies as sent, to redrive under another id.
    letters = dead_lettered(sqs, dead_letters)
    assert [body for body, _ in letters] == [record["body"] for record in other["Records"]]
    assert {(a["ErrorCode"], a["JobId"], a["SourceMessageId"]) for _, a in letters} == {
        ("job_conflict", "raw", "m0"),
        ("job_conflict", "raw", "m1"),
    }
    assert s3.head_object(Bucket=bucket, Key="tts/raw.wav")["ETag"] == etag
    assert "tts/raw.mp3" not in {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}

    # A raw message may name its tenant: the same id is another job there, kept in the tenant's folder,
    # and its submission is audited (without a credential: the queue is inside the deployment).
    assert jobs_lambda.invoke(sqs_event({**raw, "tenant": "acme"})).json() == {"batchItemFailures": []}
    assert s3.head_object(Bucket=bucket, Key="tts/tenants/acme/raw.wav")["ETag"] != etag
    audits = [r for r in jobs_lambda.log_records() if r.get("event") == "audit" and r["id"] == "raw"]
    assert [(a["tenant"], a["action"], a["credential"]) for a in audits] == [
        ("default", "job.submitted", None),
        ("acme", "job.submitted", None),
    ]
    assert all(raw["text"] not in json.dumps(a) for a in audits)


@pytest.mark.engine
def test_a_client_error_fails_the_job_for_good_and_says_why(
    jobs_lambda: LocalLambda, sqs: Any, dead_letters: str, s3: Any, bucket: str
) -> None:
    status, error = call(jobs_lambda, "POST", "/v1/jobs", {"text": "Hi.", "speaker": "nobody"})
    assert status == 400 and error["error"]["code"] == "unknown_speaker"  # refused before it is queued
    status, error = call(jobs_lambda, "POST", "/v1/jobs", {"text": "x" * 100_001, "speaker": SPEAKER})
    assert status == 413 and error["error"]["code"] == "text_too_long"

    # A raw message cannot be refused up front: its job fails, acked (retrying cannot help), with the reason.
    raw = {"id": "nobody-speaks", "text": "Hi.", "speaker": "nobody"}
    assert jobs_lambda.invoke(sqs_event(raw)).json() == {"batchItemFailures": []}
    view = job_view(jobs_lambda, "nobody-speaks")
    assert view["status"] == "failed" and "retriable" not in view
    assert view["error"]["code"] == "unknown_speaker" and "'nobody'" in view["error"]["message"]
    stored = json.loads(s3.get_object(Bucket=bucket, Key="tts/jobs/nobody-speaks/status.json")["Body"].read())
    assert stored["error"] == view["error"]
    assert jobs_lambda.invoke(sqs_event(raw)).json() == {"batchItemFailures": []}  # a duplicate: still failed
    assert [r["status"] for r in batch_records(jobs_lambda, expected=2)] == ["dead_lettered", "job_failed"]
    letters = dead_lettered(sqs, dead_letters)
    assert [json.loads(body) for body, _ in letters] == [
        raw
    ]  # one dead letter per failed job, with the reason
    assert [(a["ErrorCode"], a["JobId"]) for _, a in letters] == [("unknown_speaker", "nobody-speaks")]
    assert letters[0][1]["ErrorMessage"] == view["error"]["message"]

    assert call(jobs_lambda, "GET", "/v1/jobs/never-submitted")[0] == 404
    status, error = call(jobs_lambda, "GET", "/v1/jobs/..%2Fescape")
    assert status == 404 and error["error"]["code"] in ("job_not_found", "not_found")


@pytest.mark.engine
def test_without_a_queue_the_job_api_says_so(
    artifact_location: str, bucket: str, s3_env: dict[str, str]
) -> None:
    with local_lambda(artifact_location, COSYVOICE_OUTPUT_BUCKET=bucket, **s3_env) as runtime:
        runtime.wait_init()
        status, error = call(runtime, "POST", "/v1/jobs", {"text": "Hi.", "speaker": SPEAKER})
    assert status == 503 and error["error"]["code"] == "jobs_unavailable"
    assert "COSYVOICE_JOB_QUEUE_URL" in error["error"]["message"]


@pytest.mark.usefixtures("aws_in_process")
def test_large_audio_goes_up_in_parts_and_only_once(s3: Any, bucket: str) -> None:
    pieces = [bytes([index]) * (PART_BYTES // 4) for index in range(9)]  # 2.25 parts
    assert store_stream(bucket, "tts/big.pcm", iter(pieces), PCM, "big")
    assert not store_stream(bucket, "tts/big.pcm", iter(pieces), PCM)  # a duplicate's upload
    assert not store_stream(bucket, "tts/big.pcm", [b"small"], PCM)
    head = s3.head_object(Bucket=bucket, Key="tts/big.pcm")
    assert head["ETag"].strip('"').endswith("-3") and head["Metadata"]["job-id"] == "big"
    assert s3.get_object(Bucket=bucket, Key="tts/big.pcm")["Body"].read() == b"".join(pieces)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []  # the loser's was aborted


@pytest.mark.engine
def test_two_deliveries_of_one_job_at_once_make_one_audio_the_lease_holders(
    artifact_location: str, jobs_env: dict[str, str], s3: Any, bucket: str, sqs: Any, queue: str
) -> None:
    text = " ".join([SENTENCE] * 3)
    raw = {"id": "twice", "text": text, "speaker": SPEAKER, "seed": SEED}
    with (
        local_lambda(artifact_location, **jobs_env) as first,
        local_lambda(artifact_location, **jobs_env) as second,
    ):
        first.wait_init()
        second.wait_init()
        with ThreadPoolExecutor(2) as pool:  # SQS delivered the message twice, to two environments
            replies = list(pool.map(lambda runtime: runtime.invoke(sqs_event(raw)).json(), (first, second)))
        # One worker holds the job's lease; a delivery that found it held was sent again as a new
        # message (for when the holder's lease would have run out), and received again finds it done.
        outcomes = sorted(r["status"] for env in (first, second) for r in batch_records(env, 1))
        again = first.invoke(sqs_event(raw)).json()
        reference = first.invoke({"text": text, "speaker": SPEAKER, "format": "wav", "seed": SEED}).json()
        last = batch_records(first, 2)[-1]["status"]
    assert replies == [{"batchItemFailures": []}] * 2 and again == {"batchItemFailures": []}
    assert outcomes in (["done", "held"], ["done", "exists"]), outcomes
    assert last == "exists"
    delayed = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert int(delayed["Attributes"]["ApproximateNumberOfMessagesDelayed"]) == outcomes.count("held")
    assert s3.get_object(Bucket=bucket, Key="tts/twice.wav")["Body"].read() == base64.b64decode(
        reference["audio"]
    )
    folder = "tts/jobs/twice/"
    status = json.loads(s3.get_object(Bucket=bucket, Key=f"{folder}status.json")["Body"].read())
    assert status["status"] == "done" and status["progress"]["segments_done"] == 3
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{folder}parts/")["Contents"]
    assert [item["Key"] for item in listed] == [f"{folder}parts/000000.pcm"]  # one part, written once


class _NoTimeLeft:
    def get_remaining_time_in_millis(self) -> int:
        return 0


@pytest.mark.parametrize("outcome", ["deferred", "retrying"])
@pytest.mark.usefixtures("aws_in_process")
def test_a_record_handed_back_is_received_again_soon_not_after_the_visibility_timeout(
    outcome: str, sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from function.aws.s3 import StorageError
    from function.instance import settings as settings_module
    from function.instance.settings import Settings
    from function.jobs import batch
    from function.jobs import queue as job_queue

    url = sqs.create_queue(QueueName=f"slow-{outcome}", Attributes={"VisibilityTimeout": "3600"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"job": "some-job"}))
    (message,) = received(sqs, url)  # invisible for the next hour, as Lambda's poller leaves it
    monkeypatch.setattr(job_queue, "RETRY_DEFERRED_SECONDS", 1)
    monkeypatch.setattr(job_queue, "RETRY_FAILED_SECONDS", 1)

    def transient(*_: Any) -> Any:
        raise StorageError("S3 is having a moment")

    monkeypatch.setattr(batch, "process_record", transient)
    settings = Settings(artifact="unused", output_bucket="unused", job_queue_url=url)
    monkeypatch.setattr(settings_module, "_settings", settings)
    reply = batch.handle_sqs(as_event([message]), _NoTimeLeft() if outcome == "deferred" else None)
    assert reply == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    again = received(sqs, url)  # waits up to 2 s: far less than the hour
    assert [m["MessageId"] for m in again] == [message["MessageId"]]


# A record of each kind that can never succeed (issue 22: each was acked and only logged).
HOPELESS = {
    "not json": "{not json",
    "no id": {"text": "Hi.", "speaker": SPEAKER},
    "over the cap": {"id": "too-long", "text": "x" * 100_001, "speaker": SPEAKER},
    "unknown speaker": {"id": "no-such-voice", "text": "Hi.", "speaker": "nobody"},
}


@pytest.mark.engine
def test_every_record_that_can_never_succeed_is_dead_lettered_with_its_reason_then_acked(
    jobs_lambda: LocalLambda, sqs: Any, dead_letters: str
) -> None:
    event = sqs_event(*HOPELESS.values())
    assert jobs_lambda.invoke(event).json() == {"batchItemFailures": []}
    letters = dead_lettered(sqs, dead_letters)
    assert [body for body, _ in letters] == [record["body"] for record in event["Records"]]  # unchanged
    codes = [(a["ErrorCode"], a.get("JobId"), a["SourceMessageId"]) for _, a in letters]
    assert codes == [
        ("invalid_request", None, "m0"),
        ("invalid_request", None, "m1"),
        ("text_too_long", "too-long", "m2"),
        ("unknown_speaker", "no-such-voice", "m3"),
    ]
    assert all(attributes["ErrorMessage"] for _, attributes in letters)
    assert job_view(jobs_lambda, "no-such-voice")["error"]["code"] == "unknown_speaker"  # as before
    assert "audio" in jobs_lambda.invoke(DIRECT).json()  # and the function serves the next request


@pytest.mark.usefixtures("aws_in_process")
@pytest.mark.parametrize("dead_letter_queue", ["none", "refusing"])
def test_a_hopeless_record_is_returned_not_dropped_when_it_cannot_be_dead_lettered(
    dead_letter_queue: str, sqs: Any, queue: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No dead-letter queue configured (the redrive policy will move it), or SendMessage refused."""
    from function.instance import settings as settings_module
    from function.instance.settings import Settings
    from function.jobs import batch

    missing = queue.rsplit("/", 1)[0] + "/no-such-queue"
    settings = Settings(
        artifact="unused",
        output_bucket=bucket,
        job_queue_url=queue,
        dead_letter_queue_url=None if dead_letter_queue == "none" else missing,
    )
    monkeypatch.setattr(settings_module, "_settings", settings)
    event = sqs_event(*(HOPELESS[kind] for kind in ("not json", "no id", "over the cap")))
    reply = batch.handle_sqs(event, None)
    assert reply == {"batchItemFailures": [{"itemIdentifier": f"m{index}"} for index in range(3)]}


@pytest.mark.engine
def test_a_message_naming_no_part_of_its_job_is_dead_lettered_and_the_job_left_alone(
    jobs_lambda: LocalLambda, sqs: Any, queue: str, dead_letters: str
) -> None:
    body = {"id": "one-part", "text": "Hi.", "speaker": SPEAKER}
    assert call(jobs_lambda, "POST", "/v1/jobs", body)[0] == 202
    stray = {"job": "one-part", "part": 7}
    assert jobs_lambda.invoke(sqs_event(stray)).json() == {"batchItemFailures": []}
    ((letter, attributes),) = dead_lettered(sqs, dead_letters)
    assert json.loads(letter) == stray and attributes["ErrorCode"] == "no_such_part"
    assert "no part 7" in attributes["ErrorMessage"]
    assert job_view(jobs_lambda, "one-part")["status"] == "queued"  # the job itself is untouched
    assert poll_once(jobs_lambda, sqs, queue) == {"batchItemFailures": []}  # its own message: spoken
    done = job_view(jobs_lambda, "one-part")
    assert done["status"] == "done" and done["progress"]["parts_total"] == 1
