"""Write an artifact: every graph's large tensors into one aligned weights file, stored once, then rename.

Each tensor of at least `INLINE_LIMIT` bytes is written at the next `WEIGHT_ALIGNMENT` boundary of
weights.bin and its graph points there (ONNX external data: location, offset, length). Identical tensors
(same dtype, shape and bytes, e.g. the decoder layers both LLM graphs use) are written once. Large
`Constant` nodes are turned into initializers first so that nothing big stays inside a graph file.

Everything is written into a temporary directory beside the target and renamed at the end, so an
interrupted export never leaves a half artifact behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import onnx
from onnx import TensorProto, numpy_helper

from export.errors import ContractError
from function.cosyvoice.contract import INLINE_LIMIT, WEIGHT_ALIGNMENT, WEIGHTS_FILE


@dataclass
class WeightsFile:
    """An append-only, aligned, de-duplicating tensor store that hashes what it writes.

    The manifest needs the file's sha256; hashing every byte on its way out (padding included) saves
    reading 1.7 GB back. That only holds while `handle` is written through `_write` alone, from offset 0.
    """

    handle: BinaryIO
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)  # content key -> (offset, length)
    size: int = 0
    deduplicated_bytes: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)  # typeshed's name for a hash object

    def add(self, data: bytes, key: str) -> tuple[int, int]:
        if key in self.offsets:
            self.deduplicated_bytes += len(data)
            return self.offsets[key]
        offset = -(-self.size // WEIGHT_ALIGNMENT) * WEIGHT_ALIGNMENT
        self._write(b"\0" * (offset - self.size))
        self._write(data)
        self.offsets[key] = (offset, len(data))
        return offset, len(data)

    def sha256(self) -> str:
        """Hex sha256 of everything written so far, i.e. of the whole file once writing is done."""
        return self.digest.hexdigest()

    def _write(self, data: bytes) -> None:
        self.handle.write(data)
        self.digest.update(data)
        self.size += len(data)


def _lift_large_constants(graph: onnx.GraphProto) -> None:
    """Constant nodes holding big tensors become initializers, so they can live in the weights file."""
    kept = []
    for node in graph.node:
        value = next((a for a in node.attribute if a.name == "value"), None)
        if node.op_type == "Constant" and value is not None and _nbytes(value.t) >= INLINE_LIMIT:
            tensor = TensorProto()
            tensor.CopyFrom(value.t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)


def _nbytes(tensor: TensorProto) -> int:
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data)
    return numpy_helper.to_array(tensor).nbytes


def externalize(model: onnx.ModelProto, store: WeightsFile) -> None:
    """Move every large initializer of `model` into `store`, pointing the model at it."""
    _lift_large_constants(model.graph)
    for tensor in model.graph.initializer:
        if tensor.data_location == TensorProto.EXTERNAL:
            raise ContractError(f"initializer {tensor.name} is already external; export graphs in memory")
        if _nbytes(tensor) < INLINE_LIMIT:
            continue
        data = tensor.raw_data if tensor.HasField("raw_data") else numpy_helper.to_array(tensor).tobytes()
        key = hashlib.sha256(f"{tensor.data_type}:{list(tensor.dims)}:".encode() + data).hexdigest()
        offset, length = store.add(bytes(data), key)
        for kind in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            tensor.ClearField(kind)
        tensor.data_location = TensorProto.EXTERNAL
        del tensor.external_data[:]
        for name, value in (("location", WEIGHTS_FILE), ("offset", str(offset)), ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = name, value


@contextmanager
def staging_directory(target: Path, force: bool) -> Iterator[Path]:
    """A temporary directory that becomes `target` only if the block finishes without error."""
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        yield staging
        if target.exists():
            retired = staging.with_suffix(".old")
            os.replace(target, retired)
            os.replace(staging, target)
            shutil.rmtree(retired)
        else:
            os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def write_graphs(
    directory: Path,
    graphs: dict[str, onnx.ModelProto],
    progress: Callable[[str], None] = lambda name: None,
) -> WeightsFile:
    """Write `<name>.onnx` for each graph and the shared weights file into `directory`."""
    with (directory / WEIGHTS_FILE).open("wb") as handle:
        store = WeightsFile(handle)
        for name, model in graphs.items():
            externalize(model, store)
            onnx.save_model(model, str(directory / f"{name}.onnx"))
            progress(name)
        handle.flush()
        os.fsync(handle.fileno())
    return store


__all__ = ["WeightsFile", "externalize", "staging_directory", "write_graphs"]
