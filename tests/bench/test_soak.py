"""`bench soak`, short: half a minute of the mixed traffic against `serve` on the tiny artifact."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import soak
from bench.config import ROOT

SECONDS = 25.0
EXPECTED = {
    "short": "200",
    "long": "200",
    "openai": "200",
    "lone surrogate": "200",
    "abandoned stream": "200",
    "not json": "400",
    "wrong type": "422",
    "over the limit": "413",
    "unknown speaker": "400",
}


def test_a_short_soak_meets_no_5xx_and_every_probe_answered(tiny_artifact: Path) -> None:
    result = soak.run(ROOT, tiny_artifact, SECONDS, quiet_every=5.0)
    answered: dict[str, set[str]] = {}
    for kind, status in result.answers:
        answered.setdefault(kind, set()).add(status)
    assert set(answered) == set(soak.KINDS)  # every kind was sent
    assert result.server_errors == 0, result.answers
    assert result.unanswered_probes == 0 and len(result.probes) >= SECONDS / soak.PROBE_EVERY / 2
    # A synthesis route admits before it reads the body: any request there may meet a 429 first.
    for kind, status in EXPECTED.items():
        assert answered[kind] <= {status, "429"}, (kind, answered[kind])
    assert answered["no key"] == {"401"}  # refused before a slot: never a 429
    assert "200" in set().union(*answered.values()) and len(result.rss) >= 3
    # Quiet moments: the clients paused until the server had nothing in flight, and it was sampled.
    assert len(result.idle) >= 3 and all(size > 0 for _, size in result.idle)
    assert all("|" in table.render() for table in result.tables(settle=5.0))


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
