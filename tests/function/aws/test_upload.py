"""function.aws.s3.Upload against moto_server: an object written once as a file whose head stays
writable, so libsndfile can finish flac's and mp3's headers on close while the rest has already left.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import soundfile
from botocore.exceptions import ClientError

from function.audio.encode import encode_into
from function.aws.clients import s3_client
from function.aws.s3 import PART_BYTES, RewriteRefused, StorageError, Upload
from function.core.formats import Output

pytestmark = pytest.mark.usefixtures("aws_in_process")

RATE = 22050
PCM = Output.of("pcm", RATE)
KEY = "tts/object"


def noise(seconds: float) -> np.ndarray:
    """A signal flac cannot shrink: its encoding runs to several parts in a few minutes of audio."""
    return np.random.default_rng(7).uniform(-1, 1, int(seconds * RATE)).astype(np.float32)


def reference(signal: np.ndarray, output: Output) -> bytes:
    """libsndfile's own file of `signal`, written whole into memory."""
    buffer = io.BytesIO()
    container, subtype = output.format.soundfile or ("", "")
    soundfile.write(buffer, signal, RATE, format=container, subtype=subtype)
    return buffer.getvalue()


def slices(signal: np.ndarray) -> Iterator[np.ndarray]:
    return (signal[start : start + RATE * 10] for start in range(0, signal.shape[0], RATE * 10))


def uploads(s3: Any, bucket: str) -> list[Any]:
    return list(s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def parts_of(s3: Any, bucket: str) -> str:
    """How the object was written: its ETag's part count ("-3"), or "" for a single PUT."""
    etag = s3.head_object(Bucket=bucket, Key=KEY)["ETag"].strip('"')
    return etag[etag.index("-") :] if "-" in etag else ""


@pytest.mark.parametrize(("fmt", "seconds", "parts"), [("flac", 420, "-3"), ("mp3", 20, "")])
def test_an_encoder_finishing_its_header_writes_the_same_bytes_as_in_memory(
    fmt: str, seconds: int, parts: str, s3: Any, bucket: str
) -> None:
    """flac's STREAMINFO and mp3's LAME tag are written over the head on close, after parts 2 and 3
    of the flac have left: the object is byte for byte libsndfile's file of the whole signal."""
    output, signal = Output.of(fmt, RATE), noise(seconds)
    with Upload(bucket, KEY, output, "job") as upload:
        encode_into(upload, slices(signal), output)
        assert upload.complete()
    assert s3.get_object(Bucket=bucket, Key=KEY)["Body"].read() == reference(signal, output)
    assert parts_of(s3, bucket) == parts
    head = s3.head_object(Bucket=bucket, Key=KEY)
    assert head["ContentType"] == output.media_type and head["Metadata"] == {
        "sample-rate": "22050",
        "job-id": "job",
    }


def test_a_seek_behind_the_head_into_what_has_left_fails_and_nothing_is_written(s3: Any, bucket: str) -> None:
    with Upload(bucket, KEY, PCM) as upload:
        upload.write(b"h" * PART_BYTES + b"t" * (PART_BYTES + 10))  # part 2 has left, 10 bytes wait
        upload.seek(3)  # into the head: allowed
        upload.write(b"patched")
        upload.seek(0, io.SEEK_END)
        with pytest.raises(RewriteRefused, match="a seek to byte"):
            upload.seek(PART_BYTES + 5)
        with pytest.raises(RewriteRefused):  # libsndfile swallows the first: every later call refuses
            upload.write(b"more")
        with pytest.raises(RewriteRefused):
            upload.complete()
    assert uploads(s3, bucket) == []
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_a_read_is_refused() -> None:
    with Upload("unused", KEY, PCM) as upload, pytest.raises(RewriteRefused, match="a read"):
        upload.read(4)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # cffi reports the swallowed
@pytest.mark.parametrize("writer", ["bytes", "libsndfile"])
def test_an_error_mid_way_aborts_the_upload(
    writer: str, s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Part 2 fails inside a write: written directly, the write raises; written by libsndfile, which
    swallows it and fails on its short write, leaving the upload raises the S3 error instead. Either
    way nothing is written and the upload is aborted."""
    client = s3_client()
    sent = client.upload_part

    def failing(**request: Any) -> Any:
        if request["PartNumber"] == 2:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "boom"}}, "UploadPart")
        return sent(**request)

    monkeypatch.setattr(client, "upload_part", failing)
    flac = Output.of("flac", RATE)
    with pytest.raises(StorageError, match="boom"), Upload(bucket, KEY, flac) as upload:
        if writer == "bytes":
            upload.write(b"x" * (3 * PART_BYTES))
        else:
            encode_into(upload, slices(noise(420)), flac)
        upload.complete()
    assert uploads(s3, bucket) == []
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_a_producer_failing_mid_way_aborts_the_upload(s3: Any, bucket: str) -> None:
    def pieces() -> Iterator[bytes]:
        yield b"x" * (2 * PART_BYTES)  # part 2 has left
        raise OSError("the next part could not be read")

    with pytest.raises(OSError), Upload(bucket, KEY, PCM) as upload:
        for piece in pieces():
            upload.write(piece)
        upload.complete()
    assert uploads(s3, bucket) == []


@pytest.mark.parametrize("size", [10, 3 * PART_BYTES], ids=["small", "multipart"])
def test_an_existing_key_is_not_overwritten(size: int, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key=KEY, Body=b"first")
    with Upload(bucket, KEY, PCM) as upload:
        upload.write(b"x" * size)
        assert not upload.complete()
    assert s3.get_object(Bucket=bucket, Key=KEY)["Body"].read() == b"first"
    assert uploads(s3, bucket) == []


def test_a_small_object_is_one_put(s3: Any, bucket: str) -> None:
    """Up to its head and one part more never filled, an object goes up in one conditional PUT."""
    data = np.random.default_rng(7).bytes(2 * PART_BYTES - 1)  # the head and a part but one byte
    with Upload(bucket, KEY, PCM) as upload:
        upload.write(data)
        upload.seek(0)
        upload.write(b"HEAD")
        assert upload.complete()
    assert s3.get_object(Bucket=bucket, Key=KEY)["Body"].read() == b"HEAD" + data[4:]
    assert parts_of(s3, bucket) == ""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # cffi reports the swallowed
def test_libsndfile_seeking_back_into_what_has_left_fails_the_upload(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a head shorter than FLAC's STREAMINFO, libsndfile's seek back on close reaches bytes that
    have left: it swallows the refusal, and `complete` raises it instead of writing a broken file."""
    monkeypatch.setattr("function.aws.s3.PART_BYTES", 16)
    output = Output.of("flac", RATE)
    with Upload(bucket, KEY, output) as upload:
        encode_into(upload, [noise(0.1)], output)
        with pytest.raises(RewriteRefused):
            upload.complete()
    assert uploads(s3, bucket) == []
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
