"""Running a job's message: a job planned and its first parts sent, or one part spoken, then the join.

A job is planned once (function.jobs.plan: its parts and its contract, stored with it) by the worker that
takes its first message, `{"job": id}`. That worker sends the messages of parts 1 … window-1 and speaks
part 0 itself; the worker that finishes part k sends part k + window, so at most that many parts of one
job are in flight and the jobs behind it keep their share of the workers. The window, the flow's steps,
the decode batch and the artifact are the plan's, never the worker's own. Without a queue (a direct
invoke in a deployment that has none) the worker speaks every part in order itself.

A part is spoken whole within one invocation, refused up front when the measured speed says it would
not fit (function.cosyvoice.budget), and written once with its speech marks (function.jobs.store). Each
fresh take of a part's lease counts one attempt of that part; the worker that finds every part written
joins them (function.jobs.join) under the job's lease, renewed as it goes, marks the job done and, when
its write is the one that did, publishes the end (function.jobs.notify). The outcome tells the caller
what to do with its message:

    DONE       the audio is written now: ack
    EXISTED    it was written before (a duplicate delivery, a same-content resubmission): ack
    CONTINUED  progress made (a part written, parts sent) and the rest is on the queue: ack
    HELD       another worker holds the part or the join (a duplicate delivery, or a redelivery whose
               holder was killed): send the message again for when that worker's lease has run out (a
               live holder finishes; a dead one's work is then taken over)
    FAILED     the job had failed before: ack, speaking nothing and sending no successor
    DEFERRED   nothing could be done before the deadline: hand the message back (it counts a receive)
    STOPPED    the worker was asked to stop (SIGTERM) with no time to finish the part: send the message
               again, as new; the attempt is not counted against the job
Sent again means a new message and the received one acked: work that went back through no fault of its
own never counts toward the queue's maxReceiveCount.
    FOREIGN    the plan's artifact is not this worker's: send the message again for another worker;
               nothing is spoken and no attempt counted

Failing. A client error (unknown speaker, nothing to speak: a 4xx) fails the job at once. A transient
one (S3, SQS, SNS, ours) becomes the status's `last_error` and the message is handed back, until the
part's last attempt (COSYVOICE_JOB_MAX_RECEIVES, counted by the job, not by SQS) or the queue's last
receive: then the job fails, retriable. Either way the worker whose write made the job failed tells the
topic and raises JobFailed, so its message alone is dead-lettered: one notice and one dead letter per
failed job. A failed job stays failed (function.jobs.store); submitting it again is how it is retried.

Duplicates and crashes: parts, marks, the plan and the audio are write-once, and every segment draws
from its own seed, so a part spoken twice is the same part. A finished part's message delivered again
sends its successor unless that is written already and tries the join, so a worker killed between
writing its part and sending the next loses nothing. The join happens once: the job's lease admits one
joiner, the audio object is written once (If-None-Match), and the status's move to done is If-Match.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING

from function.audio.encode import to_pcm16
from function.aws import s3
from function.core.deadline import Deadline, DeadlineExceeded, Stopped
from function.core.errors import InvalidRequest, TTSError
from function.core.repeating import repeating
from function.core.script import MARK_TYPES
from function.cosyvoice.budget import OverBudget
from function.jobs import join, notify, queue, store
from function.jobs.plan import Contract, Plan, split
from function.jobs.store import DONE, FAILED, Job
from function.service.synthesis import Allowance, Synthesis, prepare

if TYPE_CHECKING:
    from function.core.formats import Output
    from function.core.options import SynthesisOptions
    from function.core.script import SpeechMark
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings

CHECKPOINT_SECONDS = 0.5  # after a part's last segment: its write, the status, the next part's message


@dataclass
class _Leases:
    """What this run holds: the job's lease (the join) and one part's, each until when (as stored), or
    None, and the part's attempts. Giving up compares them, so a run never clears another worker's."""

    job: float | None = None
    part: int | None = None
    part_until: float | None = None
    attempts: int = 0


class Outcome(StrEnum):
    DONE = "done"
    EXISTED = "exists"
    CONTINUED = "continued"
    HELD = "held"
    FAILED = "job_failed"
    DEFERRED = "deferred"
    STOPPED = "stopped"
    FOREIGN = "foreign_artifact"


class JobFailed(TTSError):
    """This message failed the job (for good, or retriably: then only a resubmission retries it): the
    caller dead-letters it with the job's reason. Raised once per failed job."""

    status = 422

    def __init__(self, error: dict[str, str]) -> None:
        super().__init__(error.get("message", "the job failed"))
        self.code = error.get("code", "job_failed")


