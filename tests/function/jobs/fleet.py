"""A deployment's job storage on moto_server and a fleet of real queue workers (`python -m function worker`,
each a process of its own, optionally with faults injected by job_faults.py), for the fan-out and
stuck-job tests."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from function.core.options import MIN_FLOW_STEPS
from tests.function.support import CLI, aws_env, clean_env, messages_on, moto_client

FAULTS = Path(__file__).with_name("job_faults.py")
LEASE_SECONDS = 3  # a killed worker's part and message come back this soon
WAIT_SECONDS = 300  # for a run to end: a generous bound on a loaded machine, never a measured figure
FINAL = ("done", "failed")
POLL_SECONDS = 0.25  # between looks at S3: each is a request the workers' moto_server also serves
FLOW_STEPS = MIN_FLOW_STEPS


class Deployment:
    """A bucket, a job queue with its dead-letter queue, a topic (with a queue subscribed to it), and
    workers started on demand."""

    def __init__(self, endpoint: str, tmp_path: Path, artifact: str, **settings: str) -> None:
        self.s3 = moto_client("s3", endpoint)
        self.sqs = moto_client("sqs", endpoint)
        sns = moto_client("sns", endpoint)
        name = f"fan-{uuid.uuid4().hex[:12]}"
        self.s3.create_bucket(Bucket=name)
        self.bucket = name
        self.queue = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        self.dead_letters = self.sqs.create_queue(QueueName=f"{name}-dead")["QueueUrl"]
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
            COSYVOICE_DEAD_LETTER_QUEUE_URL=self.dead_letters,
            COSYVOICE_JOB_TOPIC_ARN=topic,
            COSYVOICE_JOB_LEASE_SECONDS=str(LEASE_SECONDS),
            COSYVOICE_WARMUP="0",
            # The fewest flow steps: what these tests hold is how a job's parts move, which the steps do
            # not change (a test that moves a job to other steps gives that worker its own).
            COSYVOICE_FLOW_STEPS=str(FLOW_STEPS),
            **settings,
        )
        self.tmp_path = tmp_path
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.stopped: set[int] = set()  # indices of the workers the test stopped or killed itself

    def start_worker(self, faults: str | None = None, **settings: str) -> subprocess.Popen[bytes]:
        """A worker with the deployment's settings and `settings` of its own, `faults` injected."""
        log = self.tmp_path / f"worker-{len(self.workers)}.log"
        command = [*CLI, "worker"] if faults is None else [sys.executable, str(FAULTS), faults, "worker"]
        with log.open("wb") as sink:
            worker = subprocess.Popen(
                command, env={**self.env, **settings}, stdout=sink, stderr=subprocess.STDOUT
            )
        self.workers.append(worker)
        return worker

    def submit(self, job_id: str, body: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.queue, MessageBody=json.dumps({"id": job_id, **body}))

    def read(self, key: str) -> bytes | None:
        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except self.s3.exceptions.NoSuchKey:
            return None

    def status(self, job_id: str) -> dict[str, Any] | None:
        found = self.read(f"tts/jobs/{job_id}/status.json")
        return None if found is None else dict(json.loads(found))

    def planned(self, job_id: str) -> bool:
        return self.read(f"tts/jobs/{job_id}/plan.json") is not None

    def parts_written(self, job_id: str) -> int:
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"tts/jobs/{job_id}/parts/")
        return sum(item["Key"].endswith(".pcm") for item in listed.get("Contents", []))

    def leased(self, job_id: str) -> bool:
        """Whether any part of the job is held by a worker now."""
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"tts/jobs/{job_id}/leases/")
        for item in listed.get("Contents", []):
            found = self.read(item["Key"])
            if found is not None and json.loads(found)["until"] > time.time():
                return True
        return False

    def wait_for(self, check: Any, what: str, every: float = POLL_SECONDS) -> None:
        """Until `check()` holds (looked at `every` seconds), while every worker the test did not stop is
        alive."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not check():
            self.assert_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"never {what}\n{self.logs()}")
            time.sleep(every)

    def wait_done(self, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Every status each job was seen in, until each is done or failed."""
        seen: dict[str, list[dict[str, Any]]] = {job_id: [] for job_id in job_ids}

        def ended() -> bool:
            for job_id in job_ids:
                status = self.status(job_id)
                if status is not None:
                    seen[job_id].append(status)
            return all(found and found[-1]["status"] in FINAL for found in seen.values())

        self.wait_for(ended, f"ended: {[self.status(job_id) for job_id in job_ids]}")
        return seen

    def assert_alive(self) -> None:
        for index, worker in enumerate(self.workers):
            if index not in self.stopped:
                assert worker.poll() in (None, 0), self.logs()

    def terminate(self, worker: subprocess.Popen[bytes], how: int = signal.SIGTERM) -> int:
        """Stop one worker (SIGTERM: it finishes or hands back its part; SIGKILL); its exit status."""
        self.stopped.add(self.workers.index(worker))
        worker.send_signal(how)
        return worker.wait(timeout=120)

    def result(self, job_id: str) -> dict[str, bytes]:
        """The job's objects beside each other: audio, and for a script its marks and captions."""
        base = f"tts/{job_id}"
        keys = {"audio": f"{base}.wav", "marks": f"{base}.marks.jsonl", "captions": f"{base}.vtt"}
        return {name: found for name, key in keys.items() if (found := self.read(key)) is not None}

    def drained(self, queue: str) -> list[dict[str, Any]]:
        """Every message left on `queue`, received and deleted."""
        taken: list[dict[str, Any]] = []
        while messages := self.sqs.receive_message(
            QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageAttributeNames=["All"]
        ).get("Messages", []):
            taken += messages
            for message in messages:
                self.sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        return taken

    def ends_told(self) -> list[dict[str, Any]]:
        return [json.loads(message["Body"]) for message in self.drained(self.ends)]

    def left_on_queue(self) -> int:
        """Messages on the job queue, visible, in flight or delayed."""
        return messages_on(self.sqs, self.queue)

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

    def lines(self, event: str) -> list[dict[str, Any]]:
        """Every JSON log line of `event` the workers printed."""
        found = []
        for path in sorted(self.tmp_path.glob("worker-*.log")):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    parsed = json.loads(line)
                    if isinstance(parsed, dict) and parsed.get("event") == event:
                        found.append(parsed)
        return found


__all__ = ["FAULTS", "FINAL", "FLOW_STEPS", "LEASE_SECONDS", "WAIT_SECONDS", "Deployment"]
