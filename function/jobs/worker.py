"""Running a job within one invocation: its next segments while they fit, each checkpointed, then the audio.

An invocation (an SQS record, a direct invoke) takes up where the job's finished parts end. It asks the
engine for as many of the remaining segments as the measured speed says fit before its deadline (less
room to checkpoint), writes each segment's audio as it arrives, and stops when the next one would not
fit (function.cosyvoice.budget.OverBudget up front; DeadlineExceeded if one runs over, losing only that
segment). Once every part is there and the assembly fits, the parts stream through the format's encoder into
the audio object (function.aws.s3.store_stream: one multipart part in memory at a time). The outcome
tells the caller what to do with its message:

    DONE       the audio is written now: ack
    EXISTED    it was written before (a duplicate delivery, a same-content resubmission): ack
    CONTINUED  progress made and a continuation message sent: ack
    DEFERRED   nothing could be done before the deadline (or no queue to continue through): hand the
               message back (batchItemFailures); on the queue's last receive the job is marked failed,
               retriable, with the reason
    FAILED     it had failed for good before: ack
Errors are recorded in the status and raised. A client error (unknown speaker, nothing to speak: a 4xx)
fails the job for good: the caller acks. Transient ones (S3, SQS, ours) become the status's
`last_error`: the caller has the record retried, and on its last receive the job is marked failed
(retriable) with that error.

Duplicate deliveries: a worker takes the job's lease before it starts (function.jobs.store.take_lease);
a delivery that finds the lease held by a live worker is DEFERRED (handed back), and one that finds it run
out, its holder killed mid-job, takes the job over from the last finished part. Parts and audio are
write-once and a job's seed is fixed, so even two workers on one job (a lease outrun by a segment) write
identical parts and one audio object; the status is written with If-Match.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import chain
from typing import TYPE_CHECKING, Any

from function.audio.encode import iter_encode, to_pcm16, wav_header
from function.aws import s3
from function.core.deadline import Deadline, DeadlineExceeded
from function.core.errors import TTSError
from function.core.script import MARK_TYPES
from function.cosyvoice.budget import OverBudget
from function.jobs import queue, store
from function.jobs.store import DONE, FAILED, QUEUED, RUNNING, Job
from function.markup.marks import MARKS_MEDIA_TYPE, VTT_MEDIA_TYPE, marks_jsonl, webvtt
from function.service.synthesis import Allowance, Synthesis, prepare

if TYPE_CHECKING:
    from collections.abc import Iterable

    from function.core.formats import Output
    from function.cosyvoice.engine import Engine
    from function.instance.settings import Settings

CHECKPOINT_SECONDS = 0.5  # after the last segment: its part, the status, a continuation message
ASSEMBLY_SECONDS = 0.5  # the assembly's fixed cost: a few S3 round trips
# Per second of audio: reading the parts back and uploading (wav, pcm: the parts are copied), plus the
# encoding for the other formats, the slowest of them (opus, with its resampling) allowed for.
COPY_SECONDS_PER_AUDIO_SECOND = 0.002
ENCODE_SECONDS_PER_AUDIO_SECOND = 0.02


class PartsMismatch(TTSError):
    """The engine did not yield one chunk per segment (a segment drew no speech tokens): ours, retried."""

    code = "parts_mismatch"
    status = 500


@dataclass
class _Lease:
    """The lease a run holds on its job: None until it is taken, then until when (as the status stores
    it), renewed at each checkpoint. Giving up compares it, so a run never clears another worker's."""

    until: float | None = None


class Outcome(StrEnum):
    DONE = "done"
    EXISTED = "exists"
    CONTINUED = "continued"
    DEFERRED = "deferred"
    FAILED = "failed"


def run(
    job: Job, engine: Engine, settings: Settings, deadline: Deadline | None, last_receive: bool = False
) -> Outcome:
    """Work on `job` until it is done or `deadline` (see the module docstring for the outcomes)."""
    lease = _Lease()
    try:
        return _run(job, engine, settings, deadline, last_receive, lease)
    except TTSError as exc:
        if 400 <= exc.status < 500:  # the request itself cannot be served: retrying cannot help
            store.update_status(job, FAILED, error=_error(exc), retriable=False, lease_until=None)
            raise
        with contextlib.suppress(TTSError):  # S3 may be what failed: the original error is raised
            _note(job, _error(exc), last_receive, lease)
        raise
    except Exception as exc:
        with contextlib.suppress(TTSError):
            _note(job, {"code": "internal_error", "message": type(exc).__name__}, last_receive, lease)
        raise


