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

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.function.jobs.fleet import Deployment
from tests.function.support import SPEAKER

pytestmark = pytest.mark.engine

SENTENCE = (
    "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
    " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and nobody"
    " in the whole town expects that today will be any different from the long and gentle day before it."
)
TEXT = " ".join([SENTENCE] * 4)  # four segments: more than the widest window
SCRIPT = (
    "<speak>"
    + "".join(
        f'<p><s>{SENTENCE}</s><break time="300ms"/><mark name="m{index}"/><s>Chapter {index} ends.</s></p>'
        for index in range(2)
    )
    + "</speak>"
)
JOBS = {
    "text": {"text": TEXT, "speaker": SPEAKER, "seed": 7, "format": "wav"},  # a seed that speaks briefly
    "script": {"text": SCRIPT, "text_type": "ssml", "speaker": SPEAKER, "seed": 22, "format": "wav"},
}


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
            deployment.wait_for(lambda: deployment.parts_written("text") > 0, "wrote a part")
            deployment.terminate(started[0], signal.SIGKILL)
        seen = deployment.wait_done(list(JOBS))
        # What the killed worker held comes back once its lease runs out, finds its job done and is
        # acknowledged: the workers empty the queue before they are stopped.
        deployment.wait_for(lambda: deployment.left_on_queue() == 0, "emptied the queue")
        results = {kind: deployment.result(kind) for kind in JOBS}
        exits = deployment.stop()
    finally:
        deployment.stop()
    assert exits == ([-signal.SIGKILL] if kill_one else []) + [0] * (workers - kill_one), deployment.logs()
    return results, seen, deployment


@pytest.fixture(scope="module")
def one_worker(
    moto_endpoint: str, artifact_location: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, dict[str, bytes]], list[dict[str, Any]]]:
    """Both jobs on one worker, each as one part: their objects, and the ends the topic was told."""
    results, _, deployment = run(
        moto_endpoint,
        tmp_path_factory.mktemp("alone"),
        artifact_location,
        1,
        COSYVOICE_JOB_PART_SECONDS="100000",
    )
    return results, deployment.ends_told()


def test_a_job_is_the_same_on_one_worker_or_many_in_any_parts_and_despite_a_killed_worker(
    moto_endpoint: str,
    artifact_location: str,
    tmp_path: Path,
    one_worker: tuple[dict[str, dict[str, bytes]], list[dict[str, Any]]],
) -> None:
    alone, told = one_worker
    assert set(alone["text"]) == {"audio"} and set(alone["script"]) == {"audio", "marks", "captions"}
    assert {(end["id"], end["status"]) for end in told} == {("text", "done"), ("script", "done")}

    settings = {"COSYVOICE_JOB_PART_SECONDS": "1", "COSYVOICE_JOB_PARALLEL": "2"}
    fanned, seen, deployment = run(moto_endpoint, tmp_path / "two", artifact_location, 2, **settings)
    assert fanned == alone  # audio, marks and captions, byte for byte
    final = seen["text"][-1]
    assert final["progress"]["parts_total"] == final["progress"]["parts_done"] == 4
    assert final["progress"]["segments_done"] == 4 and final["status"] == "done"
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


@pytest.mark.parametrize("drain", ["0", "300"], ids=["no time to finish", "time to finish"])
def test_a_worker_stopped_mid_part_finishes_it_or_hands_it_back_and_exits_0(
    drain: str,
    moto_endpoint: str,
    artifact_location: str,
    tmp_path: Path,
    one_worker: tuple[dict[str, dict[str, bytes]], list[dict[str, Any]]],
) -> None:
    """SIGTERM while a part is spoken: with COSYVOICE_DRAIN_SECONDS to spare the worker finishes the part
    first; without, the part stops and its message goes back as a new one (no attempt counted, no error
    noted). Either way the worker exits 0 and the job ends with the same audio on another worker."""
    deployment = Deployment(
        moto_endpoint,
        tmp_path,
        artifact_location,
        COSYVOICE_JOB_PART_SECONDS="100000",
        COSYVOICE_DRAIN_SECONDS=drain,
        COSYVOICE_JOB_MAX_RECEIVES="1",  # a counted hand-back would fail the job
    )
    try:
        first = deployment.start_worker()
        deployment.submit("text", JOBS["text"])
        deployment.wait_for(lambda: deployment.leased("text"), "took its one part")
        assert deployment.terminate(first) == 0, deployment.logs()
        assert deployment.parts_written("text") == (0 if drain == "0" else 1)
        noted = deployment.status("text")
        assert noted is not None and "last_error" not in noted and "error" not in noted
        deployment.start_worker()
        seen = deployment.wait_done(["text"])
        audio = deployment.result("text")["audio"]
    finally:
        deployment.stop()
    assert seen["text"][-1]["status"] == "done"
    assert deployment.left_on_queue() == 0
    assert one_worker[0]["text"]["audio"] == audio
