"""The export tests' quantised artifacts: four from one run of the command line (one torch export).

Each quantisation test reads the artifact of its own weights; test_export_cli.py checks that an artifact
from such a run is the one its own export writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

# name → the --also spec of its weights (the first is the run's own OUT_DIR, flow int8 only)
QUANTISED = {
    "flow-int8": "flow=int8",
    "vocoder-int8": "vocoder=int8",
    "int4": "llm=int4,flow=int8,vocoder=int8",
    "fp32": "llm=fp32",  # last: after the quantised ones, it shows they left the shared graphs alone
}


@pytest.fixture(scope="session")
def quantised_run(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Path], str]:
    """The artifacts by name (QUANTISED), each with its quality report, and the run's stdout."""
    root = tmp_path_factory.mktemp("quantised")
    paths = {name: root / name for name in QUANTISED}
    also = [arg for name in list(QUANTISED)[1:] for arg in ("--also", f"{paths[name]}:{QUANTISED[name]}")]
    result = run_cli(
        "-m", "export", str(tiny_model_dir), str(paths["flow-int8"]), "--flow-weights", "int8", *also
    )
    assert result.returncode == 0, result.stderr
    return paths, result.stdout


@pytest.fixture(scope="session")
def quantised_artifacts(quantised_run: tuple[dict[str, Path], str]) -> dict[str, Path]:
    return quantised_run[0]
