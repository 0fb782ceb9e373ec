"""Jobs: a long text's request, status and finished parts, kept in S3 so its synthesis can span invocations.

Layout, under s3://$COSYVOICE_OUTPUT_BUCKET/$COSYVOICE_OUTPUT_PREFIX (R below, the root; the function's role
may write nowhere else). A job's own objects are under its tenant's prefix P: R for the default tenant,
R + "tenants/{tenant}/" for every other (function.core.tenant).

    P{id}.{format}                 the audio (a raw SQS message or direct invoke may name its own
                                   `output_key` instead)
    Pjobs/{id}/request.json        what was asked, its sha256 and the job's seed: written once
    Pjobs/{id}/status.json         queued | running (progress) | done (where, how long) | failed (why)
    Pjobs/{id}/plan.json           the job's parts and contract (function.jobs.plan): written once, by the
                                   first worker
    Pjobs/{id}/parts/{k:06d}.pcm   part k's audio, s16le mono at the model's rate: written once
    Pjobs/{id}/parts/{k:06d}.marks.json   its speech marks (a script's), at samples from the part's
                                   start: written once, before the audio (the audio's presence says
                                   the part is finished)
    Pjobs/{id}/leases/{k:06d}.json the worker speaking part k, until when, and the part's attempts:
                                   replaced only as read
    Rjobs/_active/{tenant}/{id}    the index of jobs that are not final (function.jobs.sweep reads it):
                                   written before the request, removed when the job ends
    Rjobs/_sweeper.json            the lease of the deployment's one sweeper

Identity is content: a job's sha256 covers its canonical request (every field with its default, minus
the id and the ignored `stream`), so the same id with the same content is the same job, and the same id
with other content is refused (JobConflict) instead of being silently dropped. A request without a seed
gets one at submission, stored with it: every segment of the job then draws exactly what it would in a
run of the whole text (function.cosyvoice.engine), so parts written by different invocations, or twice by
duplicate deliveries, are identical, and write-once keeps the first.

The status is read-modify-write with If-Match: a writer that lost a race re-reads it, and nothing
changes a final status (done, or failed). The one way out of `failed` is `retry`, when a retriable
failure is submitted again.

Leases (wall-clock seconds): a worker speaking a part holds that part's lease object (take_part_lease,
refused while another worker's runs), renewed every third of its length while the part is spoken;
each fresh take counts one attempt of the part, and a part handed back through no fault of its own
gives its attempt back. The worker that joins the parts holds the job's lease in its status
(`lease_until`, take_lease), renewed as it joins.
Each is given up when the worker stops. A worker killed mid-part or mid-join (SIGKILL, an out-of-memory
kill, a timeout) gives nothing up: its lease runs out by itself, and the next delivery of its message,
or the sweeper, takes the part or the join over. A lease never outlasts its holder's invocation.
"""

from __future__ import annotations

import calendar
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
from function.core.tenant import DEFAULT_TENANT, tenant_prefix
from function.instance.settings import Settings
from function.jobs.plan import Contract, Plan
from function.service.schema import JOB_ID_PATTERN, SpeechJob

JOBS_FOLDER = "jobs/"
PCM_BYTES = 2  # s16le
MARKED_KEYS = ("marks_key", "captions_key")  # a marked job's speech marks and captions, beside its audio
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
_JSON = "application/json"
_WRITE_ATTEMPTS = 5  # status writers racing on one job: each lost race re-reads and retries
# Beside the job folders under jobs/ (a job id starts with a letter or a digit, so neither is an id):
_ACTIVE = "_active"  # the index of jobs that are not final: _active/{tenant}/{id}
_SWEEPER = "_sweeper.json"  # the lease of the deployment's one sweeper


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
    root: str  # COSYVOICE_OUTPUT_PREFIX
    tenant: str = DEFAULT_TENANT

    @property
    def prefix(self) -> str:
        """Where the tenant's objects live: the root, or under tenants/{tenant}/ for all but the default."""
        return tenant_prefix(self.root, self.tenant)

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

    @property
    def active_key(self) -> str:
        """Its entry in the deployment's index of jobs that are not final (what the sweeper reads)."""
        return f"{_active_folder(self.root)}{self.tenant}/{self.id}"

    def options(self) -> SynthesisOptions:
        """What the worker synthesises: the request, with the job's seed and tenant (whose saved voices it
        may name), segment by segment whole."""
        return replace(self.request.to_options(), seed=self.seed, stream=False, tenant=self.tenant)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "sha256": self.sha256,
            "seed": self.seed,
            "created_at": self.created_at,
            "request": self.request.model_dump(mode="json", exclude_none=True),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], bucket: str, root: str, tenant: str) -> Job:
        return cls(
            id=data["id"],
            request=SpeechJob.model_validate(data["request"]),
            sha256=data["sha256"],
            seed=int(data["seed"]),
            created_at=data["created_at"],
            bucket=bucket,
            root=root,
            tenant=tenant,
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
    progressed_at: float | None = None  # when the job last moved (time.time()): queued, a part taken or
    # written, a re-drive; None in a status written before it was kept (its updated_at stands in)
    redrives: int = 0  # the sweeper's re-drives since the job last moved

    @property
    def final(self) -> bool:
        """Nothing more will happen to the job: its audio is written, or it failed (a retriable failure
        is retried only by submitting the same job again, function.jobs.store.retry)."""
        return self.state in (DONE, FAILED)

    def moved_at(self) -> float:
        """When the job last moved (time.time())."""
        return self.progressed_at if self.progressed_at is not None else self.updated()

    def updated(self) -> float:
        """When the status was last written (time.time(), to the second)."""
        return (
            calendar.timegm(time.strptime(self.updated_at, "%Y-%m-%dT%H:%M:%SZ")) if self.updated_at else 0.0
        )

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
        if self.progressed_at is not None:
            data["progressed_at"] = round(self.progressed_at, 3)
        if self.redrives:
            data["redrives"] = self.redrives
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
            progressed_at=data.get("progressed_at"),
            redrives=data.get("redrives", 0),
        )


