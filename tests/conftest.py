"""Shared fixtures: one tiny random-weight model directory and its exported artifact per test session.

Both are built by the real command lines in a subprocess, so the test process itself never has to import
torch for them (runtime tests stay torch-free).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from function.cosyvoice.contract import FLOW_ESTIMATOR, WEIGHTS_FILE

ROOT = Path(__file__).resolve().parents[1]


# whisper's tokenizer vocabulary, as `make setup` extracts it (the Makefile exports the same variable).
os.environ.setdefault("COSYVOICE_WHISPER_ASSETS", str(ROOT / ".cache" / "whisper-assets"))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def run_graph(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The first output of a one-input graph `model` (input "x"), run by onnxruntime as it stands."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def estimator_feed(frames: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A guidance batch of two for the flow estimator, shaped by the contract's spec; t is 0.3."""
    rng = np.random.default_rng(seed)
    dims = {"batch": 2, "n_mels": 80, "mel_len": frames}
    feed = {
        spec.name: rng.standard_normal([dims[str(dim)] for dim in spec.shape], dtype=np.float32)
        for spec in FLOW_ESTIMATOR.inputs
    }
    feed["t"] = np.full(dims["batch"], 0.3, np.float32)
    return feed


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / "model"
    result = run_cli("-m", "export", "fake", "--size", "tiny", str(path))
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="session")
def tiny_artifact(tiny_model_dir: Path) -> Path:
    path = tiny_model_dir.parent / "artifact"
    result = run_cli("-m", "export", str(tiny_model_dir), str(path))
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture
def damaged_artifact(tiny_artifact: Path, tmp_path: Path) -> Path:
    """The tiny artifact with one byte of weights.bin flipped: same size, other contents."""
    copy = tmp_path / "damaged"
    shutil.copytree(tiny_artifact, copy)
    with (copy / WEIGHTS_FILE).open("r+b") as weights:
        weights.seek(100_000)
        byte = weights.read(1)
        weights.seek(100_000)
        weights.write(bytes([byte[0] ^ 0xFF]))
    return copy