class NoSuchPart(InvalidRequest):
    """A message names a part the job does not have."""

    code = "no_such_part"


class _Held(Exception):
    """Another worker holds the part or the join."""


class _Failed(Exception):
    """The job failed while this worker was starting its part."""


class _Exhausted(Exception):
    """The part was taken as many times as it may be, and every worker died speaking it."""


class _Foreign(Exception):
    """The job was planned with another artifact than this worker's."""


class _Deferred(Exception):
    """Nothing more can be done in this invocation: the message goes back, with the reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def contract_of(engine: Engine, settings: Settings, options: SynthesisOptions) -> Contract:
    """What this worker would plan a job with: its window, the request's flow steps (or the
    deployment's), its decode batch and its artifact."""
    return Contract(
        window=settings.job_parallel,
        flow_steps=engine.flow_steps_for(options),
        decode_rows=engine.decode_rows,
        artifact=engine.artifact.manifest_sha256,
    )


def run(
    job: Job,
    engine: Engine,
    settings: Settings,
    deadline: Deadline | None,
    last_receive: bool = False,
    part: int | None = None,
) -> Outcome:
    """Work on `job` (its part `part`; None: the job's first message) until it is done or `deadline`
    (see the module docstring for the outcomes). Raises JobFailed when this message failed the job."""
    leases = _Leases()
    try:
        return _run(job, engine, settings, deadline, part, leases)
    except NoSuchPart:
        raise  # a message that names no part of the job: dead-lettered, the job left as it is
    except _Held:
        return Outcome.HELD
    except _Failed:
        return Outcome.FAILED
    except _Exhausted as exhausted:
        _give_up_part(job, leases)
        error = {"code": "part_exhausted", "message": str(exhausted)}
        return _fail(job, error, settings, retriable=True, leases=leases)
    except _Foreign as foreign:
        print(json.dumps({"event": "foreign_artifact", "job": job.id, "message": str(foreign)}), flush=True)
        return Outcome.FOREIGN
    except Stopped:
        _give_up_part(job, leases, counted=False)
        if leases.job is not None:  # stopped mid-join: the next joiner need not wait for the lease
            store.release(job, None, leases.job)
        return Outcome.STOPPED
    except _Deferred as deferred:
        if deadline is not None and deadline.stopping:
            _give_up_part(job, leases, counted=False)
            return Outcome.STOPPED
        _give_up_part(job, leases)
        error = {"code": "not_started", "message": deferred.reason}
        return _note(job, error, last_receive or _last_attempt(leases, settings), leases, settings)
    except TTSError as exc:
        if 400 <= exc.status < 500:  # the request itself cannot be served: retrying cannot help
            _give_up_part(job, leases)
            return _fail(job, _error(exc), settings, retriable=False, leases=leases)
        if _transient(job, _error(exc), last_receive, leases, settings) is Outcome.FAILED:
            return Outcome.FAILED
        raise
    except Exception as exc:
        internal = {"code": "internal_error", "message": type(exc).__name__}
        if _transient(job, internal, last_receive, leases, settings) is Outcome.FAILED:
            return Outcome.FAILED
        raise


def _transient(
    job: Job, error: dict[str, str], last_receive: bool, leases: _Leases, settings: Settings
) -> Outcome:
    """After a transient error: the part given up and the error noted (on the part's last attempt or the
    queue's last receive, the job failed: JobFailed when by this call). DEFERRED: the caller raises the
    error and its message is handed back; FAILED: another worker had failed the job, ack."""
    try:
        _give_up_part(job, leases)
        return _note(job, error, last_receive or _last_attempt(leases, settings), leases, settings)
    except JobFailed:
        raise
    except TTSError:  # S3 may be what failed: the caller raises the original error
        return Outcome.DEFERRED


