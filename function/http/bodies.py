"""A request body read whole by a middleware, within the deployment's limit, then handed on to the app
as if it had not been read."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope

from function.core.errors import TTSError


class BodyTooLarge(TTSError):
    code = "body_too_large"
    status = 413


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body; None when the client went away first. BodyTooLarge beyond `limit` bytes, said by
    Content-Length or found while reading (a chunked upload has none)."""
    length = dict(scope.get("headers") or []).get(b"content-length", b"0")
    if length.isdigit() and int(length) > limit:
        raise BodyTooLarge(f"the request body exceeds {limit} bytes")
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
        if size > limit:
            raise BodyTooLarge(f"the request body exceeds {limit} bytes")
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that first gives `body` as the one request message, then what `receive` gives (the
    disconnect a streaming response listens for)."""
    pending: Message | None = {"type": "http.request", "body": body, "more_body": False}

    async def replay() -> Message:
        nonlocal pending
        if pending is None:
            return await receive()
        message, pending = pending, None
        return message

    return replay


__all__ = ["BodyTooLarge", "read_body", "replaying"]
