"""`python -m bench soak`: `serve` under minutes of mixed traffic on loopback, watched for leaks and 5xx.

CLIENTS clients loop through KINDS, each starting at its own place in the cycle: short and long texts on
/v1/tts and OpenAI's route, hostile bodies (not JSON, wrong types, a lone surrogate, a text over the
limit, an unknown speaker, no API key), and streams the client abandons after their first chunk. More
clients than the server's slots and queue places, so some are refused with 429 (and wait Retry-After).
Meanwhile /healthz is probed every PROBE_EVERY seconds on fresh connections and the server's resident
memory (VmRSS) is sampled every RSS_EVERY seconds. Every QUIET_EVERY seconds the clients pause until the
server has nothing in flight (its /readyz counts) and RSS is sampled once more: what the process holds
between requests, the figure a leak raises, apart from the working memory of the requests it is serving.

Prints RSS over time, the requests by kind and status, and the probes; the targets (issue 22): RSS
growth between requests after the first minute at most 5 %, no 5xx, every probe answered. The exit
status says whether they were met.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import serving
from bench.tables import Table

API_KEY = "soak-key"
MAX_TEXT_CHARS = 600
CLIENTS = 4
PROBE_EVERY = 0.5
PROBE_TIMEOUT = 5.0
RSS_EVERY = 5.0
QUIET_EVERY = 30.0
SETTLE_SECONDS = 60.0  # RSS growth is measured from here: the first minute fills caches and arenas
MAX_GROWTH = 0.05
SHORT = "Hello there, this is a short one."
LONG = ("The quick brown fox jumps over the lazy dog, and keeps on running. " * 9)[:MAX_TEXT_CHARS]
SERVER_SETTINGS = {
    "COSYVOICE_THREADS": "1",
    "COSYVOICE_MAX_CONCURRENT": "1",
    "COSYVOICE_MAX_QUEUED": "1",
    "COSYVOICE_MAX_TEXT_CHARS": str(MAX_TEXT_CHARS),
    "COSYVOICE_API_KEYS": API_KEY,
}

Send = Callable[[httpx.AsyncClient, str], Awaitable[int]]


def _json(body: object) -> dict[str, object]:
    # Escaped: a lone surrogate is valid JSON this way.
    return {"content": json.dumps(body), "headers": {"content-type": "application/json"}}


async def _post(client: httpx.AsyncClient, path: str, **request: object) -> int:
    return (await client.post(path, **request)).status_code  # type: ignore[arg-type]


async def _abandoned_stream(client: httpx.AsyncClient, speaker: str) -> int:
    body = {"text": LONG, "speaker": speaker, "stream": True}
    async with client.stream("POST", "/v1/tts", json=body) as response:
        if response.status_code == 200:
            async for _ in response.aiter_bytes():
                break  # the client goes away after the first chunk
        return response.status_code


def _tts(text: str) -> Send:
    return lambda client, speaker: _post(client, "/v1/tts", json={"text": text, "speaker": speaker})


def _hostile(**request: object) -> Send:
    return lambda client, _: _post(client, "/v1/tts", **request)


KINDS: dict[str, Send] = {
    "short": _tts(SHORT),
    "not json": _hostile(content=b'{"text": ', headers={"content-type": "application/json"}),
    "long": _tts(LONG),
    "wrong type": _hostile(json={"text": 5, "speed": "fast"}),
    "openai": lambda client, _: _post(
        client,
        "/v1/audio/speech",
        json={"model": "m", "input": SHORT, "voice": "alloy", "response_format": "opus"},
    ),
    "lone surrogate": lambda client, speaker: _post(
        client, "/v1/tts", **_json({"text": "\ud800 Hi\u200b there.", "speaker": speaker})
    ),
    "abandoned stream": _abandoned_stream,
    "over the limit": lambda client, speaker: _post(
        client, "/v1/tts", json={"text": "x" * (MAX_TEXT_CHARS + 1), "speaker": speaker}
    ),
    "unknown speaker": _hostile(json={"text": SHORT, "speaker": "nobody"}),
    "no key": lambda client, speaker: _unkeyed(client, speaker),
}


async def _unkeyed(client: httpx.AsyncClient, speaker: str) -> int:
    request = client.build_request("POST", "/v1/tts", json={"text": SHORT, "speaker": speaker})
    del request.headers["authorization"]
    return (await client.send(request)).status_code


@dataclass
class Soak:
    """What a soak saw."""

    seconds: float
    rss: list[tuple[float, int]] = field(default_factory=list)  # (seconds since start, bytes)
    idle: list[tuple[float, int]] = field(default_factory=list)  # the same, with nothing in flight
    answers: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, status) → requests
    probes: list[float] = field(default_factory=list)  # ms
    unanswered_probes: int = 0

    @property
    def server_errors(self) -> int:
        return sum(count for (_, status), count in self.answers.items() if not status.startswith(("2", "4")))

    def growth(self, settle: float = SETTLE_SECONDS) -> float | None:
        """Growth of the RSS between requests after `settle` s: the median of the last third of the idle
        samples since then over the median of the first third (one sample still moves with what the
        allocators keep of the last requests); None without three samples."""
        settled = [rss for at, rss in self.idle if at >= settle]
        third = len(settled) // 3
        if third == 0:
            return None
        return statistics.median(settled[-third:]) / statistics.median(settled[:third]) - 1

    def met(self, settle: float = SETTLE_SECONDS) -> bool:
        growth = self.growth(settle)
        return (
            self.server_errors == 0
            and self.unanswered_probes == 0
            and (growth is None or growth <= MAX_GROWTH)
        )

    def tables(self, settle: float = SETTLE_SECONDS) -> list[Table]:
        memory = Table(
            f"RSS of `serve` over {self.seconds / 60:.1f} min of mixed traffic",
            ["at", "between requests", "highest while serving, since the row above"],
        )
        step = max(1, -(-len(self.idle) // 12))  # at most 12 rows, evenly spaced, and the last sample
        shown = self.idle[::step] + ([self.idle[-1]] if (len(self.idle) - 1) % step else [])
        since = 0.0
        for at, rss in shown:
            busy = [sample for when, sample in self.rss if since <= when <= at]
            memory.add(f"{at:.0f} s", _mib(rss), _mib(max(busy)) if busy else "–")
            since = at
        growth = self.growth(settle)
        memory.notes.append(
            f"growth between requests after {settle:.0f} s: "
            + ("–" if growth is None else f"{growth * 100:+.2f} %")
            + f" (target ≤ {MAX_GROWTH * 100:.0f} %)"
        )
        requests = Table("Requests by kind and status", ["kind", "answers"])
        for kind in KINDS:
            statuses = sorted((status, n) for (k, status), n in self.answers.items() if k == kind)
            requests.add(kind, ", ".join(f"{n}× {status}" for status, n in statuses) or "–")
        requests.notes.append(f"5xx and errors: {self.server_errors} (target 0)")
        probes = Table(
            f"/healthz every {PROBE_EVERY} s",
            ["probes", f"unanswered ({PROBE_TIMEOUT:.0f} s)", "median", "slowest"],
        )
        median = f"{statistics.median(self.probes):.1f} ms" if self.probes else "–"
        slowest = f"{max(self.probes):.1f} ms" if self.probes else "–"
        probes.add(
            str(len(self.probes) + self.unanswered_probes), str(self.unanswered_probes), median, slowest
        )
        probes.notes.append("targets met" if self.met(settle) else "TARGETS MISSED")
        return [memory, requests, probes]


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def _traffic(url: str, pid: int, seconds: float, clients: int, quiet_every: float) -> Soak:
    soak = Soak(seconds)
    flowing = asyncio.Event()  # cleared while the server is let go quiet
    flowing.set()
    began = time.monotonic()
    end = began + seconds
    keyed = {"Authorization": f"Bearer {API_KEY}"}
    client = httpx.AsyncClient(
        base_url=url, timeout=120, headers=keyed, limits=httpx.Limits(max_connections=None)
    )
    probe = httpx.AsyncClient(
        base_url=url, timeout=PROBE_TIMEOUT, limits=httpx.Limits(max_keepalive_connections=0)
    )
    async with client, probe:
        speaker = (await client.get("/v1/speakers")).json()["speakers"][0]
        kinds = list(KINDS.items())

        async def loop(offset: int) -> None:
            turn = offset
            while time.monotonic() < end:
                await flowing.wait()
                kind, send = kinds[turn % len(kinds)]
                turn += 1
                try:
                    status = str(await send(client, speaker))
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                soak.answers[(kind, status)] += 1
                if status == "429":
                    await asyncio.sleep(1)  # Retry-After

        async def probing() -> None:
            while time.monotonic() < end:
                start = time.perf_counter()
                try:
                    (await probe.get("/healthz")).raise_for_status()
                    soak.probes.append((time.perf_counter() - start) * 1000)
                except httpx.HTTPError:
                    soak.unanswered_probes += 1
                await asyncio.sleep(PROBE_EVERY)

        async def sampling() -> None:
            while time.monotonic() < end:
                soak.rss.append((time.monotonic() - began, _rss(pid)))
                await asyncio.sleep(RSS_EVERY)
            soak.rss.append((time.monotonic() - began, _rss(pid)))

        async def quiet_moments() -> None:
            while time.monotonic() + quiet_every < end:
                await asyncio.sleep(quiet_every)
                flowing.clear()
                if await _until_idle(probe, end):
                    soak.idle.append((time.monotonic() - began, _rss(pid)))
                flowing.set()

        await asyncio.gather(
            *(loop(index * 3) for index in range(clients)), probing(), sampling(), quiet_moments()
        )
    return soak


async def _until_idle(probe: httpx.AsyncClient, end: float) -> bool:
    """Wait until the server has no synthesis in flight or queued (a stream its client abandoned ends at
    the server's next chunk, after the client has gone); False if it is still busy at `end`, so a stuck
    server ends the soak on time instead of holding it."""
    while time.monotonic() < end:
        try:
            counts = (await probe.get("/readyz")).json()
            if counts.get("in_flight") == 0 and counts.get("queued") == 0:
                return True
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.1)
    return False


def run(
    code: Path,
    artifact: Path,
    seconds: float,
    clients: int = CLIENTS,
    env: dict[str, str] | None = None,
    quiet_every: float = QUIET_EVERY,
) -> Soak:
    """Start `serve` from `code` on `artifact` with SERVER_SETTINGS (and `env`), soak it with a quiet
    moment every `quiet_every` s, stop it."""
    port = serving.free_port()
    url = f"http://127.0.0.1:{port}"
    server = serving.start(code, artifact, port, {**SERVER_SETTINGS, **(env or {})})
    try:
        serving.wait_ready(server, url)
        return asyncio.run(_traffic(url, server.pid, seconds, clients, quiet_every))
    finally:
        serving.stop(server)


__all__ = ["KINDS", "Soak", "run"]