def _run(
    job: Job, engine: Engine, settings: Settings, deadline: Deadline | None, part: int | None, leases: _Leases
) -> Outcome:
    current = store.status(job)
    if current is not None and current.final:
        return Outcome.EXISTED if current.state == DONE else Outcome.FAILED
    options = job.options()
    output = options.output(engine.sample_rate)
    joined = s3.exists(job.bucket, job.key)  # by a worker that has not marked the job done yet
    own = contract_of(engine, settings, options)
    plan = store.load_plan(job, own)
    synthesis = None
    if plan is None:  # the text is segmented once, here; a voice deleted since submission fails it (400)
        synthesis = _prepared(options, own, engine, deadline)
        plan = store.save_plan(job, split(synthesis.segments, settings.job_part_seconds, own))
    if plan.contract.artifact != own.artifact:
        raise _Foreign(
            f"job {job.id!r} was planned with artifact {plan.contract.artifact[:12]}…, this worker serves"
            f" {own.artifact[:12]}…: the part goes to a worker with the job's artifact"
        )
    if synthesis is None or plan.contract != own:
        synthesis = _prepared(options, plan.contract, engine, deadline)
    if part is not None and part >= len(plan.parts):
        raise NoSuchPart(f"job {job.id!r} has {len(plan.parts)} parts: there is no part {part}")
    if joined:
        _finish(job, engine, output, plan, settings, store.finished_parts(job))
        return Outcome.EXISTED
    if part is None and settings.job_queue_url is None:
        for index in range(len(plan.parts)):
            _speak_part(job, synthesis, plan, index, deadline, settings, leases)
        return _after_part(job, engine, output, plan, None, deadline, settings, leases)
    if part is None:  # the job's first message: the window's first parts go out, part 0 is this one's
        finished = store.finished_parts(job)
        for index in range(1, min(plan.contract.window, len(plan.parts))):
            if index not in finished:
                queue.enqueue(job, settings, index)
        part = 0
    _speak_part(job, synthesis, plan, part, deadline, settings, leases)
    return _after_part(job, engine, output, plan, part, deadline, settings, leases)


def _prepared(
    options: SynthesisOptions, contract: Contract, engine: Engine, deadline: Deadline | None
) -> Synthesis:
    """The job's synthesis as its contract says: the plan's flow steps and decode batch."""
    planned = replace(options, flow_steps=contract.flow_steps, decode_rows=contract.decode_rows)
    return prepare(planned, Allowance(max_text_chars=None), deadline, engine, MARK_TYPES)


def _after_part(
    job: Job,
    engine: Engine,
    output: Output,
    plan: Plan,
    part: int | None,
    deadline: Deadline | None,
    settings: Settings,
    leases: _Leases,
) -> Outcome:
    """After part `part` (None: every part, spoken in order here): the progress recorded, the successor
    sent (unless written already, or the job failed meanwhile), and the join once every part is written."""
    finished = store.finished_parts(job)  # this part's included: what the successor and the join go by
    if store.record_parts(job, plan, finished, engine.sample_rate).state == FAILED:
        return Outcome.FAILED
    if part is not None:
        successor = part + plan.contract.window
        # A finished successor was sent before (its worker sends the next one in turn): not again.
        if successor < len(plan.parts) and successor not in finished:
            queue.enqueue(job, settings, successor)
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
    attempts = store.take_part_lease(job, index, until)
    if attempts is None:
        raise _Held
    leases.part, leases.part_until, leases.attempts = index, until, attempts
    if attempts > settings.job_max_receives:  # every attempt so far ended with its worker (killed)
        raise _Exhausted(
            f"part {index + 1} of {len(plan.parts)} was taken {attempts - 1} times and never finished: its"
            " worker stopped each time without a word (killed: out of memory, or a timeout)"
        )
    if store.record_parts(job, plan, store.finished_parts(job), engine.sample_rate, started=True).final:
        _give_up_part(job, leases, counted=False)
        raise _Failed
    pcm = bytearray()
    marks: list[tuple[int, SpeechMark]] = []
    samples = 0  # of this part so far: a mark's place is the samples before it
    try:
        # Renewed from a thread every third of the lease, so a segment longer than the lease never lets
        # another worker take a part this one is still speaking.
        renewing = partial(_renew, job, settings, deadline, leases)
        with repeating(settings.job_lease_seconds / 3, renewing, "cosyvoice-part-lease"):
            for run in plan.decode_runs(index):
                for chunk in synthesis.audio(run, work):
                    marks += [(samples, mark) for mark in synthesis.take_marks()]
                    pcm += to_pcm16(chunk)
                    samples += chunk.size
                marks += [(samples, mark) for mark in synthesis.take_marks()]
    except Stopped:
        raise
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
    other worker is joining them; the job's lease is renewed as the join goes."""
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
        raise _Held  # another worker joins them (or died joining them: its message comes back)
    leases.job = until

    def renew() -> None:
        if deadline is not None:
            deadline.check()
        until = _lease_until(deadline, settings)
        if store.take_lease(job, until, held=leases.job):
            leases.job = until

    ordered = [sizes[index] for index in range(len(plan.parts))]
    if job.options().script is not None:  # before the audio, whose presence says the join is done
        join.join_marks(job, engine.sample_rate, ordered, job.request.speech_marks or MARK_TYPES)
    join.join_audio(job, output, ordered, renew)
    return Outcome.DONE if _finish(job, engine, output, plan, settings, sizes) else Outcome.EXISTED


