"""Jobs fanned out over several queue workers (`python -m function worker`, real processes on the tiny
artifact) with S3, SQS and SNS on moto_server.

GIVEN a long text and a long SSML script with marks, sent as raw jobs to the queue
WHEN one worker speaks each as one part, or two or three workers speak them in one-segment parts two or
three at a time, one of the workers SIGKILLed part-way
THEN each job's audio, speech marks and captions are the same bytes in every run, each job ends once
(one SNS message), its progress counted its parts, nothing is left on the queue, and the workers stop on
SIGTERM with exit status 0.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.function.support import CLI, SPEAKER, aws_env, clean_env, moto_client

pytestmark = pytest.mark.engine

SENTENCE = (
    "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
    " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and nobody"
    " in the whole town expects that today will be any different from the long and gentle day before it."
)
TEXT = " ".join([SENTENCE] * 6)  # six segments
SCRIPT = (
    "<speak>"
    + "".join(
        f'<p><s>{SENTENCE}</s><break time="300ms"/><mark name="m{index}"/><s>Chapter {index} ends.</s></p>'
        for index in range(3)
    )
    + "</speak>"
)
JOBS = {
    "text": {"text": TEXT, "speaker": SPEAKER, "seed": 21, "format": "wav"},
    "script": {"text": SCRIPT, "text_type": "ssml", "speaker": SPEAKER, "seed": 22, "format": "wav"},
}
LEASE_SECONDS = 3  # a killed worker's part and message come back this soon
WAIT_SECONDS = 300  # for a run to end: a generous bound on a loaded machine, never a measured figure


class Deployment:
    """A bucket, a job queue and a topic (with a queue subscribed to it) on moto_server, and workers."""

    def __init__(self, endpoint: str, tmp_path: Path, artifact: str, **settings: str) -> None:
        self.s3 = moto_client("s3", endpoint)
        self.sqs = moto_client("sqs", endpoint)
        sns = moto_client("sns", endpoint)
        name = f"fan-{uuid.uuid4().hex[:12]}"
        self.s3.create_bucket(Bucket=name)
        self.bucket = name
        self.queue = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        self.ends = self.sqs.create_queue(QueueName=f"{name}-ends")["QueueUrl"]
        topic = sns.create_topic(Name=name)["TopicArn"]
        ends_arn = self.sqs.get_queue_attributes(QueueUrl=self.ends, AttributeNames=["QueueArn"])
        sns.subscribe(
            TopicArn=topic,
            Protocol="sqs",
            Endpoint=ends_arn["Attributes"]["QueueArn"],
            Attributes={"RawMessageDelivery": "true"},
        )
        self.env = clean_env(
            **aws_env(endpoint),
            COSYVOICE_ARTIFACT=artifact,
            COSYVOICE_OUTPUT_BUCKET=name,
            COSYVOICE_JOB_QUEUE_URL=self.queue,
            COSYVOICE_JOB_TOPIC_ARN=topic,
            COSYVOICE_JOB_LEASE_SECONDS=str(LEASE_SECONDS),
            COSYVOICE_THREADS="1",
            COSYVOICE_WARMUP="0",
            **settings,
        )
        self.tmp_path = tmp_path
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.workers: list[subprocess.Popen[bytes]] = []

    def start_worker(self) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"worker-{len(self.workers)}.log"
        with log.open("wb") as sink:
            worker = subprocess.Popen([*CLI, "worker"], env=self.env, stdout=sink, stderr=subprocess.STDOUT)
        self.workers.append(worker)
        return worker

    def submit(self, job_id: str, body: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.queue, MessageBody=json.dumps({"id": job_id, **body}))

    def status(self, job_id: str) -> dict[str, Any] | None:
        try:
            found = self.s3.get_object(Bucket=self.bucket, Key=f"tts/jobs/{job_id}/status.json")
        except self.s3.exceptions.NoSuchKey:
            return None
        return dict(json.loads(found["Body"].read()))

    def parts_written(self, job_id: str) -> int:
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"tts/jobs/{job_id}/parts/")
        return sum(item["Key"].endswith(".pcm") for item in listed.get("Contents", []))

    def wait_done(self, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Every status each job was seen in, until each is done or failed."""
        seen: dict[str, list[dict[str, Any]]] = {job_id: [] for job_id in job_ids}
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            for job_id in job_ids:
                status = self.status(job_id)
                if status is not None:
                    seen[job_id].append(status)
            if all(found and found[-1]["status"] in ("done", "failed") for found in seen.values()):
                return seen
            exits = {worker.poll() for worker in self.workers}  # none died but the ones the test stopped
            assert exits <= {None, 0, -signal.SIGKILL}, self.logs()
            time.sleep(0.2)
        raise AssertionError(f"jobs not done: {[self.status(job_id) for job_id in job_ids]}\n{self.logs()}")

    def result(self, job_id: str) -> dict[str, bytes]:
        """The job's objects beside each other: audio, and for a script its marks and captions."""
        base = f"tts/{job_id}"
        keys = {"audio": f"{base}.wav", "marks": f"{base}.marks.jsonl", "captions": f"{base}.vtt"}
        found = {}
        for name, key in keys.items():
            with contextlib.suppress(self.s3.exceptions.NoSuchKey):
                found[name] = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return found

    def ends_told(self) -> list[dict[str, Any]]:
        told: list[dict[str, Any]] = []
        while messages := self.sqs.receive_message(
            QueueUrl=self.ends, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", []):
            told += [json.loads(message["Body"]) for message in messages]
            for message in messages:
                self.sqs.delete_message(QueueUrl=self.ends, ReceiptHandle=message["ReceiptHandle"])
        return told

    def left_on_queue(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def stop(self) -> list[int | None]:
        """SIGTERM every live worker; their exit statuses."""
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        return [worker.returncode for worker in self.workers]

    def logs(self) -> str:
        return "\n".join(path.read_text()[-3000:] for path in sorted(self.tmp_path.glob("worker-*.log")))


def run(
    endpoint: str, tmp_path: Path, artifact: str, workers: int, kill_one: bool = False, **settings: str
) -> tuple[dict[str, dict[str, bytes]], dict[str, list[dict[str, Any]]], Deployment]:
    """Both jobs on `workers` workers: their objects, the statuses seen, and the deployment."""
    deployment = Deployment(endpoint, tmp_path, artifact, **settings)
    try:
        started = [deployment.start_worker() for _ in range(workers)]
        for kind, body in JOBS.items():
            deployment.submit(kind, body)
        if kill_one:
            deadline = time.monotonic() + WAIT_SECONDS
            while deployment.parts_written("text") == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            started[0].send_signal(signal.SIGKILL)
            started[0].wait()
        seen = deployment.wait_done(list(JOBS))
        results = {kind: deployment.result(kind) for kind in JOBS}
        exits = deployment.stop()
    finally:
        deployment.stop()
    assert exits == ([-signal.SIGKILL] if kill_one else []) + [0] * (workers - kill_one), deployment.logs()
    return results, seen, deployment


def test_a_job_is_the_same_on_one_worker_or_many_in_any_parts_and_despite_a_killed_worker(
    moto_endpoint: str, artifact_location: str, tmp_path: Path
) -> None:
    alone, _, first = run(
        moto_endpoint, tmp_path / "alone", artifact_location, 1, COSYVOICE_JOB_PART_SECONDS="100000"
    )
    assert set(alone["text"]) == {"audio"} and set(alone["script"]) == {"audio", "marks", "captions"}
    assert {(end["id"], end["status"]) for end in first.ends_told()} == {("text", "done"), ("script", "done")}

    settings = {"COSYVOICE_JOB_PART_SECONDS": "1", "COSYVOICE_JOB_PARALLEL": "2"}
    fanned, seen, deployment = run(moto_endpoint, tmp_path / "two", artifact_location, 2, **settings)
    assert fanned == alone  # audio, marks and captions, byte for byte
    final = seen["text"][-1]
    assert final["progress"]["parts_total"] == final["progress"]["parts_done"] == 6
    assert final["progress"]["segments_done"] == 6 and final["status"] == "done"
    counted = [status["progress"]["parts_done"] for status in seen["text"]]
    assert counted == sorted(counted)  # never backwards, however the workers race
    ends = deployment.ends_told()
    assert sorted((end["id"], end["status"]) for end in ends) == [("script", "done"), ("text", "done")]
    assert {end["key"] for end in ends} == {"tts/text.wav", "tts/script.wav"}
    assert deployment.left_on_queue() == 0

    settings = {"COSYVOICE_JOB_PART_SECONDS": "1", "COSYVOICE_JOB_PARALLEL": "3"}
    survived, _, deployment = run(
        moto_endpoint, tmp_path / "killed", artifact_location, 3, kill_one=True, **settings
    )
    assert survived == alone
    assert deployment.left_on_queue() == 0
    assert sorted(end["id"] for end in deployment.ends_told() if end["status"] == "done") == [
        "script",
        "text",
    ]


def test_a_worker_stopped_mid_part_hands_it_back_and_exits_0(
    moto_endpoint: str, artifact_location: str, tmp_path: Path
) -> None:
    """SIGTERM while a part is spoken: the part stops, its message goes back (visible again soon, not
    after the lease), the worker exits 0, and another worker finishes the job to the same audio."""
    deployment = Deployment(moto_endpoint, tmp_path, artifact_location, COSYVOICE_JOB_PART_SECONDS="100000")
    try:
        first = deployment.start_worker()
        deployment.submit("text", JOBS["text"])
        deadline = time.monotonic() + WAIT_SECONDS
        listed: dict[str, Any] = {}
        while not listed.get("Contents") and time.monotonic() < deadline:  # its one part is being spoken
            listed = deployment.s3.list_objects_v2(Bucket=deployment.bucket, Prefix="tts/jobs/text/leases/")
            time.sleep(0.05)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0, deployment.logs()
        assert deployment.parts_written("text") == 0  # stopped part-way: nothing half written
        noted = deployment.status("text")
        assert noted is not None and "asked to stop (SIGTERM)" in noted["last_error"]["message"]
        deployment.start_worker()
        seen = deployment.wait_done(["text"])
        audio = deployment.result("text")["audio"]
    finally:
        deployment.stop()
    assert seen["text"][-1]["status"] == "done"
    assert deployment.left_on_queue() == 0
    alone, _, _ = run(moto_endpoint, tmp_path / "alone", artifact_location, 1, COSYVOICE_JOB_PART_SECONDS="1")
    assert alone["text"]["audio"] == audio
