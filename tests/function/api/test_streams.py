"""function.http.streams: a streamed reply closes its synthesis as soon as the reply ends, however it ends,
before the response returns and with the garbage collector off (so not through a finaliser)."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.types import Message

from function.http.streams import SynthesisStream


class Closing:
    """Stands in for a Synthesis: records when it was closed, and what was still unread."""

    def __init__(self) -> None:
        self.closed_on: str | None = None
        self.drawn = 0

    def pieces(self) -> Iterator[bytes]:
        for _ in range(1000):
            self.drawn += 1
            yield b"piece"

    def close(self) -> None:
        self.closed_on = threading.current_thread().name


async def exchange(response: SynthesisStream, hang_up_after: int | None) -> list[Message]:
    sent: list[Message] = []
    gone = asyncio.Event()

    async def receive() -> Message:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        bodies = sum(m["type"] == "http.response.body" for m in sent)
        if hang_up_after is not None and bodies >= hang_up_after:
            gone.set()
            await asyncio.sleep(0.05)  # the disconnect reaches the response while it streams

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/v1/tts", "headers": []}
    await response(scope, receive, send)
    return sent


@pytest.fixture
def no_collection() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collection")
def test_a_client_that_hangs_up_mid_stream_closes_the_synthesis_at_once() -> None:
    synthesis = Closing()
    response = SynthesisStream(synthesis.pieces(), synthesis, "audio/wav")  # type: ignore[arg-type]
    asyncio.run(exchange(response, hang_up_after=3))
    assert synthesis.closed_on == threading.main_thread().name  # here, before the response returned
    assert synthesis.drawn < 1000  # the client went away before the end


@pytest.mark.usefixtures("no_collection")
def test_a_stream_sent_to_its_end_closes_the_synthesis_too() -> None:
    synthesis = Closing()
    response = SynthesisStream(synthesis.pieces(), synthesis, "audio/wav")  # type: ignore[arg-type]
    sent = asyncio.run(exchange(response, hang_up_after=None))
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert synthesis.closed_on is not None and synthesis.drawn == 1000


@pytest.mark.usefixtures("no_collection")
def test_a_stream_that_fails_closes_the_synthesis() -> None:
    synthesis = Closing()

    def failing() -> Iterator[bytes]:
        yield b"piece"
        raise RuntimeError("the encoder broke")

    response = SynthesisStream(failing(), synthesis, "audio/wav")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="the encoder broke"):
        asyncio.run(exchange(response, hang_up_after=None))
    assert synthesis.closed_on is not None
