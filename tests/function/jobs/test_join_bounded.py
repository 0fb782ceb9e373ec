"""The join is bounded: a job of more than an hour of audio is re-encoded (flac, mp3) part by part, with
peak memory near one part's samples, never the whole signal's; its lease is renewed as it goes, whatever
the format.

The parts are synthetic (written straight to S3, no synthesis) and S3 is moto_server in its own process,
so tracemalloc here sees the join's allocations alone: numpy's buffers, the parts read back and the
upload's parts.
"""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from function.audio.encode import wav_header
from function.core.formats import FORMATS, Output
from function.jobs import join
from function.jobs.store import Job
from function.service.schema import SpeechJob
from tests.function.support import SPEAKER, moto_client

pytestmark = pytest.mark.usefixtures("aws_in_process")

RATE = 22050
PART_SECONDS = 150  # the default COSYVOICE_JOB_PART_SECONDS
PARTS = 25  # 3,750 s: more than an hour
# Peak traced memory of a join: one part's samples as float32 (150 s: 13 MB) a few times over while it
# is read and converted, the upload's head and the part filling (two 8 MiB), and boto's buffers. The
# whole hour as float32 is 318 MB, and a join that held it held two copies.
PEAK_BOUND_BYTES = 80 * 1024 * 1024


def part_samples(index: int) -> np.ndarray:
    """Part `index`'s s16le samples, the same every time: a note that moves from part to part, a low
    sawtooth in every fourth part and a sine in the others. The sawtooth's harmonics are where the encoders
    spend their bytes, enough for objects of three upload parts or more in both formats; LAME takes half the
    time over a sine, which an hour of sawtooth alone would only spend again. One second of it, repeated:
    the note's whole cycles fit in a second."""
    t = np.arange(RATE) / RATE
    sawtooth = index % 4 == 0
    note = 2 * ((55 + index) * t % 1) - 1 if sawtooth else np.sin(2 * np.pi * (110 + 10 * index) * t)
    return np.tile(np.rint(0.4 * note * 32767).astype("<i2"), PART_SECONDS)


@pytest.fixture(scope="module")
def long_job(moto_endpoint: str) -> Iterator[tuple[str, list[int]]]:
    """A bucket holding the parts of job "long": its name, and the parts' byte sizes."""
    s3 = moto_client("s3", moto_endpoint)
    bucket = f"long-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    sizes = []
    for index in range(PARTS):
        pcm = part_samples(index).tobytes()
        s3.put_object(Bucket=bucket, Key=job_of(bucket, "pcm").part_key(index), Body=pcm)
        sizes.append(len(pcm))
    yield bucket, sizes


def job_of(bucket: str, fmt: str) -> Job:
    """Job "long" asking for `fmt`: its parts are the same whatever the format, its audio key is not."""
    request = SpeechJob(id="long", text="Long.", speaker=SPEAKER, format=fmt)
    return Job(id="long", request=request, sha256="", seed=0, created_at="", bucket=bucket, root="tts/")


def joined(job: Job, sizes: list[int]) -> int:
    """Join the parts of these `sizes` into the job's audio: how many times the join renewed its lease."""
    renewals = 0

    def renew() -> None:
        nonlocal renewals
        renewals += 1

    join.join_audio(job, Output.of(job.format, RATE), sizes, renew)
    return renewals


def traced(job: Job, sizes: list[int]) -> int:
    """Join as `joined` does (renewed at least once a part): the join's peak traced memory."""
    tracemalloc.start()
    try:
        assert joined(job, sizes) >= len(sizes)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def download(s3: Any, job: Job, tmp_path: Path) -> Path:
    """The job's audio object, which went up in several upload parts (its first patched on close after
    the second had left), in a file."""
    etag = s3.head_object(Bucket=job.bucket, Key=job.key)["ETag"].strip('"')
    assert "-" in etag and int(etag.rpartition("-")[2]) >= 3, f"fewer than three upload parts: {etag}"
    assert s3.list_multipart_uploads(Bucket=job.bucket).get("Uploads", []) == []
    path = tmp_path / job.key.rpartition("/")[2]
    s3.download_file(job.bucket, job.key, str(path))
    return path


def joined_within_bound(long_job: tuple[str, list[int]], fmt: str, s3: Any, tmp_path: Path) -> Path:
    """The long job joined into `fmt` under PEAK_BOUND_BYTES of traced memory, downloaded."""
    bucket, sizes = long_job
    job = job_of(bucket, fmt)
    peak = traced(job, sizes)
    assert peak < PEAK_BOUND_BYTES, f"peak {peak / 2**20:.0f} MiB"
    return download(s3, job, tmp_path)


def test_an_hour_of_flac_is_joined_in_bounded_memory_and_is_the_parts_exactly(
    long_job: tuple[str, list[int]], s3: Any, tmp_path: Path
) -> None:
    path = joined_within_bound(long_job, "flac", s3, tmp_path)
    with soundfile.SoundFile(path) as audio:
        assert (audio.samplerate, audio.frames) == (RATE, PARTS * PART_SECONDS * RATE)
        for index in range(PARTS):  # lossless: every sample is the parts' own
            assert np.array_equal(audio.read(PART_SECONDS * RATE, dtype="int16"), part_samples(index))


def test_an_hour_of_mp3_is_joined_in_bounded_memory_and_decodes_to_its_length(
    long_job: tuple[str, list[int]], s3: Any, tmp_path: Path
) -> None:
    path = joined_within_bound(long_job, "mp3", s3, tmp_path)
    with soundfile.SoundFile(path) as audio:
        assert audio.samplerate == RATE
        decoded = sum(block.shape[0] for block in audio.blocks(RATE * 60, dtype="int16"))
    # Exactly the parts' length: the LAME tag, written over the object's first bytes on close, tells
    # the decoder the encoder's delay and padding to drop.
    assert decoded == PARTS * PART_SECONDS * RATE


def test_the_lease_is_renewed_within_a_part_as_it_is_encoded(
    s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no time between renewals allowed, the join renews after reading each part and before each
    slice of it that it hands to the encoder."""
    monkeypatch.setattr(join, "RENEW_SECONDS", 0.0)
    seconds, parts = 25, 2  # three slices a part
    pcm = np.zeros(seconds * RATE, dtype="<i2").tobytes()
    job = job_of(bucket, "flac")
    for index in range(parts):
        s3.put_object(Bucket=bucket, Key=job.part_key(index), Body=pcm)
    slices = -(-seconds // join.SLICE_SECONDS)
    assert joined(job, [len(pcm)] * parts) == parts * (1 + slices)


@pytest.mark.parametrize(
    "sizes", [[5_300_000, 5_300_000, 1_000], [1_000, 2_000, 3_000]], ids=["copied by S3", "read one by one"]
)
def test_a_wav_join_renews_the_lease_for_each_part(sizes: list[int], s3: Any, bucket: str) -> None:
    job = job_of(bucket, "wav")
    parts = [bytes([index + 1]) * size for index, size in enumerate(sizes)]
    for index, pcm in enumerate(parts):
        s3.put_object(Bucket=bucket, Key=job.part_key(index), Body=pcm)
    assert joined(job, sizes) == len(sizes)
    written = s3.get_object(Bucket=bucket, Key=job.key)["Body"].read()
    assert written == wav_header(RATE, sum(sizes)) + b"".join(parts)


def test_every_format_has_an_encoding_cost() -> None:
    assert set(join.ENCODE_SECONDS_PER_AUDIO_SECOND) == set(FORMATS)
