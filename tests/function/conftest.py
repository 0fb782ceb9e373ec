"""Fixtures for the function's edges: a real uvicorn server, moto_server for S3 and SQS, the local Lambda
runtime (helpers in support.py).

Everything runs the real engine on the session's tiny artifact (tests marked `engine`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from function.cosyvoice.contract import MANIFEST_FILE
from tests.function.support import (
    MAX_BODY_BYTES,
    MAX_TEXT_CHARS,
    aws_env,
    aws_in_this_process,
    free_port,
    job_storage,
    moto_client,
    serving,
    stop,
    wait_until,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "engine: runs the real engine on the tiny artifact (tiny_artifact fixture)"
    )


@pytest.fixture(scope="session")
def artifact_location(tiny_artifact: Path) -> str:
    return str(tiny_artifact)


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
    """The tiny artifact as if exported from a CosyVoice-300M-Instruct directory: the manifest's recorded
    kind marks an -Instruct model (function.voices.openai.takes_instructions); the files are links."""
    path = tmp_path_factory.mktemp("instruct") / "artifact"
    path.mkdir()
    for file in tiny_artifact.iterdir():
        if file.name != MANIFEST_FILE:
            (path / file.name).symlink_to(file)
    manifest = json.loads((tiny_artifact / MANIFEST_FILE).read_text())
    manifest["source"].update(name="CosyVoice-300M-Instruct", instruct=True)
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
        with httpx.Client() as client:
            wait_until(lambda: client.get(f"{url}/moto-api/").status_code == 200, process, 60, log)
        yield url
    finally:
        stop(process)


@pytest.fixture
def s3_env(moto_endpoint: str) -> dict[str, str]:
    return aws_env(moto_endpoint)


@pytest.fixture
def aws_in_process(s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """This process's own AWS clients (function.aws.clients) on moto_server for the test."""
    with aws_in_this_process(s3_env["AWS_ENDPOINT_URL_S3"], monkeypatch) as env:
        yield env


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


@pytest.fixture
def dead_letters(sqs: Any) -> str:
    """A dead-letter queue of its own (COSYVOICE_DEAD_LETTER_QUEUE_URL)."""
    return str(sqs.create_queue(QueueName=f"dead-{uuid.uuid4().hex[:12]}")["QueueUrl"])
