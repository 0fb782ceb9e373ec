"""The exported tiny artifact: layout, manifest round trip, opening from disk and memory, refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from function.artifact import Artifact, Manifest
from function.contract import CORE_GRAPHS, GRAPHS, WEIGHT_ALIGNMENT, llm_decode_spec
from function.errors import ArtifactError
from function.graphs import Graph


def test_runtime_imports_no_torch(tiny_artifact: Path) -> None:
    """The Lambda handler, model loaded, must not pull torch in (it is not even in the deployment zip)."""
    code = "import sys, function.handler; sys.exit(10 if 'torch' in sys.modules else 0)"
    env = {**os.environ, "COSYVOICE_ARTIFACT": str(tiny_artifact), "COSYVOICE_WARMUP": "0"}
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2], env=env)
    assert result.returncode == 0


def test_layout_and_manifest_round_trip(tiny_artifact: Path) -> None:
    artifact = Artifact.open(tiny_artifact, verify_hashes=True)
    manifest = artifact.manifest
    assert Manifest.from_dict(json.loads(manifest.dumps())) == manifest
    assert {spec.name for spec in CORE_GRAPHS} <= set(manifest.graphs)
    assert len(manifest.speakers) == 7 and all(len(e) == 192 for e in manifest.speakers.values())
    assert manifest.weights.size == (tiny_artifact / "weights.bin").stat().st_size
    layers = sum(1 for s in manifest.graphs["llm_decode"].inputs if s.name.startswith("past_key_"))
    specs = {**GRAPHS, "llm_decode": llm_decode_spec(layers)}
    for name, entry in manifest.graphs.items():
        assert [s.name for s in entry.inputs] == specs[name].input_names
        assert [s.name for s in entry.outputs] == specs[name].output_names


def test_every_external_tensor_is_aligned(tiny_artifact: Path) -> None:
    manifest = Artifact.open(tiny_artifact).manifest
    for entry in manifest.graphs.values():
        if not entry.external_weights:
            continue
        model = onnx.load(str(tiny_artifact / entry.file), load_external_data=False)
        for tensor in model.graph.initializer:
            for item in tensor.external_data:
                if item.key == "offset":
                    assert int(item.value) % WEIGHT_ALIGNMENT == 0


def test_memory_and_disk_sessions_agree(tiny_artifact: Path) -> None:
    on_disk = Artifact.open(tiny_artifact)
    files = {path.name: path.read_bytes() for path in tiny_artifact.iterdir()}
    in_memory = Artifact.from_files(files)
    mel = np.random.default_rng(0).standard_normal((1, 80, 20), dtype=np.float32)
    outputs = [Graph.load(a, "hift_f0", threads=1).run(mel=mel)["f0"] for a in (on_disk, in_memory)]
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_truncated_weights_are_refused(tiny_artifact: Path, tmp_path: Path) -> None:
    copy = tmp_path / "artifact"
    shutil.copytree(tiny_artifact, copy)
    with (copy / "weights.bin").open("r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(ArtifactError, match="truncated"):
        Artifact.open(copy)


def test_wrong_format_version_is_refused(tiny_artifact: Path, tmp_path: Path) -> None:
    copy = tmp_path / "artifact"
    shutil.copytree(tiny_artifact, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["format_version"] = 999
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="format version 999"):
        Artifact.open(copy)


def test_not_an_artifact(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="manifest.json is missing"):
        Artifact.open(tmp_path)


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_damaged_graph_is_an_artifact_error_naming_it(tiny_artifact: Path, tmp_path: Path, on_disk) -> None:
    copy = tmp_path / "artifact"
    shutil.copytree(tiny_artifact, copy)
    graph = copy / "hift_f0.onnx"
    graph.write_bytes(bytes(reversed(graph.read_bytes())))  # same size: the manifest's size check passes
    artifact = (
        Artifact.open(copy)
        if on_disk
        else Artifact.from_files({p.name: p.read_bytes() for p in copy.iterdir()})
    )
    with pytest.raises(ArtifactError, match="graph hift_f0 could not be loaded"):
        Graph.load(artifact, "hift_f0", threads=1)
