"""Lambda event shapes, and the answer to the direct one.

    API Gateway HTTP API (v2), REST API (v1), Function URL, ALB → "http"   (FastAPI through Mangum)
    SQS                                                        → "sqs"    (function.batch)
    {"text": ..., "speaker" | "instruct" | "prompt_audio": ...}  → "direct" (`direct_invoke`)

A plain module: importing it starts no model load (function.handler's INIT does), so the routing is
tested in-process against the files in events/.
"""

from __future__ import annotations

import base64
from typing import Any

from function.audio import media_type, output_rate
from function.batch import write_job
from function.deadline import invocation_deadline
from function.errors import TTSError
from function.model import get_engine
from function.reply import reply_audio
from function.schema import SpeechJob, parse
from function.settings import Settings
from function.storage import location


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
    """'http', 'sqs', 'direct', or None for shapes this function does not serve."""
    if not isinstance(event, dict):
        return None
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
    """A SpeechJob as the event. With `id` or `output_key` the audio goes to S3 (idempotently) and the
    reply names it; otherwise the reply carries it base64, or, when that would not fit Lambda's 6 MB
    response, it goes to S3 anyway if an output bucket is configured. Work that cannot finish before the
    invocation's deadline (`context`) is refused up front. Errors come back as
    {"error": {"code", "message"}} (no stack trace). The engine is borrowed only once the event parses."""
    try:
        job = parse(SpeechJob, event)
        if job.id is not None or job.output_key is not None:
            written = write_job(job, settings, settings.max_text_chars)
            return location(written, job.format, output_rate(job.format, get_engine().sample_rate))
        options = job.to_options().validated(settings.max_text_chars)
        engine = get_engine()
        chunks = engine.stream(options, invocation_deadline(context))
        audio = reply_audio(options, engine, settings, spill="direct", chunks=chunks)
        rate = output_rate(options.format, engine.sample_rate, options.sample_rate)
        if isinstance(audio, bytes):
            return {
                "format": options.format,
                "content_type": media_type(options.format),
                "sample_rate": rate,
                "audio": base64.b64encode(audio).decode("ascii"),
            }
        return location(audio, options.format, rate)
    except TTSError as exc:
        return exc.to_dict()


__all__ = ["UnsupportedEvent", "direct_invoke", "event_kind"]