def submit(request: SpeechJob, settings: Settings, tenant: str = DEFAULT_TENANT) -> tuple[Job, bool]:
    """Store a new job of `tenant`'s (True), or find the one its id names with the same content (False).
    A request without an id gets a fresh one. Raises JobConflict for an id taken by other content."""
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
        root=settings.output_prefix,
        tenant=tenant,
    )
    body = json.dumps(job.to_dict(), ensure_ascii=False).encode()
    mark_active(job)  # before the request: a job stored is a job the sweeper can find
    if s3.put(bucket, _request_key(job.folder), body, _JSON):
        return job, True
    existing = load(job.id, settings, tenant)
    current = status(existing)
    if current is not None and current.final:
        mark_inactive(existing)  # the entry this submission wrote: the job had ended before
    if existing.sha256 != job.sha256:
        raise JobConflict(
            f"job id {job.id!r} is taken by a job with other content: give this request another id"
        )
    return existing, False


def load(job_id: str, settings: Settings, tenant: str = DEFAULT_TENANT) -> Job:
    """`tenant`'s job `job_id`; JobNotFound when that tenant has none (whatever other tenants have)."""
    bucket = bucket_of(settings)
    if re.fullmatch(JOB_ID_PATTERN, job_id) is None:  # never a key outside the job's folder
        raise JobNotFound(f"no job {job_id!r}")
    found = s3.read(bucket, _request_key(_folder(tenant_prefix(settings.output_prefix, tenant), job_id)))
    if found is None:
        raise JobNotFound(f"no job {job_id!r}")
    return Job.from_dict(json.loads(found[0]), bucket, settings.output_prefix, tenant)


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


def take_lease(
    job: Job, until: float, held: float | None = None, clock: Callable[[], float] = time.time
) -> bool:
    """Hold the job as the worker joining its parts until `until` (on `clock`, time.time()), or renew
    this worker's own lease (held until `held`): False if another worker holds it (its lease has not run
    out) or the job is finished."""

    def taken(current: JobStatus) -> JobStatus | None:
        mine = held is not None and current.lease_until == held
        if current.final or (current.held(clock()) and not mine):
            return None
        return replace(current, state=RUNNING, lease_until=until)

    now_in_force = _rewrite(job, taken)
    return now_in_force.state == RUNNING and now_in_force.lease_until == until


def _rewrite(job: Job, change: Callable[[JobStatus], JobStatus | None]) -> JobStatus:
    """Write change(current status) with If-Match, re-reading after each lost race, and return the
    status now in force: a final one is never changed, and a change that returns None declines."""
    return _write(job, change)[0]


def _write(job: Job, change: Callable[[JobStatus], JobStatus | None]) -> tuple[JobStatus, bool]:
    """`_rewrite`, and whether this call's write is the status now in force."""
    key = _status_key(job)
    for _ in range(_WRITE_ATTEMPTS):
        found = s3.read(job.bucket, key)
        current = JobStatus(QUEUED) if found is None else JobStatus.from_dict(json.loads(found[0]))
        if found is not None and current.final:
            return current, False
        changed = change(current)
        if changed is None:
            return current, False
        new = replace(changed, updated_at=_now())
        body = json.dumps(new.to_dict(), ensure_ascii=False).encode()
        if s3.put(job.bucket, key, body, _JSON, etag=None if found is None else found[1]):
            return new, True
    raise s3.StorageError(f"the status of job {job.id!r} kept changing under this writer")


