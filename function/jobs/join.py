"""A job's parts joined into its audio, and for a script its speech marks and captions, once every part
is written (function.jobs.worker calls it under the job's lease).

wav and pcm at the model's rate are the parts' samples as they are: S3 joins them itself (a multipart
upload whose first part is the header with part 0, and whose later parts are UploadPartCopy of parts 1,
2, … : nothing is read back but part 0), when there are several and every one but the last is at least
S3's 5 MiB part minimum (COSYVOICE_JOB_PART_SECONDS keeps them so). Otherwise, and for every other
format, the parts stream through the format's encoder into the audio object, one multipart part in
memory at a time.

A part's marks are stored at samples from the part's start; here each is moved by the samples of the
parts before it and only then turned into milliseconds, so the job's marks and captions are exactly those
of one run of the whole script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import chain

from function.audio.encode import iter_encode, wav_header
from function.aws import s3
from function.core.formats import Output
from function.core.script import MARK_TYPES, SpeechMark
from function.jobs import store
from function.jobs.store import Job
from function.markup.marks import MARKS_MEDIA_TYPE, VTT_MEDIA_TYPE, marks_jsonl, webvtt

# The join's time, for refusing one that would not finish in the invocation: a few S3 round trips, then
# per second of audio, S3's copies (wav, pcm) or the encoding (the slowest format, opus, allowed for).
JOIN_SECONDS = 0.5
COPY_SECONDS_PER_AUDIO_SECOND = 0.002
ENCODE_SECONDS_PER_AUDIO_SECOND = 0.02


def copies_parts(output: Output) -> bool:
    """Whether the audio object is the parts themselves (under a wav header): no encoding."""
    return output.name in ("wav", "pcm") and output.rate == output.source_rate


def seconds_needed(output: Output, audio_seconds: float) -> float:
    per_second = COPY_SECONDS_PER_AUDIO_SECOND if copies_parts(output) else ENCODE_SECONDS_PER_AUDIO_SECOND
    return JOIN_SECONDS + audio_seconds * per_second


def join_audio(job: Job, output: Output, sizes: list[int], renew: Callable[[], None]) -> None:
    """Write the audio object from the parts of these byte `sizes` (0, 1, … in order), once; `renew`
    (the joiner's lease) is called as the parts are read."""
    header = wav_header(output.rate, sum(sizes)) if output.name == "wav" else b""
    voiced = [index for index, size in enumerate(sizes) if size > 0]  # S3 copies no empty object
    if copies_parts(output) and len(voiced) > 1 and s3.joinable([sizes[index] for index in voiced]):
        first = header + store.read_part(job, voiced[0])
        sources = [job.part_key(index) for index in voiced[1:]]
        s3.join(job.bucket, job.key, first, sources, output, job.id)
        return
    pieces: Iterable[bytes]
    if copies_parts(output):
        pieces = chain([header], (store.read_part(job, index) for index in range(len(sizes))))
    else:
        pieces = iter_encode(store.read_parts(job, len(sizes)), output)
    s3.store_stream(job.bucket, job.key, pieces, output, job.id)


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


__all__ = ["copies_parts", "join_audio", "join_marks", "seconds_needed"]
