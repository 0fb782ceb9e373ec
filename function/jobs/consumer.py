"""The job queue's consumer outside Lambda (containers, Kubernetes, docker compose; started by
`python -m function worker`, function.cli.worker), with the same record handling as Lambda's SQS path
(function.jobs.batch).

It long-polls COSYVOICE_JOB_QUEUE_URL for one message at a time, keeps it invisible while it works on it
(for COSYVOICE_JOB_LEASE_SECONDS, renewed by ChangeMessageVisibility every third of that: a killed
worker's message comes back when its part's lease runs out), deletes what it finished and hands back what
it could not do (visible again in 10 s or 60 s, as on Lambda; the queue's redrive policy dead-letters a
message after its last receive). A worker has no deadline of its own: a part runs to its end. Between
messages, and while the queue is idle, it sweeps the deployment's jobs (function.jobs.sweep) once
COSYVOICE_JOB_STALL_SECONDS / 2 have passed since its last pass; the sweeper's lease keeps that to one
worker of the fleet at a time.

SIGTERM (Kubernetes scaling in, `docker compose stop`): the worker takes no new message (an idle one
exits at once, mid-poll) and finishes the part in hand if it can within COSYVOICE_DRAIN_SECONDS (the
measured speed says up front whether it can). Otherwise, or once that time is up, the part stops at its
next token and its message is sent again as a new one (the parts already written are kept; the part is
spoken again from its start by whichever worker receives it, and the attempt does not count against the
job), then the worker exits 0. Scaling is the platform's: KEDA's `aws-sqs-queue` trigger on the same
queue (infra/k8s/workers).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from function.core.deadline import REPLY_MARGIN_SECONDS, Deadline, Stopped
from function.core.repeating import repeating
from function.instance.settings import Settings

logger = logging.getLogger(__name__)

WAIT_SECONDS = 10  # the long poll: an idle worker asks SQS six times a minute
STOP_CHECK_SECONDS = 0.2  # how soon an idle worker notices it was asked to stop


class Stopping:
    """SIGTERM's mark: whether the worker was asked to stop, and since when."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.since: float | None = None  # time.monotonic() of the request

    def request(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)


@dataclass(frozen=True)
class UntilStopped(Deadline):
    """No time limit until the worker is asked to stop; then `drain_seconds` more, after which the
    engine stops at its next token (Stopped)."""

    stop: Stopping = field(default_factory=Stopping)
    drain_seconds: float = 0.0

    def remaining(self) -> float:
        if self.stop.since is None:
            return math.inf
        return self.stop.since + self.drain_seconds - REPLY_MARGIN_SECONDS - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    @property
    def stopping(self) -> bool:
        return self.stop.is_set()

    def check(self) -> None:
        if self.expired():
            raise Stopped(
                f"the worker was asked to stop (SIGTERM) and its {self.drain_seconds:.0f} s to finish"
                " (COSYVOICE_DRAIN_SECONDS) ran out: the part goes back to the queue"
            )


def consume(settings: Settings, stopping: Stopping) -> None:
    """Work on the queue's messages one at a time until `stopping` is set, sweeping between them. SQS
    refusing a receive or a delete is logged and waited out: a message not deleted comes back and finds
    its work done."""
    from botocore.exceptions import BotoCoreError, ClientError

    from function.aws.clients import sqs_client
    from function.jobs.batch import handle_record

    assert settings.job_queue_url is not None
    deadline = UntilStopped(
        math.inf, "none: a worker's part runs to its end", math.inf, stopping, settings.drain_seconds
    )
    swept = -math.inf
    while not stopping.is_set():
        if time.monotonic() - swept >= settings.job_stall_seconds / 2:
            swept = time.monotonic()
            _sweep(settings)
        try:
            messages = _receive(settings, stopping)
        except (BotoCoreError, ClientError) as exc:
            logger.warning("cannot receive from the job queue: %s", exc)
            stopping.wait(WAIT_SECONDS)
            continue
        for message in messages:
            record = {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "eventSource": "aws:sqs",
            }
            heartbeat = _kept_invisible(settings, message["ReceiptHandle"])
            if handle_record(record, settings, deadline, heartbeat):
                try:
                    sqs_client().delete_message(
                        QueueUrl=settings.job_queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )
                except (BotoCoreError, ClientError) as exc:
                    logger.warning("cannot delete a finished message (it comes back, done): %s", exc)


def _receive(settings: Settings, stopping: Stopping) -> list[dict[str, Any]]:
    """One long poll for a message, given up the moment the worker is asked to stop: an idle worker exits
    at once, not at the poll's end. The poll itself runs on a thread of its own, left behind on a stop; a
    message SQS hands to it then stays invisible for its lease and comes back, as from a killed worker."""
    from function.aws.clients import sqs_client

    if stopping.is_set():  # asked while it swept: no poll, so no message taken only to be left behind
        return []
    client = sqs_client()
    answer: list[dict[str, Any] | BaseException] = []
    answered = threading.Event()

    def poll() -> None:
        try:
            answer.append(
                client.receive_message(
                    QueueUrl=settings.job_queue_url,
                    MaxNumberOfMessages=1,
                    WaitTimeSeconds=min(WAIT_SECONDS, max(1, math.ceil(settings.job_stall_seconds / 2))),
                    VisibilityTimeout=settings.job_lease_seconds,
                    AttributeNames=["All"],
                )
            )
        except BaseException as exc:  # raised again on the consumer's thread
            answer.append(exc)
        finally:
            answered.set()

    threading.Thread(target=poll, name="cosyvoice-poll", daemon=True).start()
    while not answered.wait(STOP_CHECK_SECONDS):
        if stopping.is_set():
            return []
    (found,) = answer
    if isinstance(found, BaseException):
        raise found
    return list(found.get("Messages", []))


def _sweep(settings: Settings) -> None:
    """One pass of the sweeper, if no other worker of the fleet holds its lease; its failures are
    logged (the next pass tries again), never the worker's end."""
    from function.jobs.sweep import sweep

    try:
        sweep(settings)
    except Exception:
        logger.exception("the job sweep failed")


def _kept_invisible(settings: Settings, receipt_handle: str) -> contextlib.AbstractContextManager[None]:
    """While the block runs, renew the message's invisibility every third of the lease, so no other
    worker receives it however long its part takes."""
    from botocore.exceptions import BotoCoreError, ClientError

    from function.aws.clients import sqs_client

    seconds = settings.job_lease_seconds

    def renew() -> None:
        try:
            sqs_client().change_message_visibility(
                QueueUrl=settings.job_queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
            )
        except (BotoCoreError, ClientError) as exc:  # the part's lease still guards it
            logger.warning("cannot keep message invisible: %s", exc)

    return repeating(seconds / 3, renew, "cosyvoice-heartbeat")


__all__ = ["Stopping", "UntilStopped", "consume"]
