"""The queue's work in the metrics: each job message's outcome and line, the jobs' ends, the re-drives.

A message is `Job` (a job's first message, or a raw job: the job is planned and its first part spoken)
or `JobPart` (one part of a planned job). Its outcome is the status of its `batch_record` line
(function.jobs.batch), and that line is written here, with its embedded metrics inside Lambda. A job's
characters are counted once, by its `Job` message; its audio by the message that spoke it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from function.core.emf import COUNT
from function.instance.settings import Settings
from function.observe import embedded, metrics, tally

JOB, JOB_PART = "Job", "JobPart"
DONE = "done"  # the outcome of the message that finished its job
PART_WRITTEN = frozenset({DONE, "continued"})  # outcomes of a message that wrote a part


def operation_of(record: Mapping[str, Any]) -> str:
    """JOB_PART for a message naming a part of a planned job, else JOB."""
    try:
        body = json.loads(record.get("body") or "")
    except (TypeError, ValueError):
        return JOB
    return JOB_PART if isinstance(body, dict) and body.get("part") is not None else JOB


def message_done(record: Mapping[str, Any], line: dict[str, Any]) -> None:
    """The message `record` ended as its `batch_record` `line` says (`failed_job`: it failed its job):
    counted, and the line written (with its embedded metrics inside Lambda)."""
    work = tally.taken()
    failed_job = bool(line.get("failed_job"))
    operation = operation_of(record)
    characters = work.characters if operation == JOB else 0
    outcome = str(line.get("status"))
    line = {**line, "audio_seconds": round(work.audio_seconds, 3)}
    if metrics.enabled():
        metrics.JOB_PARTS.labels(outcome).inc()
        if outcome == DONE or failed_job:
            metrics.JOBS_FINISHED.labels("failed" if failed_job else DONE).inc()
        metrics.count_work(operation, work.tenant, work, characters)
    counts = {
        **embedded.work_metrics(work),
        "RequestCharacters": (float(characters), COUNT),
        "PartsDone": (float(outcome in PART_WRITTEN), COUNT),
        "JobsFailed": (float(failed_job), COUNT),
    }
    embedded.write(line, operation, counts)


def redriven(settings: Settings, jobs: int, failed: int) -> None:
    """A sweep sent `jobs` stalled jobs' messages again, and failed `failed` that never moved (counted
    when `settings` keep metrics: a sweep may run where no other setting is read)."""
    if settings.metrics:
        metrics.JOB_REDRIVES.inc(jobs)
        metrics.JOBS_FINISHED.labels("failed").inc(failed)


__all__ = ["JOB", "JOB_PART", "message_done", "operation_of", "redriven"]
