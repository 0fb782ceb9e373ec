"""Inside Lambda (the real runtime client against the local Runtime API, as `function invoke` runs it):
each HTTP request and each SQS record writes one log line that is also its EMF document, and the figures
in it are what was sent and received."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from function.local.invoke import LocalLambda
from tests.function.observe.support import seconds_of
from tests.function.support import EVENTS, SPEAKER, aws_env, local_lambda, moto_client, sqs_event

pytestmark = pytest.mark.engine

NAMESPACE = "CosyVoiceTest"


@pytest.fixture(scope="module")
def bucket(moto_endpoint: str) -> str:
    name = f"emf-{uuid.uuid4().hex[:12]}"
    moto_client("s3", moto_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def runtime(artifact_location: str, moto_endpoint: str, bucket: str) -> Iterator[LocalLambda]:
    env = {
        **aws_env(moto_endpoint),
        "COSYVOICE_OUTPUT_BUCKET": bucket,
        "COSYVOICE_METRICS_NAMESPACE": NAMESPACE,
    }
    with local_lambda(artifact_location, **env) as runtime:
        runtime.wait_init()
        yield runtime


def lines_of(runtime: LocalLambda, event: str, count: int) -> list[dict[str, Any]]:
    """The runtime's JSON lines of `event`, once `count` have arrived (they come through a pipe)."""
    deadline = time.monotonic() + 10
    while True:
        found = [record for record in runtime.log_records() if record.get("event") == event]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def embedded(document: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, float]]:
    """An EMF document's namespace, dimensions (name → value) and metrics (name → value), checked for
    the shape CloudWatch requires."""
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert isinstance(document["_aws"]["Timestamp"], int)
    names, rollup = directive["Dimensions"]
    assert rollup == []  # the totals, which the alarms read
    units = {metric["Name"]: metric["Unit"] for metric in directive["Metrics"]}
    assert set(units.values()) <= {"Count", "Milliseconds", "Seconds", "None"}
    return (
        directive["Namespace"],
        {name: document[name] for name in names},
        {name: document[name] for name in units},
    )


def test_an_http_api_request_writes_its_line_with_polly_s_metrics(runtime: LocalLambda) -> None:
    event = json.loads((EVENTS / "http-api-tts.json").read_text())
    event["requestContext"]["requestId"] = request_id = f"gw-{uuid.uuid4().hex[:8]}"
    text = json.loads(event["body"])["text"]
    reply = runtime.invoke(event).json()
    assert reply["statusCode"] == 200 and reply["headers"]["x-request-id"] == request_id
    audio = base64.b64decode(reply["body"])
    (line,) = [line for line in lines_of(runtime, "request", 1) if line["request_id"] == request_id]
    namespace, dimensions, metrics = embedded(line)
    assert (namespace, dimensions) == (NAMESPACE, {"Operation": "/v1/tts"})
    assert (metrics["2XXCount"], metrics["4XXCount"], metrics["5XXCount"]) == (1, 0, 0)
    assert metrics["RequestCharacters"] == len(text) == line["characters"]
    assert metrics["AudioSeconds"] == pytest.approx(seconds_of(audio), abs=0.001)
    assert metrics["ResponseLatency"] > 0 and metrics["RealtimeFactor"] > 0
    assert "TimeToFirstAudio" not in metrics  # Mangum buffers the reply: nothing was streamed
    assert text not in json.dumps(line)


def test_an_error_reply_names_its_request_and_counts_as_a_4xx(runtime: LocalLambda) -> None:
    event = json.loads((EVENTS / "http-api-tts.json").read_text())
    event["requestContext"]["requestId"] = request_id = f"gw-{uuid.uuid4().hex[:8]}"
    event["body"] = json.dumps({"text": "Hello.", "speaker": "nobody"})
    reply = runtime.invoke(event).json()
    assert reply["statusCode"] == 400
    assert json.loads(reply["body"])["error"]["request_id"] == request_id == reply["headers"]["x-request-id"]
    (line,) = [line for line in lines_of(runtime, "request", 2) if line["request_id"] == request_id]
    _, _, metrics = embedded(line)
    assert (metrics["2XXCount"], metrics["4XXCount"], metrics["5XXCount"]) == (0, 1, 0)


def test_a_job_record_reports_its_own_line(runtime: LocalLambda, bucket: str, moto_endpoint: str) -> None:
    text = "A job spoken on Lambda, measured."
    job_id = f"emf-{uuid.uuid4().hex[:8]}"
    reply = runtime.invoke(
        sqs_event({"id": job_id, "text": text, "speaker": SPEAKER, "format": "wav"})
    ).json()
    assert reply == {"batchItemFailures": []}
    audio = moto_client("s3", moto_endpoint).get_object(Bucket=bucket, Key=f"tts/{job_id}.wav")["Body"].read()
    (line,) = [line for line in lines_of(runtime, "batch_record", 1) if line.get("job") == job_id]
    namespace, dimensions, metrics = embedded(line)
    assert (namespace, dimensions, line["status"]) == (NAMESPACE, {"Operation": "Job"}, "done")
    assert metrics["RequestCharacters"] == len(text)
    assert metrics["AudioSeconds"] == pytest.approx(seconds_of(audio), abs=0.001)
    assert (metrics["PartsDone"], metrics["JobsFailed"]) == (1, 0)
