"""The HTTP API (FastAPI): served by uvicorn in containers, and by Mangum inside Lambda
(function.awslambda.handler).

Endpoints are plain `def`: synthesis is CPU-bound and blocking, so FastAPI runs it in its thread pool.
The health checks are `async def`, answered on the event loop however busy that pool is, and synthesis
routes (tagged function.api.admission.SYNTHESIS) are admitted a few at a time, the rest refused with 429.
The model is never loaded here (no lifespan: Mangum would run it on every invocation). A route only
translates: its body into options (function.service.schema), the transport into an allowance, and the
service path's `Synthesis` (function.service.synthesis) into a response.

POST /v1/audio/speech takes OpenAI's body: function.voices.openai maps its voice names onto built-in
speakers and says whether the model takes instructions, function.api.sse shapes `stream_format="sse"`.

With COSYVOICE_API_KEYS set, every route but the probes and the docs needs a key (function.api.keys); each
key, SigV4 pair (function.polly.sigv4) or API Gateway identity (function.api.gateway) names the tenant the
request acts for, and a route sees only that tenant's jobs, voices, lexicons and tasks.

GET /metrics is Prometheus' (function.observe.metrics), open like the probes.

The middleware, outermost first: request ids, the request's log line and metrics
(function.api.request_ids); the header limit and the last-resort 500 (Guard); who calls (RequireKey, or
RequireSignature under /polly, which reads and checks the body too); admission control
(function.api.admission); the body limit (ReadBody). So a synthesis slot is only ever held by a caller
whose credentials were checked, and under /polly only once its whole signed body has arrived.

Every error leaves as {"error": {"code", "message", "request_id"}} with a 4xx status for the client's
mistakes and a bare 500 for ours (the traceback goes to the log, never into the response).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from function.api.admission import Admit, get_admission
from function.api.error_replies import error_reply
from function.api.keys import RequireKey
from function.api.request_ids import RequestIds
from function.api.sse import MEDIA_TYPE as EVENT_STREAM
from function.api.sse import SpeechEvents
from function.api.voice_routes import router as voice_router
from function.core.errors import InvalidRequest, TTSError
from function.core.formats import FORMATS
from function.core.options import SynthesisOptions
from function.core.script import MARK_TYPES, MarkType
from function.http.bodies import BodyTooLarge, read_body, replaying
from function.http.context import SYNTHESIS, caller_of
from function.http.streams import SynthesisStream
from function.instance.model import get_engine, loaded_engine
from function.instance.settings import get_settings
from function.instance.startup import STARTUP
from function.jobs.routes import router as job_router
from function.markup.marks import MARKS_MEDIA_TYPE, marked_lines, marks_jsonl
from function.polly.routes import polly_router
from function.polly.sigv4 import RequireSignature
from function.service.deadlines import http_deadline
from function.service.schema import ErrorBody, OpenAISpeechRequest, SpeechRequest, describe
from function.service.synthesis import STREAMING_TRANSPORT, Allowance, Synthesis, prepare
from function.voices.library import is_voice_id
from function.voices.openai import resolve_voice, takes_instructions, usable_voices

logger = logging.getLogger(__name__)

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Invalid request (bad values, unknown speaker or format)."},
    413: {
        "model": ErrorBody,
        "description": "Text, body or audio too large for this path, or more work than its time allows.",
    },
    422: {"model": ErrorBody, "description": "The body does not match the schema (types, missing fields)."},
    429: {"model": ErrorBody, "description": "Every synthesis slot and queue place taken: see Retry-After."},
    504: {"model": ErrorBody, "description": "Synthesis stopped at the request's time limit."},
}
_AUDIO: dict[int | str, dict[str, Any]] = {
    200: {"description": "Encoded audio.", "content": {f.media_type: {} for f in FORMATS.values()}},
    **_ERRORS,
}
_SPEECH: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Encoded audio, or with stream_format=sse OpenAI's speech.audio.* events.",
        "content": {**_AUDIO[200]["content"], EVENT_STREAM: {}},
    },
    **_ERRORS,
}
# Read by function.core.deadline (not a FastAPI parameter, so a bad value gets the same 400 on every edge).
_TIMEOUT_HEADER: dict[str, Any] = {
    "parameters": [
        {
            "name": "X-Request-Timeout",
            "in": "header",
            "required": False,
            "schema": {"type": "number", "exclusiveMinimum": 0},
            "description": "Seconds the caller will wait: longer work is refused (413) or stopped (504).",
        }
    ]
}
# What X-Instructions says when a request's instructions were not used.
INSTRUCTIONS_IGNORED = "ignored: this model has no instruct mode (export a CosyVoice-300M-Instruct model)"
INSTRUCTIONS_CLONED = "ignored: a saved voice speaks as its recording does"


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _wedged() -> str | None:
    """Why this process cannot recover by itself (function.api.watchdog), or None."""
    watchdog = get_admission().watchdog
    return watchdog.wedged() if watchdog is not None else None


def allowance(request: Request, max_text_chars: int | None) -> Allowance:
    """What an HTTP request is allowed. Mangum buffers a Lambda response (6 MB, base64): streaming there
    would only dodge the size check. uvicorn and a streaming Function URL (function.awslambda.streaming)
    send the body as it is made."""
    settings = get_settings()
    streaming = bool(request.scope.get(STREAMING_TRANSPORT))
    return Allowance(max_text_chars, max_response_bytes=None if streaming else settings.max_response_bytes)


def synthesis_for(
    options: SynthesisOptions, request: Request, mark_types: tuple[MarkType, ...] = ()
) -> Synthesis:
    """The request through the service path (function.service.synthesis) as its caller's tenant, with the
    earliest of its deadlines (function.service.deadlines)."""
    settings = get_settings()
    options = replace(options, tenant=caller_of(request.scope).tenant)
    options = options.validated(settings.max_text_chars)  # before the deadline header is read
    deadline = http_deadline(request.scope, settings.max_request_seconds)
    return prepare(options, allowance(request, settings.max_text_chars), deadline, mark_types=mark_types)


def audio_response(synthesis: Synthesis, headers: dict[str, str] | None = None) -> Response:
    """The audio file: streamed (chunked) when asked for and the transport allows it, else whole."""
    headers = {**synthesis.headers, **(headers or {})}
    media = synthesis.output.media_type
    if synthesis.streamed:
        return SynthesisStream(synthesis.pieces(), synthesis, media, headers)
    return Response(synthesis.whole(), media_type=media, headers=headers)


def events_response(synthesis: Synthesis, events: SpeechEvents, headers: dict[str, str]) -> Response:
    """OpenAI's speech event stream: sent as it is made when the transport allows, else whole."""
    headers = {**synthesis.headers, **headers}
    if synthesis.streamed:
        return SynthesisStream(events.events(synthesis.pieces()), synthesis, EVENT_STREAM, headers)
    audio = synthesis.whole()
    assert isinstance(audio, bytes)  # an HTTP reply never spills
    return Response(b"".join(events.events([audio])), media_type=EVENT_STREAM, headers=headers)


