"""`python -m bench chunks`: when a listener's playback would wait, from each chunk's arrival and length."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import main
from bench.chunks import Playback, playback


def test_chunks_that_arrive_before_they_are_due_leave_a_margin() -> None:
    # First chunk at 0.5 s holding 1 s: the second is due at 1.5 s and came at 1.2 s; the third is due at
    # 2.5 s (1.5 + its predecessor's 1 s) and came at 2.0 s.
    assert playback([0.5, 1.2, 2.0], [1.0, 1.0, 1.0]) == Playback(
        first=0.5, margin=pytest.approx(0.3), waited=0.0, rtf=pytest.approx(2.0 / 3.0)
    )


def test_a_late_chunk_makes_playback_wait_and_delays_what_follows() -> None:
    # The second chunk is due at 0.6 s but comes at 1.0 s: 0.4 s of silence; the third is then due at
    # 1.0 + 0.5 = 1.5 s and comes at 1.4 s, in time.
    played = playback([0.1, 1.0, 1.4], [0.5, 0.5, 0.5])
    assert played.margin == pytest.approx(-0.4)
    assert played.waited == pytest.approx(0.4)


def test_playback_needs_one_duration_per_chunk() -> None:
    with pytest.raises(ValueError):
        playback([0.1, 0.2], [0.5])
    with pytest.raises(ValueError):
        playback([], [])


def test_the_command_streams_each_size_on_a_real_artifact(
    tiny_artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each first size goes with the engine's later sizes."""
    from function.cosyvoice.engine import CHUNK_TOKENS

    assert main(["chunks", "--artifacts", str(tiny_artifact), "--sizes", "5,10", "--runs", "1"]) == 0
    later = ", ".join(map(str, CHUNK_TOKENS[1:]))
    labels = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if "|" in line]
    assert f"5, {later}" in labels and f"10, {later}" in labels


def test_the_command_streams_whole_schedules_alternating_them(
    tiny_artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["chunks", "--artifacts", str(tiny_artifact), "--schedules", "5,10;4,8,16", "--runs", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [
        line for line in out.splitlines() if line.startswith("| 5, 10 ") or line.startswith("| 4, 8, 16 ")
    ]
    assert len(rows) == 2
    assert "streamed RTF" in out


@pytest.mark.parametrize("sizes", ["ten", "0,5", "", "5;10"])
def test_bad_sizes_are_one_line(sizes: str, tiny_artifact: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chunks", "--artifacts", str(tiny_artifact), "--sizes", sizes]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: error: --sizes")


@pytest.mark.parametrize("schedules", ["10,x", "10,50;0", "10;;20"])
def test_bad_schedules_are_one_line(
    schedules: str, tiny_artifact: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["chunks", "--artifacts", str(tiny_artifact), "--schedules", schedules]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: error: --schedules")


def test_a_missing_artifact_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chunks", "--artifacts", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: error: no artifact at")
