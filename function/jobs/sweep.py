"""The sweeper: one pass over the jobs that are not final, re-driving those that have stopped moving.

A job can stop moving with nothing in flight: a part's message lost (a purge, retention, a bug), a
worker killed in a way whose message comes back only after the queue's visibility timeout (a crashed
Lambda part: 90 minutes), a join whose message went missing. Every job that is not final has an entry
in an index (function.jobs.store.active_jobs), so a pass reads that index, never every job ever made.

A job is stalled when it has not moved (queued, a part taken or written, a re-drive) for
COSYVOICE_JOB_STALL_SECONDS and nothing of it is held: then its messages are sent again.

- not planned yet: its first message;
- planned: every part among the window's first unfinished ones that is neither written nor held (a
  duplicate of a part in flight is harmless: parts are write-once and a held part's message is acked);
- every part written but not joined, nor held by a joiner: its last part's message, which joins.

While the queue has messages waiting, nothing is re-driven: the workers have not reached them yet, and
a job waiting its turn is not stuck. Each re-drive is counted in the job's status; the job fails, with
that reason, on the re-drive after COSYVOICE_JOB_MAX_REDRIVES without progress. A final job found in
the index leaves it: its worker died after writing its end and before telling the topic, which is told
now.

Who runs it: every queue worker between messages and while idle (function.jobs.consumer), and on Lambda
a schedule (template.yaml's sweep event, every 5 minutes); `python -m function sweep` runs one pass.
A pass holds the sweeper's lease (COSYVOICE_JOB_STALL_SECONDS / 2), so one worker of a fleet sweeps at
a time and the fleet sweeps about twice per stall period.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from function.core.errors import TTSError
from function.instance.settings import Settings
from function.jobs import notify, queue, store
from function.jobs.plan import Contract
from function.jobs.store import DONE, FAILED, Job, JobNotFound, JobStatus
from function.observe.jobs import redriven

logger = logging.getLogger(__name__)


@dataclass
class Swept:
    """What one pass did."""

    swept: bool = True  # False: another sweeper held the lease, nothing was looked at
    looked_at: int = 0  # jobs in the index
    redriven: dict[str, list[int | None]] = field(default_factory=dict)  # job → parts sent (None: first)
    failed: list[str] = field(default_factory=list)  # jobs failed for not moving
    waiting: int = 0  # messages on the queue: nothing was re-driven while there were any

    def to_dict(self) -> dict[str, object]:
        return {"event": "job_sweep", **asdict(self)}


def sweep(settings: Settings, clock: Callable[[], float] = time.time) -> Swept:
    """One pass over the deployment's jobs that are not final (see the module docstring)."""
    bucket = store.bucket_of(settings)
    now = clock()
    if not store.take_sweep_lease(
        bucket, settings.output_prefix, now + settings.job_stall_seconds / 2, clock
    ):
        return Swept(swept=False)
    found = Swept(waiting=queue.waiting(settings))
    for tenant, job_id in store.active_jobs(bucket, settings.output_prefix):
        found.looked_at += 1
        try:
            _sweep_job(store.load(job_id, settings, tenant), settings, now, found)
        except JobNotFound:
            continue  # its submission has not stored the request yet (or never will)
        except TTSError as exc:  # one job's storage fault must not stop the pass
            logger.warning("cannot sweep job %s/%s: %s", tenant, job_id, exc.message)
    print(json.dumps(found.to_dict()), flush=True)
    redriven(settings, len(found.redriven), len(found.failed))
    return found


def _sweep_job(job: Job, settings: Settings, now: float, found: Swept) -> None:
    current = store.status(job) or JobStatus(store.QUEUED, updated_at=job.created_at)  # never queued
    if current.final:
        if now - current.updated() < settings.job_stall_seconds:
            return  # the worker that ended it is telling the topic now
        # It died before telling (and before taking the job out of the index): told now.
        notify.publish_end(job.id, current, settings)
        store.mark_inactive(job)
        return
    if found.waiting or now - current.moved_at() < settings.job_stall_seconds or current.held(now):
        return
    parts = _unsent(job, current, settings, now)
    if not parts:
        return  # its parts are held: being spoken
    reason = f"job {job.id!r} stopped moving (no part taken or written for {settings.job_stall_seconds} s)"
    counted = store.redriven(job, settings.job_max_redrives, reason)
    if counted.state == FAILED:
        found.failed.append(job.id)
        notify.publish_end(job.id, counted, settings)
        store.mark_inactive(job)
        return
    if counted.state == DONE:
        return
    for part in parts:
        queue.enqueue(job, settings, part)
    found.redriven[job.id] = parts


def _unsent(job: Job, current: JobStatus, settings: Settings, now: float) -> list[int | None]:
    """The messages a stalled job needs again (None: its first)."""
    # A plan stored before plans held their contract: only the window matters here.
    plan = store.load_plan(job, Contract(settings.job_parallel, 1, 1, ""))
    if plan is None:
        return [None]
    finished = store.finished_parts(job)
    unfinished = [index for index in range(len(plan.parts)) if index not in finished]
    if not unfinished:
        return [len(plan.parts) - 1]  # every part written: a part's message joins them
    window = unfinished[: plan.contract.window]
    return [index for index in window if not store.part_held(job, index, now)]


__all__ = ["Swept", "sweep"]
