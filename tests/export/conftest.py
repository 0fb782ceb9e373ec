"""The export tests' quantised artifacts: four from one run of the command line (one torch export).

Each quantisation test reads the artifact of its own weights; test_export_cli.py checks that an artifact
from such a run is the one its own export writes. Like the tiny artifact, the run is shared by the workers
of a pytest-xdist run (tests/conftest.py shared_build).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, shared_build

# name → the --also spec of its weights (the first is the run's own OUT_DIR, flow int8 only)
QUANTISED = {
    "flow-int8": "flow=int8",
    "vocoder-int8": "vocoder=int8",
    "int4": "llm=int4,flow=int8,vocoder=int8",
    "fp32": "llm=fp32",  # last: after the quantised ones, it shows they left the shared graphs alone
}
STDOUT = "stdout.txt"  # the run's, beside its artifacts


@pytest.fixture(scope="session")
def quantised_run(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Path], str]:
    """The artifacts by name (QUANTISED), each with its quality report, and the run's stdout."""

    def build(root: Path) -> None:
        root.mkdir()
        paths = {name: root / name for name in QUANTISED}
        also = [arg for name in list(QUANTISED)[1:] for arg in ("--also", f"{paths[name]}:{QUANTISED[name]}")]
        result = run_cli(
            "-m", "export", str(tiny_model_dir), str(paths["flow-int8"]), "--flow-weights", "int8", *also
        )
        assert result.returncode == 0, result.stderr
        (root / STDOUT).write_text(result.stdout)

    root = shared_build(tmp_path_factory, "quantised", build)
    return {name: root / name for name in QUANTISED}, (root / STDOUT).read_text()


@pytest.fixture(scope="session")
def quantised_artifacts(quantised_run: tuple[dict[str, Path], str]) -> dict[str, Path]:
    return quantised_run[0]