def marks_response(synthesis: Synthesis, marks_only: bool) -> Response:
    """/v1/tts with speech marks (function.markup.marks): one JSON reply (audio base64 + marks), the
    marks alone as JSON lines, or, streamed, NDJSON lines with each mark before the audio it describes."""
    headers = synthesis.headers
    if marks_only:
        synthesis.drain()
        return Response(marks_jsonl(synthesis.marks), media_type=MARKS_MEDIA_TYPE, headers=headers)
    if synthesis.streamed:
        lines = marked_lines(synthesis.pieces(), synthesis.take_marks)
        return SynthesisStream(lines, synthesis, MARKS_MEDIA_TYPE, headers)
    return JSONResponse(synthesis.reply(), headers=headers)


def openai_speech_response(body: OpenAISpeechRequest, request: Request) -> Response:
    """POST /v1/audio/speech: the voice name resolved, instructions applied where the model takes them
    (X-Instructions says which), then synthesized like /v1/tts; `stream_format="sse"` as OpenAI's events."""
    settings = get_settings()
    engine = get_engine()
    saved = is_voice_id(body.voice_name)  # a saved voice's id goes on to the service path as it is
    speaker = body.voice_name if saved else resolve_voice(body.voice_name, settings.voices, engine.speakers)
    instructions = (body.instructions or "").strip() or None
    instructed = instructions is not None and not saved and takes_instructions(engine.artifact.manifest)
    headers: dict[str, str] = {}
    if instructions is not None:
        ignored = INSTRUCTIONS_CLONED if saved else INSTRUCTIONS_IGNORED
        headers["X-Instructions"] = "applied" if instructed else ignored
    options = body.to_options(speaker, instructions if instructed else None)
    if body.stream_format != "sse":
        return audio_response(synthesis_for(options, request), headers)
    # An event stream of SSML also carries its speech marks (function.api.sse).
    synthesis = synthesis_for(options, request, MARK_TYPES if options.script is not None else ())
    text_tokens = len(engine.tokenizer.encode(body.input))
    return events_response(synthesis, SpeechEvents(synthesis, text_tokens, engine.token_rate), headers)


