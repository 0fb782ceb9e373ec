"""`python -m bench observe`: what measuring costs, on the request path, with the metrics on against off in
the same run.

One process serves the app in-process (Starlette's TestClient: the whole middleware stack, the route, the
thread pool) on an artifact; each round sends every request twice back to back, once with
COSYVOICE_METRICS on and once off, which goes first alternating, so drift on the machine falls on both
sides alike. Reported per request: the median time each way, and the median of the pairs' differences
(on minus off) as a share of the off time. A request's log line is written
either way (only the metrics turn off), to /dev/null here: the figure is the metrics' cost, not a
terminal's. /readyz has no synthesis, so its share is the worst case; /v1/tts carries a real synthesis
on the artifact given. On a busy machine a synthesis varies far more than the metrics cost, so a note
gives that cost alone too: recording one streamed request's metrics, timed over many repetitions.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
import timeit
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.tables import Table

SPEECH = {"text": "Hello there, a short sentence to measure.", "seed": 1, "format": "pcm"}


def run(artifact: Path, rounds: int) -> Table:
    from starlette.testclient import TestClient

    from function.api.app import app
    from function.instance.model import get_engine
    from function.instance.settings import Settings, use_settings

    settings = Settings.from_env({"COSYVOICE_ARTIFACT": str(artifact), "COSYVOICE_WARMUP": "1"})
    use_settings(settings)
    engine = get_engine()
    requests: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "GET /readyz": ("GET", "/readyz", None),
        "POST /v1/tts": ("POST", "/v1/tts", {**SPEECH, "speaker": engine.speakers[0]}),
        "POST /v1/tts streamed": (
            "POST",
            "/v1/tts",
            {**SPEECH, "speaker": engine.speakers[0], "stream": True},
        ),
    }
    times: dict[tuple[str, bool], list[float]] = {(name, on): [] for name in requests for on in (True, False)}
    with TestClient(app) as client, open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        for index in range(rounds + 1):  # the first round warms both sides and is not counted
            for name, (method, path, body) in requests.items():
                for on in (True, False) if index % 2 else (False, True):
                    use_settings(replace(settings, metrics=on))
                    started = time.perf_counter()
                    response = client.request(method, path, json=body)
                    elapsed = time.perf_counter() - started
                    response.raise_for_status()
                    if index:
                        times[name, on].append(elapsed)
    table = Table(
        f"The request path with metrics on and off (median of {rounds}, in-process, {artifact.name})",
        ["request", "metrics on (ms)", "metrics off (ms)", "paired difference (ms)", "cost of measuring"],
    )
    for name in requests:
        measured, bare = statistics.median(times[name, True]), statistics.median(times[name, False])
        cost = f"{(measured - bare) / bare:+.1%}"
        table.add(
            name, f"{measured * 1000:.2f}", f"{bare * 1000:.2f}", f"{(measured - bare) * 1000:+.2f}", cost
        )
    table.notes.append(f"recording one streamed request's metrics alone: {recording_cost() * 1e6:.1f} µs")
    table.notes.append("the aim: at most 1 % on a synthesis; the log line is written either way")
    return table


def recording_cost(repeat: int = 20_000) -> float:
    """Seconds to count one streamed /v1/tts request in the Prometheus metrics (the metrics must be on)."""
    from function.observe.metrics import count_request
    from function.observe.tally import Tally

    work = Tally(
        characters=40, audio_seconds=3.0, compute_seconds=1.0, first_audio_seconds=0.3, streamed=True
    )
    return (
        timeit.timeit(lambda: count_request("/v1/tts", 200, "default", work, 1.2, None), number=repeat)
        / repeat
    )


__all__ = ["run"]
