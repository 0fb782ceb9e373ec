"""Jobs that never get stuck: real queue workers (`python -m function worker` on the tiny artifact) with S3,
SQS and SNS on moto_server, each disturbance triggered by the test or injected at a named call.

GIVEN a job of three parts
WHEN two workers with other windows share the queue; a part's message is lost; a part's writes always
fail; every busy worker is stopped, again and again; the job moves to a worker with other flow steps
and decode batch; a worker serving another artifact takes its messages
THEN the job ends done with the audio of the undisturbed job, or failed with its reason and never another
state afterwards; the job queue ends empty; a failed job has one dead letter and one notice.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.function.jobs.fleet import FLOW_STEPS, Deployment
from tests.function.support import SPEAKER, aws_in_this_process, moto_client

pytestmark = pytest.mark.engine

SENTENCE = (  # one segment (the splitter packs sentences up to 80 text tokens)
    "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
    " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and nobody"
    " in the whole town expects that today will be any different from the long and gentle day before it."
)
# Three segments, with a seed whose segments the tiny model's random LLM ends early (most seeds let it speak
# several times longer): every worker of every scenario speaks them.
JOB = {"text": " ".join([SENTENCE] * 3), "speaker": SPEAKER, "seed": 7, "format": "wav"}
# Segments long enough that a worker stopped as it takes a part is still speaking it.
LONG_JOB = {**JOB, "seed": 9}
PARTS = {"COSYVOICE_JOB_PART_SECONDS": "1"}  # a part per segment
STALL = {"COSYVOICE_JOB_STALL_SECONDS": "2"}  # the workers sweep every second while idle
ONE_PART_SECONDS = 100_000  # the whole job in one part


@pytest.fixture(scope="module")
def references(moto_endpoint: str, artifact_location: str) -> Callable[[dict[str, Any]], bytes]:
    """A job's audio, undisturbed: spoken in this process in one part with the fleet's settings (no queue,
    no worker process; the scenarios hold that every worker makes these same bytes), once per job body."""
    from function.instance.model import build_engine
    from function.instance.settings import Settings
    from function.jobs import store, worker
    from function.service.schema import SpeechJob

    s3 = moto_client("s3", moto_endpoint)
    bucket = f"reference-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    settings = Settings(
        artifact=artifact_location,
        output_bucket=bucket,
        threads=1,
        flow_steps=FLOW_STEPS,
        job_part_seconds=ONE_PART_SECONDS,
    )
    engine = build_engine(settings)
    made: dict[str, bytes] = {}

    def reference(job: dict[str, Any]) -> bytes:
        key = json.dumps(job, sort_keys=True)
        if key not in made:
            with pytest.MonkeyPatch.context() as patch, aws_in_this_process(moto_endpoint, patch):
                stored, _ = store.submit(SpeechJob(id=f"job-{len(made)}", **job), settings)
                assert worker.run(stored, engine, settings, None) is worker.Outcome.DONE
            made[key] = bytes(s3.get_object(Bucket=bucket, Key=stored.key)["Body"].read())
        return made[key]

    return reference


@pytest.fixture(scope="module")
def reference(references: Callable[[dict[str, Any]], bytes]) -> bytes:
    return references(JOB)


@pytest.fixture
def deploy(moto_endpoint: str, artifact_location: str, tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    """Deployments of the test's own, their workers stopped however the test ends."""
    made: list[Deployment] = []

    def make(**settings: str) -> Deployment:
        made.append(Deployment(moto_endpoint, tmp_path, artifact_location, **settings))
        return made[-1]

    yield make
    for deployment in made:
        deployment.stop()


def planned_and_begun(deployment: Deployment) -> Any:
    """The job submitted to a first worker of window 1, once it has planned the job and written a part."""
    first = deployment.start_worker(COSYVOICE_JOB_PARALLEL="1")
    deployment.submit("job", JOB)
    deployment.wait_for(lambda: deployment.parts_written("job") >= 1, "wrote its first part")
    return first


def ends_done(deployment: Deployment, reference: bytes) -> dict[str, Any]:
    """The job done with the reference's audio, told once, nothing left on either queue."""
    status = deployment.wait_done(["job"])["job"][-1]
    assert status["status"] == "done", (status, deployment.logs())
    # The worker that wrote `done` tells the topic, then acknowledges its message; duplicates a
    # disturbance left (a first message sent again re-sends its window) find the job done and are
    # acknowledged too: the workers empty the queue.
    deployment.wait_for(lambda: deployment.left_on_queue() == 0, "emptied the queue")
    assert deployment.result("job")["audio"] == reference
    assert [end["status"] for end in deployment.ends_told()] == ["done"]
    assert deployment.drained(deployment.dead_letters) == []
    assert deployment.status("job") == status  # and nothing they did changed the finished job
    exits = deployment.stop()
    assert [code for index, code in enumerate(exits) if index not in deployment.stopped] == [0] * (
        len(exits) - len(deployment.stopped)
    )
    return status