def create_app() -> FastAPI:
    app = FastAPI(
        title="CosyVoice TTS",
        version="0.1.0",
        description="CosyVoice-300M text-to-speech on onnxruntime. Long texts: POST /v1/jobs.",
    )

    def synthesis(path: str, responses: dict[int | str, dict[str, Any]], summary: str) -> Any:
        """A synthesis route: admitted a few at a time (function.api.admission), with a deadline."""
        return app.post(
            path,
            response_class=Response,
            responses=responses,
            summary=summary,
            tags=[SYNTHESIS],
            openapi_extra=_TIMEOUT_HEADER,
        )

    @synthesis("/v1/tts", _AUDIO, "Synthesize speech")
    def tts(body: SpeechRequest, request: Request) -> Response:
        marks = body.mark_types()
        speech = synthesis_for(body.to_options(), request, marks)
        return marks_response(speech, body.marks_only) if marks else audio_response(speech)

    @synthesis("/v1/audio/speech", _SPEECH, "OpenAI-compatible speech")
    def openai_speech(body: OpenAISpeechRequest, request: Request) -> Response:
        return openai_speech_response(body, request)

    @app.get("/v1/speakers", summary="Built-in speakers, and the OpenAI voice names mapped onto them")
    def speakers() -> dict[str, Any]:
        engine = get_engine()
        return {
            "speakers": engine.speakers,
            "voices": usable_voices(get_settings().voices, engine.speakers),
            "instructions": takes_instructions(engine.artifact.manifest),
            "sample_rate": engine.sample_rate,
        }

    @app.get(
        "/healthz",
        summary="Liveness: the process answers, however busy, and has no stalled work it cannot end",
        responses={503: {"model": ErrorBody}},
    )
    async def healthz() -> Any:
        wedged = _wedged()
        if wedged is not None:
            return _error(503, "wedged", f"{wedged}: restart this instance")
        return {"status": "ok"}

    @app.get(
        "/readyz",
        summary="Readiness: loaded, not draining, room for another synthesis; the counts and startup phases",
        responses={503: {"model": ErrorBody}},
    )
    async def readyz() -> Any:
        admission = get_admission()
        if admission.draining:
            return _error(503, "draining", "the server is shutting down")
        wedged = _wedged()
        if wedged is not None:
            return _error(503, "wedged", wedged)
        if loaded_engine() is None:
            return _error(503, "not_ready", "the model is still loading")
        if admission.saturated:
            return _error(503, "saturated", admission.describe())
        return {"status": "ready", **admission.counts(), "phases_ms": STARTUP.milliseconds()}

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """Prometheus' exposition of function.observe.metrics, open like the probes; 404 when
        COSYVOICE_METRICS=off."""
        if not get_settings().metrics:
            return _error(404, "not_found", "metrics are off (COSYVOICE_METRICS=off)")
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    # Error handlers are async too: a plain def would wait for a thread of the busy synthesis pool.
    @app.exception_handler(TTSError)
    async def tts_error(_: Request, exc: TTSError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if any(item.get("type") == "json_invalid" for item in errors):
            return _error(400, "invalid_json", "the request body is not valid JSON")
        return _error(422, "invalid_request", describe(errors))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    app.include_router(job_router)
    app.include_router(voice_router)
    app.include_router(polly_router(synthesis_for))  # Polly's API, SigV4-signed (function.polly.sigv4)
    # Added innermost first: see the module's docstring for the order and why.
    app.add_middleware(ReadBody)
    app.add_middleware(Admit, routes=app.routes)  # outer than ReadBody: a refusal is answered unread
    app.add_middleware(RequireSignature)  # no valid signature and body, no slot
    app.add_middleware(RequireKey)  # no key, no slot
    app.add_middleware(Guard)
    app.add_middleware(RequestIds, routes=app.routes)
    return app


MAX_HEADER_BYTES = 16 * 1024  # API Gateway allows ~10 KB; uvicorn's parser would take far more


class HeadersTooLarge(InvalidRequest):
    code = "headers_too_large"
    status = 431


class InternalError(TTSError):
    """Ours, not the caller's: the traceback goes to the log, never into the response."""

    code = "internal_error"
    status = 500


class Guard:
    """ASGI middleware: caps request headers, and turns unexpected exceptions into a JSON 500, each in the
    shape of the request's API (function.api.error_replies)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        if sum(len(name) + len(value) for name, value in headers) > MAX_HEADER_BYTES:
            refused = HeadersTooLarge(f"request headers exceed {MAX_HEADER_BYTES} bytes")
            await error_reply(scope, refused)(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        except Exception:
            if started:  # too late for a status: let the server abort the connection
                raise
            logger.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            await error_reply(scope, InternalError("internal error"))(scope, receive, send)


class ReadBody:
    """ASGI middleware: reads the body whole within COSYVOICE_MAX_BODY_BYTES (FastAPI buffers it anyway),
    so a chunked upload cannot exceed the limit, and hands it on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(scope, receive, get_settings().max_body_bytes)
        except BodyTooLarge as refused:
            await error_reply(scope, refused)(scope, receive, send)
            return
        if body is not None:  # else the client went away
            await self.app(scope, replaying(body, receive), send)


app = create_app()

__all__ = ["app", "create_app"]
