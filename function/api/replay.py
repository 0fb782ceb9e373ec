"""A request body a middleware has read whole, handed on to the app as if it had not been read."""

from __future__ import annotations

from starlette.types import Message, Receive


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
