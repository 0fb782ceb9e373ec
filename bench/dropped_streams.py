"""`python -m bench dropped-streams`: `serve` under clients that hang up mid-stream, then must still serve
and stop.

Each run starts `serve` (one synthesis slot, two places in line, COSYVOICE_DRAIN_SECONDS=DRAIN_SECONDS)
and sends CLIENTS clients at it for SECONDS: each in turn opens a streamed /v1/tts request, reads a few
bytes of it and hangs up, or sends a short whole request; a 429 waits its Retry-After. Then one request
must succeed within RECOVER_SECONDS (a 429 is retried: the slot may still be free only a moment later),
/healthz must answer 200, and SIGTERM must stop the process within the drain and a margin. A run in which
any of that fails is a wedged server, as the dropped streams used to leave one: every synthesis 429 and
SIGTERM ignored.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import serving
from bench.tables import Table

CLIENTS = 4
DRAIN_SECONDS = 10
EXIT_MARGIN_SECONDS = 10  # past the drain: the interpreter's own exit
RECOVER_SECONDS = 60.0  # the request that must succeed after the load may wait this long for a slot
SERVER_SETTINGS = {
    "COSYVOICE_THREADS": "1",
    "COSYVOICE_MAX_CONCURRENT": "1",
    "COSYVOICE_MAX_QUEUED": "2",
    "COSYVOICE_DRAIN_SECONDS": str(DRAIN_SECONDS),
}
STREAMED = ("The quick brown fox jumps over the lazy dog, and keeps on running. " * 8).strip()
WHOLE = "Hello there, a short one."
BYTES_BEFORE_HANGING_UP = 64


@dataclass
class Run:
    """What one run saw."""

    answers: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, status) → requests
    recovered: str = "–"  # the status of the request that must succeed after the load, or what failed
    healthy: bool = False  # /healthz answered 200 after it
    exit_seconds: float | None = None  # SIGTERM to exit; None: killed after the bound

    @property
    def wedged(self) -> bool:
        return self.recovered != "200" or not self.healthy or self.exit_seconds is None


async def _dropped_stream(client: httpx.AsyncClient, speaker: str) -> str:
    body = {"text": STREAMED, "speaker": speaker, "stream": True}
    async with client.stream("POST", "/v1/tts", json=body) as response:
        if response.status_code == 200:
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read >= BYTES_BEFORE_HANGING_UP:
                    break  # leaving the block closes the connection mid-stream
        return str(response.status_code)


async def _whole(client: httpx.AsyncClient, speaker: str) -> str:
    response = await client.post("/v1/tts", json={"text": WHOLE, "speaker": speaker})
    return str(response.status_code)


KINDS = {"dropped stream": _dropped_stream, "whole": _whole}


async def _client(url: str, speaker: str, first: int, end: float, run: Run) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        turn = first
        while time.monotonic() < end:
            kind = list(KINDS)[turn % len(KINDS)]
            turn += 1
            try:
                status = await KINDS[kind](client, speaker)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            run.answers[(kind, status)] += 1
            if status == "429":
                await asyncio.sleep(1.0)


async def _must_succeed(url: str, speaker: str) -> str:
    """The status of one whole request after the load, retried while it is refused for a busy slot."""
    give_up = time.monotonic() + RECOVER_SECONDS
    async with httpx.AsyncClient(base_url=url, timeout=RECOVER_SECONDS) as client:
        while True:
            try:
                status = str(
                    (await client.post("/v1/tts", json={"text": WHOLE, "speaker": speaker})).status_code
                )
            except httpx.HTTPError as exc:
                return type(exc).__name__
            if status != "429" or time.monotonic() >= give_up:
                return status
            await asyncio.sleep(1.0)


def run_once(code: Path, artifact: Path, seconds: float, clients: int) -> Run:
    """One run against a fresh server: the load, the request that must succeed, the probe, SIGTERM."""
    port = serving.free_port()
    url = f"http://127.0.0.1:{port}"
    server = serving.start(code, artifact, port, SERVER_SETTINGS)
    run = Run()
    try:
        serving.wait_ready(server, url)
        speaker = httpx.get(f"{url}/v1/speakers", timeout=10).json()["speakers"][0]

        async def load() -> None:
            end = time.monotonic() + seconds
            await asyncio.gather(*(_client(url, speaker, index, end, run) for index in range(clients)))
            run.recovered = await _must_succeed(url, speaker)

        asyncio.run(load())
        run.healthy = httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    finally:
        run.exit_seconds = _terminate(server)
    return run


def _terminate(server: subprocess.Popen[bytes]) -> float | None:
    """SIGTERM; seconds until the process exited, or None when it had to be killed."""
    if server.poll() is not None:
        return 0.0
    began = time.monotonic()
    server.terminate()
    try:
        server.wait(timeout=DRAIN_SECONDS + EXIT_MARGIN_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        return None
    return time.monotonic() - began


def table(runs: list[Run], seconds: float, clients: int) -> Table:
    result = Table(
        f"`serve` under {clients} clients for {seconds:g} s, streams dropped mid-way (one slot)",
        ["run", "dropped streams", "whole requests", "then a request", "/healthz", "SIGTERM to exit"],
    )
    for index, run in enumerate(runs, 1):
        by_kind = {
            kind: ", ".join(f"{n}× {status}" for (k, status), n in sorted(run.answers.items()) if k == kind)
            for kind in KINDS
        }
        exit_time = "killed" if run.exit_seconds is None else f"{run.exit_seconds:.1f} s"
        result.add(
            str(index),
            by_kind["dropped stream"] or "–",
            by_kind["whole"] or "–",
            run.recovered,
            "200" if run.healthy else "failed",
            exit_time,
        )
    wedged = sum(run.wedged for run in runs)
    result.notes.append(f"wedged runs: {wedged} of {len(runs)} (target 0)")
    return result


__all__ = ["Run", "run_once", "table"]
