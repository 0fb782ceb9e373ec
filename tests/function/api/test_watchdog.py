"""function.api.watchdog: a synthesis that makes no progress is failed, its slot given back, and work
that never ends makes /healthz fail; a synthesis that beats is left alone.

Stand-in synthesis routes (plain `def`, run on the thread pool like the real ones) under the real
admission middleware, with a watchdog of a fraction of a second.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import Response, StreamingResponse

from function.api import admission as admission_module
from function.api.admission import SYNTHESIS, Admission, Admit
from function.api.watchdog import Watchdog
from function.core.progress import beat
from function.instance import settings as settings_module
from function.instance.settings import Settings

STALL_SECONDS = 0.3
WAIT_SECONDS = 30  # only a broken watchdog makes a test wait this long


class Stuck:
    """Stand-in routes whose work hangs until `release` (as a wedged synthesis thread does)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.ended = threading.Event()
        self.app = FastAPI()

        @self.app.post("/stuck", tags=[SYNTHESIS])
        def stuck() -> Response:
            self._hang()
            return Response(b"late")

        @self.app.post("/beating", tags=[SYNTHESIS])
        def beating() -> Response:
            for _ in range(round(4 * STALL_SECONDS / 0.05)):  # four stall bounds of work, beating
                time.sleep(0.05)
                beat()
            return Response(b"done")

        @self.app.post("/stream", tags=[SYNTHESIS])
        def stream() -> StreamingResponse:
            def pieces() -> Iterator[bytes]:
                yield b"first"
                self._hang()
                yield b"never"

            return StreamingResponse(pieces())

    def _hang(self) -> None:
        try:
            assert self.released.wait(WAIT_SECONDS)
        finally:
            self.ended.set()


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> tuple[Admission, Watchdog, Stuck]:
    limit = Admission(capacity=1, max_queued=0)
    limit.watchdog = Watchdog(STALL_SECONDS)
    monkeypatch.setattr(admission_module, "_admission", limit)
    return limit, limit.watchdog, Stuck()


def client(app: FastAPI) -> httpx.AsyncClient:
    admitted = Admit(app, app.routes)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=admitted), base_url="http://test")


def test_a_synthesis_without_progress_is_failed_and_its_slot_given_back(
    watched: tuple[Admission, Watchdog, Stuck],
) -> None:
    limit, watchdog, stuck = watched

    async def scenario() -> None:
        async with client(stuck.app) as http:
            failed = await asyncio.wait_for(http.post("/stuck"), WAIT_SECONDS)
            assert failed.status_code == 503
            assert failed.json()["error"]["code"] == "stalled"
            assert limit.in_flight == 0 and watchdog.stalled == 1  # the slot is free again...
            assert watchdog.abandoned == 1 and watchdog.wedged() is None  # ...its work still runs
            await asyncio.sleep(STALL_SECONDS * 1.5)
            assert "still running" in (watchdog.wedged() or "")  # it did not end: cannot recover
            stuck.released.set()
            assert await asyncio.to_thread(stuck.ended.wait, WAIT_SECONDS)
            for _ in range(WAIT_SECONDS * 20):  # its task ends on the loop once its thread returns
                if watchdog.abandoned == 0:
                    break
                await asyncio.sleep(0.05)
            assert watchdog.abandoned == 0 and watchdog.wedged() is None

    asyncio.run(scenario())


def test_a_synthesis_that_beats_is_left_to_finish(watched: tuple[Admission, Watchdog, Stuck]) -> None:
    limit, watchdog, stuck = watched

    async def scenario() -> None:
        async with client(stuck.app) as http:
            done = await asyncio.wait_for(http.post("/beating"), WAIT_SECONDS)
        assert (done.status_code, done.content) == (200, b"done")
        assert watchdog.stalled == 0 and limit.in_flight == 0

    asyncio.run(scenario())


def test_a_started_stream_without_progress_is_cut(watched: tuple[Admission, Watchdog, Stuck]) -> None:
    limit, watchdog, stuck = watched

    async def scenario() -> None:
        async with client(stuck.app) as http:
            with pytest.raises(Exception, match="no progress"):
                async with http.stream("POST", "/stream") as response:
                    assert response.status_code == 200
                    await response.aread()
        assert limit.in_flight == 0 and watchdog.stalled == 1
        stuck.released.set()

    asyncio.run(scenario())


def test_healthz_fails_while_the_process_cannot_recover(monkeypatch: pytest.MonkeyPatch) -> None:
    from function.api import app as app_module

    limit = Admission(capacity=1, max_queued=0)
    monkeypatch.setattr(admission_module, "_admission", limit)
    # for Guard, and the request's metrics and line (function.api.request_ids)
    monkeypatch.setattr(settings_module, "_settings", Settings(artifact="unused"))
    monkeypatch.setattr(app_module, "loaded_engine", lambda: object())

    async def probe(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app_module.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.get(path)

    assert asyncio.run(probe("/healthz")).json() == {"status": "ok"}  # no watchdog: Lambda's case
    limit.watchdog = Watchdog(STALL_SECONDS)
    assert asyncio.run(probe("/healthz")).json() == {"status": "ok"}
    monkeypatch.setattr(limit.watchdog, "wedged", lambda: "1 LLM thread(s) told to stop still running")
    for path in ("/healthz", "/readyz"):
        answer = asyncio.run(probe(path))
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "wedged", path
