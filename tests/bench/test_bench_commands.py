"""`python -m bench`'s commands parse without torch or a model, and refuse a missing model in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import main


@pytest.mark.parametrize("command", ["coldstart", "speed", "memory", "lambda", "all"])
def test_a_measurement_without_its_model_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--model", str(tmp_path), "--artifacts", str(tmp_path / "artifact")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"bench: error: need a model directory {tmp_path}") and "make bench" in line


def test_every_command_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    assert (
        "{coldstart,speed,memory,lambda,all,load,chunks,scaling,decode-batch,shared-decode,long-text,"
        "fanout,soak,dropped-streams,voices,observe,report,verify}" in usage
    )


@pytest.mark.parametrize("command", ["decode-batch", "shared-decode", "long-text", "observe"])
def test_a_decode_measurement_without_its_artifact_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--artifacts", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"bench: error: no artifact at {tmp_path}")


def test_decode_batch_measures_the_same_tokens_at_every_row_count(tiny_artifact: Path) -> None:
    from bench.batch_decode import decode

    one, three = (decode(tiny_artifact, rows, threads=1, segments=3, tokens=12) for rows in (1, 3))
    assert one["tokens"] == three["tokens"] == 36 and one["drawn"] == three["drawn"]
    assert (one["widest_step"], three["widest_step"]) == (1, 3)
    assert three["steps"] < one["steps"] and three["step_ms_per_token"] > 0 and three["peak_rss_mib"] > 0


def test_shared_decode_needs_a_request(tiny_artifact: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shared-decode", "--artifacts", str(tiny_artifact), "--requests", "0"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "bench: error: --requests must be at least 1, got 0"


def test_requests_at_once_share_the_decode_only_above_one_row(tiny_artifact: Path) -> None:
    from bench.shared_decode import speak_at_once

    alone, shared = (speak_at_once(tiny_artifact, rows, requests=2, threads=1) for rows in (1, 2))
    assert alone["shared_steps"] is None and shared["shared_steps"] > 0
    assert alone["audio_s"] > 0 and shared["audio_s"] > 0 and shared["peak_rss_mib"] > 0


def test_a_long_text_replayed_speaks_as_long_as_decoded(tiny_artifact: Path) -> None:
    from bench.long_text import REPLAYED, TEXT, speak

    text = TEXT[: TEXT.index(" Inside the library")]  # two segments: a quicker test
    decoded, replayed = (speak(tiny_artifact, rows, threads=1, text=text) for rows in (2, None))
    assert decoded["segments"] == replayed["segments"] >= 2 and replayed["rows"] == REPLAYED
    assert decoded["audio_s"] == replayed["audio_s"] > 0  # every segment draws its fixed token count


def test_an_artifact_is_current_only_in_the_runtimes_format(tiny_artifact: Path, tmp_path: Path) -> None:
    import json

    from bench.current import is_current
    from function.cosyvoice.contract import FORMAT_VERSION

    assert is_current(tiny_artifact) and not is_current(tmp_path)
    old = tmp_path / "old"
    old.mkdir()
    manifest = json.loads((tiny_artifact / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "format_version": FORMAT_VERSION - 1}))
    assert not is_current(old)
