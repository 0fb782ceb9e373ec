"""The job API: POST /v1/jobs submits a long text, GET /v1/jobs/{id} reports on it (function.jobs.store).

Submission stores the request and queues a small message naming it (function.jobs.queue); the SQS path
(function.jobs.batch) does the work across as many invocations as it takes. The queued status is written
once the message is sent, so a job with a request but no status was never queued: submitting the same
content again queues it then. Submitting a job that failed retriably again retries it (the one way out
of `failed`, function.jobs.store.retry). Without an output bucket or a queue the routes answer 503
jobs_unavailable. Included by function.api.app.create_app.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from function.instance.settings import get_settings
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


@router.post(
    "/v1/jobs",
    status_code=202,
    response_model=JobAccepted,
    responses={200: _EXISTS, **_ERRORS},
    summary="Submit a long text; its audio goes to S3",
)
def submit_job(body: JobRequest) -> Any:
    settings = get_settings()
    store.bucket_of(settings)
    queue.queue_url(settings)  # refuse before anything is stored
    request = SpeechJob.model_validate(body.model_dump())
    # An unknown speaker, a deleted voice or an unusable prompt is the caller's 400, now.
    check(request.to_options(), Allowance(settings.job_max_text_chars))
    job, created = store.submit(request, settings)
    current = store.status(job)
    if current is None:
        queue.enqueue(job, settings)
        current = store.mark_queued(job)
    elif not created and store.retry(job):  # the same job again: a retriable failure is retried
        queue.enqueue(job, settings)
        current = store.status(job) or current
    accepted = {"id": job.id, "status": current.state, "status_url": store.status_url(job.id)}
    return JSONResponse(accepted, status_code=202 if created else 200)


@router.get(
    "/v1/jobs/{job_id}",
    responses={404: {"model": ErrorBody, "description": "No such job."}, 503: _ERRORS[503]},
    summary="A job's status: queued, running (progress), done (a presigned URL), failed (why)",
)
def get_job(job_id: str) -> dict[str, Any]:
    job = store.load(job_id, get_settings())
    return store.view(job, store.status(job))


__all__ = ["router"]
