"""The export artifact: manifest, one aligned weights file, small ONNX graphs; opened from disk or memory.

Layout of an artifact directory:

    manifest.json          this module's `Manifest`
    weights.bin            every large tensor of every graph, each at a 64 KiB-aligned offset, stored once
    <graph>.onnx           graph structure plus tensors under 64 KiB; external data points into weights.bin
    multilingual.tiktoken  the v1 text tokenizer's vocabulary
    campplus.onnx, speech_tokenizer_v1.onnx   copied through when the model directory has them

`Artifact.open(dir)` maps weights.bin once; `Artifact.from_files` takes the same files already in memory
(the S3 → SnapStart path). Either way the manifest lists, per graph, where each external tensor lies in
weights.bin, and every session computes from views into that one buffer: nothing is copied, and tensors
two graphs share (the LLM's prefill and decode layers) are resident once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import mmap
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from function.core.errors import ArtifactError
from function.cosyvoice.contract import (
    FORMAT_VERSION,
    GRAPHS,
    MANIFEST_FILE,
    WEIGHTS_FILE,
    TensorSpec,
)
from function.cosyvoice.params import ModelParams, strict

Buffer = bytes | bytearray | memoryview | mmap.mmap


@dataclass(frozen=True)
class WeightSlice:
    """One initializer stored in weights.bin: the bytes onnxruntime is handed a view of."""

    name: str
    dtype: str  # numpy dtype name
    shape: tuple[int, ...]
    offset: int
    length: int

    def to_dict(self) -> dict:
        return {**asdict(self), "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WeightSlice:
        # Hundreds per graph: built directly (an unknown key is a TypeError, which the manifest reports).
        return cls(**{**data, "shape": tuple(data["shape"])})


@dataclass(frozen=True)
class GraphEntry:
    """One graph file of the artifact, with the concrete shapes read from the exported model."""

    name: str
    file: str
    role: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    size: int
    sha256: str
    # Its initializers in weights.bin; empty for graphs copied through self-contained (campplus, tokenizer).
    external_tensors: tuple[WeightSlice, ...] = ()
    quantization: str = "fp32"  # fp32 graphs compute from the shared weights; quantised ones prepack
    optimization: str = "none"  # "extended": onnxruntime's portable rewrites were applied at export

    def to_dict(self) -> dict:
        data = asdict(self)
        data["inputs"] = [spec.to_dict() for spec in self.inputs]
        data["outputs"] = [spec.to_dict() for spec in self.outputs]
        data["external_tensors"] = [tensor.to_dict() for tensor in self.external_tensors]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphEntry:
        values = dict(data)
        values["inputs"] = tuple(TensorSpec.from_dict(d) for d in data["inputs"])
        values["outputs"] = tuple(TensorSpec.from_dict(d) for d in data["outputs"])
        values["external_tensors"] = tuple(WeightSlice.from_dict(d) for d in data.get("external_tensors", ()))
        return strict(cls, values)


@dataclass(frozen=True)
class FileEntry:
    file: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    format_version: int
    source: dict[str, Any]  # {"name": ..., "files": {file: sha256}}
    params: ModelParams
    graphs: dict[str, GraphEntry]
    weights: FileEntry
    tokenizer: FileEntry
    speakers: dict[str, list[float]]  # name -> 192-d embedding (as stored in spk2info.pt)
    export_options: dict[str, Any]
    versions: dict[str, str]

    @property
    def sample_rate(self) -> int:
        return self.params.vocoder.sample_rate

    def to_dict(self) -> dict:
        return {
            "format_version": self.format_version,
            "source": self.source,
            "sample_rate": self.sample_rate,
            "token_rate": self.params.flow.input_frame_rate,
            "mel_rate": self.params.flow.mel_rate,
            "params": asdict(self.params),
            "graphs": {name: entry.to_dict() for name, entry in self.graphs.items()},
            "weights": asdict(self.weights),
            "tokenizer": asdict(self.tokenizer),
            "speakers": self.speakers,
            "export_options": self.export_options,
            "versions": self.versions,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise ArtifactError(
                f"artifact format version {version!r} is not supported (this runtime reads {FORMAT_VERSION});"
                " export the model again with this version's exporter"
            )
        try:
            return cls(
                format_version=version,
                source=dict(data["source"]),
                params=ModelParams.from_dict(data["params"]),
                graphs={name: GraphEntry.from_dict(entry) for name, entry in data["graphs"].items()},
                weights=strict(FileEntry, data["weights"]),
                tokenizer=strict(FileEntry, data["tokenizer"]),
                speakers={name: list(map(float, emb)) for name, emb in data["speakers"].items()},
                export_options=dict(data["export_options"]),
                versions=dict(data["versions"]),
            )
        except (KeyError, TypeError) as exc:
            raise ArtifactError(f"manifest is malformed: {exc!r}") from exc

    def files(self) -> list[FileEntry]:
        """Every file the artifact consists of besides the manifest, with its size and sha256."""
        entries = [self.weights, self.tokenizer]
        entries += [FileEntry(g.file, g.size, g.sha256) for g in self.graphs.values()]
        return entries

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"


def sha256_of(data: Buffer | Path) -> str:
    digest = hashlib.sha256()
    if isinstance(data, Path):
        with data.open("rb") as handle:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
    else:
        digest.update(data)
    return digest.hexdigest()


class Artifact:
    """An opened artifact: the manifest plus access to each file, on disk (mmap) or in memory."""

    def __init__(
        self, manifest: Manifest, files: Mapping[str, Buffer], manifest_sha256: str | None = None
    ) -> None:
        self.manifest = manifest
        self._files = dict(files)
        # What names this export (saved voices record it): the manifest file's sha256; an artifact built
        # in memory without one is named by its files' digests, which the manifest lists.
        self.manifest_sha256 = (
            manifest_sha256
            or hashlib.sha256(
                "".join(sorted(entry.sha256 for entry in manifest.files())).encode()
            ).hexdigest()
        )

    @classmethod
    def open(cls, root: str | Path, verify_hashes: bool = False) -> Artifact:
        """Open an artifact directory. Sizes are always checked; sha256 only when asked (it reads 1.7 GB)."""
        root = Path(root)
        manifest_path = root / MANIFEST_FILE
        if not manifest_path.is_file():
            raise ArtifactError(f"{root} is not an artifact directory: {MANIFEST_FILE} is missing")
        manifest_bytes = manifest_path.read_bytes()
        manifest = _read_manifest(manifest_bytes, str(manifest_path))
        files: dict[str, Buffer] = {}
        for entry in manifest.files():
            path = root / entry.file
            if not path.is_file():
                raise ArtifactError(f"artifact {root}: {entry.file} is missing")
            files[entry.file] = _map_file(path)
        artifact = cls(manifest, files, sha256_of(manifest_bytes))
        artifact.check(verify_hashes)
        return artifact

    @classmethod
    def from_files(cls, files: Mapping[str, Buffer], verify_hashes: bool = False) -> Artifact:
        """An artifact whose files are already in memory (read from S3 during INIT)."""
        if MANIFEST_FILE not in files:
            raise ArtifactError(f"artifact files lack {MANIFEST_FILE}")
        manifest = _read_manifest(bytes(files[MANIFEST_FILE]), MANIFEST_FILE)
        missing = [entry.file for entry in manifest.files() if entry.file not in files]
        if missing:
            raise ArtifactError(f"artifact files lack {', '.join(missing)}")
        artifact = cls(manifest, files, sha256_of(files[MANIFEST_FILE]))
        artifact.check(verify_hashes)
        return artifact

    def check(self, verify_hashes: bool) -> None:
        for entry in self.manifest.files():
            data = self._files[entry.file]
            if len(data) != entry.size:
                raise ArtifactError(
                    f"artifact file {entry.file} has {len(data)} bytes, the manifest says {entry.size}:"
                    " the artifact is truncated or from another export"
                )
            if verify_hashes and sha256_of(data) != entry.sha256:
                raise ArtifactError(f"artifact file {entry.file} does not match its sha256 in the manifest")
        for graph in self.manifest.graphs.values():
            for tensor in graph.external_tensors:
                _check_slice(graph.name, tensor, self.manifest.weights.size)

    def file(self, name: str) -> Buffer:
        try:
            return self._files[name]
        except KeyError:
            raise ArtifactError(f"artifact has no file {name}") from None

    def has_graph(self, name: str) -> bool:
        return name in self.manifest.graphs

    def graph(self, name: str) -> GraphEntry:
        try:
            return self.manifest.graphs[name]
        except KeyError:
            raise ArtifactError(
                f"artifact has no graph {name!r} (known: {sorted(self.manifest.graphs)})"
            ) from None

    @property
    def weights(self) -> Buffer:
        return self._files[self.manifest.weights.file]


def _read_manifest(data: bytes, where: str) -> Manifest:
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{where} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ArtifactError(f"{where} is not a JSON object")
    manifest = Manifest.from_dict(raw)
    unknown = [name for name in manifest.graphs if name not in GRAPHS]
    if unknown:
        raise ArtifactError(f"manifest names graphs this runtime does not know: {unknown}")
    return manifest


def _check_slice(graph: str, tensor: WeightSlice, weights_size: int) -> None:
    """A slice the runtime may view: inside weights.bin and exactly as long as its dtype and shape say."""
    where = f"manifest: {graph} tensor {tensor.name!r}"
    try:
        itemsize = _itemsize(tensor.dtype)
    except TypeError:
        raise ArtifactError(f"{where} has an unknown dtype {tensor.dtype!r}") from None
    if tensor.length != itemsize * math.prod(tensor.shape) or min(tensor.shape, default=0) < 0:
        raise ArtifactError(f"{where}: {tensor.length} bytes do not hold {tensor.dtype} {list(tensor.shape)}")
    if tensor.offset < 0 or tensor.offset + tensor.length > weights_size:
        raise ArtifactError(
            f"{where} lies outside weights.bin ({tensor.offset} + {tensor.length} > {weights_size} bytes)"
        )


@functools.cache
def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def _map_file(path: Path) -> Buffer:
    size = path.stat().st_size
    if size == 0:
        return b""
    with path.open("rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


__all__ = [
    "Artifact",
    "FileEntry",
    "GraphEntry",
    "Manifest",
    "WEIGHTS_FILE",
    "WeightSlice",
    "sha256_of",
]