def _run(
    job: Job, engine: Engine, settings: Settings, deadline: Deadline | None, last_receive: bool, lease: _Lease
) -> Outcome:
    current = store.status(job)
    if current is not None and current.final:
        return Outcome.EXISTED if current.state == DONE else Outcome.FAILED
    options = job.options()
    output = options.output(engine.sample_rate)
    if s3.exists(job.bucket, job.key):  # a duplicate wrote it and has not marked it done yet
        _mark_done(job, engine, output, store.finished_parts(job))
        return Outcome.EXISTED
    until = _lease_until(deadline, settings)
    if not store.take_lease(job, until):
        return Outcome.DEFERRED  # another worker is on it: this delivery comes back after a pause
    lease.until = until
    # A voice deleted since submission fails the job here (400); the text is segmented once, here.
    synthesis = prepare(options, Allowance(max_text_chars=None), deadline, engine, MARK_TYPES)
    if options.script is not None:
        return _run_script(job, synthesis)
    segments = synthesis.segments
    sizes = store.finished_parts(job)
    _progress(job, engine, sizes, len(segments), lease, _lease_until(deadline, settings))
    progressed = False
    while len(sizes) < len(segments):
        start = len(sizes)
        work = _before(deadline, CHECKPOINT_SECONDS)
        picked = range(start, start + _fitting(engine, segments[start:], work))
        try:
            # Segments are synthesised whole (options.stream is off): one chunk each, in order.
            for chunk in synthesis.audio(picked, work):
                pcm = to_pcm16(chunk)
                store.write_part(job, len(sizes), pcm)
                sizes.append(len(pcm))
                progressed = True
                _progress(job, engine, sizes, len(segments), lease, _lease_until(deadline, settings))
        except (OverBudget, DeadlineExceeded):
            break
        if len(sizes) != picked.stop:
            raise PartsMismatch(
                f"segments {picked.start}-{picked.stop - 1} gave {len(sizes) - picked.start} chunks, one"
                " each was expected: the parts would not line up with the segments"
            )
    if len(sizes) == len(segments) and _assembly_fits(deadline, engine, output, sizes):
        _assemble(job, engine, output, sizes)
        return Outcome.DONE
    if progressed:
        store.release(job, None, lease.until)  # stopping here: the next delivery need not wait
        lease.until = None
        if settings.job_queue_url is not None:
            queue.enqueue(job.id, settings)
            return Outcome.CONTINUED
    reason = (
        f"no time left in this invocation for segment {len(sizes) + 1} of {len(segments)}"
        if len(sizes) < len(segments)
        else "no time left in this invocation to assemble the audio"
    )
    if not progressed:  # waiting again: queued, or running if earlier invocations made parts
        waiting = RUNNING if sizes else QUEUED
        _note(job, {"code": "not_started", "message": reason}, last_receive, lease, waiting)
    return Outcome.DEFERRED


def _run_script(job: Job, synthesis: Synthesis) -> Outcome:
    """A script (SSML, or text asking for speech marks) in one run, writing the audio, its marks and its
    captions: each mark's time needs all the audio before it, so a script is not checkpointed segment by
    segment as a text is, and must fit one invocation."""
    output = synthesis.output
    s3.store_stream(job.bucket, job.key, synthesis.pieces(), output, job.id)
    wanted = set(job.request.speech_marks or MARK_TYPES)
    chosen = [mark for mark in synthesis.marks if mark.type in wanted]
    s3.put(job.bucket, job.marks_key, marks_jsonl(chosen), MARKS_MEDIA_TYPE)
    captions = webvtt(synthesis.marks, synthesis.duration_ms).encode()
    s3.put(job.bucket, job.captions_key, captions, VTT_MEDIA_TYPE)
    _mark_done(job, synthesis.engine, output, [synthesis.samples * store.PCM_BYTES], marked=True)
    return Outcome.DONE


