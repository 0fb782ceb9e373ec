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
    assert "{coldstart,speed,memory,lambda,all,load,chunks,scaling,soak,voices,report,verify}" in usage
