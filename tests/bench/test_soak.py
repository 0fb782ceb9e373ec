"""`bench soak`'s own parts, without a server: the targets' arithmetic, the tables, the wait for a quiet
server, the requests each kind sends, and the command's argument checks.

Soaking `serve` itself takes minutes and belongs to `python -m bench soak`; each kind's status from the
real server is tested in tests/function/api (test_http_api.py, test_api_keys.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import soak
from bench.__main__ import main


def test_the_targets_are_missed_by_a_5xx_an_unanswered_probe_or_growth() -> None:
    clean = soak.Soak(
        60, idle=[(0, 100), (60, 100), (90, 130), (120, 104)], answers=Counter({("short", "200"): 3})
    )
    assert clean.met() and clean.growth() == pytest.approx(0.04)  # a passing peak is not growth
    assert not soak.Soak(60, idle=clean.idle, answers=Counter({("short", "500"): 1})).met()
    assert not soak.Soak(60, idle=clean.idle, answers=Counter({("long", "ReadTimeout"): 1})).met()
    assert not soak.Soak(60, idle=clean.idle, unanswered_probes=1).met()
    assert not soak.Soak(60, idle=[(0, 100), (60, 100), (90, 103), (120, 106)]).met()
    assert soak.Soak(60, idle=[(0, 100), (60, 100)]).growth() is None
    # Growth is the RSS between requests: what a request holds while it is served is not counted.
    busy = soak.Soak(60, rss=[(60, 100), (90, 200), (120, 300)], idle=[(60, 100), (90, 100), (120, 101)])
    assert busy.met()


def test_the_tables_show_memory_requests_by_kind_and_probes() -> None:
    mib = 2**20
    result = soak.Soak(
        120,
        rss=[(10, 150 * mib), (50, 190 * mib), (100, 180 * mib)],
        idle=[(30, 100 * mib), (60, 100 * mib), (90, 101 * mib), (120, 102 * mib)],
        answers=Counter({("short", "200"): 4, ("short", "429"): 1, ("no key", "401"): 2}),
        probes=[3.0, 5.0, 40.0],
    )
    memory, requests, probes = (table.render() for table in result.tables(settle=30))
    assert "2.0 min" in memory and "190.0 MiB" in memory and "+2.00 %" in memory
    assert "4× 200, 1× 429" in requests and "2× 401" in requests and "5xx and errors: 0" in requests
    assert "40.0 ms" in probes and "targets met" in probes
    assert "TARGETS MISSED" in soak.Soak(1, unanswered_probes=1).tables()[2].render()


def serve_readiness(answers: list[dict[str, int]]) -> Callable[[httpx.Request], httpx.Response]:
    """A stand-in /readyz answering `answers` in turn, then the last one again."""
    calls = iter(answers)
    last: list[dict[str, int]] = [answers[-1]]

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/readyz"
        last[0] = next(calls, last[0])
        return httpx.Response(200, json=last[0])

    return answer


def test_a_quiet_moment_waits_for_nothing_in_flight_or_queued_and_gives_up_at_the_end() -> None:
    async def until_idle(answers: list[dict[str, int]], seconds: float) -> bool:
        transport = httpx.MockTransport(serve_readiness(answers))
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as probe:
            return await soak._until_idle(probe, time.monotonic() + seconds)

    busy, queued, idle = (
        {"in_flight": 1, "queued": 0},
        {"in_flight": 0, "queued": 1},
        {"in_flight": 0, "queued": 0},
    )
    assert asyncio.run(until_idle([busy, queued, idle], seconds=30))
    assert not asyncio.run(until_idle([busy], seconds=0.3))  # a stuck server ends the soak on time


def sent(kind: str) -> httpx.Request:
    """The request `kind` sends (to a stand-in server that streams two chunks of audio)."""
    requests: list[httpx.Request] = []

    async def audio() -> AsyncIterator[bytes]:
        yield b"RIFF"
        yield b"more"

    def record(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, content=audio())

    async def send() -> int:
        transport = httpx.MockTransport(record)
        headers = {"Authorization": f"Bearer {soak.API_KEY}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://serve", headers=headers) as client:
            return await soak.KINDS[kind](client, "voice")

    assert asyncio.run(send()) == 200
    (request,) = requests
    return request


def test_each_kind_sends_the_request_it_is_named_for() -> None:
    def body(kind: str) -> Any:
        return json.loads(sent(kind).read())

    assert body("short") == {"text": soak.SHORT, "speaker": "voice"}
    assert body("long") == {"text": soak.LONG, "speaker": "voice"} and len(soak.LONG) == soak.MAX_TEXT_CHARS
    assert len(body("over the limit")["text"]) == soak.MAX_TEXT_CHARS + 1
    assert body("unknown speaker")["speaker"] == "nobody"
    assert body("wrong type") == {"text": 5, "speed": "fast"}
    assert body("abandoned stream")["stream"] is True
    assert body("lone surrogate")["text"].startswith("\ud800")
    with pytest.raises(json.JSONDecodeError):
        body("not json")
    assert sent("openai").url.path == "/v1/audio/speech"
    assert "authorization" in sent("short").headers and "authorization" not in sent("no key").headers


def test_the_command_refuses_a_missing_artifact_and_impossible_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["soak", "--artifacts", str(tmp_path)]) == 2
    assert "no artifact at" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text("{}")  # the command looks for the manifest, then the flags
    for flags in (["--minutes", "0"], ["--minutes", "1441"], ["--clients", "0"]):
        assert main(["soak", "--artifacts", str(tmp_path), *flags]) == 2, flags
        assert "--minutes must be in (0, 1440]" in capsys.readouterr().err
