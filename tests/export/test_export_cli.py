"""The export command line: a good tiny export, and one readable line for every bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from export.__main__ import main
from tests.conftest import run_cli


def test_fake_model_has_the_released_layout(tiny_model_dir: Path) -> None:
    names = {path.name for path in tiny_model_dir.iterdir()}
    assert {
        "cosyvoice.yaml",
        "llm.pt",
        "flow.pt",
        "hift.pt",
        "spk2info.pt",
        "campplus.onnx",
        "speech_tokenizer_v1.onnx",
    } <= names


def test_fake_model_is_reproducible(tiny_model_dir: Path, tmp_path: Path) -> None:
    import torch

    from export.fake import make_fake_model

    # The first came from `python -m export fake --size tiny` (tests/conftest.py); again, in this process.
    again = make_fake_model(tmp_path / "again", "tiny")
    for name in ("llm.pt", "flow.pt", "hift.pt"):
        first, second = torch.load(tiny_model_dir / name), torch.load(again / name)
        assert first.keys() == second.keys()
        assert all(torch.equal(first[key], second[key]) for key in first)


def one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("export: error:")
    return lines[0]


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line `python -m export ARGV` writes for a bad input, run in this process (the command's
    main; one case below runs it as its own process)."""
    try:
        code = main(list(argv))
    except SystemExit as exited:  # argparse's usage errors
        code = exited.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    return one_line_error(subprocess.CompletedProcess(argv, code, captured.out, captured.err))


def test_missing_checkpoint(tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "flow.pt").unlink()
    assert "flow.pt" in refused(capsys, str(broken), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_truncated_checkpoint(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    data = (broken / "llm.pt").read_bytes()
    (broken / "llm.pt").write_bytes(data[: len(data) // 2])
    line = one_line_error(run_cli("-m", "export", str(broken), str(tmp_path / "out")))
    assert "llm.pt" in line
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no half-written staging directory


def test_shape_mismatch_with_config(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    config = (broken / "cosyvoice.yaml").read_text()
    (broken / "cosyvoice.yaml").write_text(config.replace("llm_input_size: 64", "llm_input_size: 96"))
    refused(capsys, str(broken), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_existing_output_needs_force(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert "--force" in refused(capsys, str(tiny_model_dir), str(out))


def test_usage_errors_are_one_line(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(capsys, str(tiny_model_dir), str(tmp_path / "a"), "--also", f"{tmp_path}/b:llm=int3")
    assert "llm=int3" in line
    assert "--llm-weights" in refused(capsys, str(tiny_model_dir), "--llm-weights")
    assert not (tmp_path / "a").exists()


def test_also_names_each_directory_once(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert "twice" in refused(capsys, str(tiny_model_dir), str(out), "--also", f"{out}:llm=int8")
    assert not out.exists()


def _manifest(artifact: Path) -> dict:
    """The manifest less what the quality report measured (a run without the report has none of it)."""
    manifest = json.loads((artifact / "manifest.json").read_text())
    for measured in ("quality", "flow_steps"):
        manifest["export_options"].pop(measured, None)
    return manifest


def test_artifacts_from_one_run_equal_separate_exports(
    tiny_model_dir: Path, tiny_artifact: Path, quantised_run: tuple[dict[str, Path], str], tmp_path: Path
) -> None:
    """`--also` shares the torch export only: each artifact is byte for byte what its own export writes.

    In that run (tests/export/conftest.py) the quantised artifacts come first, so an fp32 artifact equal
    to the plain export also shows that quantising left the shared fp32 graphs alone."""
    together, stdout = quantised_run
    assert stdout.count("done in") == len(together)  # a summary per artifact
    single = tmp_path / "int4-single"
    quantised = ("--llm-weights", "int4", "--flow-weights", "int8", "--vocoder-weights", "int8")
    assert main([str(tiny_model_dir), str(single), *quantised, "--no-quality-report"]) == 0  # in this process
    assert _manifest(together["fp32"]) == _manifest(tiny_artifact)
    assert _manifest(together["int4"]) == _manifest(single)
    assert _manifest(together["int4"])["weights"] != _manifest(together["fp32"])["weights"]
