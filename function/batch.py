"""The batch path: SQS records → synthesis → one S3 object per job; failures reported per record.

Message body (JSON; `function.schema.SpeechJob`, the POST /v1/tts fields plus an id):

    {"id": "order-42-line-3",             required; [A-Za-z0-9._-], becomes the default key
     "text": "...",                       up to COSYVOICE_BATCH_MAX_TEXT_CHARS characters
     "speaker": "英文女" | "instruct": "..." | "prompt_audio": "<base64>", "prompt_text": "...",
     "format": "wav", "speed": 1.0, "seed": 7,
     "output_key": "custom/name.wav"}     optional; default "<id>.<format>"

The object lands at s3://$COSYVOICE_OUTPUT_BUCKET/$COSYVOICE_OUTPUT_PREFIX<key>. The key is a function
of the message alone, and a job whose object exists is skipped: a redelivered message (visibility timeout,
a retried batch) yields the same single object. A record that cannot be done (malformed JSON, unknown
speaker, S3 refusing the write) is returned in `batchItemFailures` (the function must be configured with
`FunctionResponseTypes: [ReportBatchItemFailures]`); its neighbours succeed, and after the queue's
maxReceiveCount the redrive policy moves it to the dead-letter queue.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from function.audio import encode, output_rate
from function.errors import InvalidRequest, TTSError
from function.model import get_engine
from function.schema import SpeechJob, parse
from function.settings import Settings, get_settings
from function.storage import Written, exists, store

logger = logging.getLogger(__name__)


def write_job(job: SpeechJob, settings: Settings, max_text_chars: int) -> Written:
    """Synthesize `job` into its S3 object unless that object exists."""
    if settings.output_bucket is None:
        raise InvalidRequest("COSYVOICE_OUTPUT_BUCKET is not set: this deployment cannot write audio to S3")
    key = settings.output_prefix + job.output_name()
    options = job.to_options().validated(max_text_chars)
    if exists(settings.output_bucket, key):
        return Written(settings.output_bucket, key, existed=True)
    engine = get_engine()
    data = encode(engine.stream(options), options.format, engine.sample_rate, options.sample_rate)
    rate = output_rate(options.format, engine.sample_rate, options.sample_rate)
    store(settings.output_bucket, key, data, options.format, rate, job.id)
    return Written(settings.output_bucket, key, existed=False)


def process_record(record: Mapping[str, Any], settings: Settings) -> Written:
    try:
        body = json.loads(record["body"])
    except (KeyError, TypeError, ValueError):
        raise InvalidRequest("the message body is not JSON") from None
    job = parse(SpeechJob, body)
    if job.id is None:
        raise InvalidRequest("id is required on the batch path")
    return write_job(job, settings, settings.job_max_text_chars)


def handle_sqs(event: Mapping[str, Any]) -> dict[str, list[dict[str, str]]]:
    """One SQS batch → {"batchItemFailures": [{"itemIdentifier": messageId}, ...]}."""
    settings = get_settings()
    failures = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId", ""))
        outcome: dict[str, Any] = {"event": "batch_record", "messageId": message_id}
        try:
            written = process_record(record, settings)
            outcome |= {"status": "exists" if written.existed else "written", "key": written.key}
        except TTSError as exc:
            outcome |= {"status": "failed", "code": exc.code, "message": exc.message}
        except Exception as exc:  # one record's bug must not fail its neighbours
            logger.exception("batch record %s failed", message_id)
            outcome |= {"status": "failed", "code": "internal_error", "message": type(exc).__name__}
        if outcome["status"] == "failed":
            failures.append({"itemIdentifier": message_id})
        print(json.dumps(outcome, ensure_ascii=False), flush=True)
    return {"batchItemFailures": failures}


__all__ = ["handle_sqs", "process_record", "write_job"]
