"""Jobs: a long text's request, status and finished parts, kept in S3 so its synthesis can span invocations.

Layout, under s3://$COSYVOICE_OUTPUT_BUCKET/$COSYVOICE_OUTPUT_PREFIX (P below; the function's role may
write nowhere else):

    P{id}.{format}                 the audio (a raw SQS message or direct invoke may name its own
                                   `output_key` instead)
    Pjobs/{id}/request.json        what was asked, its sha256 and the job's seed: written once
    Pjobs/{id}/status.json         queued | running (progress) | done (where, how long) | failed (why)
    Pjobs/{id}/plan.json           the job's parts (function.jobs.plan): written once, by the first worker
    Pjobs/{id}/parts/{k:06d}.pcm   part k's audio, s16le mono at the model's rate: written once
    Pjobs/{id}/parts/{k:06d}.marks.json   its speech marks (a script's), at samples from the part's
                                   start: written once, before the audio (the audio's presence says
                                   the part is finished)
    Pjobs/{id}/leases/{k:06d}.json the worker speaking part k, until when: replaced only as read

Identity is content: a job's sha256 covers its canonical request (every field with its default, minus
the id and the ignored `stream`), so the same id with the same content is the same job, and the same id
with other content is refused (JobConflict) instead of being silently dropped. A request without a seed
gets one at submission, stored with it: every segment of the job then draws exactly what it would in a
run of the whole text (function.cosyvoice.engine), so parts written by different invocations, or twice by
duplicate deliveries, are identical, and write-once keeps the first.

The status is read-modify-write with If-Match: a writer that lost a race re-reads it, and nothing
overwrites a finished job's status (done, or permanently failed).

Leases (wall-clock seconds): a worker speaking a part holds that part's lease object (take_part_lease,
refused while another worker's runs), renewed after each segment; the worker that joins the parts holds
the job's lease in its status (`lease_until`, take_lease). Each is given up when the worker stops. A
worker killed mid-part or mid-join (SIGKILL, an out-of-memory kill, a timeout) gives nothing up: its
lease runs out by itself, and the next delivery of its message takes the part or the join over. A lease
never outlasts its holder's invocation.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from function.aws import s3
from function.core.errors import TTSError
from function.core.options import SynthesisOptions
from function.core.script import SpeechMark
from function.instance.settings import Settings
from function.jobs.plan import Plan
from function.service.schema import JOB_ID_PATTERN, SpeechJob

JOBS_FOLDER = "jobs/"
PCM_BYTES = 2  # s16le
MARKED_KEYS = ("marks_key", "captions_key")  # a marked job's speech marks and captions, beside its audio
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
_JSON = "application/json"
_WRITE_ATTEMPTS = 5  # status writers racing on one job: each lost race re-reads and retries


class JobNotFound(TTSError):
    code = "job_not_found"
    status = 404


class JobConflict(TTSError):
    """The id names a job with other content: refused, the existing job is left as it is."""

    code = "job_conflict"
    status = 409


class JobsUnavailable(TTSError):
    """The deployment has no output bucket (or no queue) for jobs."""

    code = "jobs_unavailable"
    status = 503


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def bucket_of(settings: Settings) -> str:
    if settings.output_bucket is None:
        raise JobsUnavailable("COSYVOICE_OUTPUT_BUCKET is not set: this deployment cannot keep jobs or audio")
    return settings.output_bucket


# Fields added to the request since jobs were first stored: left out of the digest while unset, so a job
# stored before them is still the same content when it is submitted again.
_LATER_FIELDS = ("flow_steps",)


def content_digest(request: SpeechJob) -> str:
    unset = {name for name in _LATER_FIELDS if getattr(request, name) is None}
    canonical = request.model_dump(mode="json", exclude={"id", "stream", *unset})
    text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Job:
    """A submitted job: its request as given, and what was fixed at submission."""

    id: str
    request: SpeechJob
    sha256: str
    seed: int
    created_at: str
    bucket: str
    prefix: str  # COSYVOICE_OUTPUT_PREFIX

    @property
    def folder(self) -> str:
        return _folder(self.prefix, self.id)

    @property
    def key(self) -> str:
        """Where the audio goes."""
        return self.prefix + self.request.output_name()

    @property
    def format(self) -> str:
        return self.request.format

    @property
    def marks_key(self) -> str:
        """Beside the audio: its speech marks as JSON lines (a job with SSML or speech marks)."""
        return self._beside_audio(".marks.jsonl")

    @property
    def captions_key(self) -> str:
        """Beside the audio: WebVTT captions, one cue per sentence."""
        return self._beside_audio(".vtt")

    def _beside_audio(self, suffix: str) -> str:
        return self.key.removesuffix(f".{self.format}") + suffix

    def part_key(self, index: int) -> str:
        return f"{self.folder}parts/{index:06d}.pcm"

    def part_marks_key(self, index: int) -> str:
        return f"{self.folder}parts/{index:06d}.marks.json"

    def lease_key(self, index: int) -> str:
        return f"{self.folder}leases/{index:06d}.json"

    def options(self) -> SynthesisOptions:
        """What the worker synthesises: the request, with the job's seed, segment by segment whole."""
        return replace(self.request.to_options(), seed=self.seed, stream=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sha256": self.sha256,
            "seed": self.seed,
            "created_at": self.created_at,
            "request": self.request.model_dump(mode="json", exclude_none=True),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], bucket: str, prefix: str) -> Job:
        return cls(
            id=data["id"],
            request=SpeechJob.model_validate(data["request"]),
            sha256=data["sha256"],
            seed=int(data["seed"]),
            created_at=data["created_at"],
            bucket=bucket,
            prefix=prefix,
        )