def _finish(
    job: Job, engine: Engine, output: Output, plan: Plan, settings: Settings, sizes: dict[int, int]
) -> bool:
    """The audio is written from parts of these byte `sizes`: mark the job done and, when this worker's
    write made it so, tell the topic and take the job out of the index of jobs that are not final (a
    worker that dies in between leaves it there, and the sweeper tells the topic). False when another
    worker finished it first."""
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
    finished = store.finish(
        job,
        segments_done=plan.segments,
        segments_total=plan.segments,
        parts_done=len(plan.parts),
        parts_total=len(plan.parts),
        audio_seconds=seconds,
        result=result,
        error=None,
    )
    if finished:
        notify.publish(job.id, DONE, result, settings)
        store.mark_inactive(job)
    return finished


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
    """Hold the part on, for the lease's length again (a failed renewal is tried again next time: the
    lease still runs)."""
    assert leases.part is not None
    until = _lease_until(deadline, settings)
    with contextlib.suppress(TTSError):
        if store.take_part_lease(job, leases.part, until, leases.part_until) is not None:
            leases.part_until = until


def _give_up_part(job: Job, leases: _Leases, counted: bool = True) -> None:
    if leases.part is not None:
        store.release_part_lease(job, leases.part, leases.part_until, counted)
        leases.part = leases.part_until = None


def _last_attempt(leases: _Leases, settings: Settings) -> bool:
    """Whether the part this run took was its last attempt (COSYVOICE_JOB_MAX_RECEIVES)."""
    return leases.attempts >= settings.job_max_receives


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


def _fail(job: Job, error: dict[str, str], settings: Settings, retriable: bool, leases: _Leases) -> Outcome:
    """Fail the job (for good, or retriably: until it is submitted again). The worker whose write failed
    it tells the topic, takes it out of the index and raises JobFailed (its message is dead-lettered);
    FAILED when the job had ended before (another worker failed it, and told)."""
    if not store.fail(job, error, retriable, leases.job):
        return Outcome.FAILED
    with contextlib.suppress(TTSError):  # a job failed but untold stays indexed: the sweeper tells
        notify.publish(job.id, FAILED, {"error": error, "retriable": retriable}, settings)
        store.mark_inactive(job)
    raise JobFailed(error)


def _note(job: Job, error: dict[str, str], last: bool, leases: _Leases, settings: Settings) -> Outcome:
    """Record a transient error (or a deferral) where the caller can read it, and stop working on the
    job: DEFERRED, the message goes back. On the `last` try the job fails instead (retriable)."""
    if last:
        return _fail(job, error, settings, retriable=True, leases=leases)
    store.release(job, None, leases.job, error=error)
    return Outcome.DEFERRED


__all__ = ["CHECKPOINT_SECONDS", "JobFailed", "NoSuchPart", "Outcome", "contract_of", "run"]
