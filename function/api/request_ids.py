"""Request ids, and what each request leaves behind: its id on the reply, its log line, its metrics.

A request's id is, in order: API Gateway's own request id inside Lambda (its `requestContext.requestId`, so
the gateway's logs and ours meet), the caller's `X-Request-Id` when it is a sane one (1 to 128 letters,
digits and `._:-`, so it can go into a log line as it is), else a fresh one. Polly's API answers it as
`x-amzn-RequestId`, as Polly does (its SDKs put it in `ResponseMetadata.RequestId`); every other route as
`X-Request-Id`, and an error's body names it too (`{"error": {"code", "message", "request_id"}}`), so a
user's report of an error finds its log line. The id goes on the scope for the routes and the audit
trail (function.http.context).

The request is tallied (function.observe.tally) while it runs. When the reply has gone, one line says
what the request was and how it ended: its id, method, path and route template, status, tenant,
characters billed, audio seconds, duration and, streamed, the time to first audio; nothing of its body
or credentials. The same figures go to the Prometheus metrics (function.observe.metrics), and inside
Lambda the line carries them as embedded metrics (function.observe.embedded).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from function.api.gateway import EVENT
from function.api.route_templates import template_of
from function.core.emf import MILLISECONDS
from function.http.context import caller_of, set_request_id
from function.observe import embedded
from function.observe.metrics import count_request
from function.observe.tally import Tally, tallying
from function.polly.errors import ERROR_TYPE_HEADER, is_polly_path

HEADER = "X-Request-Id"
POLLY_HEADER = "x-amzn-RequestId"
REQUEST_EVENT = "request"
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
GONE = 499  # the status counted for a request whose caller went away before any reply


def request_id(scope: Scope) -> str:
    """The id of the request in `scope`: API Gateway's, else the caller's sane X-Request-Id, else new."""
    event = scope.get(EVENT)
    context = event.get("requestContext") if isinstance(event, dict) else None
    gateway = context.get("requestId") if isinstance(context, dict) else None
    if isinstance(gateway, str) and SANE_ID.fullmatch(gateway):
        return gateway
    asked = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
    return asked if SANE_ID.fullmatch(asked) else uuid.uuid4().hex


def naming(body: bytes, found: str) -> tuple[bytes, str | None]:
    """An error reply's JSON `body` with the request id `found` in its error, and the error's code;
    unchanged, and None, when the body is not the project's error shape."""
    try:
        document = json.loads(body)
    except ValueError:
        return body, None
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return body, None
    error["request_id"] = found
    code = error.get("code")
    return json.dumps(document, ensure_ascii=False).encode(), code if isinstance(code, str) else None


class RequestIds:
    """ASGI middleware, outermost: the request's id on its scope and its reply, its tally, its log line
    and its metrics. `routes`: the app's own list, for the route templates."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute] = ()) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = request_id(scope)
        set_request_id(scope, found)
        polly = is_polly_path(scope.get("path", ""))
        header = POLLY_HEADER if polly else HEADER
        status: int | None = None
        code: str | None = None
        held: Message | None = None  # an error reply's start, sent once its body names the request
        body = bytearray()

        async def send_with_id(message: Message) -> None:
            nonlocal status, code, held
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                headers[header] = found
                if polly:  # Polly's errors keep Polly's shape: the code is in a header
                    code = headers.get(ERROR_TYPE_HEADER)
                elif status >= 400 and headers.get("content-type", "").startswith("application/json"):
                    held = message
                    return
            elif message["type"] == "http.response.body" and held is not None:
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                named, code = naming(bytes(body), found)
                MutableHeaders(scope=held)["content-length"] = str(len(named))
                start, held = held, None
                await send(start)
                await send({"type": "http.response.body", "body": named})
                return
            await send(message)

        work = Tally()
        try:
            with tallying(work):
                await self.app(scope, receive, send_with_id)
        finally:
            self.finish(scope, found, work, GONE if status is None else status, code)

    def finish(self, scope: Scope, found: str, work: Tally, status: int, code: str | None) -> None:
        """The request's metrics, and its line (embedded metrics and all inside Lambda)."""
        route = template_of(self.routes, scope)
        tenant = caller_of(scope).tenant
        seconds = work.elapsed()
        first_audio = work.first_audio_seconds if work.streamed else None
        count_request(route, status, tenant, work, seconds, code)
        line: dict[str, Any] = {
            "event": REQUEST_EVENT,
            "request_id": found,
            "method": scope.get("method"),
            "path": scope.get("path"),
            "route": route,
            "status": status,
            "code": code,
            "tenant": tenant,
            "characters": work.characters,
            "audio_seconds": round(work.audio_seconds, 3),
            "duration_ms": round(seconds * 1000, 1),
            "first_audio_ms": None if first_audio is None else round(first_audio * 1000, 1),
        }
        metrics = {
            **embedded.status_counts(status),
            **embedded.work_metrics(work),
            "ResponseLatency": (line["duration_ms"], MILLISECONDS),
        }
        embedded.write(line, route, metrics)


__all__ = ["HEADER", "POLLY_HEADER", "RequestIds", "naming", "request_id"]
