"""How a job is split into parts, and how its parts are joined (S3's UploadPartCopy on moto_server).

GIVEN a job's segments WHEN it is split at any part size THEN the parts cover every segment once, in
order, and with a decode batch above 1 they cut only between the job's fixed decode runs.
GIVEN parts over S3's 5 MiB part minimum WHEN a wav is joined THEN S3 copies the later parts (only part 0
is read back) and the object is the header and the parts' samples; smaller parts are streamed instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from function.audio.encode import wav_header
from function.core.formats import Output
from function.core.options import MIN_FLOW_STEPS
from function.jobs.plan import Contract, Plan, split

SEGMENTS = [f"Sentence number {index} is about this long." for index in range(11)]


def contract(decode_rows: int = 1) -> Contract:
    return Contract(window=4, flow_steps=10, decode_rows=decode_rows, artifact="a" * 64)


@pytest.mark.parametrize("part_seconds", [1, 4, 9, 1000])
@pytest.mark.parametrize("decode_rows", [1, 2, 4])
def test_parts_cover_every_segment_once_and_cut_only_between_decode_runs(
    part_seconds: int, decode_rows: int
) -> None:
    plan = split(SEGMENTS, part_seconds, contract(decode_rows))
    assert [index for part in plan.parts for index in part] == list(range(len(SEGMENTS)))
    other = Contract(window=9, flow_steps=3, decode_rows=7, artifact="b" * 64)
    assert plan.segments == len(SEGMENTS) and Plan.from_dict(plan.to_dict(), other) == plan
    runs = [run for index in range(len(plan.parts)) for run in plan.decode_runs(index)]
    assert [index for run in runs for index in run] == list(range(len(SEGMENTS)))
    if decode_rows == 1:
        assert runs == list(plan.parts)  # each segment decodes alone: a part is one engine call
    else:
        group = decode_rows + 1  # the first alone, then one full batch: as the engine decodes a call
        assert all(run.start % group == 0 and len(run) <= group for run in runs)
        whole = split(SEGMENTS, 10_000, contract(decode_rows))
        assert runs == whole.decode_runs(0)  # the same runs as one part of the whole job


def test_the_part_size_sets_how_many_parts() -> None:
    assert len(split(SEGMENTS, 1, contract()).parts) == len(SEGMENTS)
    assert len(split(SEGMENTS, 10_000, contract()).parts) == 1
    assert 1 < len(split(SEGMENTS, 6, contract()).parts) < len(SEGMENTS)


def test_a_plan_stored_before_contracts_takes_the_readers_settings_but_its_own_decode_group() -> None:
    reader = Contract(window=8, flow_steps=5, decode_rows=4, artifact="c" * 64)
    old = Plan.from_dict({"parts": [[0, 3], [3, 5]], "decode_group": 3}, reader)
    assert old.contract == Contract(window=8, flow_steps=5, decode_rows=2, artifact="c" * 64)
    assert old.decode_group == 3


@pytest.mark.usefixtures("aws_in_process")
@pytest.mark.parametrize(
    "sizes",
    [[5_600_000, 5_300_000, 1_000], [0, 5_600_000, 0, 5_300_000, 1_000], [1_000, 2_000, 3_000]],
    ids=["copied", "copied, empty parts left out", "streamed"],
)
def test_a_wav_is_joined_from_its_parts(
    sizes: list[int], s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from function.instance.settings import Settings
    from function.jobs import join, store
    from function.service.schema import SpeechJob

    settings = Settings(artifact="unused", output_bucket=bucket)
    job, _ = store.submit(SpeechJob(id="joined", text="Hi.", speaker="x"), settings)
    parts = [bytes([index + 1]) * size for index, size in enumerate(sizes)]
    for index, pcm in enumerate(parts):
        store.write_part(job, index, pcm, [])
    read: list[int] = []
    original = store.read_part

    def reading(job: Any, index: int) -> bytes:
        read.append(index)
        return original(job, index)

    monkeypatch.setattr(store, "read_part", reading)
    output = Output.of("wav", 22050)
    join.join_audio(job, output, sizes, lambda: None)
    join.join_audio(job, output, sizes, lambda: None)  # a second joiner: the object is written once
    written = s3.get_object(Bucket=bucket, Key=job.key)["Body"].read()
    assert written == wav_header(22050, sum(sizes)) + b"".join(parts)
    head = s3.head_object(Bucket=bucket, Key=job.key)
    voiced = [index for index, size in enumerate(sizes) if size]
    if max(sizes) > 5 * 1024 * 1024:
        assert head["ETag"].strip('"').endswith(f"-{len(voiced)}")  # one multipart part per job part
        assert read == [voiced[0]] * 2  # S3 copied the rest: only the first came back, once per joiner
    else:
        assert set(read) == set(range(len(sizes)))
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []  # the loser's was aborted


@pytest.mark.engine
@pytest.mark.usefixtures("aws_in_process")
def test_the_last_two_parts_finishing_together_join_once(
    tiny_artifact: Any, s3: Any, bucket: str, sqs: Any
) -> None:
    """GIVEN a job of two parts, both written WHEN their two workers reach the join at the same moment
    THEN one joins (done), the other finds the join held or done, and the end is told once."""
    import threading

    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings
    from function.jobs import store, worker
    from function.service.schema import SpeechJob

    engine = Engine.load(Artifact.open(tiny_artifact), threads=1)
    topic, ends = _topic_with_queue(bucket, sqs)
    settings = Settings(artifact="unused", output_bucket=bucket, job_topic_arn=topic)
    sentence = (  # one segment (the splitter packs sentences up to 80 text tokens)
        "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
        " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and"
        " nobody in the whole town expects that today will be any different from the long and gentle day"
        " before it."
    )
    text = f"{sentence} {sentence}"
    job, _ = store.submit(SpeechJob(id="together", text=text, speaker="英文女", seed=3), settings)
    plan = store.save_plan(
        job, split(engine.segments(text), 1, worker.contract_of(engine, settings, job.options()))
    )
    assert len(plan.parts) >= 2
    for index in range(len(plan.parts)):
        store.write_part(job, index, b"\x01\x00" * 2000, [])
    start = threading.Barrier(2)
    outcomes: list[worker.Outcome] = []

    def finish(part: int) -> None:
        start.wait()
        outcomes.append(worker.run(job, engine, settings, None, part=part))

    threads = [threading.Thread(target=finish, args=(len(plan.parts) - offset,)) for offset in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == sorted(
        [worker.Outcome.DONE, outcomes[1 - outcomes.index(worker.Outcome.DONE)]]
    )
    assert outcomes.count(worker.Outcome.DONE) == 1
    assert set(outcomes) <= {worker.Outcome.DONE, worker.Outcome.HELD, worker.Outcome.EXISTED}
    status = store.status(job)
    assert status is not None and status.state == "done" and status.parts_done == len(plan.parts)
    assert [end["status"] for end in _told(sqs, ends)] == ["done"]


def _topic_with_queue(name: str, sqs: Any) -> tuple[str, str]:
    """An SNS topic on moto_server and a queue subscribed to it: what an application would do."""
    from function.aws.clients import sns_client

    topic = sns_client().create_topic(Name=f"{name}-ends")["TopicArn"]
    ends = sqs.create_queue(QueueName=f"{name}-ends")["QueueUrl"]
    ends_arn = sqs.get_queue_attributes(QueueUrl=ends, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns_client().subscribe(TopicArn=topic, Protocol="sqs", Endpoint=ends_arn)
    return topic, ends


def _told(sqs: Any, ends: str) -> list[dict[str, Any]]:
    """The job ends the topic delivered to the queue."""
    import json

    messages = sqs.receive_message(QueueUrl=ends, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
        "Messages", []
    )
    return [json.loads(json.loads(message["Body"])["Message"]) for message in messages]


@pytest.mark.engine
@pytest.mark.usefixtures("aws_in_process")
def test_a_job_that_fails_for_good_tells_the_topic_why(tiny_artifact: Any, bucket: str, sqs: Any) -> None:
    from function.core.errors import UnknownSpeaker
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings
    from function.jobs import store, worker
    from function.service.schema import SpeechJob

    engine = Engine.load(Artifact.open(tiny_artifact), threads=1)
    topic, ends = _topic_with_queue(bucket, sqs)
    settings = Settings(artifact="unused", output_bucket=bucket, job_topic_arn=topic)
    job, _ = store.submit(SpeechJob(id="nobody", text="Hi.", speaker="nobody"), settings)
    with pytest.raises(worker.JobFailed) as failed:
        worker.run(job, engine, settings, None)
    assert failed.value.code == UnknownSpeaker.code
    (end,) = _told(sqs, ends)
    assert (end["id"], end["status"], end["error"]["code"], end["retriable"]) == (
        "nobody",
        "failed",
        "unknown_speaker",
        False,
    )
    status = store.status(job)
    assert status is not None and status.state == "failed" and status.error == end["error"]


@pytest.mark.usefixtures("aws_in_process")
def test_progress_counts_parts_and_a_failed_job_stays_failed_until_it_is_submitted_again(
    bucket: str,
) -> None:
    from function.instance.settings import Settings
    from function.jobs import store
    from function.service.schema import SpeechJob

    settings = Settings(artifact="unused", output_bucket=bucket)
    job, _ = store.submit(SpeechJob(id="counted", text="Hi.", speaker="x"), settings)
    plan = Plan((range(0, 2), range(2, 3), range(3, 5)), contract())
    rate = 100
    status = store.record_parts(job, plan, {0: 400, 2: 200}, rate, started=True)
    assert (status.state, status.parts_done, status.parts_total) == ("running", 2, 3)
    assert (status.segments_done, status.segments_total, status.audio_seconds) == (4, 5, 3.0)
    assert store.record_parts(job, plan, {0: 400}, rate).parts_done == 2  # a writer that saw fewer
    error = {"code": "not_started", "message": "part 2 of 3 did not fit"}
    assert store.fail(job, error, retriable=True, held_until=None)  # its part's last attempt
    assert not store.fail(job, {"code": "other", "message": "later"}, retriable=False, held_until=None)
    for started in (False, True):  # another part finished, or a worker took one: still failed
        kept = store.record_parts(job, plan, {0: 400, 1: 100, 2: 200}, rate, started=started)
        assert (kept.state, kept.error, kept.parts_done, kept.retriable) == ("failed", error, 2, True)
    assert store.update_status(job, "running").state == "failed"
    assert store.retry(job) and not store.retry(job)  # submitted again: queued once, and only once
    again = store.status(job)
    assert again is not None and (again.state, again.error, again.retriable) == ("queued", None, False)
    assert store.fail(job, error, retriable=False, held_until=None)
    assert not store.retry(job)  # a failure for good is not retried


@pytest.mark.engine
@pytest.mark.usefixtures("aws_in_process")
@pytest.mark.parametrize("decode_rows", [1, 2])
def test_a_job_is_the_same_whatever_its_part_size_at_any_decode_batch(
    tiny_artifact: Any, s3: Any, bucket: str, decode_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN an engine decoding `decode_rows` segments at once WHEN one seeded job is spoken in one part
    and in parts of one decode run each THEN the engine is asked for the same runs of segments (what
    decodes together, and so what an int8 LLM draws, is the job's, not the parts') and the audio is the
    same bytes."""
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings
    from function.jobs import store, worker
    from function.service.schema import SpeechJob

    engine = Engine.load(Artifact.open(tiny_artifact), threads=1)
    engine.batch_decode(decode_rows)
    asked: list[range | None] = []
    speak = Engine.speak

    def recorded(self: Engine, utterance: Any, deadline: Any = None) -> Any:
        asked.append(utterance.only)
        return speak(self, utterance, deadline)

    monkeypatch.setattr(Engine, "speak", recorded)
    runs = {}
    sentence = (
        "On a quiet morning the old baker opens his little shop, the narrow street smells of warm bread, the"
        " children walk past on their way to school, a tired dog sleeps in the sun beside the door, and"
        " nobody in the whole town expects that today will be any different from the long and gentle day"
        " before it."
    )
    audio = {}
    for part_seconds in (100_000, 1):
        asked.clear()
        settings = Settings(
            artifact="unused", output_bucket=bucket, job_part_seconds=part_seconds, flow_steps=MIN_FLOW_STEPS
        )
        request = SpeechJob(  # a seed whose segments the tiny model ends early
            id=f"parts-{part_seconds}", text=" ".join([sentence] * 4), speaker="英文女", seed=7
        )
        job, _ = store.submit(request, settings)
        assert worker.run(job, engine, settings, None) is worker.Outcome.DONE  # no queue: part after part
        plan = store.load_plan(job, worker.contract_of(engine, settings, job.options()))
        assert plan is not None and plan.decode_group == (1 if decode_rows == 1 else decode_rows + 1)
        audio[len(plan.parts)] = s3.get_object(Bucket=bucket, Key=job.key)["Body"].read()
        runs[len(plan.parts)] = list(asked)
    assert len(audio) == 2 and 1 in audio  # one part, and several
    one, several = audio.values()
    assert one == several
    alone, parted = runs.values()
    if decode_rows == 1:  # each segment decodes alone: a part is one call, whatever its size
        assert alone == [range(0, 4)] and parted == [range(index, index + 1) for index in range(4)]
    else:  # four segments in the job's runs of three (the first alone, then a batch of two; then one)
        assert alone == parted == [range(0, 3), range(3, 4)]
