"""Jobs that survive crashes: the worker killed (SIGKILL) or its S3 / SQS calls failing mid-part,
mid-join and between a part's write and the next part's send, under the real runtime client with S3
and SQS on moto_server (faults injected by job_faults.py in the runtime process).

GIVEN a raw job of two segments (one part, or two) on the queue, and a first environment that meets the
fault
WHEN Lambda's poller goes on delivering the job's messages to a healthy environment (another one: Lambda
replaces an environment whose process died)
THEN the job ends done exactly once, its audio byte for byte the same text and seed made in one run, each
part written once; a failure's reason is in the status meanwhile; a dead worker's `running` status is
taken over once its lease has run out.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from function.local.invoke import LocalLambda, RuntimeFailed
from tests.function.support import SPEAKER, aws_env, batch_records, local_lambda, messages_on, moto_client

pytestmark = pytest.mark.engine

FAULTS = Path(__file__).with_name("job_faults.py")
SENTENCE = (
    "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
    " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and nobody"
    " in the whole town expects that today will be any different from the long and gentle day before it."
)
TEXT = f"{SENTENCE} {SENTENCE}"  # two segments: the least that has a middle
SEED = 5
LEASE_SECONDS = 2

# Parts of one segment each, one at a time: the first environment speaks part 0 and sends part 1.
TWO_PARTS = {"COSYVOICE_JOB_PART_SECONDS": "1", "COSYVOICE_JOB_PARALLEL": "1"}


class Case(NamedTuple):
    spec: str  # what the first environment meets (job_faults.py)
    met: str  # "killed" or the error code its status then shows
    parts: dict[str, str]  # how the first environment plans the job: one part of two segments, or two


CASES = {
    "killed mid-part": Case("kill:segment:2", "killed", {}),
    "killed between a part's write and the next part's send": Case("kill:SendMessage:", "killed", TWO_PARTS),
    "killed mid-join": Case("kill:GetObject:parts/000000.pcm", "killed", {}),
    "S3 PUT failing at a part's write": Case("fail:PutObject:parts/000000.pcm", "storage_error", {}),
    "S3 GET failing mid-join": Case("fail:GetObject:parts/000000.pcm", "storage_error", {}),
    "S3 PUT failing at the audio's write": Case("fail:PutObject:.wav", "storage_error", {}),
    "SQS SendMessage failing at the next part": Case("fail:SendMessage:", "queue_error", TWO_PARTS),
}


def deliver(runtime: LocalLambda, sqs: Any, queue: str) -> dict[str, Any] | None:
    """One poll as Lambda's poller makes it: acked records deleted; records handed back made visible at
    once (the pause they asked for, passed)."""
    messages = sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=1, WaitTimeSeconds=2, AttributeNames=["All"]
    ).get("Messages", [])
    if not messages:
        return None
    (message,) = messages
    event = {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message["Attributes"],
                "eventSource": "aws:sqs",
            }
        ]
    }
    reply = runtime.invoke(event).json()
    if reply["batchItemFailures"]:
        sqs.change_message_visibility(
            QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    else:
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return reply


def read_status(s3: Any, bucket: str, job_id: str) -> dict[str, Any]:
    return json.loads(s3.get_object(Bucket=bucket, Key=f"tts/jobs/{job_id}/status.json")["Body"].read())


def records_until_done(runtime: LocalLambda, before: int, job_id: str) -> list[dict[str, Any]]:
    """The batch records after the first `before`, once the job's `done` is among them (they come
    through a pipe, in order: the next case then counts from past all of this one's)."""
    deadline = time.monotonic() + 10
    while True:
        records = batch_records(runtime, 0)[before:]
        if (
            any(r.get("job") == job_id and r["status"] == "done" for r in records)
            or time.monotonic() > deadline
        ):
            return records
        time.sleep(0.05)


