"""The handler as Lambda runs it: the real awslambdaric client against a local Runtime API.

Covers every file in events/, the SnapStart sequence (INIT → before-snapshot → restore → invoke), and
that clones restored from one snapshot draw different random streams.
"""

from __future__ import annotations

import base64
import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import soundfile

from function.local.invoke import LocalLambda, RuntimeFailed
from tests.function.support import DIRECT, EVENTS, SPEAKER, aws_env, clean_env, local_lambda, moto_client

pytestmark = pytest.mark.engine

EVENT_FILES = sorted(EVENTS.glob("*.json"))


def wait_for_record(runtime: LocalLambda, event: str, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while len(records := runtime.log_records(event)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return records


def decode_audio(data: bytes) -> int:
    audio, _ = soundfile.read(io.BytesIO(data))
    return audio.size


@pytest.fixture(scope="module")
def output_bucket(moto_endpoint: str) -> tuple[str, dict[str, str]]:
    name = f"events-{uuid.uuid4().hex[:12]}"
    moto_client("s3", moto_endpoint).create_bucket(Bucket=name)
    return name, {**aws_env(moto_endpoint), "COSYVOICE_OUTPUT_BUCKET": name}


@pytest.fixture(scope="module")
def runtime(artifact_location: str, output_bucket: tuple[str, dict[str, str]]) -> LocalLambda:
    with local_lambda(artifact_location, **output_bucket[1]) as runtime:
        runtime.wait_init()
        yield runtime


@pytest.mark.parametrize("path", EVENT_FILES, ids=[p.stem for p in EVENT_FILES])
def test_every_event_file_is_served(
    runtime: LocalLambda, path: Path, moto_endpoint: str, output_bucket: tuple[str, dict[str, str]]
) -> None:
    event = json.loads(path.read_text())
    invocation = runtime.invoke(event)
    assert invocation.ok, invocation.body
    reply = invocation.json()
    if "Records" in event:
        assert reply == {"batchItemFailures": []}
        s3 = moto_client("s3", moto_endpoint)
        for record in event["Records"]:
            job = json.loads(record["body"])
            obj = s3.get_object(Bucket=output_bucket[0], Key=f"tts/{job['id']}.{job['format']}")
            assert decode_audio(obj["Body"].read()) > 0
    elif "text" in event:
        assert decode_audio(base64.b64decode(reply["audio"])) > 0
    elif reply["headers"]["content-type"].startswith("application/json"):
        assert reply["statusCode"] == 200
        assert SPEAKER in json.loads(reply["body"])["speakers"]
    else:
        assert reply["statusCode"] == 200, reply.get("body")
        assert reply["isBase64Encoded"] is True
        assert reply["headers"]["content-type"].startswith("audio/")
        assert decode_audio(base64.b64decode(reply["body"])) > 0


def test_the_init_record_carries_every_phase(runtime: LocalLambda) -> None:
    (record,) = wait_for_record(runtime, "init")
    phases = record["phases_ms"]
    assert list(phases)[-1] == "ready"
    assert {"process", "runtime_import", "artifact_fetch", "session_creation", "warm_up"} <= set(phases)
    # The loader thread's phases overlap the main thread's, whose laps tile INIT up to ready.
    loader = ["artifact_fetch", "session_creation", "warm_up"]
    assert record["concurrent"] == loader
    main = [name for name in phases if name not in loader]
    assert main == ["process", "runtime_import", "handler_init", "load_wait", "ready"]
    assert sum(phases[name] for name in main[:-1]) == pytest.approx(phases["ready"], abs=0.1)
    assert sum(phases[name] for name in loader) <= phases["handler_init"] + phases["load_wait"]
    metrics = record["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    assert {m["Name"] for m in metrics} == {f"startup.{name}" for name in phases}
    assert all(record[f"startup.{name}"] == value for name, value in phases.items())


def test_unknown_events_fail_with_a_clear_error(runtime: LocalLambda) -> None:
    invocation = runtime.invoke({"detail-type": "Scheduled Event", "source": "aws.events"})
    assert not invocation.ok
    error = invocation.json()
    assert error["errorType"] == "UnsupportedEvent"
    assert "SQS" in error["errorMessage"]


def test_direct_invoke_errors_come_back_as_json(runtime: LocalLambda) -> None:
    reply = runtime.invoke({"text": "hi", "speaker": "nobody"}).json()
    assert reply["error"]["code"] == "unknown_speaker"


def test_direct_invoke_with_an_id_writes_to_s3(
    runtime: LocalLambda, output_bucket: tuple[str, dict[str, str]]
) -> None:
    import httpx

    reply = runtime.invoke({**DIRECT, "id": "direct-1", "format": "wav"}).json()
    assert (reply["bucket"], reply["key"]) == (output_bucket[0], "tts/direct-1.wav")
    assert decode_audio(httpx.get(reply["url"]).content) > 0  # the presigned URL works


@pytest.mark.parametrize("fmt", ["wav", "opus"])
def test_direct_invoke_reports_the_rate_its_audio_is_written_at(runtime: LocalLambda, fmt: str) -> None:
    reply = runtime.invoke({**DIRECT, "format": fmt}).json()
    _, rate = soundfile.read(io.BytesIO(base64.b64decode(reply["audio"])))
    assert reply["sample_rate"] == rate  # opus files are 24 kHz whatever the model's rate
    assert rate == (24000 if fmt == "opus" else 22050)


def test_a_direct_invoke_asking_for_speech_marks_gets_them_with_its_audio(runtime: LocalLambda) -> None:
    text = '<speak>First words.<break time="300ms"/><mark name="here"/>Second words.</speak>'
    event = {**DIRECT, "format": "wav", "text": text, "text_type": "ssml", "speech_marks": ["ssml"]}
    event["seed"] = 3
    reply = runtime.invoke(event).json()
    audio, rate = soundfile.read(io.BytesIO(base64.b64decode(reply["audio"])))
    ((mark,),) = [reply["marks"]]
    assert mark["type"] == "ssml" and mark["value"] == "here"
    assert text[mark["start"] : mark["end"]] == '<mark name="here"/>'
    assert 300 <= mark["time"] < 1000 * len(audio) / rate  # after the break, inside the audio
    alone = runtime.invoke({**event, "marks_only": True}).json()
    assert alone == {"marks": reply["marks"]}  # no audio, the same marks (seeded)


def test_a_response_too_large_for_lambda_is_a_413_pointing_to_the_batch_path(artifact_location: str) -> None:
    event = json.loads((EVENTS / "http-api-tts.json").read_text())
    # Room for the envelope and a few bytes: any real audio is over the limit.
    with local_lambda(artifact_location, COSYVOICE_MAX_RESPONSE_BYTES=str(16 * 1024 + 64)) as runtime:
        runtime.wait_init()
        reply = runtime.invoke(event).json()
    assert reply["statusCode"] == 413
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "output_too_large"
    assert "batch" in error["message"]


def test_init_failure_is_reported_to_the_runtime_api() -> None:
    runtime = LocalLambda(clean_env(COSYVOICE_ARTIFACT="/nonexistent/artifact"), timeout=300)
    with runtime, pytest.raises(RuntimeFailed, match="manifest"):
        runtime.wait_init()
    assert runtime.api.init_errors


def test_snapstart_runs_init_then_snapshot_hooks_then_restore_then_invocations(
    artifact_location: str,
) -> None:
    with local_lambda(artifact_location, snapstart=True) as runtime:
        runtime.wait_init()
        # Snapshot point: warmed up, waiting on restore/next, nothing restored or invoked yet.
        (snapshot,) = wait_for_record(runtime, "snapshot")
        assert list(snapshot["phases_ms"])[-2:] == ["warm_up", "ready"]
        assert runtime.log_records("init") == [] and runtime.log_records("restore") == []
        paths = [call.path for call in runtime.api.calls]
        assert paths == ["/2018-06-01/runtime/restore/next"]

        runtime.restore()
        (restore,) = wait_for_record(runtime, "restore")
        assert "restore" in restore["phases_ms"]
        assert runtime.invoke(DIRECT).ok
        paths = [call.path for call in runtime.api.calls]
        assert paths[:2] == ["/2018-06-01/runtime/restore/next", "/2018-06-01/runtime/invocation/next"]


def test_a_damaged_artifact_fails_a_snapshot_init_but_an_on_demand_one_only_checks_sizes(
    damaged_artifact: Path,
) -> None:
    """Flipped bytes (same size) are found where INIT has time for the sha256 (SnapStart, provisioned);
    an on-demand INIT, on a caller's clock, checks sizes only."""
    damaged = str(damaged_artifact)
    runtime = local_lambda(damaged, snapstart=True)
    with runtime, pytest.raises(RuntimeFailed, match="does not match its sha256"):
        runtime.wait_init()
    with local_lambda(damaged) as on_demand:
        on_demand.wait_init()
        assert on_demand.invoke(DIRECT).ok


def test_clones_of_one_snapshot_draw_different_random_streams(artifact_location: str) -> None:
    seeded = {**DIRECT, "seed": 11}
    unseeded, pinned = [], []
    with local_lambda(artifact_location, snapstart=True, clones=2) as runtime:
        runtime.wait_init()
        for _ in range(2):
            runtime.restore()
            unseeded.append(runtime.invoke(DIRECT).json()["audio"])
            pinned.append(runtime.invoke(seeded).json()["audio"])
            runtime.park()  # this clone is done; the next /next call comes from the next clone
        assert len(wait_for_record(runtime, "restore", 2)) == 2
        assert len(runtime.log_records("snapshot")) == 1  # one snapshot, two restores
    assert unseeded[0] != unseeded[1]
    assert pinned[0] == pinned[1]
