"""The SQS path: every record is a job (function.jobs.store), worked on (function.jobs.worker) until it is
done or its share of the invocation runs out; records that could not be started go back in
`batchItemFailures`.

Message bodies (JSON):

    {"job": "<id>"}                       a stored job: sent by POST /v1/jobs, and by a worker to
                                          continue a job in the next invocation
                                          (function.shared.schema.JobMessage)
    {"id": "order-42-line-3",             a raw job (function.shared.schema.SpeechJob): submitted as a job on
     "text": "...",                       receipt (the same id and content again is the same job; other
     "speaker": "英文女" | "instruct": "..." | "prompt_audio": "<base64>", "prompt_text": "...",
     "format": "wav", "speed": 1.0, "seed": 7,
     "output_key": "custom/name.wav"}     content under the same id is refused), then worked on at once

Each record's outcome (one `batch_record` log line each):
  acked     done; exists (a duplicate, or already done); continued (progress checkpointed, a
            continuation message sent); failed for good: a client error (bad JSON, no id, unknown
            speaker, an id reused with other content), recorded in the job's status when it is the job's
  returned  deferred (no time to start it before the deadline) and transient errors (S3, SQS, ours):
            received again in 10 s or 60 s (function.jobs.queue.hand_back), not after the 90 min
            visibility timeout; on the queue's last receive (COSYVOICE_JOB_MAX_RECEIVES)
            the job's status says failed and why, and SQS moves the message to the dead-letter queue.
The function must be configured with `FunctionResponseTypes: [ReportBatchItemFailures]`.

The records share the invocation: each may use the time left divided by the records left, so a long job
continues in the next invocation instead of starving its neighbour.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from function.core.deadline import Deadline
from function.core.errors import InvalidRequest, TTSError
from function.jobs import queue, store, worker
from function.jobs.store import Job
from function.jobs.worker import Outcome
from function.shared.limits import invocation_deadline
from function.shared.model import get_engine
from function.shared.schema import JobMessage, SpeechJob, parse
from function.shared.settings import Settings, get_settings

logger = logging.getLogger(__name__)


def process_record(
    record: Mapping[str, Any], settings: Settings, deadline: Deadline | None
) -> tuple[Job, Outcome]:
    try:
        body = json.loads(record["body"])
    except (KeyError, TypeError, ValueError):
        raise InvalidRequest("the message body is not JSON") from None
    if isinstance(body, dict) and "job" in body:
        job = store.load(parse(JobMessage, body).job, settings)
    else:
        request = parse(SpeechJob, body)
        if request.id is None:
            raise InvalidRequest("id is required in a raw job message")
        job, _ = store.submit(request, settings)
    receives = int(record.get("attributes", {}).get("ApproximateReceiveCount", 1))
    return job, worker.run(job, get_engine(), settings, deadline, receives >= settings.job_max_receives)


def handle_sqs(event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
    """One SQS batch → {"batchItemFailures": [{"itemIdentifier": messageId}, ...]}."""
    settings = get_settings()
    deadline = invocation_deadline(context)
    records = event.get("Records", [])
    failures = []
    for index, record in enumerate(records):
        message_id = str(record.get("messageId", ""))
        outcome: dict[str, Any] = {"event": "batch_record", "messageId": message_id}
        share = _share(deadline, len(records) - index)
        try:
            if share is not None and share.expired():
                outcome["status"] = Outcome.DEFERRED.value
            else:
                job, result = process_record(record, settings, share)
                outcome |= {"job": job.id, "status": result.value, "key": job.key}
        except TTSError as exc:
            status = "failed" if 400 <= exc.status < 500 else "retrying"  # client errors are permanent
            outcome |= {"status": status, "code": exc.code, "message": exc.message}
        except Exception as exc:  # one record's bug must not fail its neighbours
            logger.exception("batch record %s failed", message_id)
            outcome |= {"status": "retrying", "code": "internal_error", "message": type(exc).__name__}
        if outcome["status"] in (Outcome.DEFERRED.value, "retrying"):
            failures.append({"itemIdentifier": message_id})
            if "receiptHandle" in record:
                deferred = outcome["status"] == Outcome.DEFERRED.value
                delay = queue.RETRY_DEFERRED_SECONDS if deferred else queue.RETRY_FAILED_SECONDS
                queue.hand_back(record["receiptHandle"], delay, settings)
        print(json.dumps(outcome, ensure_ascii=False), flush=True)
    return {"batchItemFailures": failures}


def _share(deadline: Deadline | None, records_left: int) -> Deadline | None:
    """This record's part of the invocation: the time left, split evenly among the records left."""
    if deadline is None:
        return None
    return replace(deadline, at=time.monotonic() + deadline.remaining() / records_left)


__all__ = ["handle_sqs", "process_record"]