class Storage(NamedTuple):
    """A bucket and a job queue on moto_server, the clients to read them and the function's environment."""

    s3: Any
    sqs: Any
    bucket: str
    queue: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def storage(moto_endpoint: str) -> Storage:
    """One bucket and queue for the crash cases, each case's job under an id of its own (the queue is
    empty again at each case's end)."""
    s3, sqs = moto_client("s3", moto_endpoint), moto_client("sqs", moto_endpoint)
    bucket, name = f"crash-{uuid.uuid4().hex[:12]}", f"crash-jobs-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    queue = str(sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "1"})["QueueUrl"])
    env = dict(
        COSYVOICE_OUTPUT_BUCKET=bucket,
        COSYVOICE_JOB_QUEUE_URL=queue,
        COSYVOICE_JOB_LEASE_SECONDS=str(LEASE_SECONDS),
        COSYVOICE_WARMUP="0",
        **aws_env(moto_endpoint),
    )
    return Storage(s3, sqs, bucket, queue, env)


@pytest.fixture(scope="module")
def healthy(artifact_location: str, storage: Storage) -> Iterator[tuple[LocalLambda, bytes]]:
    """The healthy environment Lambda's poller delivers to once the first has met its fault (in Lambda a
    new one, beside it or after it), and the audio one run of TEXT at SEED makes there."""
    with local_lambda(artifact_location, **storage.env) as runtime:
        runtime.wait_init()
        one_run = runtime.invoke({"text": TEXT, "speaker": SPEAKER, "format": "wav", "seed": SEED}).json()
        yield runtime, base64.b64decode(one_run["audio"])


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_job_survives_its_worker_dying_or_its_storage_failing(
    case: str, artifact_location: str, storage: Storage, healthy: tuple[LocalLambda, bytes]
) -> None:
    spec, met, parts = CASES[case]
    s3, sqs, bucket, queue = storage.s3, storage.sqs, storage.bucket, storage.queue
    job_id = f"crash-{list(CASES).index(case)}"
    sqs.send_message(
        QueueUrl=queue, MessageBody=json.dumps({"id": job_id, "text": TEXT, "speaker": SPEAKER, "seed": SEED})
    )
    faulty = local_lambda(artifact_location, **storage.env, **parts)
    faulty.launcher = (str(FAULTS), spec)
    with faulty:
        faulty.wait_init()
        if met == "killed":
            with pytest.raises(RuntimeFailed):
                deliver(faulty, sqs, queue)
            # Left running (with the dead worker's lease, unless it had given it up to continue).
            assert read_status(s3, bucket, job_id)["status"] == "running"
        else:
            reply = deliver(faulty, sqs, queue)
            assert reply is not None and len(reply["batchItemFailures"]) == 1  # handed back, not lost
            noted = read_status(s3, bucket, job_id)
            assert noted["last_error"]["code"] == met and "injected" in noted["last_error"]["message"]

    runtime, reference = healthy
    before = len(batch_records(runtime, 0))
    for _ in range(40):  # the dead worker's lease runs out; the job is taken over and finished
        if read_status(s3, bucket, job_id)["status"] in ("done", "failed"):
            break
        if deliver(runtime, sqs, queue) is None:
            time.sleep(0.2)
    outcomes = [record["status"] for record in records_until_done(runtime, before, job_id)]
    done = read_status(s3, bucket, job_id)

    assert done["status"] == "done", done
    assert outcomes.count("done") == 1, outcomes
    assert set(outcomes) <= {"done", "deferred", "held", "continued"}, outcomes
    audio = s3.get_object(Bucket=bucket, Key=f"tts/{job_id}.wav")["Body"].read()
    assert audio == reference  # nothing lost, nothing doubled
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"tts/jobs/{job_id}/parts/")["Contents"]
    names = ["000000.pcm", "000001.pcm"] if parts else ["000000.pcm"]  # the plan the first worker made
    assert [item["Key"].rsplit("/", 1)[1] for item in listed] == names
    assert messages_on(sqs, queue) == 0  # nothing left: visible, in flight or delayed


