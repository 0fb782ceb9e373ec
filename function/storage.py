"""Audio objects in S3: written once (If-None-Match), checked for by key, and handed out by presigned URL.

The batch path writes one object per job and skips a job whose object exists, so a redelivered message
yields the same single object; direct invokes name their object in the reply with a presigned URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from function.audio import media_type
from function.aws import s3_client
from function.errors import TTSError

PRESIGNED_URL_SECONDS = 3600


class StorageError(TTSError):
    """S3 refused a read or write; the record is retried (and eventually dead-lettered)."""

    code = "storage_error"
    status = 502


@dataclass(frozen=True)
class Written:
    bucket: str
    key: str
    existed: bool  # True: an earlier delivery already wrote it, nothing was synthesized


def exists(bucket: str, key: str) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3_client().head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise StorageError(f"cannot check s3://{bucket}/{key}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot check s3://{bucket}/{key}: {exc}") from exc


def store(bucket: str, key: str, data: bytes, fmt: str, sample_rate: int, job_id: str | None = None) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    metadata = {"sample-rate": str(sample_rate), **({"job-id": job_id} if job_id else {})}
    try:
        # If-None-Match: a duplicate delivery running at the same time cannot replace the first object.
        s3_client().put_object(
            Bucket=bucket, Key=key, Body=data, ContentType=media_type(fmt), Metadata=metadata, IfNoneMatch="*"
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
            return
        raise StorageError(f"cannot write s3://{bucket}/{key}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot write s3://{bucket}/{key}: {exc}") from exc


def location(written: Written, fmt: str, sample_rate: int) -> dict[str, Any]:
    """The reply that names a stored object, with a presigned GET URL for it."""
    url = s3_client().generate_presigned_url(
        "get_object", Params={"Bucket": written.bucket, "Key": written.key}, ExpiresIn=PRESIGNED_URL_SECONDS
    )
    return {
        "format": fmt,
        "content_type": media_type(fmt),
        "sample_rate": sample_rate,
        "bucket": written.bucket,
        "key": written.key,
        "url": url,
        "existed": written.existed,
    }


__all__ = ["PRESIGNED_URL_SECONDS", "StorageError", "Written", "exists", "location", "store"]