def test_two_windows_on_one_queue_send_every_part(
    deploy: Callable[..., Deployment], reference: bytes
) -> None:
    """The plan's window is the job's: a worker of window 1 plans it, one of window 3 finishes it."""
    deployment = deploy(**PARTS)
    first = planned_and_begun(deployment)
    deployment.start_worker(COSYVOICE_JOB_PARALLEL="3")
    assert deployment.terminate(first) == 0
    plan = json.loads(deployment.read("tts/jobs/job/plan.json") or b"{}")
    assert plan["window"] == 1 and len(plan["parts"]) == 3
    ends_done(deployment, reference)


def test_a_lost_part_message_is_sent_again_by_the_sweeper(
    deploy: Callable[..., Deployment], reference: bytes
) -> None:
    deployment = deploy(**PARTS, **STALL)
    deployment.start_worker('drop:SendMessage:"part": 2', COSYVOICE_JOB_PARALLEL="1")
    deployment.submit("job", JOB)
    status = ends_done(deployment, reference)
    assert status["progress"]["parts_done"] == 3
    redriven = [line["redriven"] for line in deployment.lines("job_sweep") if line["redriven"]]
    assert redriven == [{"job": [2]}]  # once, and only the lost part


def test_a_part_that_always_fails_fails_the_job_once_for_good(deploy: Callable[..., Deployment]) -> None:
    deployment = deploy(**PARTS, **STALL, COSYVOICE_JOB_MAX_RECEIVES="2")
    for _ in range(2):
        deployment.start_worker("fail-always:PutObject:parts/000002.pcm", COSYVOICE_JOB_PARALLEL="4")
    deployment.submit("job", JOB)
    failed = deployment.wait_done(["job"])["job"][-1]
    assert failed["status"] == "failed" and failed["error"]["code"] == "storage_error", failed
    assert failed["retriable"] is True
    # The other parts' messages finish or are acked; sweeps pass over it; it stays failed.
    deployment.wait_for(lambda: deployment.left_on_queue() == 0, "emptied the queue")
    deployment.wait_for(lambda: len(deployment.lines("job_sweep")) >= 4, "swept again")
    assert deployment.status("job") == failed
    (letter,) = deployment.drained(deployment.dead_letters)
    assert json.loads(letter["Body"]) == {"job": "job", "part": 2}
    assert letter["MessageAttributes"]["ErrorCode"]["StringValue"] == "storage_error"
    ends = deployment.ends_told()
    assert [(end["status"], end["error"]["code"]) for end in ends] == [("failed", "storage_error")]
    assert deployment.stop() == [0, 0]
    assert deployment.read("tts/job.wav") is None


def test_stopping_every_busy_worker_again_and_again_never_fails_the_job(
    deploy: Callable[..., Deployment], references: Callable[[dict[str, Any]], bytes]
) -> None:
    """Scaling in: SIGTERM with no time to finish hands the part back uncounted, so even one attempt a
    part (COSYVOICE_JOB_MAX_RECEIVES=1) survives any number of stops."""
    deployment = deploy(
        **PARTS,
        COSYVOICE_JOB_MAX_RECEIVES="1",
        COSYVOICE_DRAIN_SECONDS="0",
    )
    workers = [deployment.start_worker(), deployment.start_worker()]
    deployment.submit("job", LONG_JOB)
    for _ in range(3):
        deployment.wait_for(lambda: deployment.leased("job"), "took a part", every=0.05)  # stopped mid-part
        for worker in workers:
            assert deployment.terminate(worker) == 0
        workers = [deployment.start_worker(), deployment.start_worker()]
    status = ends_done(deployment, references(LONG_JOB))
    assert "error" not in status and "last_error" not in status


def test_a_job_moved_to_a_worker_with_other_flow_steps_keeps_its_sound(
    deploy: Callable[..., Deployment], reference: bytes
) -> None:
    deployment = deploy(**PARTS)
    first = planned_and_begun(deployment)
    assert deployment.terminate(first) == 0  # a deploy: the part in hand is finished first
    deployment.start_worker(COSYVOICE_FLOW_STEPS="5", COSYVOICE_DECODE_BATCH="2")
    ends_done(deployment, reference)


def test_a_worker_serving_another_artifact_never_speaks_the_jobs_parts(
    deploy: Callable[..., Deployment], reference: bytes, artifact_location: str, tmp_path: Path
) -> None:
    other = tmp_path / "other-artifact"
    shutil.copytree(artifact_location, other)
    manifest = other / "manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text()), indent=1))  # another identity
    deployment = deploy(**PARTS, COSYVOICE_DRAIN_SECONDS="0")
    first = planned_and_begun(deployment)
    assert deployment.terminate(first) == 0
    written = deployment.parts_written("job")
    foreign = deployment.start_worker(COSYVOICE_ARTIFACT=str(other))
    deployment.wait_for(lambda: deployment.lines("foreign_artifact") != [], "handed a part back")
    assert deployment.terminate(foreign) == 0
    assert deployment.parts_written("job") == written
    deployment.start_worker()
    ends_done(deployment, reference)
