"""Objects in S3: written once (If-None-Match) or replaced only as read (If-Match), listed by prefix, and
handed out by presigned URL.

Jobs (function.jobs.store) keep their request, parts and audio as write-once objects, so a duplicate delivery
working on the same job at the same time cannot replace what the first one wrote, and their status as a
read-modify-write object; direct invokes name their object in the reply with a presigned URL. Large
audio goes up as a multipart upload holding one part in memory, completed only if the key is still free.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from function.aws.clients import s3_client
from function.core.errors import TTSError
from function.core.formats import Output

PRESIGNED_URL_SECONDS = 3600
PART_BYTES = 8 * 1024 * 1024  # multipart upload part (S3's minimum is 5 MiB); what store_stream holds
MIN_PART_BYTES = 5 * 1024 * 1024  # S3's smallest multipart part but the last
_MISSING = ("404", "NoSuchKey", "NotFound")
_PRECONDITION = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")


class StorageError(TTSError):
    """S3 refused a read or write; the record is retried (and eventually dead-lettered)."""

    code = "storage_error"
    status = 502


class _Precondition(Exception):
    """The object exists (If-None-Match) or changed since it was read (If-Match)."""


@dataclass(frozen=True)
class Written:
    bucket: str
    key: str
    existed: bool  # True: an earlier delivery already wrote it, nothing was synthesized


@contextlib.contextmanager
def _s3(action: str, bucket: str, key: str) -> Iterator[None]:
    """botocore's errors as StorageError; a failed precondition as _Precondition."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _PRECONDITION:
            raise _Precondition from exc
        raise StorageError(f"cannot {action} s3://{bucket}/{key}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot {action} s3://{bucket}/{key}: {exc}") from exc


def _missing(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError

    cause = exc.__cause__
    return isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") in _MISSING


def exists(bucket: str, key: str) -> bool:
    try:
        with _s3("check", bucket, key):
            s3_client().head_object(Bucket=bucket, Key=key)
        return True
    except StorageError as exc:
        if _missing(exc):
            return False
        raise


def read(bucket: str, key: str) -> tuple[bytes, str] | None:
    """The object's bytes and ETag, or None when there is no such object."""
    try:
        with _s3("read", bucket, key):
            response = s3_client().get_object(Bucket=bucket, Key=key)
            return response["Body"].read(), response["ETag"]
    except StorageError as exc:
        if _missing(exc):
            return None
        raise


def put(
    bucket: str, key: str, data: bytes, content_type: str, etag: str | None = None, **metadata: str
) -> bool:
    """Write `key` if it does not exist (etag None) or is still the version read with `etag`; False
    when that condition failed (someone else wrote first) and nothing was written."""
    condition = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
    try:
        with _s3("write", bucket, key):
            s3_client().put_object(
                Bucket=bucket, Key=key, Body=data, ContentType=content_type, Metadata=metadata, **condition
            )
        return True
    except _Precondition:
        return False


def delete(bucket: str, keys: Iterable[str]) -> None:
    """Remove these objects; a key that is already gone is no error."""
    for key in keys:
        with _s3("delete", bucket, key):
            s3_client().delete_object(Bucket=bucket, Key=key)


def sizes(bucket: str, prefix: str) -> dict[str, int]:
    """Every key under `prefix` with its size in bytes."""
    found: dict[str, int] = {}
    with _s3("list", bucket, prefix):
        for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found.update({item["Key"]: item["Size"] for item in page.get("Contents", [])})
    return found


def keys_after(bucket: str, prefix: str, after: str | None, limit: int) -> list[str]:
    """The first `limit` keys under `prefix`, in S3's order (UTF-8 bytes, ascending), after the key
    `after` (None: from the first): one page of a listing, for callers that page through it."""
    more = {"StartAfter": after} if after is not None else {}
    with _s3("list", bucket, prefix):
        page = s3_client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=limit, **more)
    return [item["Key"] for item in page.get("Contents", [])]


