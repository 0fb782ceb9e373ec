"""The export command line: a good tiny export, and one readable line for every bad input."""

from __future__ import annotations

import json
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


def test_usage_errors_are_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    line = one_line_error(
        run_cli("-m", "export", str(tiny_model_dir), str(tmp_path / "a"), "--also", f"{tmp_path}/b:llm=int3")
    )
    assert "llm=int3" in line
    assert "--llm-weights" in one_line_error(run_cli("-m", "export", str(tiny_model_dir), "--llm-weights"))
    assert not (tmp_path / "a").exists()


def test_also_names_each_directory_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert "twice" in one_line_error(
        run_cli("-m", "export", str(tiny_model_dir), str(out), "--also", f"{out}:llm=int8")
    )
    assert not out.exists()


def _manifest(artifact: Path) -> dict:
    return json.loads((artifact / "manifest.json").read_text())


def test_artifacts_from_one_run_equal_separate_exports(
    tiny_model_dir: Path, tiny_artifact: Path, tmp_path: Path
) -> None:
    """`--also` shares the torch export only: each artifact is byte for byte what its own export writes.

    The quantised artifact comes first, so an fp32 artifact equal to the plain export also shows that
    quantising left the shared fp32 graphs alone."""
    together, fp32, single = tmp_path / "int4", tmp_path / "fp32", tmp_path / "int4-single"
    quantised = (
        "--llm-weights",
        "int4",
        "--flow-weights",
        "int8",
        "--vocoder-weights",
        "int8",
        "--no-quality-report",
    )
    result = run_cli(
        "-m", "export", str(tiny_model_dir), str(together), *quantised, "--also", f"{fp32}:llm=fp32"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("done in") == 2  # a summary per artifact
    assert run_cli("-m", "export", str(tiny_model_dir), str(single), *quantised).returncode == 0
    # The session's artifact was exported with the quality report on (how far fewer flow steps move the
    # mel); the report is a measurement beside the content, which must be the same.
    reported = _manifest(tiny_artifact)
    assert reported["export_options"].pop("flow_steps")["reference_steps"] == 10
    assert _manifest(fp32) == reported
    assert _manifest(together) == _manifest(single)
    assert _manifest(together)["weights"] != _manifest(fp32)["weights"]
