"""An -Instruct model is recognised by its real directory layouts, and the export flag wins."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    ("layout", "flag", "instruct"),
    [
        ("CosyVoice-300M-Instruct", None, True),  # a plain directory, as released
        (SNAPSHOT, None, True),  # its resolved last name is the commit: "-Instruct" is higher up
        ("my-voice", "--instruct", True),  # huggingface-cli download --local-dir my-voice
        ("CosyVoice-300M-Instruct-copy", "--no-instruct", False),  # the flag wins over the name
    ],
)
def test_exported_artifact_takes_instructions_by_layout(
    tiny_model_dir: Path, tmp_path: Path, layout: str, flag: str | None, instruct: bool
) -> None:
    model_dir = linked_copy(tiny_model_dir, tmp_path / layout)
    out = tmp_path / "artifact"
    result = run_cli("-m", "export", str(model_dir), str(out), "--no-quality-report", *filter(None, [flag]))
    assert result.returncode == 0, result.stderr
    manifest = Artifact.open(out).manifest
    assert manifest.source["instruct"] is instruct
    assert takes_instructions(manifest) is instruct


def test_the_kind_follows_the_path_as_given_unless_the_flag_says() -> None:
    assert is_instruct(Path("/models") / SNAPSHOT)
    assert is_instruct(Path("pretrained_models/CosyVoice-300M-Instruct"))
    assert not is_instruct(Path("pretrained_models/CosyVoice-300M-SFT"))
    assert not is_instruct(Path("my-voice"))
    assert is_instruct(Path("my-voice"), instruct=True)
    assert not is_instruct(Path("CosyVoice-300M-Instruct"), instruct=False)
