"""Helpers for the function's edge tests: a real uvicorn server, moto_server clients, the local Lambda
runtime, SQS events. The fixtures built on them are in conftest.py beside this file."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from function.local.invoke import LocalLambda

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
HANDLER = "function.awslambda.handler.lambda_handler"
CLI = [sys.executable, "-m", "function"]
SPEAKER = "英文女"  # one of the tiny model's built-in speakers (export/fake.py SFT_SPEAKERS)
MAX_TEXT_CHARS = 120
MAX_BODY_BYTES = 256 * 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Lambda or COSYVOICE settings, plus `extra`.

    The function's engine runs on one thread (COSYVOICE_THREADS) unless `extra` says otherwise: each test
    worker keeps a CPU busy, so an engine on every CPU would only contend with the other worker's tests.
    The split of more CPUs between the engine's sessions is tested in tests/function/cosyvoice."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_LAMBDA_", "COSYVOICE_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, "COSYVOICE_THREADS": "1", **extra}


def wait_until(check: Any, process: subprocess.Popen[Any], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.1)
    raise TimeoutError(log.read_text()[-4000:])


def stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def local_lambda(artifact: str, snapstart: bool = False, clones: int = 0, **env: str) -> LocalLambda:
    """The handler under the real runtime client against a local Runtime API (enter it to start)."""
    return LocalLambda(
        clean_env(COSYVOICE_ARTIFACT=artifact, **env),
        snapstart=snapstart,
        clones=clones,
        handler=HANDLER,
        timeout=300,
    )


def start_serving(artifact: str, log: Path, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m function serve` on a loopback port, once /readyz answers 200: the process and its URL."""
    port = free_port()
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*CLI, "serve", "--artifacts", artifact, "--port", str(port), "--log-level", "warning"],
            cwd=ROOT,
            env=clean_env(**env),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=5) as client:  # one client: each new one loads the CA bundle again
            wait_until(lambda: client.get(f"{url}/readyz").status_code == 200, process, 300, log)
    except BaseException:
        stop(process)
        raise
    return process, url


@contextlib.contextmanager
def serving(artifact: str, log: Path, **env: str) -> Iterator[str]:
    """`python -m function serve` on a loopback port until the block ends; yields its URL."""
    process, url = start_serving(artifact, log, **env)
    try:
        yield url
    finally:
        stop(process)


def aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ENDPOINT_URL_SQS": endpoint,
        "AWS_ENDPOINT_URL_SNS": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


@functools.cache
def moto_client(service: str, endpoint: str) -> Any:
    """A boto3 client of moto_server at `endpoint`, with the credentials of aws_env: one per service and
    endpoint, shared by the tests (making one reads botocore's service model again)."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


@contextlib.contextmanager
def aws_in_this_process(endpoint: str, patch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """This process's own AWS clients (function.aws.clients) on moto_server at `endpoint` while the block
    runs: its endpoints in the environment (set through `patch`, which undoes them), and the clients made
    afresh before and after."""
    from function.aws.clients import reset_clients

    env = aws_env(endpoint)
    for name, value in env.items():
        patch.setenv(name, value)
    reset_clients()
    try:
        yield env
    finally:
        reset_clients()


def messages_on(sqs: Any, queue: str) -> int:
    """Messages on `queue`, visible, in flight or delayed: at once, where a receive would wait."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    found = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"]
    return sum(int(found[name]) for name in names)


def job_storage(endpoint: str) -> dict[str, str]:
    """A fresh bucket and queue on moto_server, as the environment of a function that takes jobs."""
    name = f"jobs-{uuid.uuid4().hex[:12]}"
    moto_client("s3", endpoint).create_bucket(Bucket=name)
    queue = moto_client("sqs", endpoint).create_queue(QueueName=name)["QueueUrl"]
    return {**aws_env(endpoint), "COSYVOICE_OUTPUT_BUCKET": name, "COSYVOICE_JOB_QUEUE_URL": queue}


DIRECT = {"text": "Hello there.", "speaker": SPEAKER, "format": "pcm"}  # a direct invoke of the tiny model


def sqs_event(*bodies: Any) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m{i}",
                "eventSource": "aws:sqs",
                "awsRegion": "us-east-1",
                "body": body if isinstance(body, str) else json.dumps(body),
            }
            for i, body in enumerate(bodies)
        ]
    }


def batch_records(runtime: Any, expected: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The batch_record log lines; they arrive through a pipe, possibly after the reply that followed them."""
    deadline = time.monotonic() + timeout
    while True:
        records = [r for r in runtime.log_records() if r.get("event") == "batch_record"]
        if len(records) >= expected or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    """`response` is the JSON error body with that status and code, and a message, no traceback."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    assert "Traceback" not in response.text
