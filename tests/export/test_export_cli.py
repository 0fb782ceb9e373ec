"""The export command line: a good tiny export, and one readable line for every bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

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
    again = tmp_path / "again"
    assert run_cli("-m", "export", "fake", "--size", "tiny", str(again)).returncode == 0
    import torch

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


def test_missing_checkpoint(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "flow.pt").unlink()
    assert "flow.pt" in one_line_error(run_cli("-m", "export", str(broken), str(tmp_path / "out")))
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


def test_shape_mismatch_with_config(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    config = (broken / "cosyvoice.yaml").read_text()
    (broken / "cosyvoice.yaml").write_text(config.replace("llm_input_size: 64", "llm_input_size: 96"))
    one_line_error(run_cli("-m", "export", str(broken), str(tmp_path / "out")))


def test_existing_output_needs_force(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert "--force" in one_line_error(run_cli("-m", "export", str(tiny_model_dir), str(out)))
