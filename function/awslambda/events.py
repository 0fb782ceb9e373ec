"""Lambda event shapes, and the answer to the direct one.

    API Gateway HTTP API (v2), REST API (v1), Function URL, ALB → "http"   (FastAPI through Mangum)
    SQS                                                        → "sqs"    (function.jobs.batch)
    {"text": ..., "speaker" | "instruct" | "prompt_audio": ...}  → "direct" (`direct_invoke`)

A plain module: importing it starts no model load (function.awslambda.handler's INIT does), so the routing is
tested in-process against the files in events/.
"""

from __future__ import annotations

import hashlib
from typing import Any

from function.aws.s3 import Written, location
from function.core.errors import TTSError
from function.instance.model import get_engine
from function.instance.settings import Settings
from function.jobs import store, worker
from function.service.deadlines import invocation_deadline
from function.service.schema import SpeechJob, parse
from function.service.synthesis import Allowance, Spill, prepare


class UnsupportedEvent(TTSError):
    code = "unsupported_event"
    status = 400

    @classmethod
    def of(cls, event: Any) -> UnsupportedEvent:
        shape = sorted(event)[:8] if isinstance(event, dict) else type(event).__name__
        return cls(
            f"unsupported event (keys {shape}): send API Gateway / Function URL / ALB HTTP events,"
            ' SQS batches, or a direct {"text": ..., "speaker": ...} request'
        )


def event_kind(event: Any) -> str | None:
    """'http', 'sqs', 'direct', 'sweep' (the schedule's `{"action": "sweep"}`), or None for shapes this
    function does not serve."""
    if not isinstance(event, dict):
        return None
    if event.get("action") == "sweep":
        return "sweep"
    records = event.get("Records")
    if isinstance(records, list) and records:
        sqs = all(isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records)
        return "sqs" if sqs else None
    context = event.get("requestContext")
    if isinstance(context, dict) and ("http" in context or "elb" in context or "httpMethod" in event):
        return "http"  # v2 and Function URLs carry requestContext.http; ALB .elb; REST v1 httpMethod
    if "text" in event:
        return "direct"
    return None


def direct_invoke(event: dict[str, Any], settings: Settings, context: Any = None) -> dict[str, Any]:
    """A SpeechJob as the event. With `id` or `output_key` it is a job (function.jobs.store; an output_key
    alone names one by its key): worked on in this invocation, the reply is its status (GET
    /v1/jobs/{id}'s body) and, once done, names the audio with a presigned URL; a job that does not
    finish continues through the queue, or when the deployment has none, in the next invoke of the same
    event. Otherwise the reply carries the audio base64, or, when that would not fit Lambda's 6 MB
    response, it goes to S3 anyway if an output bucket is configured. Work that cannot finish before the
    invocation's deadline (`context`) is refused up front. Errors come back as
    {"error": {"code", "message"}} (no stack trace). The engine is borrowed only once the event parses."""
    try:
        job = parse(SpeechJob, event)
        if job.id is not None or job.output_key is not None:
            return _run_job(job, settings, context)
        spill = Spill(settings.output_bucket, f"{settings.output_prefix}direct")
        allowance = Allowance(settings.max_text_chars, settings.max_response_bytes, spill)
        deadline = invocation_deadline(context)
        synthesis = prepare(job.to_options(), allowance, deadline, mark_types=job.mark_types())
        return synthesis.reply(job.marks_only)
    except TTSError as exc:
        return exc.to_dict()


def _run_job(request: SpeechJob, settings: Settings, context: Any) -> dict[str, Any]:
    if request.id is None:  # the key is the job: the same key with other content is refused
        key_id = hashlib.sha256(request.output_name().encode()).hexdigest()[:32]
        request = request.model_copy(update={"id": key_id})
    job, created = store.submit(request, settings)
    if not created:
        store.retry(job)  # the same job invoked again: a retriable failure is retried
    engine = get_engine()
    outcome = worker.run(job, engine, settings, invocation_deadline(context))
    reply = store.view(job, store.status(job))
    if outcome in (worker.Outcome.DONE, worker.Outcome.EXISTED):
        written = Written(job.bucket, job.key, existed=outcome is worker.Outcome.EXISTED)
        reply |= location(written, job.options().output(engine.sample_rate))
    return reply


__all__ = ["UnsupportedEvent", "direct_invoke", "event_kind"]
