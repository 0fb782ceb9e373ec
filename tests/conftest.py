"""Shared fixtures: one tiny random-weight model directory and its exported artifact per test run.

Both are built by the real command lines in a subprocess, so the test process itself never has to import
torch for them (runtime tests stay torch-free). Under pytest-xdist the workers of one run share them: the
first worker to ask builds them, the others wait for it and read the same directories (`shared_build`).
"""

from __future__ import annotations

import collections
import fcntl
import gc
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from function.cosyvoice.contract import FLOW_ESTIMATOR, WEIGHTS_FILE

ROOT = Path(__file__).resolve().parents[1]


# whisper's tokenizer vocabulary, as `make setup` extracts it (the Makefile exports the same variable).
os.environ.setdefault("COSYVOICE_WHISPER_ASSETS", str(ROOT / ".cache" / "whisper-assets"))

# Seconds each test file took (its tests' setup, call and teardown), from `pytest --store-durations`; only
# the order the files are handed to pytest-xdist's workers comes from them. A file not listed counts as long.
DURATIONS = Path(__file__).with_name("durations.json")
UNLISTED_SECONDS = 30.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-durations",
        action="store_true",
        help=f"write the seconds of each test file that ran to {DURATIONS.relative_to(ROOT)} at the end",
    )


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with --no-loadscope-reorder (`make test`), the longest files first, each file's
    tests in their own order.

    The workers take whole files as they run short (--dist loadfile), in this order: the files known to take
    long start early and the short ones fill in at the end, so that neither worker is left alone with a long
    file while the other has finished. (A worker's own --dist reads "no": the option it keeps is this one.)"""
    if not os.environ.get("PYTEST_XDIST_WORKER") or config.getoption("loadscopereorder", True):
        return
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_file(item.nodeid), index)
    rank = {name: (-seconds.get(name, UNLISTED_SECONDS), index) for name, index in first.items()}
    items.sort(key=lambda item: rank[_file(item.nodeid)])  # stable: a file's tests keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything collection loaded (torch, the upstream model code, hypothesis: millions of objects) is
    moved out of the cyclic collector's reach, so its full collections walk only what the tests make."""
    gc.freeze()


_measured: collections.Counter[str] = collections.Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[_file(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """--store-durations: this run's files over their earlier figures (in the process that saw every
    report: the only one, or pytest-xdist's controller)."""
    if not session.config.getoption("store_durations") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    seconds.update({name: round(total, 1) for name, total in _measured.items()})
    ordered = dict(sorted(seconds.items(), key=lambda pair: (-pair[1], pair[0])))
    DURATIONS.write_text(json.dumps(ordered, indent=0) + "\n")


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary directory of this whole run: under pytest-xdist the parent of the worker's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """`run_root/name`, built once per run by `build(path)` whichever process asks first.

    The others wait on a lock for it; a build that failed leaves no mark, so the next to ask builds (and
    fails) again rather than reading half a directory. `build` must write nothing but `path`."""
    root = run_root(tmp_path_factory)
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    done = path.with_name(f"{path.name}.done")
    with path.with_name(f"{path.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            build(path)
            done.touch()
    return path


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
    def build(path: Path) -> None:
        result = run_cli("-m", "export", "fake", "--size", "tiny", str(path))
        assert result.returncode == 0, result.stderr

    return shared_build(tmp_path_factory, "tiny/model", build)


@pytest.fixture(scope="session")
def tiny_artifact(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(path: Path) -> None:
        result = run_cli("-m", "export", str(tiny_model_dir), str(path))
        assert result.returncode == 0, result.stderr

    return shared_build(tmp_path_factory, "tiny/artifact", build)


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
