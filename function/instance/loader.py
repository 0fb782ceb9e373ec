"""Open the deployment's artifact: a local directory (mapped) or s3://bucket/prefix (read into memory).

The S3 path is the zip/SnapStart variant: the model cannot ride in a 250 MB zip, so INIT reads it into
one bytearray with parallel ranged GETs (one connection is limited well below the instance's bandwidth;
many together reach it, as AWS's S3 performance guidelines advise) and the snapshot keeps it. Sizes come
from the manifest, so no HEAD requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from function.core.errors import ArtifactError
from function.cosyvoice.artifact import Artifact, Buffer, Manifest
from function.cosyvoice.contract import MANIFEST_FILE

PART_BYTES = 16 * 1024 * 1024  # one ranged GET; big enough to amortise a request, small enough to spread
WORKERS = 16
ATTEMPTS = 3  # botocore retries failed requests, not bodies cut off mid-read: retry those here


def open_artifact(location: str, verify_hashes: bool = False) -> Artifact:
    """A directory (mapped) or s3://bucket/prefix (read into memory). Sizes are always checked; with
    verify_hashes every file's sha256 too (it reads every byte: for INITs nobody waits for, and `verify`)."""
    if location.startswith("s3://"):
        from function.aws.clients import s3_client

        return read_s3_artifact(location, s3_client(), verify_hashes=verify_hashes)
    return Artifact.open(location, verify_hashes)


def parse_s3_url(url: str) -> tuple[str, str]:
    """s3://bucket/some/prefix → ("bucket", "some/prefix/"); the prefix is "" for the bucket root."""
    if not url.startswith("s3://"):
        raise ArtifactError(f"{url!r} is not an s3:// URL")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise ArtifactError(f"{url!r} names no bucket")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


@dataclass(frozen=True)
class _Part:
    key: str
    start: int  # offset in the object
    length: int
    into: memoryview  # where in the shared buffer those bytes go


def read_s3_artifact(
    url: str, client: Any, workers: int = WORKERS, part_bytes: int = PART_BYTES, verify_hashes: bool = False
) -> Artifact:
    bucket, prefix = parse_s3_url(url)
    manifest_bytes = _get(client, bucket, prefix + MANIFEST_FILE, url)
    try:
        manifest = Manifest.from_dict(json.loads(manifest_bytes))
    except (ValueError, AttributeError) as exc:
        raise ArtifactError(f"{url}/{MANIFEST_FILE} is not a valid manifest: {exc}") from exc
    views = one_buffer({entry.file: entry.size for entry in manifest.files()})
    files: dict[str, Buffer] = {MANIFEST_FILE: manifest_bytes, **views}
    parts: list[_Part] = []
    for name, view in views.items():
        for start in range(0, len(view), part_bytes):
            length = min(part_bytes, len(view) - start)
            parts.append(_Part(prefix + name, start, length, view[start : start + length]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # list() re-raises the first failure here, in INIT.
        list(pool.map(lambda part: _fetch(client, bucket, part, url), parts))
    return Artifact.from_files(files, verify_hashes)


def one_buffer(sizes: Mapping[str, int]) -> dict[str, memoryview]:
    """One bytearray for every file, a view of it per name: the layout an in-memory artifact lives in."""
    buffer = memoryview(bytearray(sum(sizes.values())))
    views = {}
    offset = 0
    for name, size in sizes.items():
        views[name] = buffer[offset : offset + size]
        offset += size
    return views


def _get(client: Any, bucket: str, key: str, url: str) -> bytes:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except (ClientError, BotoCoreError) as exc:
        raise ArtifactError(f"cannot read s3://{bucket}/{key} (artifact {url}): {exc}") from exc


def _fetch(client: Any, bucket: str, part: _Part, url: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    for attempt in range(1, ATTEMPTS + 1):
        try:
            body = client.get_object(
                Bucket=bucket, Key=part.key, Range=f"bytes={part.start}-{part.start + part.length - 1}"
            )["Body"]
            filled = 0
            while filled < part.length:
                n = body.readinto(part.into[filled:])
                if not n:
                    raise ArtifactError(f"s3://{bucket}/{part.key} ended early at byte {part.start + filled}")
                filled += n
            return
        except (ClientError, BotoCoreError, ArtifactError, OSError) as exc:
            if attempt == ATTEMPTS:
                raise ArtifactError(f"cannot read s3://{bucket}/{part.key} (artifact {url}): {exc}") from exc


__all__ = ["one_buffer", "open_artifact", "parse_s3_url", "read_s3_artifact"]
