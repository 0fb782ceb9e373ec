"""The job queue: SQS messages naming stored jobs (`{"job": id}`, function.schema.JobMessage).

POST /v1/jobs sends one per job; a worker that runs out of invocation sends the next one itself
(SendMessage, not a visibility-timeout retry), so a job of many invocations never counts toward the
queue's maxReceiveCount, and its message is small whatever the size of the text.
"""

from __future__ import annotations

import json

from function.aws import sqs_client
from function.errors import TTSError
from function.jobs import JobsUnavailable
from function.settings import Settings


class QueueError(TTSError):
    """SQS refused the message; the submission or record is retried."""

    code = "queue_error"
    status = 502


def queue_url(settings: Settings) -> str:
    if settings.job_queue_url is None:
        raise JobsUnavailable(
            "COSYVOICE_JOB_QUEUE_URL is not set: this deployment has no job queue (send SQS messages"
            " to its queue directly, or deploy template.yaml, which sets it)"
        )
    return settings.job_queue_url


def enqueue(job_id: str, settings: Settings) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        sqs_client().send_message(QueueUrl=queue_url(settings), MessageBody=json.dumps({"job": job_id}))
    except (BotoCoreError, ClientError) as exc:
        raise QueueError(f"cannot queue job {job_id!r}: {exc}") from exc


__all__ = ["QueueError", "enqueue", "queue_url"]