@pytest.mark.usefixtures("aws_in_process")
def test_a_live_lease_keeps_a_second_worker_out_and_a_stale_one_is_taken_over(bucket: str) -> None:
    from function.instance.settings import Settings
    from function.jobs import store
    from function.service.schema import SpeechJob

    settings = Settings(artifact="unused", output_bucket=bucket)
    job, _ = store.submit(SpeechJob(id="leased", text="Hi.", speaker=SPEAKER), settings)
    now = 1_000_000.0  # the clock the workers read, moved by hand

    def clock() -> float:
        return now

    assert store.take_lease(job, now + 1.0, clock=clock)  # the first worker
    assert not store.take_lease(job, now + 60, clock=clock)  # a duplicate delivery while it works
    held = store.status(job)
    assert held is not None and held.state == "running" and held.held(now) and not held.held(now + 1.0)
    now += 0.999
    assert not store.take_lease(job, now + 60, clock=clock)  # still the first worker's, to the last moment
    now += 0.002  # the first worker died without a word: its lease runs out
    assert store.take_lease(job, now + 60, clock=clock)  # taken over
    store.update_status(job, "done")
    assert not store.take_lease(job, now + 60, clock=clock)  # a finished job is nobody's


@pytest.mark.usefixtures("aws_in_process")
def test_a_worker_that_fails_gives_up_only_its_own_lease(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a job whose lease another worker holds WHEN a duplicate delivery fails before it could take
    the lease (S3 failing) THEN the other worker's lease stays; WHEN the holder gives it up THEN it goes."""
    from types import SimpleNamespace

    from function.aws import s3
    from function.instance.settings import Settings
    from function.jobs import store, worker
    from function.service.schema import SpeechJob

    settings = Settings(artifact="unused", output_bucket=bucket)
    job, _ = store.submit(SpeechJob(id="held-elsewhere", text="Hi.", speaker=SPEAKER), settings)
    until = round(time.time() + 60, 3)
    assert store.take_lease(job, until)  # the first worker, alive and working

    def failing(bucket: str, key: str) -> bool:
        raise s3.StorageError("S3 is unavailable")

    monkeypatch.setattr(s3, "exists", failing)
    engine = SimpleNamespace(sample_rate=22050)
    with pytest.raises(s3.StorageError):
        worker.run(job, engine, settings, None)  # type: ignore[arg-type]
    after = store.status(job)
    assert after is not None and after.lease_until == until and after.held(time.time())
    assert after.error is not None and after.error["code"] == "storage_error"

    store.release(job, None, until, error={"code": "storage_error", "message": "the holder's own"})
    released = store.status(job)
    assert released is not None and released.lease_until is None


@pytest.mark.engine
@pytest.mark.usefixtures("aws_in_process")
def test_a_part_whose_workers_keep_dying_fails_its_job_on_the_attempt_after_the_last(
    tiny_artifact: Any, bucket: str
) -> None:
    """Killed workers say nothing: their leases only run out. The part's attempts still count each take,
    so a part that kills every worker that speaks it (out of memory, say) fails its job, retriable,
    instead of being taken for ever."""
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings
    from function.jobs import store, worker
    from function.service.schema import SpeechJob

    engine = Engine.load(Artifact.open(tiny_artifact), threads=1)
    settings = Settings(artifact="unused", output_bucket=bucket, job_max_receives=2)
    job, _ = store.submit(SpeechJob(id="deadly", text="Hi there.", speaker=SPEAKER, seed=1), settings)
    for attempt in (1, 2):  # two workers took part 0 and died: their leases ran out
        assert store.take_part_lease(job, 0, time.time() - 1) == attempt
    with pytest.raises(worker.JobFailed) as failed:
        worker.run(job, engine, settings, None)
    assert failed.value.code == "part_exhausted"
    status = store.status(job)
    assert status is not None and (status.state, status.retriable) == ("failed", True)
    assert "taken 2 times" in (status.error or {}).get("message", "")
    assert store.finished_parts(job) == {}
