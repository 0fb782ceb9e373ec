"""Back-pressure under `serve`: synthesis admitted a few at a time, probes answered under full load, drain.

The first tests drive function.api.admission in this process with stand-in routes (no engine); the rest run
`python -m function serve` on the tiny artifact with one synthesis slot, so a handful of requests fill it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import Response, StreamingResponse
from starlette.types import ASGIApp, Message

from function.api import admission as admission_module
from function.api.admission import RETRY_AFTER_SECONDS, SYNTHESIS, Admission, Admit
from function.core.errors import Busy
from function.instance import settings as settings_module
from function.instance.settings import Settings
from tests.function.support import SPEAKER, start_serving, stop, wait_until

# --- the limiter in this process ---------------------------------------------------------------------


def test_requests_beyond_the_queue_are_refused_and_slots_pass_in_order() -> None:
    async def scenario() -> None:
        limit = Admission(capacity=1, max_queued=2)
        await limit.enter()
        first, second = asyncio.create_task(limit.enter()), asyncio.create_task(limit.enter())
        await asyncio.sleep(0)
        assert limit.counts() == {"in_flight": 1, "queued": 2, "capacity": 1} and limit.saturated
        with pytest.raises(Busy):
            await limit.enter()

        limit.leave()  # the slot passes to the first in line, not to whoever asks next
        await first
        assert (limit.in_flight, limit.queued, second.done()) == (1, 1, False)
        limit.leave()
        await second
        limit.leave()
        assert limit.counts() == {"in_flight": 0, "queued": 0, "capacity": 1} and not limit.saturated

    asyncio.run(scenario())


def test_a_request_cancelled_in_line_gives_up_its_place() -> None:
    async def scenario() -> None:
        limit = Admission(capacity=1, max_queued=1)
        await limit.enter()
        waiting = asyncio.create_task(limit.enter())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert limit.queued == 0
        limit.leave()
        assert limit.in_flight == 0

    asyncio.run(scenario())


def _stand_in(gate: asyncio.Event) -> FastAPI:
    """Routes shaped like the real app's: two tagged synthesis POSTs (one streamed), an untagged POST
    and a GET."""
    api = FastAPI()

    @api.post("/speak", tags=[SYNTHESIS])
    async def speak() -> Response:
        await gate.wait()
        return Response(b"audio")

    @api.post("/stream", tags=[SYNTHESIS])
    async def stream() -> StreamingResponse:
        async def chunks() -> Any:
            while True:  # until the client goes away
                yield b"chunk"
                await asyncio.sleep(0.01)

        return StreamingResponse(chunks())

    @api.post("/fail", tags=[SYNTHESIS])
    async def fail() -> Response:
        raise RuntimeError("synthesis broke")

    @api.post("/other")
    async def other() -> Response:
        return Response(b"other")

    @api.get("/look")
    async def look() -> Response:
        return Response(b"look")

    return api


class Exchange:
    """One request through an ASGI app, recording what it sent and whether it read the body."""

    def __init__(self, app: ASGIApp, method: str, path: str) -> None:
        self.app, self.method, self.path = app, method, path
        self.sent: list[Message] = []
        self.body_read = False
        self.gone = asyncio.Event()  # set: the client disconnects

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(next(m["headers"] for m in self.sent if m["type"] == "http.response.start"))

    async def receive(self) -> Message:
        if not self.body_read:
            self.body_read = True
            return {"type": "http.request", "body": b"{}", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    async def run(self) -> None:
        scope = {
            "type": "http",
            "method": self.method,
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json")],
        }
        await self.app(scope, self.receive, self.send)


def test_the_middleware_refuses_unread_beyond_capacity_and_lets_other_routes_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        limit = Admission(capacity=1, max_queued=1)
        monkeypatch.setattr(admission_module, "_admission", limit)
        gate = asyncio.Event()
        api = _stand_in(gate)
        app = Admit(api, api.routes)
        running, waiting = Exchange(app, "POST", "/speak"), Exchange(app, "POST", "/speak")
        tasks = [asyncio.create_task(running.run()), asyncio.create_task(waiting.run())]
        await asyncio.sleep(0.05)
        assert limit.counts() == {"in_flight": 1, "queued": 1, "capacity": 1}

        refused = Exchange(app, "POST", "/speak")
        await refused.run()
        assert refused.status == 429 and not refused.body_read
        assert refused.headers[b"retry-after"] == str(RETRY_AFTER_SECONDS).encode()
        assert b'"code":"busy"' in refused.sent[-1]["body"]
        for method, path in (("GET", "/look"), ("POST", "/other"), ("GET", "/speak")):
            passed = Exchange(app, method, path)
            await asyncio.wait_for(passed.run(), 1)  # never waits for a slot
            assert passed.status in (200, 405)

        gate.set()
        await asyncio.gather(*tasks)
        assert (running.status, waiting.status) == (200, 200)
        assert limit.counts() == {"in_flight": 0, "queued": 0, "capacity": 1}

    asyncio.run(scenario())


def test_the_slot_is_held_through_a_stream_and_released_on_disconnect_or_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        limit = Admission(capacity=1, max_queued=0)
        monkeypatch.setattr(admission_module, "_admission", limit)
        api = _stand_in(asyncio.Event())
        app = Admit(api, api.routes)

        streaming = Exchange(app, "POST", "/stream")
        task = asyncio.create_task(streaming.run())
        await asyncio.sleep(0.1)
        assert sum(m["type"] == "http.response.body" for m in streaming.sent) > 1  # the response is out
        assert limit.in_flight == 1  # its body still is not
        streaming.gone.set()
        await asyncio.wait_for(task, 5)
        assert limit.in_flight == 0

        with pytest.raises(RuntimeError, match="synthesis broke"):
            await Exchange(app, "POST", "/fail").run()
        assert limit.in_flight == 0

    asyncio.run(scenario())


def test_readiness_reports_loading_saturation_and_draining(monkeypatch: pytest.MonkeyPatch) -> None:
    from function.api import app as app_module

    limit = Admission(capacity=1, max_queued=0)
    monkeypatch.setattr(admission_module, "_admission", limit)
    # for Guard, and the request's metrics and line (function.api.request_ids)
    monkeypatch.setattr(settings_module, "_settings", Settings(artifact="unused"))

    async def readyz() -> httpx.Response:
        transport = httpx.ASGITransport(app=app_module.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/readyz")

    def code() -> str:
        return asyncio.run(readyz()).json()["error"]["code"]

    monkeypatch.setattr(app_module, "loaded_engine", lambda: None)
    assert code() == "not_ready"
    monkeypatch.setattr(app_module, "loaded_engine", lambda: object())
    ready = asyncio.run(readyz())
    assert ready.status_code == 200
    assert ready.json() | {"phases_ms": {}} == {
        "status": "ready",
        "in_flight": 0,
        "queued": 0,
        "capacity": 1,
        "phases_ms": {},
    }
    limit.in_flight = 1
    assert code() == "saturated"
    limit.drain()
    assert code() == "draining"


# POST routes that synthesise nothing, so need no slot: a job's submission stores it and queues a message
# (Polly's StartSpeechSynthesisTask is one).
UNADMITTED_POSTS = {"/v1/jobs", "/polly/v1/synthesisTasks"}


def test_every_post_route_of_the_app_is_a_synthesis_route_under_admission() -> None:
    """An untagged POST would run unlimited: a new route that does no synthesis is the exception to name
    here. Read from the OpenAPI document, which lists the routes of included routers too."""
    from function.api.app import app

    admit = next(m for m in app.user_middleware if m.cls is Admit)
    paths = app.openapi()["paths"]
    posts = {path: operation["post"] for path, operation in paths.items() if "post" in operation}
    synthesis = {path for path, post in posts.items() if SYNTHESIS in post.get("tags", ())}
    assert synthesis and set(posts) - synthesis == UNADMITTED_POSTS
    limiter = Admit(app.router, admit.kwargs["routes"])
    for path in posts:
        scope = {"type": "http", "method": "POST", "path": path, "root_path": ""}
        assert limiter.admits(scope) == (path in synthesis), path


# --- the server under load ---------------------------------------------------------------------------

ONE_SLOT = dict(COSYVOICE_MAX_CONCURRENT="1", COSYVOICE_MAX_QUEUED="2", COSYVOICE_THREADS="1")
# ~1.5 s of synthesis on the tiny model with one thread (seed 1): long enough to probe a saturated server.
LONG_TEXT = ("The quick brown fox jumps over the lazy dog, and keeps on running. " * 12)[:800]
REQUESTS = 48  # on a server of 1 slot and 2 places in line: 1 running, 2 queued, the rest refused
PROBE_TIMEOUT = 2.0  # the readiness probe's timeoutSeconds (infra/k8s/deployment.yaml)
SPEAK = {"text": LONG_TEXT, "speaker": SPEAKER, "seed": 1}
UNREADABLE = b'{"text": '  # a body that, once read, is a 400: answered 429, it was refused unread


class Load:
    """What the clients saw: the syntheses' answers, the probe rounds (/healthz, /readyz) and the
    answers to unreadable bodies sent while /readyz said `saturated`."""

    def __init__(self) -> None:
        self.syntheses: list[httpx.Response] = []
        self.rounds: list[tuple[httpx.Response, httpx.Response]] = []
        self.unreadable: list[httpx.Response] = []


async def _load(url: str) -> Load:
    """REQUESTS syntheses at once, and rounds of probes (/healthz, then /readyz, each on a new connection
    as kubelet makes them) until every synthesis is answered."""
    speak = httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=None))
    probe = httpx.AsyncClient(
        base_url=url, timeout=PROBE_TIMEOUT, limits=httpx.Limits(max_keepalive_connections=0)
    )
    load = Load()
    async with speak, probe:
        tasks = [asyncio.create_task(speak.post("/v1/tts", json=SPEAK)) for _ in range(REQUESTS)]
        while not all(task.done() for task in tasks):
            health, ready = await probe.get("/healthz"), await probe.get("/readyz")
            load.rounds.append((health, ready))
            if ready.status_code == 503 and ready.json()["error"]["code"] == "saturated":
                headers = {"content-type": "application/json"}
                load.unreadable.append(await speak.post("/v1/tts", content=UNREADABLE, headers=headers))
            await asyncio.sleep(0.02)
        load.syntheses = [task.result() for task in tasks]
    return load


@pytest.mark.engine
def test_a_saturated_server_answers_probes_and_refuses_the_excess_unread(
    artifact_location: str, tmp_path: Path
) -> None:
    process, url = start_serving(artifact_location, tmp_path / "server.log", **ONE_SLOT)
    try:
        load = asyncio.run(_load(url))
        after = httpx.get(f"{url}/readyz", timeout=5).json()
    finally:
        stop(process)

    accepted = [r for r in load.syntheses if r.status_code == 200]
    refused = [r for r in load.syntheses if r.status_code == 429]
    assert len(accepted) + len(refused) == REQUESTS, [r.text for r in load.syntheses]
    assert len(accepted) >= 3 and refused  # the slot and the queue's two places, then refusals
    assert all(r.content[:4] == b"RIFF" for r in accepted)
    for response in refused:
        assert response.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
        assert response.json()["error"]["code"] == "busy"
    # Refused before any work starts: a body the server would have answered 400 once read comes back
    # 429 while the slot is taken (400 only if a slot came free between the probe and the request).
    assert load.unreadable and {r.status_code for r in load.unreadable} <= {429, 400}
    assert any(r.status_code == 429 for r in load.unreadable), [r.text for r in load.unreadable]

    # Every probe was answered within the probe's own timeout (an httpx timeout would have raised), and
    # liveness said ok throughout, while the slot was taken and the queue full.
    assert all(health.json() == {"status": "ok"} for health, _ in load.rounds)
    readiness = [ready.json() for _, ready in load.rounds]
    saturated = {"error": {"code": "saturated", "message": ANY, "request_id": ANY}}
    assert saturated in readiness  # while the queue was full
    # The rounds that count are those whose /readyz saw the slot taken: `saturated`, or in_flight 1. A
    # server whose synthesis blocked its event loop would answer none of them.
    busy = [body for body in readiness if body.get("in_flight") == 1 or "error" in body]
    assert len(busy) >= 10, f"only {len(busy)} probe rounds while the slot was taken"
    assert after["status"] == "ready" and (after["in_flight"], after["queued"]) == (0, 0)


@pytest.mark.engine
def test_sigterm_drains_the_accepted_requests_and_exits_0(artifact_location: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    process, url = start_serving(artifact_location, log, **ONE_SLOT)
    results: list[httpx.Response] = []

    def speak() -> None:
        results.append(httpx.post(f"{url}/v1/tts", json=SPEAK, timeout=60))

    clients = [threading.Thread(target=speak) for _ in range(2)]
    try:
        for client in clients:
            client.start()

        def running_and_queued() -> bool:
            response = httpx.get(f"{url}/readyz", timeout=5)
            return response.status_code == 200 and response.json()["queued"] == 1

        wait_until(running_and_queued, process, 30, log)
        process.send_signal(signal.SIGTERM)

        def refuses_connections() -> bool:
            try:
                httpx.get(f"{url}/healthz", timeout=5)
            except httpx.ConnectError:
                return True
            return False

        wait_until(refuses_connections, process, 10, log)
        assert process.wait(timeout=60) == 0, log.read_text()
    finally:
        stop(process)
        for client in clients:
            client.join(timeout=60)
    assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
    assert all(r.content[:4] == b"RIFF" for r in results)


def test_the_drain_has_a_hard_end_whatever_a_request_is_doing(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn cuts what runs at the end of its graceful timeout, but a synthesis thread that does not
    return would keep the process alive: `drain_seconds` after SIGTERM it exits regardless."""
    import uvicorn

    from function.local import drain as drain_module

    exited: list[int] = []
    ended = threading.Event()
    monkeypatch.setattr(drain_module.os, "_exit", lambda status: (exited.append(status), ended.set()))
    limit = Admission(capacity=1, max_queued=0)
    limit.in_flight = 1  # a request that never ends
    server = drain_module.DrainingServer(uvicorn.Config(FastAPI()), limit, drain_seconds=0.3)
    assert server.config.timeout_graceful_shutdown == 0  # uvicorn cuts requests first
    server.handle_exit(signal.SIGTERM, None)
    assert limit.draining and server.should_exit
    assert ended.wait(30) and exited == [0]
