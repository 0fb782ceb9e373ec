"""Objects in S3: written once (If-None-Match) or replaced only as read (If-Match), listed by prefix, and
handed out by presigned URL.

Jobs (function.jobs.store) keep their request, parts and audio as write-once objects, so a duplicate delivery
working on the same job at the same time cannot replace what the first one wrote, and their status as a
read-modify-write object; direct invokes name their object in the reply with a presigned URL. Large
audio goes up as a multipart upload written as a file (`Upload`), completed only if the key is still
free; a job's parts are joined by S3 itself where they can be (`join`).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from function.aws.clients import s3_client
from function.core.errors import TTSError
from function.core.formats import Output

PRESIGNED_URL_SECONDS = 3600
PART_BYTES = 8 * 1024 * 1024  # multipart upload part (S3's minimum is 5 MiB); an Upload holds two
MIN_PART_BYTES = 5 * 1024 * 1024  # S3's smallest multipart part but the last
_MISSING = ("404", "NoSuchKey", "NotFound")
_PRECONDITION = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")


class StorageError(TTSError):
    """S3 refused a read or write; the record is retried (and eventually dead-lettered)."""

    code = "storage_error"
    status = 502


class _Precondition(Exception):
    """The object exists (If-None-Match) or changed since it was read (If-Match)."""


class RewriteRefused(RuntimeError):
    """A seek, write or read reached bytes of an Upload that have already left for S3: honouring it
    would write a broken object."""


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


class Upload:
    """`key` written once as a file (write, seek, tell: what libsndfile writes through), then `complete`d:
    for encoders that finish their header on close by seeking back into the file's first bytes
    (function.audio.encode.encode_into), and for bytes that only append (`store_stream`).

    The object's first PART_BYTES (its head) stay in memory until `complete`, so writes that seek back
    into them patch them; each later PART_BYTES leaves as multipart part 2, 3, … as soon as it fills.
    `complete` sends the rest, then the head as part 1, and completes the upload only if `key` is still
    free (If-None-Match); an object that never filled a part after its head is one conditional PUT.
    Memory: the head and the part filling, about twice PART_BYTES, however long the object.

    A seek or write into bytes that have left, or a read, raises RewriteRefused. libsndfile calls these
    methods from C and swallows what they raise, so any failure in them is kept: raised again by every
    later call and by `complete`, which aborts the upload. As a context manager, an upload left without
    `complete` is aborted, and a kept failure is raised in place of what it caused (soundfile's failed
    write).
    """

    def __init__(self, bucket: str, key: str, output: Output, job_id: str | None = None) -> None:
        self.bucket = bucket
        self.key = key
        self._media_type = output.media_type
        self._metadata = {"sample-rate": str(output.rate), **({"job-id": job_id} if job_id else {})}
        self._client = s3_client()
        self._head = bytearray()  # bytes 0 … PART_BYTES - 1
        self._tail = bytearray()  # bytes from _tail_at on, not sent yet
        self._tail_at = PART_BYTES
        self._position = 0
        self._upload: str | None = None
        self._parts: list[dict[str, Any]] = []  # sent: part 2 on
        self._failure: BaseException | None = None
        self._finished = False

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, kind: object, raised: BaseException | None, trace: object) -> None:
        if not self._finished:
            self._abort()
        if raised is not None and self._failure is not None and raised is not self._failure:
            raise self._failure  # the cause of what was raised (libsndfile's short write)

    @property
    def _end(self) -> int:
        return self._tail_at + len(self._tail) if len(self._head) == PART_BYTES else len(self._head)

    def write(self, data: bytes) -> int:
        with self._kept():
            view = memoryview(data)
            start = self._position
            into_head = view[: max(PART_BYTES - start, 0)]
            self._head[start : start + len(into_head)] = into_head
            rest = view[len(into_head) :]
            if rest:
                at = start + len(into_head) - self._tail_at
                if at < 0:
                    raise self._refused(f"a write at byte {start}")
                self._tail[at : at + len(rest)] = rest
            self._position = start + len(view)
            while len(self._tail) >= PART_BYTES:
                self._send(bytes(memoryview(self._tail)[:PART_BYTES]))
                del self._tail[:PART_BYTES]
                self._tail_at += PART_BYTES
            return len(view)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        with self._kept():
            base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._end}[whence]
            position = base + offset
            if not (0 <= position <= len(self._head) or self._tail_at <= position <= self._end):
                raise self._refused(f"a seek to byte {position}")
            self._position = position
            return position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        with self._kept():
            raise self._refused("a read")

    def complete(self) -> bool:
        """Finish the object: True when written, False when `key` existed (the upload is aborted)."""
        try:
            if self._failure is not None:
                raise self._failure
            if self._upload is None:
                return put(
                    self.bucket, self.key, bytes(self._head + self._tail), self._media_type, **self._metadata
                )
            if self._tail:
                self._send(bytes(self._tail))
            with _s3("write", self.bucket, self.key):
                first = self._client.upload_part(
                    Bucket=self.bucket,
                    Key=self.key,
                    UploadId=self._upload,
                    PartNumber=1,
                    Body=bytes(self._head),
                )
                parts = [{"ETag": first["ETag"], "PartNumber": 1}, *self._parts]
                self._client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=self.key,
                    UploadId=self._upload,
                    MultipartUpload={"Parts": parts},
                    IfNoneMatch="*",
                )
            return True
        except BaseException as exc:
            self._abort()
            if isinstance(exc, _Precondition):
                return False
            raise
        finally:
            self._finished = True

    @contextlib.contextmanager
    def _kept(self) -> Iterator[None]:
        """Raise a failure kept from an earlier call; keep one raised now."""
        if self._failure is not None:
            raise self._failure
        try:
            yield
        except BaseException as exc:
            self._failure = exc
            raise

    def _refused(self, what: str) -> RewriteRefused:
        return RewriteRefused(
            f"s3://{self.bucket}/{self.key}: {what}; an upload holds only its head (bytes before"
            f" {PART_BYTES}) and its unsent tail (bytes {self._tail_at} to {self._end})"
        )

    def _send(self, data: bytes) -> None:
        """Upload `data` as the next part from part 2 on, starting the multipart upload first."""
        with _s3("write", self.bucket, self.key):
            if self._upload is None:
                self._upload = self._client.create_multipart_upload(
                    Bucket=self.bucket, Key=self.key, ContentType=self._media_type, Metadata=self._metadata
                )["UploadId"]
            number = len(self._parts) + 2
            sent = self._client.upload_part(
                Bucket=self.bucket, Key=self.key, UploadId=self._upload, PartNumber=number, Body=data
            )
            self._parts.append({"ETag": sent["ETag"], "PartNumber": number})

    def _abort(self) -> None:
        _abort(self._client, self.bucket, self.key, self._upload)
        self._finished = True


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
    """Write the concatenated `pieces` to `key` once through an `Upload` (about two PART_BYTES held):
    one PUT when they are small, else a multipart upload completed only if `key` is still free (a
    duplicate delivery's upload is aborted). False when `key` existed."""
    with Upload(bucket, key, output, job_id) as upload:
        for piece in pieces:
            upload.write(piece)
        return upload.complete()


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


def join(
    bucket: str,
    key: str,
    first: bytes,
    sources: list[str],
    output: Output,
    job_id: str,
    copied: Callable[[], None],
) -> bool:
    """Write `first` followed by the objects `sources` (keys in `bucket`) to `key` once, as a multipart
    upload whose later parts S3 copies itself (UploadPartCopy): nothing of them is read back here.
    `first` and each source but the last must be at least MIN_PART_BYTES (see `joinable`); `copied` is
    called after each source is copied. Completed only if `key` is still free; False when it existed."""
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
                done = client.upload_part_copy(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload,
                    PartNumber=number,
                    CopySource={"Bucket": bucket, "Key": source},
                )
                parts.append({"ETag": done["CopyPartResult"]["ETag"], "PartNumber": number})
                copied()
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
    "RewriteRefused",
    "StorageError",
    "Upload",
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
