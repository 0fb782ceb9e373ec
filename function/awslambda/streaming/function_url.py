"""A Function URL event through the ASGI app, forwarded to Lambda as the app produces it.

The scope is Mangum's own (its HTTP API v2 handler: a Function URL event is payload format 2.0), so the
app sees exactly what it sees behind Mangum, `aws.event` and `aws.context` included. The app's
`http.response.start` becomes the prelude Lambda turns into the caller's status line and headers
(`{"statusCode", "headers", "cookies"}` and 8 NUL bytes), each `http.response.body` a chunk of the
streamed reply, sent as it comes. An error before the start is answered as a JSON 500 like any other
response; after the start the status has left, so the reply ends with the error trailers instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from mangum.handlers import HTTPGateway
from mangum.types import LambdaConfig
from starlette.types import ASGIApp, Message

from function.awslambda.streaming.client import LambdaContext, ResponseStream
from function.core.errors import TTSError
from function.service.synthesis import STREAMING_TRANSPORT

logger = logging.getLogger(__name__)

PRELUDE_END = b"\0" * 8  # what separates the prelude from the body
# Only the request side of Mangum's configuration is read (responses never go through Mangum here).
_MANGUM = LambdaConfig(api_gateway_base_path="/", text_mime_types=[], exclude_headers=[])
INTERNAL_ERROR = {"error": {"code": "internal_error", "message": "internal error"}}


def is_function_url(event: Any) -> bool:
    """Whether the event came through a Lambda Function URL (v2 payload on a *.lambda-url.* domain)."""
    if not isinstance(event, dict) or event.get("version") != "2.0":
        return False
    context = event.get("requestContext")
    return isinstance(context, dict) and ".lambda-url." in str(context.get("domainName", ""))


def prelude(status: int, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The HTTP prelude of a streamed reply: repeated headers joined with commas, Set-Cookie apart."""
    fields: dict[str, str] = {}
    cookies: list[str] = []
    for raw_name, raw_value in headers:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name == "set-cookie":
            cookies.append(value)
        else:
            fields[name] = f"{fields[name]},{value}" if name in fields else value
    document = {"statusCode": status, "headers": fields, "cookies": cookies}
    return json.dumps(document).encode() + PRELUDE_END


def _json_reply(stream: ResponseStream, status: int, body: dict[str, Any]) -> None:
    stream.write(prelude(status, [(b"content-type", b"application/json")]))
    stream.write(json.dumps(body).encode())
    stream.close()


async def stream_http(
    app: ASGIApp, event: dict[str, Any], context: LambdaContext, open_stream: Callable[[], ResponseStream]
) -> None:
    """Run `app` on the event; its reply goes out through the stream `open_stream` makes at the start."""
    gateway = HTTPGateway(event, context, _MANGUM)
    request: Message | None = {"type": "http.request", "body": gateway.body, "more_body": False}
    finished = asyncio.Event()
    stream: ResponseStream | None = None

    async def receive() -> Message:
        nonlocal request
        if request is not None:
            message, request = request, None
            return message
        await finished.wait()  # Starlette listens for a disconnect while streaming: none before the end
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal stream
        # Blocking writes on the event loop: this environment serves one request, and the app's
        # synthesis runs on a worker thread that only waits for these writes.
        if message["type"] == "http.response.start":
            stream = open_stream()
            stream.write(prelude(message["status"], message.get("headers", [])))
        elif message["type"] == "http.response.body" and stream is not None:
            stream.write(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    scope = {**gateway.scope, STREAMING_TRANSPORT: True}
    try:
        await app(scope, receive, send)
    except Exception as exc:
        if stream is None:
            logger.exception("unhandled error before the response started")
            _json_reply(open_stream(), 500, INTERNAL_ERROR)
            return
        logger.exception("the response stream broke off")
        body = exc.to_dict() if isinstance(exc, TTSError) else INTERNAL_ERROR
        stream.close(f"Function.{type(exc).__name__}", body)
        return
    finally:
        finished.set()
    if stream is None:  # the app returned without answering
        _json_reply(open_stream(), 500, INTERNAL_ERROR)
        return
    stream.close()


__all__ = ["PRELUDE_END", "is_function_url", "prelude", "stream_http"]
