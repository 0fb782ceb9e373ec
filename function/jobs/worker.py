"""Running a job's message: a job planned and its first parts sent, or one part spoken, then the join.

A job is planned once (function.jobs.plan: its parts, stored with it) by the worker that takes its first
message, `{"job": id}`. That worker sends the messages of parts 1 … COSYVOICE_JOB_PARALLEL-1 and speaks
part 0 itself; the worker that finishes part k sends part k + COSYVOICE_JOB_PARALLEL, so at most that
many parts of one job are in flight and the jobs behind it keep their share of the workers. Without a
queue (a direct invoke in a deployment that has none) the worker speaks every part in order itself.

A part is spoken whole within one invocation, refused up front when the measured speed says it would
not fit (function.cosyvoice.budget), and written once with its speech marks (function.jobs.store). The
worker that finds every part written joins them (function.jobs.join) under the job's lease, publishes
the end (function.jobs.notify), then marks the job done. The outcome tells the caller what to do with its
message:

    DONE       the audio is written now: ack
    EXISTED    it was written before (a duplicate delivery, a same-content resubmission): ack
    CONTINUED  progress made (a part written, parts sent) and the rest is on the queue: ack
    DEFERRED   nothing could be done before the deadline (or there is no queue to continue through):
               hand the message back (batchItemFailures); on the queue's last receive the job is marked
               failed, retriable, with the reason
    HELD       another worker holds the part or the join (a duplicate delivery, or a redelivery whose
               holder was killed): hand the message back until that worker's lease has run out (a live
               holder finishes; a dead one's work is then taken over)
    FAILED     it had failed for good before: ack
Errors are recorded in the status and raised. A client error (unknown speaker, nothing to speak: a 4xx)
fails the job for good: the caller acks. Transient ones (S3, SQS, SNS, ours) become the status's
`last_error`: the caller has the record retried, and on its last receive the job is marked failed
(retriable) with that error.

Duplicates and crashes: parts, marks, the plan and the audio are write-once, and every segment draws
from its own seed, so a part spoken twice is the same part. A delivery of a part another worker holds
is handed back; one whose holder was killed takes the part over once its lease has run out. A finished
part's message delivered again sends its successor unless that is written already (a duplicate is
harmless) and tries the join, so a worker killed between writing its part and sending the next loses
nothing. The join happens once: the
job's lease admits one joiner, the audio object is written once (If-None-Match), and the status's move
to done is If-Match.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from function.audio.encode import to_pcm16
from function.aws import s3
from function.core.deadline import Deadline, DeadlineExceeded
from function.core.errors import InvalidRequest, TTSError
from function.core.script import MARK_TYPES
from function.cosyvoice.budget import OverBudget
from function.jobs import join, notify, queue, store
from function.jobs.plan import Plan, split
from function.jobs.store import DONE, FAILED, Job
from function.service.synthesis import Allowance, Synthesis, prepare

if TYPE_CHECKING:
    from function.core.formats import Output
    from function.core.script import SpeechMark
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings

CHECKPOINT_SECONDS = 0.5  # after a part's last segment: its write, the status, the next part's message


@dataclass
class _Leases:
    """What this run holds: the job's lease (the join) and one part's, each until when (as stored), or
    None. Giving up compares them, so a run never clears another worker's."""

    job: float | None = None
    part: int | None = None
    part_until: float | None = None


class Outcome(StrEnum):
    DONE = "done"
    EXISTED = "exists"
    CONTINUED = "continued"
    DEFERRED = "deferred"
    HELD = "held"
    FAILED = "failed"


class _Held(Exception):
    """Another worker holds the part: its message goes back until that worker's lease runs out."""


class NoSuchPart(InvalidRequest):
    """A message names a part the job does not have."""

    code = "no_such_part"


