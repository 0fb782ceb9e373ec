"""Polly's speech synthesis tasks as the project's jobs (function.jobs), seen through the job routes'
own functions: a task is submitted as POST /v1/jobs submits a job, and its status is GET /v1/jobs/{id}'s.

What Polly says of a task and a job does not keep (its voice id as asked, engine, creation time, the
characters billed) is a small record beside the jobs, at `polly/tasks/{TaskId}.json` under
COSYVOICE_OUTPUT_PREFIX in the output bucket; ListSpeechSynthesisTasks lists those records. The task's
id is its job's id; its audio is at OutputS3KeyPrefix + TaskId + "." + format under the prefix, and a
json task's speech marks beside that audio (the OutputUri then names them once they are written).

Job states → Polly's TaskStatus: queued → scheduled, running → inProgress, done → completed,
failed → failed (with the reason as TaskStatusReason).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any
from urllib.parse import quote

from function.aws import s3
from function.aws.clients import s3_client
from function.core.formats import Output
from function.instance.settings import Settings
from function.jobs.routes import get_job, submit_job
from function.service.polly import MARKS_FORMAT, PollyTask
from function.service.polly_errors import PollyError

TASKS_FOLDER = "polly/tasks/"
TASK_ID = re.compile(r"^[a-zA-Z0-9_-]{1,100}$")
TASK_STATUS = {"queued": "scheduled", "running": "inProgress", "done": "completed", "failed": "failed"}
MAX_RESULTS = 100
_JSON = "application/json"


def _bucket(settings: Settings) -> str:
    if settings.output_bucket is None:
        raise PollyError(
            "InvalidS3BucketException", "this deployment has no output bucket (COSYVOICE_OUTPUT_BUCKET)"
        )
    return settings.output_bucket


def _record_key(settings: Settings, task_id: str) -> str:
    return f"{settings.output_prefix}{TASKS_FOLDER}{task_id}.json"


def output_uri(bucket: str, key: str) -> str:
    """The object's URL, as Polly writes a task's OutputUri."""
    return f"https://s3.{s3_client().meta.region_name}.amazonaws.com/{bucket}/{quote(key)}"


def start(body: PollyTask, speaker: str, model_rate: int, settings: Settings) -> dict[str, Any]:
    """Submit the task's job and keep its record; the task as Polly describes it."""
    bucket = _bucket(settings)
    if body.OutputS3BucketName != bucket:
        raise PollyError(
            "InvalidS3BucketException",
            f"tasks write to this deployment's bucket only: give OutputS3BucketName {bucket!r}",
        )
    task_id = uuid.uuid4().hex
    job = body.job(task_id, speaker, model_rate)
    submit_job(job)  # the job route's checks, storage and queue
    record: dict[str, Any] = {
        "TaskId": task_id,
        "CreationTime": time.time(),
        "OutputFormat": body.OutputFormat,
        "TextType": body.TextType,
        "VoiceId": body.VoiceId,
        "RequestCharacters": len(job.to_options().text),
        "SpeechMarkTypes": list(job.speech_marks),
        **({"Engine": body.Engine} if body.Engine is not None else {}),
    }
    if body.OutputFormat != MARKS_FORMAT:
        record["SampleRate"] = str(Output.of(job.format, model_rate).rate)
        record["OutputUri"] = output_uri(bucket, settings.output_prefix + job.output_name())
    s3.put(bucket, _record_key(settings, task_id), json.dumps(record).encode(), _JSON)
    return {**record, "TaskStatus": TASK_STATUS["queued"]}


def _record(settings: Settings, task_id: str) -> dict[str, Any] | None:
    found = s3.read(_bucket(settings), _record_key(settings, task_id))
    return None if found is None else dict(json.loads(found[0]))


def describe(settings: Settings, task_id: str) -> dict[str, Any]:
    """GetSpeechSynthesisTask: the record, with its job's status."""
    if TASK_ID.match(task_id) is None:
        raise PollyError(
            "InvalidTaskIdException", f"TaskId {task_id!r} is not 1 to 100 of a-z, A-Z, 0-9, _ and -"
        )
    record = _record(settings, task_id)
    if record is None:
        raise PollyError("SynthesisTaskNotFoundException", f"no synthesis task {task_id!r}")
    return _with_status(record, get_job(task_id))


def _with_status(record: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    task = {**record, "TaskStatus": TASK_STATUS.get(str(view.get("status")), "scheduled")}
    if view.get("status") == "done":
        key = view.get("marks_key") if record["OutputFormat"] == MARKS_FORMAT else view.get("key")
        if key is not None:
            task["OutputUri"] = output_uri(str(view["bucket"]), str(key))
    error = view.get("error")
    if view.get("status") == "failed" and isinstance(error, dict):
        task["TaskStatusReason"] = str(error.get("message", ""))
    return task


def listed(settings: Settings, status: str | None, max_results: int, token: str | None) -> dict[str, Any]:
    """ListSpeechSynthesisTasks: newest first, `max_results` a page; NextToken is where the next page
    starts."""
    if status is not None and status not in TASK_STATUS.values():
        raise PollyError(
            "ValidationException", f"Status {status!r} is not one of {', '.join(TASK_STATUS.values())}"
        )
    if not 1 <= max_results <= MAX_RESULTS:
        raise PollyError("ValidationException", f"MaxResults must be 1 to {MAX_RESULTS}")
    if token is not None and not token.isdigit():
        raise PollyError("InvalidNextTokenException", "NextToken is not one this API gave")
    bucket = _bucket(settings)
    folder = f"{settings.output_prefix}{TASKS_FOLDER}"
    records = [
        _record(settings, key.removeprefix(folder).removesuffix(".json")) for key in s3.sizes(bucket, folder)
    ]
    tasks = [_with_status(record, get_job(record["TaskId"])) for record in records if record is not None]
    tasks = sorted(
        (task for task in tasks if status is None or task["TaskStatus"] == status),
        key=lambda task: (-task["CreationTime"], task["TaskId"]),
    )
    first = int(token or 0)
    page = tasks[first : first + max_results]
    reply: dict[str, Any] = {"SynthesisTasks": page}
    if first + max_results < len(tasks):
        reply["NextToken"] = str(first + max_results)
    return reply


__all__ = ["TASK_STATUS", "describe", "listed", "output_uri", "start"]