@dataclass(frozen=True)
class JobStatus:
    state: str  # QUEUED, RUNNING, DONE or FAILED
    updated_at: str = field(default_factory=_now)
    segments_done: int = 0
    segments_total: int | None = None  # known once a worker has split the text
    audio_seconds: float = 0.0  # of the finished segments
    # done: bucket, key, format, content_type, sample_rate, duration (and MARKED_KEYS for marked jobs)
    result: dict[str, Any] | None = None
    error: dict[str, str] | None = None  # failed: {"code", "message"}; or the last transient error
    retriable: bool = False  # failed after the queue's last receive: a redriven message resumes it
    lease_until: float | None = None  # running: a worker joins the parts until then (time.time())
    parts_total: int | None = None  # known once a worker has planned the job
    parts_done: int = 0

    @property
    def final(self) -> bool:
        """Nothing more will happen to the job: its audio is written, or it cannot be made."""
        return self.state == DONE or (self.state == FAILED and not self.retriable)

    def held(self, now: float) -> bool:
        """Whether a worker holds the job at `now` (a killed worker's lease runs out by itself)."""
        return self.state == RUNNING and self.lease_until is not None and self.lease_until > now

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.state,
            "updated_at": self.updated_at,
            "progress": {
                "segments_done": self.segments_done,
                "segments_total": self.segments_total,
                "audio_seconds": round(self.audio_seconds, 3),
                "parts_total": self.parts_total,
                "parts_done": self.parts_done,
            },
        }
        if self.result is not None:
            data.update(self.result)
        if self.error is not None:
            data["error" if self.state == FAILED else "last_error"] = self.error
        if self.retriable:
            data["retriable"] = True
        if self.lease_until is not None:
            data["lease_until"] = round(self.lease_until, 3)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobStatus:
        progress = data.get("progress", {})
        result_keys = (
            "bucket",
            "key",
            "format",
            "content_type",
            "sample_rate",
            "duration_seconds",
        ) + MARKED_KEYS
        result = {key: data[key] for key in result_keys if key in data} or None
        return cls(
            state=data["status"],
            updated_at=data.get("updated_at", ""),
            segments_done=progress.get("segments_done", 0),
            segments_total=progress.get("segments_total"),
            audio_seconds=progress.get("audio_seconds", 0.0),
            result=result,
            error=data.get("error", data.get("last_error")),
            retriable=data.get("retriable", False),
            lease_until=data.get("lease_until"),
            parts_total=progress.get("parts_total"),
            parts_done=progress.get("parts_done", 0),
        )


def submit(request: SpeechJob, settings: Settings) -> tuple[Job, bool]:
    """Store a new job (True), or find the one its id names with the same content (False). A request
    without an id gets a fresh one. Raises JobConflict for an id taken by other content."""
    bucket = bucket_of(settings)
    request.to_options().validated(settings.job_max_text_chars)
    job_id = request.id or uuid.uuid4().hex
    request = request.model_copy(update={"id": job_id})
    request.output_name()  # refuses a bad output_key before anything is stored
    job = Job(
        id=job_id,
        request=request,
        sha256=content_digest(request),
        seed=request.seed if request.seed is not None else secrets.randbits(63),
        created_at=_now(),
        bucket=bucket,
        prefix=settings.output_prefix,
    )
    body = json.dumps(job.to_dict(), ensure_ascii=False).encode()
    if s3.put(bucket, _request_key(job.folder), body, _JSON):
        return job, True
    existing = load(job.id, settings)
    if existing.sha256 != job.sha256:
        raise JobConflict(
            f"job {job.id!r} exists with other content (sha256 {existing.sha256[:12]}…, this request's"
            f" {job.sha256[:12]}…): give this request another id"
        )
    return existing, False


