"""The SQS path: every record is a job (function.jobs.store), worked on (function.jobs.worker) until it is
done or its share of the invocation runs out; records that could not be started go back in
`batchItemFailures`.

Message bodies (JSON):

    {"job": "<id>"}                       a stored job: sent by POST /v1/jobs; its worker plans it,
                                          sends its first parts' messages and speaks part 0
    {"job": "<id>", "part": k}            part k of a planned job: sent by the workers
                                          (function.jobs.worker; function.service.schema.JobMessage);
                                          either names `"tenant"` when the job is not the default's
    {"id": "order-42-line-3",             a raw job (function.service.schema.SpeechJob; `tenant`: whose,
                                          default `default`): submitted as a job on
     "text": "...",                       receipt (the same id and content again is the same job; other
     "speaker": "英文女" | "instruct": "..." | "prompt_audio": "<base64>", "prompt_text": "...",
     "format": "wav", "speed": 1.0, "seed": 7,
     "output_key": "custom/name.wav"}     content under the same id is refused), then worked on at once

Each record's outcome (one `batch_record` log line each; function.jobs.worker has the outcomes):
  acked          done; exists (a duplicate, or already done); continued (a part written, the next
                 part's message sent, the rest of the job on the queue); job_failed (the job had failed
                 before: nothing is spoken, no successor sent)
  sent again     held (another worker holds the part), stopped (a queue worker asked to stop had no
                 time to finish), foreign_artifact (the job was planned with another artifact): a new
                 message with the same body, visible after the holder's lease, at once, or soon; the
                 record is acked, so none of them counts toward the queue's receives or the job's
                 attempts. If SQS refuses the send, the record is handed back instead.
  dead-lettered  failed for good: a client error (bad JSON, no id, unknown speaker, an id reused with
                 other content, a text over the cap), or the record whose part's last attempt failed its
                 job. The record goes at once to COSYVOICE_DEAD_LETTER_QUEUE_URL, body unchanged, the
                 reason in its attributes (function.jobs.queue.dead_letter), and only then is acked; the
                 job's status says failed and why. Without a dead-letter queue to send to, or when that
                 send fails, the record is returned instead (never dropped): the queue's redrive policy
                 moves it to the dead-letter queue after its last receive.
  returned       deferred (no time to start it before the deadline) and transient errors (S3, SQS, ours):
                 received again in 10 s or 60 s, never later than COSYVOICE_JOB_LEASE_SECONDS
                 (function.jobs.queue.hand_back), not after the 90 min visibility timeout.
The function must be configured with `FunctionResponseTypes: [ReportBatchItemFailures]`.

The records share the invocation: each may use the time left divided by the records left. template.yaml
gives the job queue a batch size of 1, so a part has the whole invocation (parts are sized to fill a
good share of it) and two parts never wait on each other in one environment.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from function.core.audit import audit
from function.core.deadline import Deadline
from function.core.errors import InvalidRequest, TTSError
from function.core.tenant import DEFAULT_TENANT, Caller, TenantNameError, checked_tenant
from function.instance.model import get_engine
from function.instance.settings import Settings, get_settings
from function.jobs import queue, store, worker
from function.jobs.store import Job
from function.jobs.worker import Outcome
from function.observe.jobs import message_done
from function.service.deadlines import invocation_deadline
from function.service.schema import JOB_ID_PATTERN, JobMessage, SpeechJob, parse

logger = logging.getLogger(__name__)


def process_record(
    record: Mapping[str, Any], settings: Settings, deadline: Deadline | None
) -> tuple[Job, Outcome]:
    body = _body(record)
    part = None
    if isinstance(body, dict) and "job" in body:
        message = parse(JobMessage, body)
        job, part = store.load(message.job, settings, message.tenant), message.part
    else:
        tenant = body.pop("tenant", DEFAULT_TENANT) if isinstance(body, dict) else DEFAULT_TENANT
        request = parse(SpeechJob, body)
        if request.id is None:
            raise InvalidRequest("id is required in a raw job message")
        # A raw message delivered again is the same job, failed or not: the queue never revives a
        # failed job (SQS delivers at least once); submitting it through the API does.
        job, created = store.submit(request, settings, _tenant(tenant))
        if created:  # sent by whoever may write to the queue: inside the deployment, no credential
            audit(Caller(job.tenant), "job.submitted", job.id, str(record.get("messageId", "")) or None)
    receives = int(record.get("attributes", {}).get("ApproximateReceiveCount", 1))
    last_receive = receives >= settings.job_max_receives
    return job, worker.run(job, get_engine(), settings, deadline, last_receive, part)


def handle_sqs(event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
    """One SQS batch → {"batchItemFailures": [{"itemIdentifier": messageId}, ...]}."""
    settings = get_settings()
    deadline = invocation_deadline(context)
    records = event.get("Records", [])
    failures = []
    for index, record in enumerate(records):
        if not handle_record(record, settings, _share(deadline, len(records) - index)):
            failures.append({"itemIdentifier": str(record.get("messageId", ""))})
    return {"batchItemFailures": failures}


def handle_record(
    record: Mapping[str, Any],
    settings: Settings,
    deadline: Deadline | None,
    while_working: AbstractContextManager[Any] | None = None,
) -> bool:
    """One record, as Lambda's SQS path and the queue worker (function.jobs.consumer) take it: worked on
    (inside `while_working`: the worker keeps the message invisible meanwhile), logged (one
    `batch_record` line), and, when it failed or could not start, handed back. True when the record is
    finished with (the caller deletes it); False when it goes back to the queue."""
    message_id = str(record.get("messageId", ""))
    outcome: dict[str, Any] = {"event": "batch_record", "messageId": message_id}
    try:
        if deadline is not None and deadline.expired():
            outcome["status"] = Outcome.DEFERRED.value
        else:
            with while_working or contextlib.nullcontext():
                job, result = process_record(record, settings, deadline)
            outcome |= {"job": job.id, "status": result.value, "key": job.key}
    except TTSError as exc:
        outcome |= {"code": exc.code, "message": exc.message}
        if isinstance(exc, worker.JobFailed):
            outcome["failed_job"] = True  # this message failed its job (function.observe.jobs counts it)
        if 400 <= exc.status < 500:  # client errors are permanent: retrying cannot help
            outcome |= _dead_letter(record, exc, message_id, settings)
        else:
            outcome["status"] = "retrying"
    except Exception as exc:  # one record's bug must not fail its neighbours
        logger.exception("batch record %s failed", message_id)
        outcome |= {"status": "retrying", "code": "internal_error", "message": type(exc).__name__}
    again = _sent_again_after(outcome["status"], settings)
    if again is not None:
        try:
            queue.send_again(str(record.get("body", "")), again, settings)
        except queue.QueueError as exc:  # handed back instead: it counts a receive, nothing is lost
            outcome |= {"status": "retrying", "send_again_error": exc.message}
    delay = _handed_back_after(outcome["status"], settings)
    if delay is not None and "receiptHandle" in record:
        queue.hand_back(record["receiptHandle"], delay, settings)
    message_done(record, outcome)  # the batch_record line, and the message's metrics
    return delay is None


def _sent_again_after(status: str, settings: Settings) -> int | None:
    """When a record whose work went back through no fault of the part's own is received again: it is
    sent again as a new message (so the queue's receive count, and with it the redrive policy, never
    sees it) and the original acked. None: not such a record."""
    return {
        Outcome.STOPPED.value: 0,  # the worker was asked to stop: another takes the part now
        Outcome.HELD.value: settings.job_lease_seconds,  # by then a dead holder's lease has run out
        Outcome.FOREIGN.value: _retry_seconds(queue.RETRY_DEFERRED_SECONDS, settings),
    }.get(status)


def _handed_back_after(status: str, settings: Settings) -> int | None:
    """When a record handed back (it counts a receive) is received again; None: it is finished with."""
    return {
        Outcome.DEFERRED.value: _retry_seconds(queue.RETRY_DEFERRED_SECONDS, settings),
        "retrying": _retry_seconds(queue.RETRY_FAILED_SECONDS, settings),
        "failed": _retry_seconds(queue.RETRY_FAILED_SECONDS, settings),
    }.get(status)


def _retry_seconds(pause: int, settings: Settings) -> int:
    """A retry's pause, never longer than the lease: the deployment's own measure of how soon work
    that stopped is taken up again."""
    return min(pause, settings.job_lease_seconds)


def _tenant(named: Any) -> str:
    """The tenant a raw job message names (the queue is inside the deployment's trust boundary)."""
    try:
        return checked_tenant(named) if isinstance(named, str) else checked_tenant(repr(named))
    except TenantNameError as exc:
        raise InvalidRequest(str(exc)) from None


def _body(record: Mapping[str, Any]) -> Any:
    try:
        return json.loads(record["body"])
    except (KeyError, TypeError, ValueError):
        raise InvalidRequest("the message body is not JSON") from None


def _job_id(record: Mapping[str, Any]) -> str | None:
    """The job a record names, if it names one by a valid id (for the dead letter's attributes)."""
    with contextlib.suppress(InvalidRequest):
        body = _body(record)
        named = body.get("job", body.get("id")) if isinstance(body, dict) else None
        if isinstance(named, str) and re.fullmatch(JOB_ID_PATTERN, named):
            return named
    return None


def _dead_letter(
    record: Mapping[str, Any], error: TTSError, message_id: str, settings: Settings
) -> dict[str, Any]:
    """The outcome of a record that failed for good: dead-lettered (acked), or failed (returned) when
    there is no dead-letter queue to send it to or the send failed."""
    job_id = _job_id(record)
    try:
        sent = queue.dead_letter(str(record.get("body", "")), error, job_id, message_id, settings)
    except queue.QueueError as exc:
        return {"status": "failed", "dead_letter_error": exc.message}
    return {"status": "dead_lettered" if sent else "failed"}


def _share(deadline: Deadline | None, records_left: int) -> Deadline | None:
    """This record's part of the invocation: the time left, split evenly among the records left."""
    if deadline is None:
        return None
    return replace(deadline, at=time.monotonic() + deadline.remaining() / records_left)


__all__ = ["handle_record", "handle_sqs", "process_record"]
