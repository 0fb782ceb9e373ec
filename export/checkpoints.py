"""Read the released .pt files: state dicts and the SFT speaker table, refusing damaged ones clearly."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from export.errors import CheckpointError

REQUIRED_FILES = ("cosyvoice.yaml", "llm.pt", "flow.pt", "hift.pt")
OPTIONAL_FILES = ("spk2info.pt", "campplus.onnx", "speech_tokenizer_v1.onnx")


def check_model_dir(model_dir: Path) -> None:
    if not model_dir.is_dir():
        raise CheckpointError(f"{model_dir} is not a directory")
    missing = [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]
    if missing:
        raise CheckpointError(f"{model_dir} lacks {', '.join(missing)}")


def load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """torch.load with weights_only (no code runs from the file); a truncated zip is named as such."""
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError) as exc:
        raise CheckpointError(
            f"{path.name} cannot be read (truncated or not a torch checkpoint): {exc}"
        ) from exc
    if isinstance(loaded, dict) and "state_dict" in loaded and isinstance(loaded["state_dict"], dict):
        loaded = loaded["state_dict"]
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise CheckpointError(f"{path.name} is not a state dict of tensors")
    return {key: value.float() if value.is_floating_point() else value for key, value in loaded.items()}


def load_speakers(path: Path) -> dict[str, list[float]]:
    """spk2info.pt → {speaker: 192 floats}. Missing file (base model): no built-in speakers."""
    if not path.is_file():
        return {}
    try:
        table = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError) as exc:
        raise CheckpointError(f"{path.name} cannot be read: {exc}") from exc
    speakers: dict[str, list[float]] = {}
    for name, info in table.items():
        embedding = info.get("embedding") if isinstance(info, dict) else None
        if not isinstance(embedding, torch.Tensor) or embedding.numel() != 192:
            raise CheckpointError(f"{path.name}: speaker {name!r} has no 192-d embedding")
        speakers[str(name)] = [float(x) for x in embedding.reshape(-1).tolist()]
    return speakers


__all__ = [
    "OPTIONAL_FILES",
    "REQUIRED_FILES",
    "check_model_dir",
    "load_speakers",
    "load_state_dict",
]