def _lease_until(deadline: Deadline | None, settings: Settings) -> float:
    """Until when (time.time()) this worker holds the job: the lease's length, or the end of its own
    invocation if that comes first (a worker never runs past it); rounded as the status stores it."""
    until = time.time() + settings.job_lease_seconds
    return round(until if deadline is None else min(until, time.time() + deadline.remaining()), 3)


def _before(deadline: Deadline | None, seconds: float) -> Deadline | None:
    return None if deadline is None else replace(deadline, at=deadline.at - seconds)


def _fitting(engine: Engine, remaining: list[str], deadline: Deadline | None) -> int:
    """How many of the `remaining` segments the measured speed says fit before `deadline` (at least
    one: the engine then refuses it up front when even that one does not)."""
    if deadline is None:
        return len(remaining)
    available, needed, count = deadline.remaining(), 0.0, 0
    for segment in remaining:
        seconds = engine.speed.seconds_for([segment], engine.token_rate)
        if seconds is None:  # nothing measured yet: the deadline stops it
            return len(remaining)
        needed += seconds
        if needed > available:
            break
        count += 1
    return max(count, 1)


def _audio_seconds(engine: Engine, sizes: list[int]) -> float:
    return sum(sizes) / store.PCM_BYTES / engine.sample_rate


def _progress(job: Job, engine: Engine, sizes: list[int], total: int, lease: _Lease, until: float) -> None:
    """Checkpoint the job's progress and renew this worker's lease until `until`."""
    store.update_status(
        job,
        RUNNING,
        segments_done=len(sizes),
        segments_total=total,
        audio_seconds=_audio_seconds(engine, sizes),
        error=None,
        retriable=False,
        lease_until=until,
    )
    lease.until = until


def _assembly_fits(deadline: Deadline | None, engine: Engine, output: Output, sizes: list[int]) -> bool:
    copied = _copies_parts(output)
    per_second = COPY_SECONDS_PER_AUDIO_SECOND if copied else ENCODE_SECONDS_PER_AUDIO_SECOND
    needed = ASSEMBLY_SECONDS + _audio_seconds(engine, sizes) * per_second
    return deadline is None or deadline.remaining() >= needed


def _copies_parts(output: Output) -> bool:
    """Whether the audio object is the parts themselves (under a wav header): no encoding."""
    return output.name in ("wav", "pcm") and output.rate == output.source_rate


def _assemble(job: Job, engine: Engine, output: Output, sizes: list[int]) -> None:
    pieces: Iterable[bytes]
    if _copies_parts(output):
        # The parts are the file's samples already: copied as they are, under a header with exact sizes.
        header = [wav_header(output.rate, sum(sizes))] if output.name == "wav" else []
        pieces = chain(header, (store.read_part(job, index) for index in range(len(sizes))))
    else:
        pieces = iter_encode(store.read_parts(job, len(sizes)), output)
    s3.store_stream(job.bucket, job.key, pieces, output, job.id)
    _mark_done(job, engine, output, sizes)


def _mark_done(job: Job, engine: Engine, output: Output, sizes: list[int], marked: bool = False) -> None:
    seconds = _audio_seconds(engine, sizes)
    result = {
        "bucket": job.bucket,
        "key": job.key,
        "format": output.name,
        "content_type": output.media_type,
        "sample_rate": output.rate,
        "duration_seconds": round(seconds, 3),
    }
    if marked:
        result.update(marks_key=job.marks_key, captions_key=job.captions_key)
    done = len(sizes)
    store.update_status(
        job,
        DONE,
        segments_done=done,
        segments_total=done,
        audio_seconds=seconds,
        result=result,
        error=None,
        lease_until=None,
    )


def _error(exc: TTSError) -> dict[str, str]:
    return {"code": exc.code, "message": exc.message}


def _note(
    job: Job, error: dict[str, Any], last_receive: bool, lease: _Lease, state: str | None = None
) -> None:
    """Record a transient error (or a deferral) where the caller can read it; on the queue's last
    receive, as the job's failure (retriable: a message redriven from the dead-letter queue resumes).
    This worker stops working on the job, so its own lease goes; another worker's stays."""
    if last_receive:
        store.release(job, FAILED, lease.until, error=error, retriable=True)
    else:
        store.release(job, state, lease.until, error=error)


__all__ = ["Outcome", "PartsMismatch", "run"]