def mark_queued(job: Job) -> JobStatus:
    """The status of a job whose message was just sent, unless a worker has written one already."""
    queued = JobStatus(QUEUED, progressed_at=time.time())
    body = json.dumps(queued.to_dict(), ensure_ascii=False).encode()
    if s3.put(job.bucket, _status_key(job), body, _JSON):
        return queued
    return status(job) or queued


def record_parts(job: Job, plan: Plan, sizes: dict[int, int], rate: int, started: bool = False) -> JobStatus:
    """The progress of a job whose finished parts have these byte `sizes` (at `rate` samples a second):
    never below what a writer that saw more parts recorded. The job has moved (the sweeper leaves it
    alone) when a part was written since, or a worker has just `started` a part. A final job (done, or
    failed) stays as it is."""
    segments = sum(len(plan.parts[index]) for index in sizes)
    seconds = sum(sizes.values()) / PCM_BYTES / rate

    def counted(current: JobStatus) -> JobStatus:
        if current.parts_done > len(sizes):
            return replace(current, parts_total=len(plan.parts))
        progress = replace(
            current,
            state=RUNNING,
            parts_total=len(plan.parts),
            parts_done=len(sizes),
            segments_total=plan.segments,
            segments_done=segments,
            audio_seconds=seconds,
        )
        if started or len(sizes) > current.parts_done or current.parts_total is None:
            return replace(progress, progressed_at=time.time(), redrives=0, error=None)
        return progress

    return _rewrite(job, counted)


def fail(job: Job, error: dict[str, str], retriable: bool, held_until: float | None) -> bool:
    """Mark the job failed with `error`, giving up the join's lease if it is this worker's (held until
    `held_until`). True when this call failed it; False when it was final already (done, or failed by
    another worker: that worker tells the topic and dead-letters its message, so a job fails once)."""

    def failed(current: JobStatus) -> JobStatus:
        mine = held_until is not None and current.lease_until == held_until
        lease_until = None if mine else current.lease_until
        return replace(current, state=FAILED, error=error, retriable=retriable, lease_until=lease_until)

    return _write(job, failed)[1]


def finish(job: Job, **changes: Any) -> bool:
    """Mark the job done with `changes` (its result and final progress), its lease given up. True when
    this call made it done; False when it was final already: another worker that joined the same parts
    (its lease ran out as it finished) or a failure got there first, and that worker tells the topic,
    so a job ends once."""
    return _write(job, lambda current: replace(current, state=DONE, lease_until=None, **changes))[1]


def retry(job: Job) -> bool:
    """Queue a job that failed retriably again: the one way out of `failed`, taken when the same job
    (same id and content) is submitted again. Its finished parts are kept; every part's attempts start
    again. True when this call moved it (the caller sends its message); False when the job did not fail
    retriably, or another submission retried it first."""
    key = _status_key(job)
    found = s3.read(job.bucket, key)
    current = None if found is None else JobStatus.from_dict(json.loads(found[0]))
    if found is None or current is None or current.state != FAILED or not current.retriable:
        return False
    s3.delete(job.bucket, s3.sizes(job.bucket, f"{job.folder}leases/"))  # nobody speaks a failed job
    queued = replace(
        current,
        state=QUEUED,
        error=None,
        retriable=False,
        lease_until=None,
        progressed_at=time.time(),
        redrives=0,
        updated_at=_now(),
    )
    body = json.dumps(queued.to_dict(), ensure_ascii=False).encode()
    if not s3.put(job.bucket, key, body, _JSON, etag=found[1]):
        return False
    mark_active(job)
    return True


def redriven(job: Job, max_redrives: int, reason: str) -> JobStatus:
    """Count one re-drive of a job that has not moved: the status now in force, failed (for good: its
    parts keep failing to move) once this would be re-drive `max_redrives` + 1."""

    def counted(current: JobStatus) -> JobStatus:
        if current.redrives >= max_redrives:
            message = f"{reason}; no progress after {current.redrives} re-drives"
            error = {"code": "job_stalled", "message": message}
            return replace(current, state=FAILED, error=error, retriable=False)
        return replace(current, redrives=current.redrives + 1, progressed_at=time.time())

    return _rewrite(job, counted)


