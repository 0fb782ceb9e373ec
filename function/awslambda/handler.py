"""The Lambda entry point: `function.awslambda.handler.lambda_handler`.

INIT (module scope) starts loading the model through the one cached factory before anything else,
imports the rest of the handler while onnxruntime creates the sessions, and joins the load, so the model
is ready before the first event (a load failure fails INIT); it logs the startup phases
(function.instance.startup). The web stack (FastAPI, Mangum) is part of INIT under SnapStart and provisioned
concurrency; an on-demand INIT leaves it to the first HTTP event, so direct and SQS cold starts never pay for
it. Under SnapStart the warm-up runs in the before-snapshot hook, so the snapshot holds warmed pages; after
restore every random generator is reseeded (clones of one snapshot would otherwise draw the same "random"
audio) and AWS clients are dropped (their connections belong to the snapshotted machine).

Events are dispatched by shape (function.awslambda.events): HTTP events to the FastAPI app through Mangum, SQS
batches to function.jobs.batch, direct requests to `function.awslambda.events.direct_invoke`; anything else
raises `UnsupportedEvent`. This module keeps only INIT, the hooks and that dispatch.
"""

# ruff: noqa: E402 - the imports after `model.start_loading` come after it on purpose (see there)

from __future__ import annotations

import os

from function.instance import model

INIT_TYPE = os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
SNAPSTART = INIT_TYPE == "snap-start"
# First thing at INIT: start the model load, then import the rest while its sessions are created (that
# releases the GIL).
# A snapshot or a provisioned environment is initialised before anyone calls: there the artifact's sha256
# are checked too (every byte is read), so a damaged file fails INIT instead of speaking noise.
model.start_loading(warm_up=False if SNAPSTART else None, verify_hashes=INIT_TYPE != "on-demand")

import random
from functools import cache
from typing import TYPE_CHECKING, Any

from snapshot_restore_py import register_after_restore, register_before_snapshot

from function.aws.clients import reset_clients, s3_client
from function.awslambda.events import UnsupportedEvent, direct_invoke, event_kind
from function.cosyvoice.frontend import load_normalizer
from function.instance.library import clear_cached_voices
from function.instance.settings import get_settings
from function.instance.startup import STARTUP
from function.jobs.batch import handle_sqs
from function.jobs.sweep import sweep
from function.observe.embedded import embed_metrics
from function.observe.tally import Tally, tallying

if TYPE_CHECKING:
    from mangum import Mangum


@cache
def _http_adapter() -> Mangum:
    """The FastAPI app behind Mangum (lifespan off: it would run on every invocation)."""
    from mangum import Mangum

    from function.api.app import app

    return Mangum(app, lifespan="off")


_settings = get_settings()
embed_metrics()  # each request's and job message's line carries its metrics (function.observe.embedded)
# The web stack is slow to import (`python -X importtime -c "import function.api.app"`, FastAPI most of
# it). An on-demand INIT is on a caller's clock and direct or SQS events never need it, so there it loads
# with the first HTTP event; a snapshot or a provisioned environment loads it now, while nobody waits.
if INIT_TYPE != "on-demand":
    _http_adapter()
if _settings.output_bucket is not None:
    s3_client()  # the first batch or direct request needs it; import boto3 during INIT, not then
ENGINE = model.get_engine()  # INIT ends with the model ready, or with the load's error
if not SNAPSTART:
    STARTUP.emit("init")


@register_before_snapshot
def _before_snapshot() -> None:
    if _settings.warmup:
        with STARTUP.phase("warm_up"):
            ENGINE.warm_up()
    load_normalizer()  # the text graphs' reading (started after the model load) ends inside the snapshot
    clear_cached_voices()  # a restored clone reads voices from storage: one deleted since is refused
    STARTUP.since_start("ready")
    STARTUP.emit("snapshot")


@register_after_restore
def _after_restore() -> None:
    import numpy as np

    with STARTUP.phase("restore"):
        ENGINE.reseed()
        random.seed()
        np.random.seed()  # the legacy global generator, for any library that still draws from it
        reset_clients()
    STARTUP.emit("restore")


def lambda_handler(event: Any, context: Any) -> Any:
    kind = event_kind(event)
    if kind == "http":
        return _http_adapter()(event, context)
    if kind == "sqs":
        return handle_sqs(event, context)
    if kind == "direct":
        with tallying(Tally()):  # measured apart: not counted with the environment's next SQS record
            return direct_invoke(event, _settings, context)
    if kind == "sweep":
        return sweep(_settings).to_dict()
    raise UnsupportedEvent.of(event)


__all__ = ["ENGINE", "lambda_handler"]