class _Deferred(Exception):
    """Nothing more can be done in this invocation: the message goes back, with the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def run(
    job: Job,
    engine: Engine,
    settings: Settings,
    deadline: Deadline | None,
    last_receive: bool = False,
    part: int | None = None,
) -> Outcome:
    """Work on `job` (its part `part`; None: the job's first message) until it is done or `deadline`
    (see the module docstring for the outcomes)."""
    leases = _Leases()
    try:
        return _run(job, engine, settings, deadline, part, leases)
    except NoSuchPart:
        raise  # a message that names no part of the job: dead-lettered, the job left as it is
    except _Held:
        return Outcome.HELD
    except _Deferred as deferred:
        _give_up_part(job, leases)
        _note(job, {"code": "not_started", "message": deferred.reason}, last_receive, leases, settings)
        return Outcome.DEFERRED
    except TTSError as exc:
        _give_up_part(job, leases)
        if 400 <= exc.status < 500:  # the request itself cannot be served: retrying cannot help
            _fail(job, _error(exc), settings, retriable=False, leases=leases)
            raise
        with contextlib.suppress(TTSError):  # S3 may be what failed: the original error is raised
            _note(job, _error(exc), last_receive, leases, settings)
        raise
    except Exception as exc:
        with contextlib.suppress(TTSError):
            _give_up_part(job, leases)
            internal = {"code": "internal_error", "message": type(exc).__name__}
            _note(job, internal, last_receive, leases, settings)
        raise


def _run(
    job: Job, engine: Engine, settings: Settings, deadline: Deadline | None, part: int | None, leases: _Leases
) -> Outcome:
    current = store.status(job)
    if current is not None and current.final:
        return Outcome.EXISTED if current.state == DONE else Outcome.FAILED
    options = job.options()
    output = options.output(engine.sample_rate)
    joined = s3.exists(job.bucket, job.key)  # by a worker that has not marked the job done yet
    # A voice deleted since submission fails the job here (400); the text is segmented once, here.
    synthesis = prepare(options, Allowance(max_text_chars=None), deadline, engine, MARK_TYPES)
    plan = store.load_plan(job) or store.save_plan(
        job, split(synthesis.segments, settings.job_part_seconds, engine.decode_rows)
    )
    if part is not None and part >= len(plan.parts):
        raise NoSuchPart(f"job {job.id!r} has {len(plan.parts)} parts: there is no part {part}")
    if joined:
        _finish(job, engine, output, plan, settings, store.finished_parts(job))
        return Outcome.EXISTED
    if part is None and settings.job_queue_url is None:
        for index in range(len(plan.parts)):
            _speak_part(job, synthesis, plan, index, deadline, settings, leases)
        return _join(job, engine, output, plan, deadline, settings, leases, store.finished_parts(job))
    if part is None:  # the job's first message: the window's first parts go out, part 0 is this one's
        finished = store.finished_parts(job)
        for index in range(1, min(settings.job_parallel, len(plan.parts))):
            if index not in finished:
                queue.enqueue(job.id, settings, index)
        part = 0
    _speak_part(job, synthesis, plan, part, deadline, settings, leases)
    finished = store.finished_parts(job)  # this part's included: what the successor and the join go by
    successor = part + settings.job_parallel
    # A finished successor was sent before (its worker sends the next one in turn): not again.
    if successor < len(plan.parts) and successor not in finished:
        queue.enqueue(job.id, settings, successor)
    return _join(job, engine, output, plan, deadline, settings, leases, finished)


def _speak_part(
    job: Job,
    synthesis: Synthesis,
    plan: Plan,
    index: int,
    deadline: Deadline | None,
    settings: Settings,
    leases: _Leases,
) -> None:
    """Part `index`'s audio and marks, written once (nothing to do when it is written already)."""
    if index in store.finished_parts(job):
        return
    engine = synthesis.engine
    span = plan.parts[index]
    work = _before(deadline, CHECKPOINT_SECONDS)
    _check_fits(engine, synthesis.segments[span.start : span.stop], index, plan, work)
    until = _lease_until(deadline, settings)
    if not store.take_part_lease(job, index, until):
        raise _Held
    leases.part, leases.part_until = index, until
    store.record_parts(job, plan, store.finished_parts(job), engine.sample_rate, speaking=True)
    pcm = bytearray()
    marks: list[tuple[int, SpeechMark]] = []
    samples = 0  # of this part so far: a mark's place is the samples before it
    try:
        for run in plan.decode_runs(index):
            for chunk in synthesis.audio(run, work):
                marks += [(samples, mark) for mark in synthesis.take_marks()]
                pcm += to_pcm16(chunk)
                samples += chunk.size
                _renew(job, settings, deadline, leases)
            marks += [(samples, mark) for mark in synthesis.take_marks()]
    except (OverBudget, DeadlineExceeded) as exc:
        raise _Deferred(f"part {index + 1} of {len(plan.parts)} did not fit this invocation: {exc}") from exc
    store.write_part(job, index, bytes(pcm), marks)
    _give_up_part(job, leases)


def _join(
    job: Job,
    engine: Engine,
    output: Output,
    plan: Plan,
    deadline: Deadline | None,
    settings: Settings,
    leases: _Leases,
    sizes: dict[int, int],
) -> Outcome:
    """Join the parts when every one is written (the finished parts have these byte `sizes`) and no
    other worker is joining them."""
    store.record_parts(job, plan, sizes, engine.sample_rate)
    if len(sizes) < len(plan.parts):
        return Outcome.CONTINUED
    needed = join.seconds_needed(output, _audio_seconds(engine, list(sizes.values())))
    if deadline is not None and deadline.remaining() < needed:
        raise _Deferred("no time left in this invocation to join the parts")
    until = _lease_until(deadline, settings)
    if not store.take_lease(job, until):
        current = store.status(job)
        if current is not None and current.state == DONE:
            return Outcome.EXISTED
        raise _Held  # another worker joins them (or died joining them: this may be its message)
    leases.job = until
    ordered = [sizes[index] for index in range(len(plan.parts))]
    if job.options().script is not None:  # before the audio, whose presence says the join is done
        join.join_marks(job, engine.sample_rate, ordered, job.request.speech_marks or MARK_TYPES)
    join.join_audio(job, output, ordered)
    _finish(job, engine, output, plan, settings, sizes)
    return Outcome.DONE


def _finish(
    job: Job, engine: Engine, output: Output, plan: Plan, settings: Settings, sizes: dict[int, int]
) -> None:
    """The audio is written from parts of these byte `sizes`: tell the topic, then mark the job done."""
    seconds = _audio_seconds(engine, list(sizes.values()))
    result = {
        "bucket": job.bucket,
        "key": job.key,
        "format": output.name,
        "content_type": output.media_type,
        "sample_rate": output.rate,
        "duration_seconds": round(seconds, 3),
    }
    if job.options().script is not None:
        result.update(marks_key=job.marks_key, captions_key=job.captions_key)
    notify.publish(job.id, DONE, result, settings)
    store.update_status(
        job,
        DONE,
        segments_done=plan.segments,
        segments_total=plan.segments,
        parts_done=len(plan.parts),
        parts_total=len(plan.parts),
        audio_seconds=seconds,
        result=result,
        error=None,
        lease_until=None,
    )


def _check_fits(
    engine: Engine, segments: list[str], index: int, plan: Plan, deadline: Deadline | None
) -> None:
    """Refuse part `index` up front when the measured speed says it would not finish by `deadline`."""
    if deadline is None:
        return
    needed = engine.speed.seconds_for(segments, engine.token_rate)
    if needed is not None and needed > deadline.remaining():
        raise _Deferred(
            f"part {index + 1} of {len(plan.parts)} needs ~{needed:.0f} s here, this invocation has"
            f" {max(deadline.remaining(), 0.0):.0f} s left (a part that never fits: lower"
            " COSYVOICE_JOB_PART_SECONDS)"
        )


def _renew(job: Job, settings: Settings, deadline: Deadline | None, leases: _Leases) -> None:
    """Hold the part on: after each segment, for the lease's length again."""
    assert leases.part is not None
    until = _lease_until(deadline, settings)
    if store.take_part_lease(job, leases.part, until, leases.part_until):
        leases.part_until = until


def _give_up_part(job: Job, leases: _Leases) -> None:
    if leases.part is not None:
        store.release_part_lease(job, leases.part, leases.part_until)
        leases.part = leases.part_until = None


def _lease_until(deadline: Deadline | None, settings: Settings) -> float:
    """Until when (time.time()) this worker holds a part or the join: the lease's length, or the end of
    its own invocation if that comes first (a worker never runs past it); rounded as stored."""
    until = time.time() + settings.job_lease_seconds
    return round(until if deadline is None else min(until, time.time() + deadline.remaining()), 3)


def _before(deadline: Deadline | None, seconds: float) -> Deadline | None:
    return None if deadline is None else replace(deadline, at=deadline.at - seconds)


def _audio_seconds(engine: Engine, sizes: list[int]) -> float:
    return sum(sizes) / store.PCM_BYTES / engine.sample_rate


def _error(exc: TTSError) -> dict[str, str]:
    return {"code": exc.code, "message": exc.message}


def _fail(job: Job, error: dict[str, Any], settings: Settings, retriable: bool, leases: _Leases) -> None:
    """The job failed (for good, or until a redrive): tell the topic, then say so in the status."""
    notify.publish(job.id, FAILED, {"error": error, "retriable": retriable}, settings)
    store.release(job, FAILED, leases.job, error=error, retriable=retriable)


def _note(
    job: Job,
    error: dict[str, Any],
    last_receive: bool,
    leases: _Leases,
    settings: Settings,
) -> None:
    """Record a transient error (or a deferral) where the caller can read it; on the queue's last
    receive, as the job's failure (retriable: a message redriven from the dead-letter queue resumes).
    This worker stops working on the job, so its own lease goes; another worker's stays."""
    if last_receive:
        _fail(job, error, settings, retriable=True, leases=leases)
    else:
        store.release(job, None, leases.job, error=error)


__all__ = ["CHECKPOINT_SECONDS", "NoSuchPart", "Outcome", "run"]
