"""A job's parts joined into its audio, and for a script its speech marks and captions, once every part
is written (function.jobs.worker calls it under the job's lease).

wav and pcm at the model's rate are the parts' samples as they are: S3 joins them itself (a multipart
upload whose first part is the header with part 0, and whose later parts are UploadPartCopy of parts 1,
2, … : nothing is read back but part 0), when there are several and every one but the last is at least
S3's 5 MiB part minimum (COSYVOICE_JOB_PART_SECONDS keeps them so); otherwise they are read one by one
into the audio object. Every other format is encoded part by part: each part is read, handed to the
encoder a slice at a time, and the encoded bytes leave as multipart parts as they fill (an Upload of
function.aws.s3, which keeps the object's first part so flac and mp3 can finish their headers on close).
Memory stays near one part's samples, however long the job.

The join runs under the job's lease: `renew` is called after each part is read or copied, and while a
part is encoded at least every RENEW_SECONDS, so the lease outlives a join of any length.

A part's marks are stored at samples from the part's start; here each is moved by the samples of the
parts before it and only then turned into milliseconds, so the job's marks and captions are exactly those
of one run of the whole script.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from function.audio.encode import encode_into, wav_header
from function.aws import s3
from function.core.formats import Output
from function.core.script import MARK_TYPES, SpeechMark
from function.jobs import store
from function.jobs.store import Job
from function.markup.marks import MARKS_MEDIA_TYPE, VTT_MEDIA_TYPE, marks_jsonl, webvtt

# The join's time, for refusing one that would not finish in the invocation: a few S3 round trips, then
# per second of audio, S3's copies (wav, pcm) or the encoding into the upload by format (about three
# times what joins from S3 took on a two-vCPU host, for slower or busier CPUs; wav and pcm are encoded
# only when resampled).
JOIN_SECONDS = 0.5
COPY_SECONDS_PER_AUDIO_SECOND = 0.002
ENCODE_SECONDS_PER_AUDIO_SECOND = {
    "flac": 0.005,
    "mp3": 0.025,
    "ogg": 0.012,
    "opus": 0.06,  # resampled to 24 kHz first
    "wav": 0.005,
    "pcm": 0.005,
}
RENEW_SECONDS = 5.0  # the longest a part's encoding runs between two calls of `renew`
SLICE_SECONDS = 10  # audio handed to the encoder at a time: how often the time to renew is checked


def copies_parts(output: Output) -> bool:
    """Whether the audio object is the parts themselves (under a wav header): no encoding."""
    return output.name in ("wav", "pcm") and output.rate == output.source_rate


def seconds_needed(output: Output, audio_seconds: float) -> float:
    """What joining parts of `audio_seconds` into `output` may take, erring long."""
    if copies_parts(output):
        per_second = COPY_SECONDS_PER_AUDIO_SECOND
    else:
        per_second = ENCODE_SECONDS_PER_AUDIO_SECOND[output.name]
    return JOIN_SECONDS + audio_seconds * per_second


def join_audio(job: Job, output: Output, sizes: list[int], renew: Callable[[], None]) -> None:
    """Write the audio object from the parts of these byte `sizes` (0, 1, … in order), once, holding
    about one part in memory. `renew` is called after each part is read or copied, and at least every
    RENEW_SECONDS while a part is encoded: the caller renews its lease there."""
    header = wav_header(output.rate, sum(sizes)) if output.name == "wav" else b""
    voiced = [index for index, size in enumerate(sizes) if size > 0]  # S3 copies no empty object
    if copies_parts(output) and len(voiced) > 1 and s3.joinable([sizes[index] for index in voiced]):
        first = header + store.read_part(job, voiced[0])
        renew()
        sources = [job.part_key(index) for index in voiced[1:]]
        s3.join(job.bucket, job.key, first, sources, output, job.id, copied=renew)
        return
    with s3.Upload(job.bucket, job.key, output, job.id) as upload:
        if copies_parts(output):
            upload.write(header)
            for index in range(len(sizes)):
                upload.write(store.read_part(job, index))
                renew()
        else:
            encode_into(upload, _slices(job, len(sizes), output.source_rate, renew), output)
        upload.complete()


def _slices(job: Job, count: int, rate: int, renew: Callable[[], None]) -> Iterator[np.ndarray]:
    """The samples of parts 0 … count-1 (at `rate`) in slices of SLICE_SECONDS, calling `renew` after
    each part is read and, between slices, once RENEW_SECONDS have passed since it was last called.
    Each slice is a copy, so a part is freed before the next one is read even while the encoder still
    holds the slice it was given last."""
    size = SLICE_SECONDS * rate
    for part in store.read_parts(job, count):
        renew()
        renewed = time.monotonic()
        for start in range(0, part.shape[0], size):
            if time.monotonic() - renewed >= RENEW_SECONDS:
                renew()
                renewed = time.monotonic()
            yield part[start : start + size].copy()
        del part


def join_marks(job: Job, rate: int, sizes: list[int], wanted: Iterable[str] = MARK_TYPES) -> None:
    """Write the job's speech marks (the `wanted` types) and its captions from the parts' marks."""
    marks: list[SpeechMark] = []
    before = 0  # samples of the parts before this one
    for index, size in enumerate(sizes):
        for samples, mark in store.read_part_marks(job, index):
            marks.append(SpeechMark(_ms(before + samples, rate), mark.type, mark.start, mark.end, mark.value))
        before += size // store.PCM_BYTES
    kept = set(wanted)
    s3.put(job.bucket, job.marks_key, marks_jsonl(m for m in marks if m.type in kept), MARKS_MEDIA_TYPE)
    s3.put(job.bucket, job.captions_key, webvtt(marks, _ms(before, rate)).encode(), VTT_MEDIA_TYPE)


def _ms(samples: int, rate: int) -> int:
    """As the engine times a mark: the samples before it, in whole milliseconds."""
    return round(samples * 1000 / rate)


__all__ = ["RENEW_SECONDS", "copies_parts", "join_audio", "join_marks", "seconds_needed"]
