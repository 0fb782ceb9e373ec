"""An -Instruct model is recognised by its real directory layouts, and the export flag wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from export import build
from export.__main__ import main
from export.build import is_instruct
from function.cosyvoice.artifact import Artifact
from function.voices.openai import takes_instructions
from tests.conftest import run_cli

SNAPSHOT = "hub/models--FunAudioLLM--CosyVoice-300M-Instruct/snapshots/9ab5f1e0c2d4"


def linked_copy(model_dir: Path, target: Path) -> Path:
    """`target` holding links to the model's files, as the Hugging Face cache links its snapshots' files."""
    target.mkdir(parents=True)
    for file in model_dir.iterdir():
        (target / file.name).symlink_to(file)
    return target


LAYOUTS = [
    ("CosyVoice-300M-Instruct", None, True),  # a plain directory, as released
    (SNAPSHOT, None, True),  # its resolved last name is the commit: "-Instruct" is higher up
    ("my-voice", "--instruct", True),  # huggingface-cli download --local-dir my-voice
    ("CosyVoice-300M-Instruct-copy", "--no-instruct", False),  # the flag wins over the name
]


@pytest.mark.parametrize(("layout", "flag", "instruct"), LAYOUTS)
def test_the_command_decides_the_kind_by_layout_and_flag(
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    flag: str | None,
    instruct: bool,
) -> None:
    """The command line hands the export the directory as given and the flag; what it decides from them
    is what the manifest records (the whole way once, below)."""
    model_dir = linked_copy(tiny_model_dir, tmp_path / layout)
    asked: list[tuple[Path, bool | None]] = []

    def export_artifacts(model: Path, targets: object, force: bool, instruct: bool | None) -> list[object]:
        asked.append((model, instruct))
        return []

    monkeypatch.setattr(build, "export_artifacts", export_artifacts)
    assert main([str(model_dir), str(tmp_path / "artifact"), *filter(None, [flag])]) == 0
    ((given, flag_value),) = asked
    assert given == model_dir and is_instruct(given, flag_value) is instruct


def test_an_exported_snapshot_of_an_instruct_model_takes_instructions(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    model_dir = linked_copy(tiny_model_dir, tmp_path / SNAPSHOT)
    out = tmp_path / "artifact"
    result = run_cli("-m", "export", str(model_dir), str(out), "--no-quality-report")
    assert result.returncode == 0, result.stderr
    manifest = Artifact.open(out).manifest
    assert manifest.source["instruct"] is True
    assert takes_instructions(manifest) is True


def test_the_kind_follows_the_path_as_given_unless_the_flag_says() -> None:
    assert is_instruct(Path("/models") / SNAPSHOT)
    assert is_instruct(Path("pretrained_models/CosyVoice-300M-Instruct"))
    assert not is_instruct(Path("pretrained_models/CosyVoice-300M-SFT"))
    assert not is_instruct(Path("my-voice"))
    assert is_instruct(Path("my-voice"), instruct=True)
    assert not is_instruct(Path("CosyVoice-300M-Instruct"), instruct=False)
