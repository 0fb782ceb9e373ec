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

from function.core.errors import ArtifactError
from function.cosyvoice.artifact import Artifact, Manifest
from function.cosyvoice.contract import CORE_GRAPHS, GRAPHS, WEIGHT_ALIGNMENT, llm_decode_spec
from function.cosyvoice.graphs import Graph
from tests.conftest import estimator_feed


def test_runtime_imports_no_torch(tiny_artifact: Path) -> None:
    """The Lambda handler, model loaded, must not pull torch in (it is not even in the deployment zip)."""
    code = "import sys, function.awslambda.handler; sys.exit(10 if 'torch' in sys.modules else 0)"
    env = {**os.environ, "COSYVOICE_ARTIFACT": str(tiny_artifact), "COSYVOICE_WARMUP": "0"}
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[3], env=env)
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


def test_manifest_lists_every_external_tensor_where_the_graph_points(tiny_artifact: Path) -> None:
    manifest = Artifact.open(tiny_artifact).manifest
    assert manifest.graphs["flow_estimator"].external_tensors  # the tiny model has some to check
    for entry in manifest.graphs.values():
        model = onnx.load(str(tiny_artifact / entry.file), load_external_data=False)
        in_graph = {
            tensor.name: (int(where["offset"]), int(where["length"]), tuple(tensor.dims))
            for tensor in model.graph.initializer
            if (where := {item.key: item.value for item in tensor.external_data})
        }
        listed = {t.name: (t.offset, t.length, t.shape) for t in entry.external_tensors}
        assert listed == in_graph
        assert all(offset % WEIGHT_ALIGNMENT == 0 for offset, _, _ in listed.values())


def test_llm_graphs_share_their_common_tensors(tiny_artifact: Path) -> None:
    graphs = Artifact.open(tiny_artifact).manifest.graphs
    prefill = {t.name: t.offset for t in graphs["llm_prefill"].external_tensors}
    decode = {t.name: t.offset for t in graphs["llm_decode"].external_tensors}
    assert "lm.speech_embedding.weight" in decode
    assert all(prefill[name] == offset for name, offset in decode.items() if name in prefill)


def _in_memory(root: Path) -> dict[str, bytearray]:
    return {path.name: bytearray(path.read_bytes()) for path in root.iterdir()}


def test_memory_and_disk_sessions_agree(tiny_artifact: Path) -> None:
    on_disk = Artifact.open(tiny_artifact)
    in_memory = Artifact.from_files(_in_memory(tiny_artifact))
    mel = np.random.default_rng(0).standard_normal((1, 80, 20), dtype=np.float32)
    # hift_f0 is self-contained at this size; the estimator computes from weights.bin.
    for name, inputs in (("hift_f0", {"mel": mel}), ("flow_estimator", estimator_feed(frames=12))):
        disk, memory = (Graph.load(a, name, threads=1).run(**inputs) for a in (on_disk, in_memory))
        for output in disk:
            np.testing.assert_array_equal(disk[output], memory[output])


@pytest.mark.parametrize("on_disk", [True, False])
def test_sessions_compute_from_the_artifacts_buffer_not_a_copy(
    tiny_artifact: Path, tmp_path: Path, on_disk: bool
) -> None:
    """Zeroing the estimator's bytes in weights.bin (the file, or the S3 path's bytearray) changes what an
    already created session computes: onnxruntime reads the artifact's one buffer, not a copy of it."""
    copy = tmp_path / "artifact"
    shutil.copytree(tiny_artifact, copy)
    files = _in_memory(copy)
    artifact = Artifact.open(copy) if on_disk else Artifact.from_files(files)
    estimator = Graph.load(artifact, "flow_estimator", threads=1)
    inputs = estimator_feed(frames=12)
    before = estimator.run(**inputs)["velocity"]
    with (copy / "weights.bin").open("r+b") as handle:
        for tensor in artifact.graph("flow_estimator").external_tensors:
            files["weights.bin"][tensor.offset : tensor.offset + tensor.length] = bytes(tensor.length)
            handle.seek(tensor.offset)
            handle.write(bytes(tensor.length))
    after = estimator.run(**inputs)["velocity"]
    assert not np.array_equal(before, after)


def _with_estimator_tensors(root: Path, edit) -> dict[str, bytearray]:
    files = _in_memory(root)
    manifest = json.loads(files["manifest.json"])
    edit(manifest["graphs"]["flow_estimator"]["external_tensors"])
    files["manifest.json"] = bytearray(json.dumps(manifest).encode())
    return files


def test_a_tensor_the_manifest_misses_fails_loudly(tiny_artifact: Path) -> None:
    files = _with_estimator_tensors(tiny_artifact, lambda tensors: tensors.pop())
    with pytest.raises(ArtifactError, match="graph flow_estimator could not be loaded"):
        Graph.load(Artifact.from_files(files), "flow_estimator", threads=1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"offset": 1 << 40}, "lies outside weights.bin"),
        ({"length": 12}, "bytes do not hold"),
        ({"dtype": "no-such-type"}, "unknown dtype"),
        ({"stride": 4}, "manifest is malformed"),
    ],
)
def test_a_slice_outside_its_bytes_is_refused(tiny_artifact: Path, change: dict, message: str) -> None:
    files = _with_estimator_tensors(tiny_artifact, lambda tensors: tensors[0].update(change))
    with pytest.raises(ArtifactError, match=message):
        Artifact.from_files(files)


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
    artifact = Artifact.open(copy) if on_disk else Artifact.from_files(_in_memory(copy))
    with pytest.raises(ArtifactError, match="graph hift_f0 could not be loaded"):
        Graph.load(artifact, "hift_f0", threads=1)
