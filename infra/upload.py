"""Upload an exported artifact to S3 for the SnapStart variant, verified and resumable.

    python -m infra.upload artifact/ s3://my-bucket/cosyvoice/sft-v1
    # then: sam deploy ... --parameter-overrides ArtifactLocation=s3://my-bucket/cosyvoice/sft-v1

Every file is first checked against the sha256 the exporter recorded in manifest.json (a corrupt local
copy is never uploaded). Each object, and each part of a multipart object, is sent with its SHA-256 so
S3 rejects anything that arrives altered; S3 keeps that checksum on the object. A second run skips the
objects whose stored checksum already matches, and resumes an interrupted multipart upload by reusing
the parts whose size and checksum match the local file. manifest.json goes last, so a reader never sees
a manifest whose files are still missing.

Use a new prefix per artifact: a SnapStart version snapshots the model it read, and only a changed
ArtifactLocation publishes a new version.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from function.core.errors import ArtifactError
from function.cosyvoice.artifact import Artifact, FileEntry
from function.cosyvoice.contract import MANIFEST_FILE

MiB = 1024 * 1024
MIN_PART_SIZE = 5 * MiB  # S3's smallest part (all but the last)
MAX_PARTS = 10_000  # S3's most parts per upload
DEFAULT_PART_SIZE = 64 * MiB


class UploadError(RuntimeError):
    pass


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # without leading or trailing "/"

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        if not uri.startswith("s3://"):
            raise UploadError(f"{uri!r} is not an s3://bucket/prefix location")
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        prefix = prefix.strip("/")
        if not bucket or not prefix:
            raise UploadError(f"{uri!r} needs a bucket and a prefix: s3://bucket/prefix")
        return cls(bucket, prefix)

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class FileDigest:
    """One read of a file: its sha256 and the sha256 of each part it will be uploaded in."""

    size: int
    sha256: str  # hex, as in the manifest
    parts: tuple[bytes, ...]  # raw sha256 digests, one per part
    part_md5s: tuple[str, ...]  # hex: a part's ETag when the bucket does not use SSE-KMS

    @property
    def multipart(self) -> bool:
        return len(self.parts) > 1

    def s3_checksum(self) -> str:
        """What S3 reports as ChecksumSHA256: the object's digest, or for multipart the digest of the
        concatenated part digests followed by -<part count> (a "composite" checksum)."""
        if not self.multipart:
            return _b64(bytes.fromhex(self.sha256))
        return f"{_b64(hashlib.sha256(b''.join(self.parts)).digest())}-{len(self.parts)}"


@dataclass(frozen=True)
class UploadResult:
    name: str
    size: int
    sha256: str
    action: str  # "unchanged" | "uploaded" | "resumed"
    parts_reused: int = 0


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def digest_file(path: Path, part_size: int) -> FileDigest:
    size = path.stat().st_size
    whole = hashlib.sha256()
    parts: list[bytes] = []
    md5s: list[str] = []
    with path.open("rb") as handle:
        while (chunk := handle.read(part_size)) or not parts:  # an empty file is one empty part
            whole.update(chunk)
            parts.append(hashlib.sha256(chunk).digest())
            md5s.append(hashlib.md5(chunk, usedforsecurity=False).hexdigest())
            if not chunk:
                break
    return FileDigest(size, whole.hexdigest(), tuple(parts), tuple(md5s))


def same_checksum(stored: str | None, expected: str) -> bool:
    """S3 reports composite checksums with a -<parts> suffix, some S3-compatible servers without it;
    the digest itself decides (base64 never contains "-")."""
    return stored is not None and stored.split("-")[0] == expected.split("-")[0]


def _part_matches(stored: dict[str, Any] | None, size: int, sha256: bytes, md5: str) -> bool:
    """A part already on S3 is reused when its size and its checksum (or, where the server lists no
    checksum, its MD5 ETag) match the local bytes."""
    if stored is None or stored["Size"] != size:
        return False
    if stored.get("ChecksumSHA256"):
        return bool(stored["ChecksumSHA256"] == _b64(sha256))
    return bool(stored["ETag"].strip('"') == md5)


def artifact_entries(root: Path) -> list[FileEntry]:
    """The files the manifest lists, with their recorded sizes and sha256 (sizes already checked)."""
    manifest = Artifact.open(root).manifest
    entries = [manifest.weights, manifest.tokenizer]
    entries += [FileEntry(graph.file, graph.size, graph.sha256) for graph in manifest.graphs.values()]
    return entries


def _read_part(path: Path, number: int, part_size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek((number - 1) * part_size)
        return handle.read(part_size)


class Uploader:
    def __init__(self, client: Any, location: S3Location, part_size: int, workers: int) -> None:
        if part_size < MIN_PART_SIZE:
            raise UploadError(f"part size must be at least {MIN_PART_SIZE // MiB} MiB (an S3 limit)")
        self.client = client
        self.location = location
        self.part_size = part_size
        self.workers = workers

    def upload_artifact(self, root: Path, log: Callable[[str], None] = print) -> list[UploadResult]:
        results = []
        for entry in artifact_entries(root):
            digest = digest_file(root / entry.file, self.part_size)
            if digest.sha256 != entry.sha256:
                raise UploadError(
                    f"{root / entry.file} does not match its sha256 in the manifest: not uploading"
                )
            results.append(self.upload_file(root / entry.file, digest))
            log(_describe(results[-1]))
        manifest = root / MANIFEST_FILE
        results.append(self.upload_file(manifest, digest_file(manifest, self.part_size)))
        log(_describe(results[-1]))
        return results

    def upload_file(self, path: Path, digest: FileDigest) -> UploadResult:
        if len(digest.parts) > MAX_PARTS:
            raise UploadError(f"{path.name} needs {len(digest.parts)} parts; raise the part size")
        key = self.location.key(path.name)
        if same_checksum(self._stored_checksum(key, digest.size), digest.s3_checksum()):
            return UploadResult(path.name, digest.size, digest.sha256, "unchanged")
        if not digest.multipart:
            self.client.put_object(
                Bucket=self.location.bucket, Key=key, Body=path.read_bytes(),
                ChecksumAlgorithm="SHA256", ChecksumSHA256=digest.s3_checksum(),
            )  # fmt: skip
            return UploadResult(path.name, digest.size, digest.sha256, "uploaded")
        return self._multipart(path, key, digest)

    def _stored_checksum(self, key: str, size: int) -> str | None:
        try:
            head = self.client.head_object(Bucket=self.location.bucket, Key=key, ChecksumMode="ENABLED")
        except self.client.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return head.get("ChecksumSHA256") if head["ContentLength"] == size else None

    def _multipart(self, path: Path, key: str, digest: FileDigest) -> UploadResult:
        upload_id, stored = self._resumable_upload(key)
        bucket = self.location.bucket
        if upload_id is None:
            upload_id = self.client.create_multipart_upload(
                Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256"
            )["UploadId"]
        sizes = [min(self.part_size, digest.size - i * self.part_size) for i in range(len(digest.parts))]
        etags: dict[int, str] = {}
        for number, (size, sha, md5) in enumerate(zip(sizes, digest.parts, digest.part_md5s, strict=True), 1):
            if _part_matches(stored.get(number), size, sha, md5):
                etags[number] = stored[number]["ETag"]
        missing = [n for n in range(1, len(digest.parts) + 1) if n not in etags]

        def send(number: int) -> tuple[int, str]:
            body = _read_part(path, number, self.part_size)
            response = self.client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body,
                ChecksumAlgorithm="SHA256", ChecksumSHA256=_b64(digest.parts[number - 1]),
            )  # fmt: skip
            return number, response["ETag"]

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            etags.update(pool.map(send, missing))
        parts = [
            {"PartNumber": n, "ETag": etags[n], "ChecksumSHA256": _b64(digest.parts[n - 1])}
            for n in range(1, len(digest.parts) + 1)
        ]
        done = self.client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
        if done.get("ChecksumSHA256") and not same_checksum(done["ChecksumSHA256"], digest.s3_checksum()):
            raise UploadError(
                f"{key}: S3 stored checksum {done['ChecksumSHA256']}, expected {digest.s3_checksum()}"
            )
        reused = len(digest.parts) - len(missing)
        return UploadResult(
            path.name, digest.size, digest.sha256, "resumed" if reused else "uploaded", reused
        )

    def _resumable_upload(self, key: str) -> tuple[str | None, dict[int, dict[str, Any]]]:
        """The newest unfinished upload of `key` and its parts as S3 lists them, by number; older
        unfinished uploads of the same key are aborted (S3 bills their parts until then)."""
        bucket = self.location.bucket
        listing = self.client.list_multipart_uploads(Bucket=bucket, Prefix=key)
        uploads = sorted(
            (u for u in listing.get("Uploads", []) if u["Key"] == key),
            key=lambda u: u["Initiated"],
            reverse=True,
        )
        for stale in uploads[1:]:
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=stale["UploadId"])
        if not uploads:
            return None, {}
        upload_id = uploads[0]["UploadId"]
        parts: dict[int, dict[str, Any]] = {}
        for page in self.client.get_paginator("list_parts").paginate(
            Bucket=bucket, Key=key, UploadId=upload_id
        ):
            parts.update((part["PartNumber"], part) for part in page.get("Parts", []))
        return upload_id, parts


def _describe(result: UploadResult) -> str:
    reused = f", {result.parts_reused} parts reused" if result.parts_reused else ""
    return f"{result.name}: {result.size / 1e6:.1f} MB sha256 {result.sha256[:16]}… {result.action}{reused}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.upload", description=__doc__.split("\n\n")[0])
    parser.add_argument("artifact", type=Path, help="an exported artifact directory (with manifest.json)")
    parser.add_argument("location", help="s3://bucket/prefix")
    parser.add_argument(
        "--part-size", type=int, default=DEFAULT_PART_SIZE // MiB, help="MiB per part (default 64)"
    )
    parser.add_argument("--workers", type=int, default=4, help="parts uploaded at once")
    parser.add_argument("--region", help="the bucket's region (default: the AWS configuration's)")
    parser.add_argument("--endpoint-url", help="an S3-compatible endpoint instead of AWS")
    args = parser.parse_args(argv)

    import boto3  # here, so --help and the tests' imports need no AWS setup

    client = boto3.client("s3", region_name=args.region, endpoint_url=args.endpoint_url)
    try:
        location = S3Location.parse(args.location)
        Uploader(client, location, args.part_size * MiB, args.workers).upload_artifact(args.artifact)
    except (UploadError, ArtifactError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"ArtifactLocation={location}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
