"""A job's end told to the deployment's SNS topic (COSYVOICE_JOB_TOPIC_ARN): an application subscribes
instead of polling GET /v1/jobs/{id}.

One message per job end: {"id", "status": "done", "bucket", "key", "format", "duration_seconds", …} or
{"id", "status": "failed", "error": {"code", "message"}, "retriable"}. The worker whose status write ended
the job publishes it, then takes the job out of the index of jobs still running; one killed in between
leaves the job there, and the sweeper (function.jobs.sweep) publishes the stored end once the job's stall
time has passed. A subscriber may see an end twice (SNS delivers at least once anyway) and never misses
one.
"""

from __future__ import annotations

import json
from typing import Any

from function.aws.clients import sns_client
from function.core.errors import TTSError
from function.instance.settings import Settings
from function.jobs.store import FAILED, JobStatus


class NotifyError(TTSError):
    """SNS refused the message; the record is retried (the status is not marked ended before it)."""

    code = "notify_error"
    status = 502


def publish_end(job_id: str, ended: JobStatus, settings: Settings) -> None:
    """Publish the end that a final status records: its result, or its error and whether it is retriable."""
    if ended.state == FAILED:
        publish(job_id, FAILED, {"error": ended.error, "retriable": ended.retriable}, settings)
    else:
        publish(job_id, ended.state, ended.result or {}, settings)


def publish(job_id: str, status: str, details: dict[str, Any], settings: Settings) -> None:
    """Tell the topic, when the deployment names one, that job `job_id` ended with `status`."""
    from botocore.exceptions import BotoCoreError, ClientError

    if settings.job_topic_arn is None:
        return
    message = json.dumps({"id": job_id, "status": status, **details}, ensure_ascii=False)
    try:
        sns_client().publish(
            TopicArn=settings.job_topic_arn,
            Message=message,
            MessageAttributes={"status": {"DataType": "String", "StringValue": status}},
        )
    except (BotoCoreError, ClientError) as exc:
        raise NotifyError(f"cannot tell {settings.job_topic_arn} that job {job_id!r} ended: {exc}") from exc


__all__ = ["NotifyError", "publish", "publish_end"]