def store_stream(
    bucket: str, key: str, pieces: Iterable[bytes], output: Output, job_id: str | None = None
) -> bool:
    """Write the concatenated `pieces` to `key` once, holding at most about PART_BYTES of them: one PUT
    when they fit in one part, else a multipart upload completed only if `key` is still free (a
    duplicate delivery's upload is aborted). False when `key` existed."""
    metadata = {"sample-rate": str(output.rate), **({"job-id": job_id} if job_id else {})}
    client = s3_client()
    buffer = bytearray()
    upload: str | None = None
    parts: list[dict[str, Any]] = []

    def send_part(data: bytes) -> None:
        number = len(parts) + 1
        response = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data)
        parts.append({"ETag": response["ETag"], "PartNumber": number})

    try:
        with _s3("write", bucket, key):
            for piece in pieces:
                buffer += piece
                while len(buffer) >= PART_BYTES:
                    if upload is None:
                        upload = client.create_multipart_upload(
                            Bucket=bucket, Key=key, ContentType=output.media_type, Metadata=metadata
                        )["UploadId"]
                    send_part(bytes(buffer[:PART_BYTES]))
                    del buffer[:PART_BYTES]
            if upload is None:
                return put(bucket, key, bytes(buffer), output.media_type, **metadata)
            if buffer:
                send_part(bytes(buffer))
            client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
            )
        return True
    except BaseException as exc:
        _abort(client, bucket, key, upload)
        if isinstance(exc, _Precondition):
            return False
        raise


def _abort(client: Any, bucket: str, key: str, upload: str | None) -> None:
    """Abort a multipart upload that did not complete, if one was started; the bucket's lifecycle rule
    aborts what this cannot."""
    if upload is not None:
        with contextlib.suppress(Exception):
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)


def joinable(sizes: list[int]) -> bool:
    """Whether objects of these sizes, in order, can be joined by `join` (S3's UploadPartCopy): every
    part but the last at least MIN_PART_BYTES."""
    return all(size >= MIN_PART_BYTES for size in sizes[:-1])


def join(bucket: str, key: str, first: bytes, sources: list[str], output: Output, job_id: str) -> bool:
    """Write `first` followed by the objects `sources` (keys in `bucket`) to `key` once, as a multipart
    upload whose later parts S3 copies itself (UploadPartCopy): nothing of them is read back here.
    `first` and each source but the last must be at least MIN_PART_BYTES (see `joinable`). Completed
    only if `key` is still free; False when it existed."""
    metadata = {"sample-rate": str(output.rate), "job-id": job_id}
    client = s3_client()
    upload: str | None = None
    try:
        with _s3("join", bucket, key):
            upload = client.create_multipart_upload(
                Bucket=bucket, Key=key, ContentType=output.media_type, Metadata=metadata
            )["UploadId"]
            sent = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=first)
            parts = [{"ETag": sent["ETag"], "PartNumber": 1}]
            for number, source in enumerate(sources, start=2):
                copied = client.upload_part_copy(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload,
                    PartNumber=number,
                    CopySource={"Bucket": bucket, "Key": source},
                )
                parts.append({"ETag": copied["CopyPartResult"]["ETag"], "PartNumber": number})
            client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
            )
        return True
    except BaseException as exc:
        _abort(client, bucket, key, upload)
        if isinstance(exc, _Precondition):
            return False
        raise


def store(bucket: str, key: str, data: bytes, output: Output, job_id: str | None = None) -> None:
    """Write audio that is already in memory, once."""
    store_stream(bucket, key, [data], output, job_id)


def presigned_url(bucket: str, key: str) -> str:
    return str(
        s3_client().generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=PRESIGNED_URL_SECONDS
        )
    )


def location(written: Written, output: Output) -> dict[str, Any]:
    """The reply that names a stored object, with a presigned GET URL for it."""
    return {
        "format": output.name,
        "content_type": output.media_type,
        "sample_rate": output.rate,
        "bucket": written.bucket,
        "key": written.key,
        "url": presigned_url(written.bucket, written.key),
        "existed": written.existed,
    }


__all__ = [
    "MIN_PART_BYTES",
    "PART_BYTES",
    "PRESIGNED_URL_SECONDS",
    "StorageError",
    "Written",
    "delete",
    "exists",
    "join",
    "joinable",
    "keys_after",
    "location",
    "presigned_url",
    "put",
    "read",
    "sizes",
    "store",
    "store_stream",
]
