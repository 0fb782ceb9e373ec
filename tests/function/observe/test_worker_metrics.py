"""A queue worker observed: its /metrics port (read with prometheus_client's own parser) counts the job
it worked on, its characters and its audio, and each message leaves its `batch_record` line."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.function.jobs.fleet import Deployment
from tests.function.observe.support import scrape, seconds_of, total
from tests.function.support import SPEAKER, free_port

pytestmark = pytest.mark.engine


def test_a_worker_counts_its_job(moto_endpoint: str, tmp_path: Path, artifact_location: str) -> None:
    deployment = Deployment(moto_endpoint, tmp_path, artifact_location)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    text = "A job for a worker, measured on its way."
    try:
        deployment.start_worker(COSYVOICE_METRICS_PORT=str(port))
        deployment.submit("measured", {"text": text, "speaker": SPEAKER, "format": "wav"})
        deployment.wait_done(["measured"])
        audio = deployment.result("measured")["audio"]

        def counted() -> bool:
            try:
                return total(scrape(url), "cosyvoice_jobs_finished_total", status="done") == 1
            except httpx.HTTPError:
                return False

        deployment.wait_for(counted, "counted its job")
        samples = scrape(url)
    finally:
        deployment.stop()
    assert total(samples, "cosyvoice_job_parts_total", outcome="done") == 1
    assert total(samples, "cosyvoice_job_parts_total") == 1
    assert total(samples, "cosyvoice_jobs_finished_total", status="failed") == 0
    assert total(samples, "cosyvoice_request_characters_total", route="Job") == len(text)
    assert total(samples, "cosyvoice_audio_seconds_total", route="Job") == pytest.approx(
        seconds_of(audio), abs=0.001
    )
    assert total(samples, "cosyvoice_realtime_factor_count") >= 1
    assert total(samples, "cosyvoice_job_redrives_total") == 0  # it swept, and found nothing stalled
    (line,) = [line for line in deployment.lines("batch_record") if line.get("job") == "measured"]
    assert line["status"] == "done" and line["audio_seconds"] == pytest.approx(seconds_of(audio), abs=0.001)
