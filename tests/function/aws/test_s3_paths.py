"""S3 against moto_server on loopback: the artifact read from s3://, raw SQS jobs' outputs, idempotency,
failures (test_jobs.py has the job API and jobs across invocations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from function.instance.loader import parse_s3_url, read_s3_artifact
from tests.function.support import DIRECT, SPEAKER, batch_records, local_lambda, sqs_event

pytestmark = pytest.mark.engine


def job(job_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": job_id, "text": "Queued words.", "speaker": SPEAKER, **fields}


def keys(s3: Any, bucket: str) -> list[str]:
    return sorted(obj["Key"] for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_s3_urls_split_into_bucket_and_prefix() -> None:
    assert parse_s3_url("s3://models/cosyvoice/v1/") == ("models", "cosyvoice/v1/")
    assert parse_s3_url("s3://models") == ("models", "")


def test_artifact_from_s3_matches_the_directory_and_serves(
    tiny_artifact: Path, s3: Any, bucket: str, s3_env: dict[str, str]
) -> None:
    for path in tiny_artifact.iterdir():
        s3.upload_file(str(path), bucket, f"models/tiny/{path.name}")
    artifact = read_s3_artifact(f"s3://{bucket}/models/tiny", s3, part_bytes=64 * 1024)  # many ranged GETs
    for name in [artifact.manifest.weights.file, *(g.file for g in artifact.manifest.graphs.values())]:
        assert bytes(artifact.file(name)) == (tiny_artifact / name).read_bytes()

    seeded = {**DIRECT, "seed": 3}
    replies = []
    for location in (f"s3://{bucket}/models/tiny", str(tiny_artifact)):
        with local_lambda(location, **s3_env) as runtime:
            runtime.wait_init()
            replies.append(runtime.invoke(seeded).json())
    assert replies[0]["audio"] == replies[1]["audio"]


def test_batch_writes_each_job_once_and_redelivery_is_idempotent(
    artifact_location: str, s3: Any, bucket: str, s3_env: dict[str, str]
) -> None:
    event = sqs_event(job("a", format="wav"), job("b", format="mp3", output_key="custom/b.mp3"))
    with local_lambda(artifact_location, COSYVOICE_OUTPUT_BUCKET=bucket, **s3_env) as runtime:
        runtime.wait_init()
        assert runtime.invoke(event).json() == {"batchItemFailures": []}
        first = {key: s3.head_object(Bucket=bucket, Key=key)["ETag"] for key in keys(s3, bucket)}
        assert runtime.invoke(event).json() == {"batchItemFailures": []}  # redelivered
        statuses = [r["status"] for r in batch_records(runtime, expected=4)]
    assert [key for key in sorted(first) if not key.startswith("tts/jobs/")] == [
        "tts/a.wav",
        "tts/custom/b.mp3",
    ]
    assert {key: s3.head_object(Bucket=bucket, Key=key)["ETag"] for key in keys(s3, bucket)} == first
    assert statuses == ["done", "done", "exists", "exists"]
    head = s3.head_object(Bucket=bucket, Key="tts/a.wav")
    assert head["ContentType"] == "audio/wav" and head["Metadata"]["job-id"] == "a"


def test_bad_records_are_refused_alone_and_for_good(
    artifact_location: str, s3: Any, bucket: str, s3_env: dict[str, str], sqs: Any, dead_letters: str
) -> None:
    event = sqs_event(
        job("good"),
        "this is not json",
        {"text": "no id", "speaker": SPEAKER},
        job("who", speaker="nobody"),
        job("path", output_key="../escape.wav"),
        job("bad id!"),
    )
    env = dict(COSYVOICE_OUTPUT_BUCKET=bucket, COSYVOICE_DEAD_LETTER_QUEUE_URL=dead_letters, **s3_env)
    with local_lambda(artifact_location, **env) as runtime:
        runtime.wait_init()
        reply = runtime.invoke(event).json()
        records = batch_records(runtime, expected=6)
    # Client errors are permanent: dead-lettered with the reason, then acked (a retry could not help).
    assert reply == {"batchItemFailures": []}
    assert [(r["status"], r.get("code")) for r in records] == [
        ("done", None),
        ("dead_lettered", "invalid_request"),
        ("dead_lettered", "invalid_request"),
        ("dead_lettered", "unknown_speaker"),
        ("dead_lettered", "invalid_request"),
        ("dead_lettered", "invalid_request"),
    ]
    letters = sqs.receive_message(QueueUrl=dead_letters, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert len(letters.get("Messages", [])) == 5
    assert [key for key in keys(s3, bucket) if not key.startswith("tts/jobs/")] == ["tts/good.wav"]
    status = json.loads(s3.get_object(Bucket=bucket, Key="tts/jobs/who/status.json")["Body"].read())
    assert status["status"] == "failed" and status["error"]["code"] == "unknown_speaker"


def test_a_failing_write_reports_its_record(artifact_location: str, s3_env: dict[str, str]) -> None:
    event = sqs_event(job("x"), job("y"))
    with local_lambda(artifact_location, COSYVOICE_OUTPUT_BUCKET="no-such-bucket-here", **s3_env) as runtime:
        runtime.wait_init()
        reply = runtime.invoke(event).json()
        codes = [r.get("code") for r in batch_records(runtime, expected=2)]
    assert reply == {"batchItemFailures": [{"itemIdentifier": "m0"}, {"itemIdentifier": "m1"}]}
    assert codes == ["storage_error", "storage_error"]
