"""A streamed reply that stops its synthesis the moment the reply ends, however it ends.

Starlette's StreamingResponse draws a plain iterator on the thread pool; when the client goes away it
stops drawing and drops the iterator, and the engine's generators behind it are finalised whenever the
garbage collector finds them, on whatever thread it happens to run. `SynthesisStream` closes the
synthesis itself as soon as the response returns: sent to the end, cut by a disconnect, or cancelled.
No draw runs on another thread by then (a thread-pool call that a cancellation interrupts is waited for
before the cancellation is delivered), and closing only tells the engine's threads to stop, so it runs
here on the event loop, shielded from the cancellation that may have ended the reply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from function.service.synthesis import Synthesis


class SynthesisStream(StreamingResponse):
    """`body` (made from `synthesis`'s audio) sent as it is made; `synthesis` closed when the reply ends."""

    def __init__(
        self,
        body: Iterable[bytes],
        synthesis: Synthesis,
        media_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(body, media_type=media_type, headers=headers)
        self.synthesis = synthesis

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                self.synthesis.close()


__all__ = ["SynthesisStream"]