def load_plan(job: Job, reader: Contract) -> Plan | None:
    """The job's plan; `reader`'s settings stand in for what a plan stored before contracts lacks."""
    found = s3.read(job.bucket, _plan_key(job))
    return None if found is None else Plan.from_dict(json.loads(found[0]), reader)


def save_plan(job: Job, plan: Plan) -> Plan:
    """Store the job's plan unless a worker stored one first; the plan now in force."""
    if s3.put(job.bucket, _plan_key(job), json.dumps(plan.to_dict()).encode(), _JSON):
        return plan
    stored = load_plan(job, plan.contract)
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
        _write_once(
            job.bucket, job.part_marks_key(index), json.dumps(body, ensure_ascii=False).encode(), _JSON
        )
    _write_once(job.bucket, job.part_key(index), pcm, "audio/L16")


def _write_once(bucket: str, key: str, data: bytes, content_type: str) -> None:
    """Write `key` once, and make sure it is there: a refused conditional write (412: written before;
    409: another write of it was under way, and may yet fail) counts only once the object is read back."""
    for _ in range(_WRITE_ATTEMPTS):
        if s3.put(bucket, key, data, content_type) or s3.exists(bucket, key):
            return
    raise s3.StorageError(f"s3://{bucket}/{key} was refused {_WRITE_ATTEMPTS} times and is not there")


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
) -> int | None:
    """Hold part `index` until `until`: the part's attempts, this one counted, when nobody holds it or the
    holder's lease has run out (a fresh attempt), or when it is this worker's own lease (held until
    `held`), renewed (no new attempt); None while another worker holds it."""
    return _take(job.bucket, job.lease_key(index), until, held, clock, count=True)


def release_part_lease(job: Job, index: int, held: float | None, counted: bool = True) -> None:
    """Give up part `index`'s lease if it is still this worker's (held until `held`). `counted` False:
    this attempt does not count toward the job's failure (the worker was stopped, or handed the part
    back for a reason that is not the part's)."""
    if held is None:
        return
    key = job.lease_key(index)
    found = s3.read(job.bucket, key)
    if found is None:
        return
    lease = json.loads(found[0])
    if lease["until"] != held:
        return
    attempts = lease.get("attempts", 1) - (0 if counted else 1)
    s3.put(
        job.bucket, key, json.dumps({"until": 0.0, "attempts": max(attempts, 0)}).encode(), _JSON, found[1]
    )


def part_held(job: Job, index: int, now: float) -> bool:
    """Whether a worker holds part `index` at `now`."""
    found = s3.read(job.bucket, job.lease_key(index))
    return found is not None and json.loads(found[0])["until"] > now


def take_sweep_lease(bucket: str, root: str, until: float, clock: Callable[[], float] = time.time) -> bool:
    """Be the deployment's one sweeper (function.jobs.sweep) until `until`: False while another holds it."""
    return _take(bucket, f"{root}{JOBS_FOLDER}{_SWEEPER}", until, None, clock, count=False) is not None


def _take(
    bucket: str, key: str, until: float, held: float | None, clock: Callable[[], float], count: bool
) -> int | None:
    """A lease object `{"until", "attempts"}` taken or renewed as read (If-Match / If-None-Match): the
    attempts now (one more when taken afresh and `count`), or None while another holder's runs."""
    found = s3.read(bucket, key)
    lease = {"until": 0.0, "attempts": 0} if found is None else json.loads(found[0])
    renewing = held is not None and lease["until"] == held
    if not renewing and lease["until"] > clock():
        return None
    attempts = int(lease.get("attempts", 0)) + (1 if count and not renewing else 0)
    body = json.dumps({"until": until, "attempts": attempts}).encode()
    if s3.put(bucket, key, body, _JSON, etag=None if found is None else found[1]):
        return attempts
    return None


def mark_active(job: Job) -> None:
    """Enter the job in the index of jobs that are not final (written once: a second entry is no error)."""
    s3.put(job.bucket, job.active_key, b"", _JSON)


def mark_inactive(job: Job) -> None:
    """Take a final job out of that index."""
    s3.delete(job.bucket, [job.active_key])


def active_jobs(bucket: str, root: str) -> list[tuple[str, str]]:
    """(tenant, id) of every job in the index of jobs that are not final: one listing, however many
    jobs were ever made."""
    folder = _active_folder(root)
    named = (key.removeprefix(folder).split("/") for key in s3.sizes(bucket, folder))
    return [(parts[0], parts[1]) for parts in named if len(parts) == 2]


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


def _active_folder(root: str) -> str:
    return f"{root}{JOBS_FOLDER}{_ACTIVE}/"


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