def load(job_id: str, settings: Settings) -> Job:
    bucket = bucket_of(settings)
    if re.fullmatch(JOB_ID_PATTERN, job_id) is None:  # never a key outside the job's folder
        raise JobNotFound(f"no job {job_id!r}")
    found = s3.read(bucket, _request_key(_folder(settings.output_prefix, job_id)))
    if found is None:
        raise JobNotFound(f"no job {job_id!r}")
    return Job.from_dict(json.loads(found[0]), bucket, settings.output_prefix)


def status(job: Job) -> JobStatus | None:
    """The job's status; None until it has been queued or started."""
    found = s3.read(job.bucket, _status_key(job))
    return None if found is None else JobStatus.from_dict(json.loads(found[0]))


def update_status(job: Job, state: str | None, **changes: Any) -> JobStatus:
    """Move the job's status to `state` (None: keep it) with `changes`, read-modify-write: a writer that
    lost a race re-reads and applies its change to the newer status. A final status (done, or failed
    for good) is never changed. Returns the status now in force."""
    return _rewrite(job, lambda current: replace(current, state=state or current.state, **changes))


def release(job: Job, state: str | None, held_until: float | None, **changes: Any) -> JobStatus:
    """`update_status`, giving up the lease only when it is this worker's: the one it took or last renewed
    until `held_until` (None: it took none). A worker that failed before its lease was taken, or whose
    lease ran out and was taken over, leaves the other worker's lease in place."""

    def changed(current: JobStatus) -> JobStatus:
        mine = held_until is not None and current.lease_until == held_until
        lease_until = None if mine else current.lease_until
        return replace(current, state=state or current.state, lease_until=lease_until, **changes)

    return _rewrite(job, changed)


def take_lease(job: Job, until: float, clock: Callable[[], float] = time.time) -> bool:
    """Hold the job as the worker joining its parts until `until` (on `clock`, time.time()): False if
    another worker holds it (its lease has not run out) or the job is finished."""

    def taken(current: JobStatus) -> JobStatus | None:
        if current.final or current.held(clock()):
            return None
        return replace(current, state=RUNNING, lease_until=until)

    now_in_force = _rewrite(job, taken)
    return now_in_force.state == RUNNING and now_in_force.lease_until == until


def _rewrite(job: Job, change: Callable[[JobStatus], JobStatus | None]) -> JobStatus:
    """Write change(current status) with If-Match, re-reading after each lost race, and return the
    status now in force: a final one is never changed, and a change that returns None declines."""
    key = _status_key(job)
    for _ in range(_WRITE_ATTEMPTS):
        found = s3.read(job.bucket, key)
        current = JobStatus(QUEUED) if found is None else JobStatus.from_dict(json.loads(found[0]))
        if found is not None and current.final:
            return current
        changed = change(current)
        if changed is None:
            return current
        new = replace(changed, updated_at=_now())
        body = json.dumps(new.to_dict(), ensure_ascii=False).encode()
        if s3.put(job.bucket, key, body, _JSON, etag=None if found is None else found[1]):
            return new
    raise s3.StorageError(f"the status of job {job.id!r} kept changing under this writer")


def mark_queued(job: Job) -> JobStatus:
    """The status of a job whose message was just sent, unless a worker has written one already."""
    queued = JobStatus(QUEUED)
    body = json.dumps(queued.to_dict(), ensure_ascii=False).encode()
    if s3.put(job.bucket, _status_key(job), body, _JSON):
        return queued
    return status(job) or queued


def record_parts(job: Job, plan: Plan, sizes: dict[int, int], rate: int, speaking: bool = False) -> JobStatus:
    """The progress of a job whose finished parts have these byte `sizes` (at `rate` samples a second):
    never below what a writer that saw more parts recorded. A job that failed after a part's last
    receive stays failed (the part's message is dead-lettered) until a worker is `speaking` a part
    again (a redriven message): then it is running."""
    segments = sum(len(plan.parts[index]) for index in sizes)
    seconds = sum(sizes.values()) / PCM_BYTES / rate

    def counted(current: JobStatus) -> JobStatus:
        if current.parts_done > len(sizes):
            return replace(current, parts_total=len(plan.parts))
        progress = replace(
            current,
            parts_total=len(plan.parts),
            parts_done=len(sizes),
            segments_total=plan.segments,
            segments_done=segments,
            audio_seconds=seconds,
        )
        if current.state == FAILED and not speaking:
            return progress
        return replace(progress, state=RUNNING, error=None, retriable=False)

    return _rewrite(job, counted)


def load_plan(job: Job) -> Plan | None:
    found = s3.read(job.bucket, _plan_key(job))
    return None if found is None else Plan.from_dict(json.loads(found[0]))


def save_plan(job: Job, plan: Plan) -> Plan:
    """Store the job's plan unless a worker stored one first; the plan now in force."""
    if s3.put(job.bucket, _plan_key(job), json.dumps(plan.to_dict()).encode(), _JSON):
        return plan
    stored = load_plan(job)
    if stored is None:
        raise s3.StorageError(f"the plan of job {job.id!r} was refused and cannot be read")
    return stored


