"""`python -m bench load`: health probes while `serve` is saturated, on loopback.

The shape of issue 12's observation: REQUESTS syntheses of an 800-character text sent at once to one
server, and /healthz probed every 20 ms on fresh connections (as kubelet probes) with a 5 s timeout,
until every synthesis is answered or the probe window ends. Prints how many probes timed out, their
median and slowest answer, and how the syntheses were answered (200, or 429 beyond the queue). Any
artifact serves (the probes do not depend on the model's size); `--code` runs another checkout's
function/ (the code before a change) against the same artifact.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from pathlib import Path

import httpx

from bench import serving
from bench.tables import Table

REQUESTS = 48
TEXT = ("The quick brown fox jumps over the lazy dog, and keeps on running. " * 12)[:800]
PROBE_TIMEOUT = 5.0
PROBE_EVERY = 0.02
SLOW_PROBE_MS = 100.0  # issue 12's bound for a probe of a saturated server
PROBE_WINDOW = 20.0  # seconds of probing at most; the syntheses still run to their end


async def _load(url: str, speaker: str) -> tuple[list[float], int, Counter[str]]:
    speak = httpx.AsyncClient(base_url=url, timeout=600, limits=httpx.Limits(max_connections=None))
    probe = httpx.AsyncClient(
        base_url=url, timeout=PROBE_TIMEOUT, limits=httpx.Limits(max_keepalive_connections=0)
    )
    latencies: list[float] = []
    timeouts = 0
    body = {"text": TEXT, "speaker": speaker, "seed": 1}
    async with speak, probe:
        tasks = [asyncio.create_task(speak.post("/v1/tts", json=body)) for _ in range(REQUESTS)]
        end = time.monotonic() + PROBE_WINDOW
        while not all(task.done() for task in tasks) and time.monotonic() < end:
            start = time.perf_counter()
            try:
                await probe.get("/healthz")
                latencies.append((time.perf_counter() - start) * 1000)
            except httpx.TimeoutException:
                timeouts += 1
            await asyncio.sleep(PROBE_EVERY)
        answers: Counter[str] = Counter()
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, BaseException):
                answers[type(outcome).__name__] += 1
            else:
                answers[str(outcome.status_code)] += 1
    return latencies, timeouts, answers


def run(code: Path, artifact: Path, env: dict[str, str]) -> Table:
    port = serving.free_port()
    url = f"http://127.0.0.1:{port}"
    server = serving.start(code, artifact, port, env)
    try:
        serving.wait_ready(server, url)
        speaker = httpx.get(f"{url}/v1/speakers", timeout=5).json()["speakers"][0]
        latencies, timeouts, answers = asyncio.run(_load(url, speaker))
    finally:
        serving.stop(server)
    table = Table(
        f"/healthz while {REQUESTS} syntheses of {len(TEXT)} characters arrive at once ({code})",
        [
            "probes",
            f"timed out ({PROBE_TIMEOUT:.0f} s)",
            f"over {SLOW_PROBE_MS:.0f} ms",
            "median",
            "slowest",
            "syntheses answered",
        ],
    )
    answered = ", ".join(f"{count}× {status}" for status, count in sorted(answers.items()))
    median = f"{statistics.median(latencies):.1f} ms" if latencies else "—"
    slowest = f"{max(latencies):.1f} ms" if latencies else "—"
    slow = sum(ms > SLOW_PROBE_MS for ms in latencies) + timeouts
    table.add(str(len(latencies) + timeouts), str(timeouts), str(slow), median, slowest, answered)
    table.notes.append("settings: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "defaults"))
    return table


__all__ = ["run"]
