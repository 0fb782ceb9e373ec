"""The weights file: every external tensor 64 KiB-aligned, shared tensors stored once, writes atomic."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export.writer import staging_directory, write_graphs
from function.cosyvoice.contract import INLINE_LIMIT, WEIGHT_ALIGNMENT


def matmul_model(weight: np.ndarray, bias: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, weight.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, weight.shape[1]])],
        [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(bias, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_shared_tensors_are_stored_once_and_aligned(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    shared = rng.standard_normal((256, 256), dtype=np.float32)  # 256 KiB: external
    other = rng.standard_normal((256, 128), dtype=np.float32)  # 128 KiB: external
    bias = rng.standard_normal(256, dtype=np.float32)  # 1 KiB: stays inline
    store = write_graphs(
        tmp_path,
        {
            "a": matmul_model(shared, bias),
            "b": matmul_model(shared, bias),
            "c": matmul_model(other, bias[:128]),
        },
    )
    assert store.deduplicated_bytes == shared.nbytes
    assert store.size == (tmp_path / "weights.bin").stat().st_size
    offsets = []
    for name in "abc":
        model = onnx.load(str(tmp_path / f"{name}.onnx"), load_external_data=False)
        for tensor in model.graph.initializer:
            if tensor.data_location == TensorProto.EXTERNAL:
                info = {e.key: e.value for e in tensor.external_data}
                assert info["location"] == "weights.bin"
                offsets.append(int(info["offset"]))
            else:
                assert len(tensor.raw_data) < INLINE_LIMIT
    assert all(offset % WEIGHT_ALIGNMENT == 0 for offset in offsets)
    assert len(set(offsets)) == 2  # W of a and b is one region, W of c another
    x = rng.standard_normal((1, 256), dtype=np.float32)
    session = ort.InferenceSession(str(tmp_path / "b.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], x @ shared + bias, rtol=1e-5, atol=1e-4)


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "artifact"
    with pytest.raises(RuntimeError), staging_directory(target, force=False) as staging:
        (staging / "half.bin").write_bytes(b"x")
        raise RuntimeError("export failed midway")
    assert list(tmp_path.iterdir()) == []


def test_existing_target_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "artifact"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(FileExistsError), staging_directory(target, force=False):
        pass
    with staging_directory(target, force=True) as staging:
        (staging / "new").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["artifact"]


def test_digest_is_the_sha256_of_the_file_on_disk(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    # 120 000 bytes is not a multiple of the alignment, so the next tensor starts after zero padding,
    # and the digest is only right if that padding was hashed too.
    first = rng.standard_normal((300, 100), dtype=np.float32)
    second = rng.standard_normal((100, 300), dtype=np.float32)
    bias = np.zeros(100, dtype=np.float32)
    store = write_graphs(
        tmp_path, {"a": matmul_model(first, bias), "b": matmul_model(second, np.zeros(300, np.float32))}
    )
    written = (tmp_path / "weights.bin").read_bytes()
    assert len(written) > first.nbytes + second.nbytes  # padding is present
    assert store.sha256() == hashlib.sha256(written).hexdigest()