def finished_parts(job: Job) -> dict[int, int]:
    """The byte sizes of the parts whose audio is written, by index."""
    folder = f"{job.folder}parts/"
    found = s3.sizes(job.bucket, folder)
    named = {key: re.fullmatch(r"(\d{6})\.pcm", key.removeprefix(folder)) for key in found}
    return {int(match[1]): found[key] for key, match in named.items() if match is not None}


def write_part(job: Job, index: int, pcm: bytes, marks: list[tuple[int, SpeechMark]]) -> None:
    """Part `index`'s marks (at samples from its start), then its audio, each once: a duplicate's
    identical part finds the first one there and keeps it."""
    if marks:
        body = [{"samples": samples, **mark.to_dict()} for samples, mark in marks]
        s3.put(job.bucket, job.part_marks_key(index), json.dumps(body, ensure_ascii=False).encode(), _JSON)
    s3.put(job.bucket, job.part_key(index), pcm, "audio/L16")


def read_part(job: Job, index: int) -> bytes:
    found = s3.read(job.bucket, job.part_key(index))
    if found is None:
        raise s3.StorageError(f"part {index} of job {job.id!r} is gone (expired?)")
    return found[0]


def read_parts(job: Job, count: int) -> Iterator[np.ndarray]:
    """Parts 0..count-1 as float32 chunks in [-1, 1], one at a time."""
    for index in range(count):
        yield np.frombuffer(read_part(job, index), dtype="<i2").astype(np.float32) / 32767.0


def read_part_marks(job: Job, index: int) -> list[tuple[int, SpeechMark]]:
    """Part `index`'s speech marks, each at samples from the part's start (none: a part without any)."""
    found = s3.read(job.bucket, job.part_marks_key(index))
    if found is None:
        return []
    return [
        (item["samples"], SpeechMark(item["time"], item["type"], item["start"], item["end"], item["value"]))
        for item in json.loads(found[0])
    ]


def take_part_lease(
    job: Job, index: int, until: float, held: float | None = None, clock: Callable[[], float] = time.time
) -> bool:
    """Hold part `index` until `until`: True when nobody holds it, the holder's lease has run out, or it
    is this worker's own lease (held until `held`), renewed; False while another worker holds it."""
    key = job.lease_key(index)
    found = s3.read(job.bucket, key)
    if found is not None:
        current = json.loads(found[0])["until"]
        if current != held and current > clock():
            return False
    body = json.dumps({"until": until}).encode()
    return s3.put(job.bucket, key, body, _JSON, etag=None if found is None else found[1])


def release_part_lease(job: Job, index: int, held: float | None) -> None:
    """Give up part `index`'s lease if it is still this worker's (held until `held`)."""
    if held is not None:
        take_part_lease(job, index, 0.0, held)


def view(job: Job, current: JobStatus | None) -> dict[str, Any]:
    """GET /v1/jobs/{id}'s body: the status, with a presigned URL once the audio is written (and for its
    speech marks and captions, when the job has them)."""
    shown = current if current is not None else JobStatus(QUEUED, updated_at=job.created_at)
    data = {
        "id": job.id,
        "status_url": status_url(job.id),
        "created_at": job.created_at,
        "seed": job.seed,
        **shown.to_dict(),
    }
    if shown.state == DONE and shown.result is not None:
        data["url"] = s3.presigned_url(shown.result["bucket"], shown.result["key"])
        for key in MARKED_KEYS:
            if key in shown.result:
                data[key.replace("_key", "_url")] = s3.presigned_url(
                    shown.result["bucket"], shown.result[key]
                )
    return data


def status_url(job_id: str) -> str:
    return f"/v1/jobs/{job_id}"


def _folder(prefix: str, job_id: str) -> str:
    return f"{prefix}{JOBS_FOLDER}{job_id}/"


def _request_key(folder: str) -> str:
    return f"{folder}request.json"


def _status_key(job: Job) -> str:
    return f"{job.folder}status.json"


def _plan_key(job: Job) -> str:
    return f"{job.folder}plan.json"


__all__ = [
    "DONE",
    "FAILED",
    "Job",
    "JobConflict",
    "JobNotFound",
    "JobStatus",
    "JobsUnavailable",
    "QUEUED",
    "RUNNING",
    "content_digest",
    "finished_parts",
    "load",
    "load_plan",
    "mark_queued",
    "read_part",
    "read_part_marks",
    "read_parts",
    "record_parts",
    "release",
    "release_part_lease",
    "save_plan",
    "status",
    "status_url",
    "submit",
    "take_lease",
    "take_part_lease",
    "update_status",
    "view",
    "write_part",
]
