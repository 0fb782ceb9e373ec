"""Fixtures for the function's edges: a real uvicorn server, moto_server for S3 and SQS, the local Lambda
runtime.

Everything runs the real engine on the session's tiny artifact (tests marked `engine`).
"""

from __future__ import annotations

import contextlib
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

from function.contract import MANIFEST_FILE
from function.local.invoke import LocalLambda

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
HANDLER = "function.handler.lambda_handler"
CLI = [sys.executable, "-m", "function"]
SPEAKER = "英文女"  # one of the tiny model's built-in speakers (export/fake.py SFT_SPEAKERS)
MAX_TEXT_CHARS = 120
MAX_BODY_BYTES = 256 * 1024


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "engine: runs the real engine on the tiny artifact (tiny_artifact fixture)"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Lambda or COSYVOICE settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_LAMBDA_", "COSYVOICE_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, **extra}


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


@pytest.fixture(scope="session")
def artifact_location(tiny_artifact: Path) -> str:
    return str(tiny_artifact)


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
        wait_until(lambda: httpx.get(f"{url}/readyz", timeout=5).status_code == 200, process, 300, log)
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


@pytest.fixture(scope="session")
def server(
    artifact_location: str, tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str
) -> Iterator[str]:
    """The server on the tiny artifact, with small limits so the limit tests stay small, and a bucket and
    queue on moto_server so the job routes serve (jobs are queued there, never worked on)."""
    log = tmp_path_factory.mktemp("serve") / "server.log"
    limits = dict(COSYVOICE_MAX_TEXT_CHARS=str(MAX_TEXT_CHARS), COSYVOICE_MAX_BODY_BYTES=str(MAX_BODY_BYTES))
    with serving(artifact_location, log, **limits, **job_storage(moto_endpoint)) as url:
        yield url


@pytest.fixture(scope="session")
def instruct_artifact(tiny_artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny artifact as if exported from a CosyVoice-300M-Instruct directory: the manifest's source
    name is what marks an -Instruct model (function.voices.takes_instructions); the files are links."""
    path = tmp_path_factory.mktemp("instruct") / "artifact"
    path.mkdir()
    for file in tiny_artifact.iterdir():
        if file.name != MANIFEST_FILE:
            (path / file.name).symlink_to(file)
    manifest = json.loads((tiny_artifact / MANIFEST_FILE).read_text())
    manifest["source"]["name"] = "CosyVoice-300M-Instruct"
    (path / MANIFEST_FILE).write_text(json.dumps(manifest, ensure_ascii=False))
    return path


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto_server (S3 and SQS APIs) on loopback; each test uses buckets and queues of its own."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    binary = Path(sys.executable).with_name("moto_server")
    with log.open("w") as sink:
        process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=sink, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{url}/moto-api/").status_code == 200, process, 60, log)
        yield url
    finally:
        stop(process)


def aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ENDPOINT_URL_SQS": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def moto_client(service: str, endpoint: str) -> Any:
    """A boto3 client of moto_server at `endpoint`, with the credentials of aws_env."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def job_storage(endpoint: str) -> dict[str, str]:
    """A fresh bucket and queue on moto_server, as the environment of a function that takes jobs."""
    name = f"jobs-{uuid.uuid4().hex[:12]}"
    moto_client("s3", endpoint).create_bucket(Bucket=name)
    queue = moto_client("sqs", endpoint).create_queue(QueueName=name)["QueueUrl"]
    return {**aws_env(endpoint), "COSYVOICE_OUTPUT_BUCKET": name, "COSYVOICE_JOB_QUEUE_URL": queue}


@pytest.fixture
def s3_env(moto_endpoint: str) -> dict[str, str]:
    return aws_env(moto_endpoint)


@pytest.fixture
def s3(s3_env: dict[str, str]) -> Any:
    return moto_client("s3", s3_env["AWS_ENDPOINT_URL_S3"])


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"out-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def sqs(s3_env: dict[str, str]) -> Any:
    return moto_client("sqs", s3_env["AWS_ENDPOINT_URL_SQS"])


@pytest.fixture
def queue(sqs: Any) -> str:
    """A job queue of its own; a message handed back becomes visible again after a second."""
    name = f"jobs-{uuid.uuid4().hex[:12]}"
    return str(sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "1"})["QueueUrl"])
