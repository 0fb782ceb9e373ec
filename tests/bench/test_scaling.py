"""`python -m bench scaling`: its counts, arithmetic and table, its refusals, and one run on the tiny artifact
(the machinery, not its timings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.scaling import rtf, speed_up, table, thread_counts


def test_the_counts_run_from_one_to_the_cpus_asked_for() -> None:
    assert list(thread_counts(1, 2)) == [1]
    assert list(thread_counts(6, 8)) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(("up_to", "cpus"), [(0, 2), (-1, 2), (3, 2)])
def test_counts_beyond_the_cpus_or_below_one_are_refused(up_to: int, cpus: int) -> None:
    with pytest.raises(ValueError, match=f"from 1 to the {cpus} CPU"):
        thread_counts(up_to, cpus)


def test_rtf_and_speed_up() -> None:
    assert rtf({"wall": 6.0, "audio_seconds": 4.0}) == 1.5
    assert rtf({"wall": 6.0, "audio_seconds": 0.0}) is None
    assert speed_up(0.5, 2.0) == 4.0
    assert speed_up(None, 2.0) is None and speed_up(0.5, None) is None


def _child(whole_wall: float, streamed_wall: float, first_chunk: float) -> dict:
    return {
        "whole": {"wall": whole_wall, "audio_seconds": 10.0},
        "streamed": {"wall": streamed_wall, "audio_seconds": 10.0, "first_chunk": first_chunk},
    }


def test_the_table_has_a_row_per_count_with_its_split_and_speed_up() -> None:
    rendered = table({2: _child(15.0, 14.0, 0.9), 1: _child(30.0, 27.0, 1.6)}, "artifact-int8", "ten_seconds")
    assert rendered.rows == [
        ("1", "decode 1, estimator 1, others 1", "3.00", "2.70", "1.60 s", "1.00×"),
        ("2", "decode 2, estimator 2 rows × 1, others 2", "1.50", "1.40", "900 ms", "2.00×"),
    ]


def test_without_the_one_thread_row_there_is_no_speed_up() -> None:
    (row,) = table({4: _child(10.0, 9.0, 0.5)}, "a", "ten_seconds").rows
    assert row[-1] == "–"


def test_a_missing_artifact_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", "--artifacts", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"bench: error: no artifact at {tmp_path}")


def test_more_threads_than_cpus_is_one_line(
    tiny_artifact: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("function.cosyvoice.graphs.available_cpus", lambda: 2)
    assert main(["scaling", "--artifacts", str(tiny_artifact), "--up-to", "3"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "bench: error: --up-to must be from 1 to the 2 CPU(s) this process may use, got 3"


def test_one_count_on_the_tiny_artifact_writes_its_figures(
    tiny_artifact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["scaling", "--artifacts", str(tiny_artifact), "--up-to", "1", "--text", "short"]
    assert main([*args, "--results", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "scaling.json").read_text())
    assert saved["command"] == "python -m bench scaling" and saved["machine"]["cpus"] >= 1
    (child,) = saved["data"]["threads"].values()
    assert child["whole"]["audio_seconds"] == child["streamed"]["audio_seconds"] > 0
    assert 0 < child["streamed"]["first_chunk"] < child["streamed"]["wall"]
    assert "| 1 " in capsys.readouterr().out
