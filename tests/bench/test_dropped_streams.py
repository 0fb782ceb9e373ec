"""`python -m bench dropped-streams`, one short run against `serve` on the tiny artifact: clients that hang
up mid-stream leave a server that still answers, is healthy and stops on SIGTERM. The full load (several
runs of a minute) is the bench command's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import dropped_streams
from bench.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_run_of_dropped_streams_leaves_the_server_serving_and_stoppable(tiny_artifact: Path) -> None:
    run = dropped_streams.run_once(ROOT, tiny_artifact, seconds=8, clients=3)
    assert not run.wedged, run
    assert run.answers[("dropped stream", "200")] >= 2  # streams were opened and dropped mid-way
    assert run.answers[("whole", "200")] >= 1
    assert "wedged runs: 0 of 1" in dropped_streams.table([run], 8, 3).render()


def test_a_wedged_run_is_reported_and_fails_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    wedged = dropped_streams.Run(recovered="429", healthy=True, exit_seconds=None)
    assert wedged.wedged and not dropped_streams.Run(recovered="200", healthy=True, exit_seconds=0.4).wedged
    assert "wedged runs: 1 of 1" in dropped_streams.table([wedged], 8, 3).render()
    assert main(["dropped-streams", "--artifacts", "/nonexistent", "--runs", "1"]) == 2
    assert "no artifact at /nonexistent" in capsys.readouterr().err
