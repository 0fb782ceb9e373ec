"""The Lambda entry point: `function.handler.lambda_handler`.

INIT (module scope) starts loading the model through the one cached factory before anything else,
imports the rest of the handler while onnxruntime creates the sessions, and joins the load, so the model
is ready before the first event (a load failure fails INIT); it logs the startup phases (function.model).
The web stack (FastAPI, Mangum) is part of INIT under SnapStart and provisioned concurrency; an on-demand
INIT leaves it to the first HTTP event, so direct and SQS cold starts never pay for it.
Under SnapStart the warm-up runs in the before-snapshot hook, so the snapshot holds warmed pages;
after restore every random generator is reseeded (clones of one snapshot would otherwise draw the same
"random" audio) and AWS clients are dropped (their connections belong to the snapshotted machine).

Events are dispatched by shape:
  API Gateway HTTP API (v2), REST API (v1), Function URL, ALB → the FastAPI app through Mangum
  SQS                                                        → the batch path (function.batch)
  {"text": ..., "speaker" | "instruct" | "prompt_audio": ...}  → direct synthesis (see `direct_invoke`)
Anything else raises `UnsupportedEvent`.
"""

# ruff: noqa: E402 - the imports after `model.start_loading` come after it on purpose (see there)

from __future__ import annotations

import os

from function import model

INIT_TYPE = os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
SNAPSTART = INIT_TYPE == "snap-start"
# First thing at INIT: start the model load, then import the rest while its sessions are created (that
# releases the GIL).
model.start_loading(warm_up=False if SNAPSTART else None)

import base64
import random
import uuid
from functools import cache
from typing import TYPE_CHECKING, Any

from snapshot_restore_py import register_after_restore, register_before_snapshot

from function.audio import encode, media_type
from function.aws import reset_clients, s3_client
from function.batch import Written, handle_sqs, store, write_job
from function.errors import OutputTooLarge, TTSError
from function.schema import SpeechJob, parse
from function.settings import get_settings

PRESIGNED_URL_SECONDS = 3600


class UnsupportedEvent(TTSError):
    code = "unsupported_event"
    status = 400


if TYPE_CHECKING:
    from mangum import Mangum


@cache
def _http_adapter() -> Mangum:
    """The FastAPI app behind Mangum (lifespan off: it would run on every invocation)."""
    from mangum import Mangum

    from function.app import app

    return Mangum(app, lifespan="off")


_settings = get_settings()
# The web stack takes ~0.6 s to import (FastAPI alone ~0.5 s). An on-demand INIT is on a caller's clock
# and direct or SQS events never need it, so there it loads with the first HTTP event; a snapshot or a
# provisioned environment loads it now, while nobody waits.
if INIT_TYPE != "on-demand":
    _http_adapter()
if _settings.output_bucket is not None:
    s3_client()  # the first batch or direct request needs it; import boto3 during INIT, not then
ENGINE = model.get_engine()  # INIT ends with the model ready, or with the load's error
if not SNAPSTART:
    model.STARTUP.emit("init")


@register_before_snapshot
def _before_snapshot() -> None:
    if _settings.warmup:
        with model.STARTUP.phase("warm_up"):
            ENGINE.warm_up()
    model.STARTUP.since_start("ready")
    model.STARTUP.emit("snapshot")


@register_after_restore
def _after_restore() -> None:
    import numpy as np

    with model.STARTUP.phase("restore"):
        ENGINE.reseed()
        random.seed()
        np.random.seed()  # the legacy global generator, for any library that still draws from it
        reset_clients()
    model.STARTUP.emit("restore")


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


def _location(written: Written, fmt: str, sample_rate: int) -> dict[str, Any]:
    url = s3_client().generate_presigned_url(
        "get_object", Params={"Bucket": written.bucket, "Key": written.key}, ExpiresIn=PRESIGNED_URL_SECONDS
    )
    return {
        "format": fmt,
        "content_type": media_type(fmt),
        "sample_rate": sample_rate,
        "bucket": written.bucket,
        "key": written.key,
        "url": url,
        "existed": written.existed,
    }


def direct_invoke(event: dict[str, Any]) -> dict[str, Any]:
    """A SpeechJob as the event. With `id` or `output_key` the audio goes to S3 (idempotently) and the
    reply names it; otherwise the reply carries it base64, or, when that would not fit Lambda's 6 MB
    response, it goes to S3 anyway if an output bucket is configured. Errors come back as
    {"error": {"code", "message"}} (no stack trace)."""
    try:
        job = parse(SpeechJob, event)
        if job.id is not None or job.output_key is not None:
            written = write_job(job, _settings, _settings.max_text_chars)
            return _location(written, job.format, ENGINE.sample_rate)
        options = job.to_options().validated(_settings.max_text_chars)
        data = encode(ENGINE.stream(options), options.format, ENGINE.sample_rate)
        if _settings.fits_response(len(data)):
            return {
                "format": options.format,
                "content_type": media_type(options.format),
                "sample_rate": ENGINE.sample_rate,
                "audio": base64.b64encode(data).decode("ascii"),
            }
        if _settings.output_bucket is None:
            raise OutputTooLarge(
                f"the audio is {len(data)} bytes, too large for a direct-invoke response; configure"
                " COSYVOICE_OUTPUT_BUCKET or use the batch path (SQS → S3)"
            )
        key = f"{_settings.output_prefix}direct/{uuid.uuid4().hex}.{options.format}"
        store(_settings.output_bucket, key, data, options.format, ENGINE.sample_rate)
        return _location(Written(_settings.output_bucket, key, False), options.format, ENGINE.sample_rate)
    except TTSError as exc:
        return exc.to_dict()


def lambda_handler(event: Any, context: Any) -> Any:
    kind = event_kind(event)
    if kind == "http":
        return _http_adapter()(event, context)
    if kind == "sqs":
        return handle_sqs(event)
    if kind == "direct":
        return direct_invoke(event)
    shape = sorted(event)[:8] if isinstance(event, dict) else type(event).__name__
    raise UnsupportedEvent(
        f"unsupported event (keys {shape}): send API Gateway / Function URL / ALB HTTP events,"
        ' SQS batches, or a direct {"text": ..., "speaker": ...} request'
    )


__all__ = ["ENGINE", "UnsupportedEvent", "direct_invoke", "event_kind", "lambda_handler"]
