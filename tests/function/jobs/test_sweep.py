"""The sweeper's pass, in this process on moto_server, its clock moved by hand.

GIVEN jobs that stopped moving (a first message lost, a part's message lost while another part is being
spoken, every part written but never joined), a job whose part is being spoken, and a queue with
messages waiting
WHEN the sweeper passes
THEN it sends again exactly what each stalled job needs, leaves the others alone, counts each re-drive,
fails a job that still does not move after the last re-drive (told once, out of the index), and a Lambda
schedule's event reaches it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.function.support import SPEAKER

pytestmark = pytest.mark.usefixtures("aws_in_process")

STALL = 900


@pytest.fixture
def settings(bucket: str, queue: str) -> Any:
    from function.instance.settings import Settings

    return Settings(artifact="unused", output_bucket=bucket, job_queue_url=queue, job_stall_seconds=STALL)


def submitted(settings: Any, job_id: str, tenant: str = "default") -> Any:
    from function.jobs import store
    from function.service.schema import SpeechJob

    job, _ = store.submit(SpeechJob(id=job_id, text="Hi.", speaker=SPEAKER), settings, tenant)
    store.mark_queued(job)
    return job


def planned(job: Any, parts: int) -> Any:
    from function.jobs import store
    from function.jobs.plan import Contract, Plan

    contract = Contract(window=2, flow_steps=10, decode_rows=1, artifact="a" * 64)
    return store.save_plan(job, Plan(tuple(range(k, k + 1) for k in range(parts)), contract))


def sent(sqs: Any, queue: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while messages := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        found += [json.loads(message["Body"]) for message in messages]
        for message in messages:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return found


def later(hours: float) -> Any:
    at = time.time() + hours * 3600
    return lambda: at


def test_a_pass_sends_again_what_each_stalled_job_needs_and_nothing_else(
    settings: Any, sqs: Any, queue: str
) -> None:
    from function.jobs import store
    from function.jobs.sweep import sweep

    never_planned = submitted(settings, "lost-first", tenant="acme")
    speaking = submitted(settings, "lost-part")
    planned(speaking, 4)
    store.write_part(speaking, 0, b"\x00\x00", [])
    store.take_part_lease(speaking, 1, later(10)())  # part 1 is being spoken (its lease outlives the pass)
    unjoined = submitted(settings, "unjoined")
    planned(unjoined, 2)
    for index in range(2):
        store.write_part(unjoined, index, b"\x00\x00", [])
    working = submitted(settings, "working")
    planned(working, 1)
    store.take_part_lease(working, 0, later(10)())  # its one part is being spoken: not stuck

    assert sweep(settings).redriven == {}  # nothing has been still for the stall time
    swept = sweep(settings, clock=later(1))
    assert swept.swept and swept.looked_at == 4
    assert swept.redriven == {"lost-first": [None], "lost-part": [2], "unjoined": [1]}
    assert sorted(sent(sqs, queue), key=json.dumps) == sorted(
        [
            {"job": "lost-first", "tenant": "acme"},
            {"job": "lost-part", "part": 2},  # the window's first unfinished parts, less the held one
            {"job": "unjoined", "part": 1},  # a part's message joins the written parts
        ],
        key=json.dumps,
    )
    status = store.status(never_planned)
    assert status is not None and status.redrives == 1 and status.state == "queued"


def test_the_same_sweeper_holds_its_lease_and_waiting_messages_hold_it_back(
    settings: Any, sqs: Any, queue: str
) -> None:
    from function.jobs.sweep import sweep

    submitted(settings, "stalled")
    assert sweep(settings, clock=later(1)).redriven == {"stalled": [None]}
    assert not sweep(settings, clock=later(1)).swept  # another pass within the lease: none
    # The re-sent message waits on the queue: the workers have not reached it, nothing is stuck.
    waiting = sweep(settings, clock=later(2))
    assert waiting.swept and waiting.waiting == 1 and waiting.redriven == {}
    assert len(sent(sqs, queue)) == 1


def test_a_job_that_never_moves_fails_after_its_last_redrive_and_is_told_once(
    settings: Any, sqs: Any, queue: str
) -> None:
    from dataclasses import replace

    from function.jobs import store
    from function.jobs.sweep import sweep

    job = submitted(settings, "stuck")
    for hour in range(1, settings.job_max_redrives + 1):
        assert sweep(settings, clock=later(hour)).redriven == {"stuck": [None]}
        sent(sqs, queue)  # lost again
    told = replace(settings, job_topic_arn=None)
    last = sweep(told, clock=later(settings.job_max_redrives + 1))
    assert last.failed == ["stuck"] and last.redriven == {}
    status = store.status(job)
    assert status is not None and status.state == "failed" and status.error is not None
    assert status.error["code"] == "job_stalled" and "re-drives" in status.error["message"]
    assert store.active_jobs(settings.output_bucket, settings.output_prefix) == []  # out of the index
    assert sweep(settings, clock=later(100)).looked_at == 0
    assert store.status(job) == status and sent(sqs, queue) == []


def test_a_schedule_event_is_a_sweep() -> None:
    from function.awslambda.events import event_kind

    assert event_kind({"action": "sweep"}) == "sweep"
    assert event_kind({"action": "other"}) is None


def test_a_job_ends_once_and_a_worker_that_died_before_telling_is_told_for(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers finishing the same parts (the first one's lease ran out as it finished): the first
    write of `done` wins and only its worker tells the topic; a failure after it changes nothing. A
    worker that died between its write and telling leaves the job in the index, and the sweeper tells
    the topic once the stall time has passed."""
    from function.jobs import notify, store
    from function.jobs.sweep import sweep

    told: list[tuple[str, str, dict[str, Any]]] = []
    monkeypatch.setattr(
        notify, "publish", lambda job_id, status, details, _: told.append((job_id, status, details))
    )
    job = submitted(settings, "ended")
    result = {"key": "tts/ended.wav"}
    assert store.finish(job, result=result)
    assert not store.finish(job, result={"key": "elsewhere"})
    assert not store.fail(job, {"code": "storage_error", "message": "late"}, retriable=True, held_until=None)
    status = store.status(job)
    assert status is not None and status.state == "done" and status.result == result

    assert sweep(settings).looked_at == 1 and told == []  # its worker may be telling the topic now
    assert sweep(settings, clock=later(1)).looked_at == 1
    assert told == [("ended", "done", result)]
    assert store.active_jobs(settings.output_bucket, settings.output_prefix) == []
    assert sweep(settings, clock=later(2)).looked_at == 0 and len(told) == 1
