"""Polly's speech synthesis tasks as the project's jobs (function.jobs), submitted and read through the job
routes' own functions (function.jobs.routes): a task is a job of its caller's tenant, and its status is
GET /v1/jobs/{id}'s.

What Polly says of a task and a job does not keep (its voice id as asked, engine, creation time, the
characters billed) is a small record beside the tenant's jobs, under the tenant's prefix in the output
bucket (function.core.tenant): at `polly/tasks/{TaskId}.json`, and again in the tenant's index of tasks,
`polly/task-index/{stamp}-{TaskId}.json`, whose stamps count down with the creation time, so S3 lists the
newest task first. ListSpeechSynthesisTasks pages through that index: a page reads at most MaxResults
entries, whatever the number of tasks, and its NextToken is the last entry it read, so the next page starts
where this one ended however many tasks arrive meanwhile (they sort before it). The default tenant's tasks
from before the index are put in it when it is first listed.

The task's id is its job's id; its audio is at OutputS3KeyPrefix + TaskId + "." + format under the
tenant's prefix, and a json task's speech marks beside that audio (the OutputUri then names them once
they are written). OutputS3KeyPrefix never leaves the tenant's folder.

Job states → Polly's TaskStatus: queued → scheduled, running → inProgress, done → completed,
failed → failed (with the reason as TaskStatusReason).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from contextlib import suppress
from typing import Any
from urllib.parse import quote

from function.aws import s3
from function.aws.clients import s3_client
from function.core.formats import Output
from function.core.tenant import DEFAULT_TENANT, Caller, in_tenant_folder, tenant_prefix
from function.instance.settings import Settings
from function.jobs.routes import job_view, submit
from function.jobs.store import JobNotFound
from function.polly.errors import PollyError
from function.polly.shapes import MARKS_FORMAT, PollyTask

TASKS_FOLDER = "polly/tasks/"
INDEX_FOLDER = "polly/task-index/"
INDEXED = "polly/task-index.complete"  # written once the tasks from before the index are in it
STAMPS = 10**13  # milliseconds (the year 2286): an entry's stamp is STAMPS - 1 - its creation time
TASK_ID = re.compile(r"^[a-zA-Z0-9_-]{1,100}$")
INDEX_ENTRY = re.compile(r"^\d{13}-[a-zA-Z0-9_-]{1,100}\.json$")
TASK_STATUS = {"queued": "scheduled", "running": "inProgress", "done": "completed", "failed": "failed"}
MAX_RESULTS = 100
_JSON = "application/json"


def _bucket(settings: Settings) -> str:
    if settings.output_bucket is None:
        raise PollyError(
            "InvalidS3BucketException", "this deployment has no output bucket (COSYVOICE_OUTPUT_BUCKET)"
        )
    return settings.output_bucket


def _folder(settings: Settings, tenant: str) -> str:
    return tenant_prefix(settings.output_prefix, tenant)


def _index_entry(record: dict[str, Any]) -> str:
    stamp = STAMPS - 1 - int(record["CreationTime"] * 1000)
    return f"{stamp:013d}-{record['TaskId']}.json"


def output_uri(bucket: str, key: str) -> str:
    """The object's URL, as Polly writes a task's OutputUri."""
    return f"https://s3.{s3_client().meta.region_name}.amazonaws.com/{bucket}/{quote(key)}"


def start(
    body: PollyTask, speaker: str, model_rate: int, settings: Settings, caller: Caller
) -> dict[str, Any]:
    """Submit the task's job for the caller's tenant and keep its record; the task as Polly describes it."""
    bucket = _bucket(settings)
    if body.OutputS3BucketName != bucket:
        raise PollyError(
            "InvalidS3BucketException",
            f"tasks write to this deployment's bucket only: give OutputS3BucketName {bucket!r}",
        )
    folder = _folder(settings, caller.tenant)
    task_id = uuid.uuid4().hex
    request, translated = body.job(task_id, speaker, model_rate)
    if not in_tenant_folder(folder + (request.output_key or ""), settings.output_prefix, caller.tenant):
        raise PollyError(
            "InvalidS3KeyException",
            f"OutputS3KeyPrefix {body.OutputS3KeyPrefix!r} leads outside your folder: give a relative prefix"
            " without '..' segments",
        )
    job, _, _ = submit(request, settings, caller)  # the job route's checks, storage and queue
    record: dict[str, Any] = {
        "TaskId": task_id,
        "CreationTime": time.time(),
        "OutputFormat": body.OutputFormat,
        "TextType": body.TextType,
        "VoiceId": body.VoiceId,
        "RequestCharacters": translated.characters,
        "SpeechMarkTypes": list(request.speech_marks),
        **({"Engine": body.Engine} if body.Engine is not None else {}),
    }
    if body.OutputFormat != MARKS_FORMAT:
        record["SampleRate"] = str(Output.of(request.format, model_rate).rate)
        record["OutputUri"] = output_uri(bucket, job.key)
    stored = json.dumps(record).encode()
    s3.put(bucket, f"{folder}{TASKS_FOLDER}{task_id}.json", stored, _JSON)
    s3.put(bucket, f"{folder}{INDEX_FOLDER}{_index_entry(record)}", stored, _JSON)
    return {**record, "TaskStatus": TASK_STATUS["queued"]}


def describe(settings: Settings, tenant: str, task_id: str) -> dict[str, Any]:
    """GetSpeechSynthesisTask: `tenant`'s record, with its job's status."""
    if TASK_ID.match(task_id) is None:
        raise PollyError(
            "InvalidTaskIdException", f"TaskId {task_id!r} is not 1 to 100 of a-z, A-Z, 0-9, _ and -"
        )
    found = s3.read(_bucket(settings), f"{_folder(settings, tenant)}{TASKS_FOLDER}{task_id}.json")
    if found is None:
        raise PollyError("SynthesisTaskNotFoundException", f"no synthesis task {task_id!r}")
    return _with_status(settings, tenant, json.loads(found[0]))


def _with_status(settings: Settings, tenant: str, record: dict[str, Any]) -> dict[str, Any]:
    view = job_view(record["TaskId"], settings, tenant)
    task = {**record, "TaskStatus": TASK_STATUS.get(str(view.get("status")), "scheduled")}
    if view.get("status") == "done":
        key = view.get("marks_key") if record["OutputFormat"] == MARKS_FORMAT else view.get("key")
        if key is not None:
            task["OutputUri"] = output_uri(str(view["bucket"]), str(key))
    error = view.get("error")
    if view.get("status") == "failed" and isinstance(error, dict):
        task["TaskStatusReason"] = str(error.get("message", ""))
    return task


def listed(
    settings: Settings, tenant: str, status: str | None, max_results: int, token: str | None
) -> dict[str, Any]:
    """ListSpeechSynthesisTasks: `tenant`'s tasks, newest first, from its index: `max_results` entries a
    page (those of another status left out); NextToken is the last entry read."""
    if status is not None and status not in TASK_STATUS.values():
        raise PollyError(
            "ValidationException", f"Status {status!r} is not one of {', '.join(TASK_STATUS.values())}"
        )
    if not 1 <= max_results <= MAX_RESULTS:
        raise PollyError("ValidationException", f"MaxResults must be 1 to {MAX_RESULTS}")
    if token is not None and INDEX_ENTRY.match(token) is None:
        raise PollyError("InvalidNextTokenException", "NextToken is not one this API gave")
    bucket = _bucket(settings)
    folder = _folder(settings, tenant)
    if tenant == DEFAULT_TENANT:
        _index_earlier_tasks(bucket, folder)
    index = folder + INDEX_FOLDER
    keys = s3.keys_after(bucket, index, None if token is None else index + token, max_results + 1)
    tasks = []
    for key in keys[:max_results]:
        found = s3.read(bucket, key)
        with suppress(JobNotFound):  # a task whose job has expired (the bucket's lifecycle) is gone
            if found is not None:
                tasks.append(_with_status(settings, tenant, json.loads(found[0])))
    reply: dict[str, Any] = {
        "SynthesisTasks": [task for task in tasks if status is None or task["TaskStatus"] == status]
    }
    if len(keys) > max_results:
        reply["NextToken"] = keys[max_results - 1].removeprefix(index)
    return reply


def _index_earlier_tasks(bucket: str, folder: str) -> None:
    """Put the tasks stored before the index into it, once: a deployment's older tasks are listed too."""
    if s3.exists(bucket, folder + INDEXED):
        return
    for key in s3.sizes(bucket, folder + TASKS_FOLDER):
        found = s3.read(bucket, key)
        if found is not None:
            entry = _index_entry(json.loads(found[0]))
            s3.put(bucket, f"{folder}{INDEX_FOLDER}{entry}", found[0], _JSON)  # written once
    s3.put(bucket, folder + INDEXED, b"{}", _JSON)


__all__ = ["TASK_STATUS", "describe", "listed", "output_uri", "start"]
