"""The HTTP API (FastAPI): served by uvicorn in containers, and by Mangum inside Lambda (function.handler).

Endpoints are plain `def`: synthesis is CPU-bound and blocking, so FastAPI runs it in its thread pool and
the event loop stays free for health checks. The model is never loaded here (no lifespan: Mangum would
run it on every invocation); routes borrow the process's engine from function.model.

Every error leaves as {"error": {"code", "message"}} with a 4xx status for the client's mistakes and a
bare 500 for ours (the traceback goes to the log, never into the response).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import chain
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from function.audio import iter_encode, media_type
from function.errors import TTSError
from function.formats import FORMATS
from function.model import get_engine, loaded_engine
from function.options import SynthesisOptions
from function.reply import reply_audio
from function.schema import ErrorBody, OpenAISpeechRequest, SpeechRequest, describe
from function.settings import get_settings
from function.startup import STARTUP

logger = logging.getLogger(__name__)

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Invalid request (bad values, unknown speaker or format)."},
    413: {"model": ErrorBody, "description": "Text, body or audio too large for this path."},
    422: {"model": ErrorBody, "description": "The body does not match the schema (types, missing fields)."},
}
_AUDIO: dict[int | str, dict[str, Any]] = {
    200: {"description": "Encoded audio.", "content": {f.media_type: {} for f in FORMATS.values()}},
    **_ERRORS,
}


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def synthesize_response(options: SynthesisOptions) -> Response:
    """Run the engine and encode; streamed (chunked) when asked and the transport allows it."""
    settings = get_settings()
    options = options.validated(settings.max_text_chars)
    engine = get_engine()
    headers = {"X-Sample-Rate": str(engine.sample_rate)}
    # Lambda (Mangum) buffers every response, so streaming there would only dodge the size check.
    if options.stream and settings.max_response_bytes is None:
        chunks = engine.stream(options)
        # Pull the first chunk now: input errors then still become a 4xx instead of a cut stream.
        first = next(chunks, None)
        audio: Iterator[Any] = chain([] if first is None else [first], chunks)
        body = iter_encode(audio, options.format, engine.sample_rate)
        return StreamingResponse(body, media_type=media_type(options.format), headers=headers)
    data = reply_audio(options, engine, settings)
    return Response(data, media_type=media_type(options.format), headers=headers)


def create_app() -> FastAPI:
    app = FastAPI(
        title="CosyVoice TTS",
        version="0.1.0",
        description="CosyVoice-300M text-to-speech on onnxruntime. Long jobs: the SQS batch path.",
    )

    @app.post("/v1/tts", response_class=Response, responses=_AUDIO, summary="Synthesize speech")
    def tts(request: SpeechRequest) -> Response:
        return synthesize_response(request.to_options())

    @app.post(
        "/v1/audio/speech", response_class=Response, responses=_AUDIO, summary="OpenAI-compatible speech"
    )
    def openai_speech(request: OpenAISpeechRequest) -> Response:
        return synthesize_response(request.to_options())

    @app.get("/v1/speakers", summary="Built-in speakers")
    def speakers() -> dict[str, Any]:
        engine = get_engine()
        return {"speakers": engine.speakers, "sample_rate": engine.sample_rate}

    @app.get("/healthz", summary="Liveness")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness, with the startup phases", responses={503: {"model": ErrorBody}})
    def readyz() -> Any:
        if loaded_engine() is None:
            return _error(503, "not_ready", "the model is still loading")
        return {"status": "ready", "phases_ms": STARTUP.milliseconds()}

    @app.exception_handler(TTSError)
    def tts_error(_: Request, exc: TTSError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if any(item.get("type") == "json_invalid" for item in errors):
            return _error(400, "invalid_json", "the request body is not valid JSON")
        return _error(422, "invalid_request", describe(errors))

    @app.exception_handler(HTTPException)
    def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    app.add_middleware(Guard)
    return app


MAX_HEADER_BYTES = 16 * 1024  # API Gateway allows ~10 KB; uvicorn's parser would take far more


class Guard:
    """ASGI middleware: caps request headers and body, and turns unexpected exceptions into a JSON 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        if sum(len(name) + len(value) for name, value in headers) > MAX_HEADER_BYTES:
            await _error(431, "headers_too_large", f"request headers exceed {MAX_HEADER_BYTES} bytes")(
                scope, receive, send
            )
            return
        limit = get_settings().max_body_bytes
        length = dict(headers).get(b"content-length", b"0")
        if length.isdigit() and int(length) > limit:
            await self._too_large(limit, scope, receive, send)
            return
        # Read the body here (FastAPI buffers it anyway), so a chunked upload cannot exceed the limit.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > limit:
                await self._too_large(limit, scope, receive, send)
                return
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is None:
                return await receive()
            message, body = body, None
            return message

        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, replay, tracked_send)
        except Exception:
            if started:  # too late for a status: let the server abort the connection
                raise
            logger.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            await _error(500, "internal_error", "internal error")(scope, receive, send)

    @staticmethod
    async def _too_large(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
        await _error(413, "body_too_large", f"the request body exceeds {limit} bytes")(scope, receive, send)


app = create_app()

__all__ = ["app", "create_app", "synthesize_response"]
