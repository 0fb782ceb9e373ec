"""The job API: POST /v1/jobs submits a long text, GET /v1/jobs/{id} reports on it (function.jobs.store).

Submission stores the request and queues a small message naming it (function.jobs.queue); the SQS path
(function.jobs.batch) does the work across as many invocations as it takes. The queued status is written
once the message is sent, so a job with a request but no status was never queued: submitting the same
content again queues it then. Submitting a job that failed retriably again retries it (the one way out
of `failed`, function.jobs.store.retry). Without an output bucket or a queue the routes answer 503
jobs_unavailable. Included by function.api.app.create_app.

A job is its caller's tenant's (function.http.context): ids are unique per tenant, and another tenant's
job answers as an id that names none. Polly's tasks (function.polly.tasks) are jobs submitted and read
through `submit` and `job_view`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.requests import Request

from function.core.tenant import Caller
from function.http.context import CallerOf, audit_change
from function.instance.settings import Settings, get_settings
from function.jobs import queue, store
from function.service.schema import ErrorBody, JobAccepted, JobRequest, SpeechJob
from function.service.synthesis import Allowance, check

router = APIRouter(tags=["jobs"])

_EXISTS = {"model": JobAccepted, "description": "That job exists (same id and content)."}
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Invalid request (bad values, unknown speaker or format)."},
    409: {"model": ErrorBody, "description": "The id names a job with other content."},
    413: {"model": ErrorBody, "description": "Text longer than COSYVOICE_JOB_MAX_TEXT_CHARS."},
    422: {"model": ErrorBody, "description": "The body does not match the schema (types, missing fields)."},
    503: {"model": ErrorBody, "description": "This deployment has no job queue or output bucket."},
}


def submit(request: SpeechJob, settings: Settings, caller: Caller) -> tuple[store.Job, store.JobStatus, bool]:
    """Store `request` as a job of the caller's tenant and queue it: the job, its status, and whether it
    is new (False: the same id with the same content was submitted before)."""
    store.bucket_of(settings)
    queue.queue_url(settings)  # refuse before anything is stored
    # An unknown speaker, a deleted voice or an unusable prompt is the caller's 400, now.
    check(replace(request.to_options(), tenant=caller.tenant), Allowance(settings.job_max_text_chars))
    job, created = store.submit(request, settings, tenant=caller.tenant)
    current = store.status(job)
    if current is None:
        queue.enqueue(job, settings)
        current = store.mark_queued(job)
    elif not created and store.retry(job):  # the same job again: a retriable failure is retried
        queue.enqueue(job, settings)
        current = store.status(job) or current
    return job, current, created


def job_view(job_id: str, settings: Settings, tenant: str) -> dict[str, Any]:
    """GET /v1/jobs/{id}'s body for `tenant`'s job; JobNotFound for an id that names none of its jobs."""
    job = store.load(job_id, settings, tenant=tenant)
    return store.view(job, store.status(job))


@router.post(
    "/v1/jobs",
    status_code=202,
    response_model=JobAccepted,
    responses={200: _EXISTS, **_ERRORS},
    summary="Submit a long text; its audio goes to S3",
)
def submit_job(body: JobRequest, request: Request, caller: CallerOf) -> Any:
    job, current, created = submit(SpeechJob.model_validate(body.model_dump()), get_settings(), caller)
    if created:
        audit_change(request, "job.submitted", job.id)
    accepted = {"id": job.id, "status": current.state, "status_url": store.status_url(job.id)}
    return JSONResponse(accepted, status_code=202 if created else 200)


@router.get(
    "/v1/jobs/{job_id}",
    responses={404: {"model": ErrorBody, "description": "No such job."}, 503: _ERRORS[503]},
    summary="A job's status: queued, running (progress), done (a presigned URL), failed (why)",
)
def get_job(job_id: str, caller: CallerOf) -> dict[str, Any]:
    return job_view(job_id, get_settings(), caller.tenant)


__all__ = ["job_view", "router", "submit"]
