"""infra.upload against moto's in-process S3: verified, multipart with checksums, skip and resume."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from function.cosyvoice.artifact import FileEntry, Manifest
from function.cosyvoice.contract import FORMAT_VERSION, MANIFEST_FILE, TOKENIZER_FILE, WEIGHTS_FILE
from function.cosyvoice.params import ModelParams
from infra.upload import MIN_PART_SIZE, S3Location, Uploader, UploadError, digest_file, same_checksum

BUCKET = "models"
LOCATION = S3Location(BUCKET, "cosyvoice/v1")
PART = MIN_PART_SIZE


def _entry(path: Path) -> FileEntry:
    data = path.read_bytes()
    return FileEntry(path.name, len(data), hashlib.sha256(data).hexdigest())


def make_artifact(root: Path, weights_size: int = 2 * PART + 12345) -> Path:
    """A manifest with weights and tokenizer only: what the uploader reads, without an export."""
    root.mkdir()
    (root / WEIGHTS_FILE).write_bytes(bytes(range(256)) * (weights_size // 256) + b"w" * (weights_size % 256))
    (root / TOKENIZER_FILE).write_bytes(b"IQ== 0\n")
    manifest = Manifest(
        format_version=FORMAT_VERSION,
        source={"name": "test", "files": {}},
        params=ModelParams(),
        graphs={},
        weights=_entry(root / WEIGHTS_FILE),
        tokenizer=_entry(root / TOKENIZER_FILE),
        speakers={},
        export_options={},
        versions={},
    )
    (root / MANIFEST_FILE).write_text(manifest.dumps())
    return root


@pytest.fixture
def s3(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client


class CountingClient:
    """The real (moto) client, counting the parts actually sent."""

    def __init__(self, client) -> None:
        self._client = client
        self.parts_sent: list[int] = []

    def upload_part(self, **kwargs):
        self.parts_sent.append(kwargs["PartNumber"])
        return self._client.upload_part(**kwargs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def _object(s3, name: str) -> bytes:
    return s3.get_object(Bucket=BUCKET, Key=LOCATION.key(name))["Body"].read()


def test_uploads_every_file_intact_and_manifest_last(s3, tmp_path):
    root = make_artifact(tmp_path / "artifact")
    order: list[str] = []
    results = Uploader(s3, LOCATION, PART, workers=2).upload_artifact(root, log=order.append)

    assert [r.name for r in results] == [WEIGHTS_FILE, TOKENIZER_FILE, MANIFEST_FILE]
    assert all(r.action == "uploaded" for r in results)
    for name in (WEIGHTS_FILE, TOKENIZER_FILE, MANIFEST_FILE):
        assert _object(s3, name) == (root / name).read_bytes()
    head = s3.head_object(Bucket=BUCKET, Key=LOCATION.key(WEIGHTS_FILE), ChecksumMode="ENABLED")
    assert same_checksum(head["ChecksumSHA256"], digest_file(root / WEIGHTS_FILE, PART).s3_checksum())
    assert order[-1].startswith(MANIFEST_FILE)


def test_second_run_sends_nothing(s3, tmp_path):
    root = make_artifact(tmp_path / "artifact")
    Uploader(s3, LOCATION, PART, workers=2).upload_artifact(root, log=lambda _: None)
    counting = CountingClient(s3)
    results = Uploader(counting, LOCATION, PART, workers=2).upload_artifact(root, log=lambda _: None)
    assert {r.action for r in results} == {"unchanged"}
    assert counting.parts_sent == []


def test_changed_file_is_uploaded_again(s3, tmp_path):
    root = make_artifact(tmp_path / "artifact")
    Uploader(s3, LOCATION, PART, workers=2).upload_artifact(root, log=lambda _: None)
    other = make_artifact(tmp_path / "other", weights_size=2 * PART + 99)
    results = Uploader(s3, LOCATION, PART, workers=2).upload_artifact(other, log=lambda _: None)
    assert results[0].action == "uploaded"
    assert _object(s3, WEIGHTS_FILE) == (other / WEIGHTS_FILE).read_bytes()


def test_interrupted_multipart_upload_resumes_with_the_matching_parts(s3, tmp_path):
    root = make_artifact(tmp_path / "artifact")
    weights = root / WEIGHTS_FILE
    digest = digest_file(weights, PART)
    key = LOCATION.key(WEIGHTS_FILE)
    # An earlier run sent part 1 correctly and part 2 from a different file, then died.
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="SHA256")["UploadId"]
    first = weights.read_bytes()[:PART]
    s3.upload_part(
        Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=1, Body=first, ChecksumAlgorithm="SHA256"
    )
    s3.upload_part(
        Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=2, Body=b"x" * PART, ChecksumAlgorithm="SHA256"
    )

    counting = CountingClient(s3)
    result = Uploader(counting, LOCATION, PART, workers=1).upload_file(weights, digest)

    assert result.action == "resumed" and result.parts_reused == 1
    assert sorted(counting.parts_sent) == [2, 3]
    assert _object(s3, WEIGHTS_FILE) == weights.read_bytes()
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_refuses_a_file_that_does_not_match_the_manifest(s3, tmp_path):
    root = make_artifact(tmp_path / "artifact")
    data = bytearray((root / WEIGHTS_FILE).read_bytes())
    data[100] ^= 0xFF  # same size, different content
    (root / WEIGHTS_FILE).write_bytes(bytes(data))
    with pytest.raises(UploadError, match="sha256"):
        Uploader(s3, LOCATION, PART, workers=1).upload_artifact(root, log=lambda _: None)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


@pytest.mark.parametrize("uri", ["s3://bucket", "s3://bucket/", "https://bucket/p", "s3:///prefix"])
def test_location_needs_bucket_and_prefix(uri):
    with pytest.raises(UploadError):
        S3Location.parse(uri)


def test_location_normalises_slashes():
    assert str(S3Location.parse("s3://b/models/v1/")) == "s3://b/models/v1"
    assert S3Location.parse("s3://b/models/v1").key("weights.bin") == "models/v1/weights.bin"
