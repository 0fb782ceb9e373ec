"""The job queue: SQS messages naming stored jobs (`{"job": id}`, function.service.schema.JobMessage).

POST /v1/jobs sends one per job; the worker that takes it sends the first parts' (`{"job": id, "part": k}`),
and the worker that finishes part k sends the part COSYVOICE_JOB_PARALLEL after it (SendMessage, not a
visibility-timeout retry), so a job of many parts never counts toward the queue's maxReceiveCount, and
its messages are small whatever the size of the text.

A message that can never succeed is dead-lettered here: sent to COSYVOICE_DEAD_LETTER_QUEUE_URL with its
body as it came and the reason as message attributes (`ErrorCode`, `ErrorMessage`, `JobId` when it names
a job, `SourceMessageId`), so an operator can read why and redrive it once the cause is fixed.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from function.aws.clients import sqs_client
from function.core.errors import TTSError
from function.core.tenant import DEFAULT_TENANT
from function.instance.settings import Settings
from function.jobs.store import Job, JobsUnavailable


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


# How soon a record handed back (batchItemFailures) is received again, instead of after the queue's
# visibility timeout (90 min: 6x the function's): one that found no time, soon; a transient error, after
# a pause.
RETRY_DEFERRED_SECONDS = 10
RETRY_FAILED_SECONDS = 60


def hand_back(receipt_handle: str, seconds: int, settings: Settings) -> None:
    """Make a received message visible again in `seconds` (best effort: if SQS refuses, the visibility
    timeout brings it back all the same)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if settings.job_queue_url is None:
        return
    with contextlib.suppress(BotoCoreError, ClientError):
        sqs_client().change_message_visibility(
            QueueUrl=settings.job_queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )


def send_again(body: str, delay_seconds: int, settings: Settings) -> None:
    """Send a received message's `body` again as a new message, visible in `delay_seconds` (at most SQS's
    900): for work handed back through no fault of its own, which must not count toward the queue's
    maxReceiveCount. Raises QueueError if SQS refuses (the caller hands the message back instead)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        sqs_client().send_message(
            QueueUrl=queue_url(settings), MessageBody=body, DelaySeconds=min(delay_seconds, 900)
        )
    except (BotoCoreError, ClientError) as exc:
        raise QueueError(f"cannot send a message again: {exc}") from exc


def waiting(settings: Settings) -> int:
    """Messages on the job queue that no worker has received yet (SQS's approximate count)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        found = sqs_client().get_queue_attributes(
            QueueUrl=queue_url(settings), AttributeNames=["ApproximateNumberOfMessages"]
        )
    except (BotoCoreError, ClientError) as exc:
        raise QueueError(f"cannot read the job queue's length: {exc}") from exc
    return int(found["Attributes"]["ApproximateNumberOfMessages"])


MAX_ATTRIBUTE_CHARS = 1024  # an error message is a line for people; SQS takes 256 KiB with the body


def dead_letter(body: str, error: TTSError, job_id: str | None, message_id: str, settings: Settings) -> bool:
    """Send a record that can never succeed to the dead-letter queue, unchanged, with the reason: True
    once SQS has it; False when no dead-letter queue is configured. Raises QueueError if SQS refuses."""
    from botocore.exceptions import BotoCoreError, ClientError

    if settings.dead_letter_queue_url is None:
        return False
    reason = {"ErrorCode": error.code, "ErrorMessage": error.message[:MAX_ATTRIBUTE_CHARS]}
    named = {"JobId": job_id} if job_id else {}
    attributes = {
        name: {"DataType": "String", "StringValue": value}
        for name, value in {**reason, **named, "SourceMessageId": message_id}.items()
        if value
    }
    try:
        sqs_client().send_message(
            QueueUrl=settings.dead_letter_queue_url, MessageBody=body, MessageAttributes=attributes
        )
    except (BotoCoreError, ClientError) as exc:
        raise QueueError(f"cannot dead-letter message {message_id!r}: {exc}") from exc
    return True


def message(job: Job, part: int | None = None) -> dict[str, Any]:
    """The body naming `job` (its `part`): the tenant only when it is not the default, so a message
    reads as it did before tenants."""
    body: dict[str, Any] = {"job": job.id}
    if part is not None:
        body["part"] = part
    if job.tenant != DEFAULT_TENANT:
        body["tenant"] = job.tenant
    return body


def enqueue(job: Job, settings: Settings, part: int | None = None) -> None:
    """Send the job's message: the whole job (planned by the worker that takes it), or one `part`."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        sqs_client().send_message(QueueUrl=queue_url(settings), MessageBody=json.dumps(message(job, part)))
    except (BotoCoreError, ClientError) as exc:
        named = f"job {job.id!r}" if part is None else f"part {part} of job {job.id!r}"
        raise QueueError(f"cannot queue {named}: {exc}") from exc


__all__ = [
    "RETRY_DEFERRED_SECONDS",
    "RETRY_FAILED_SECONDS",
    "QueueError",
    "dead_letter",
    "enqueue",
    "hand_back",
    "message",
    "queue_url",
    "send_again",
    "waiting",
]
