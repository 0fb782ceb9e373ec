"""Request ids: every reply names its request, and so does the request's one log line.

A request's id is, in order: API Gateway's own request id inside Lambda (its `requestContext.requestId`, so
the gateway's logs and ours meet), the caller's `X-Request-Id` when it is a sane one (1 to 128 letters,
digits and `._:-`, so it can go into a log line as it is), else a fresh one. Polly's API answers it as
`x-amzn-RequestId`, as Polly does (its SDKs put it in `ResponseMetadata.RequestId`); every other route as
`X-Request-Id`. The id goes on the scope for the routes and the audit trail (function.http.context).

When the reply has gone, one JSON line on stdout says what the request was and how it ended: its id,
method, path, status and tenant, and nothing of its body or credentials.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from function.api.gateway import EVENT
from function.http.context import caller_of, set_request_id
from function.polly.errors import is_polly_path

HEADER = "X-Request-Id"
POLLY_HEADER = "x-amzn-RequestId"
REQUEST_EVENT = "request"
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(scope: Scope) -> str:
    """The id of the request in `scope`: API Gateway's, else the caller's sane X-Request-Id, else new."""
    event = scope.get(EVENT)
    context = event.get("requestContext") if isinstance(event, dict) else None
    gateway = context.get("requestId") if isinstance(context, dict) else None
    if isinstance(gateway, str) and SANE_ID.fullmatch(gateway):
        return gateway
    asked = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
    return asked if SANE_ID.fullmatch(asked) else uuid.uuid4().hex


class RequestIds:
    """ASGI middleware, outermost: the request's id on its scope and its reply, and its log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = request_id(scope)
        set_request_id(scope, found)
        header = POLLY_HEADER if is_polly_path(scope.get("path", "")) else HEADER
        status: int | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[header] = found
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            line: dict[str, Any] = {
                "event": REQUEST_EVENT,
                "request_id": found,
                "method": scope.get("method"),
                "path": scope.get("path"),
                "status": status,
                "tenant": caller_of(scope).tenant,
            }
            print(json.dumps(line, ensure_ascii=False), flush=True)


__all__ = ["HEADER", "POLLY_HEADER", "RequestIds", "request_id"]
