"""`python -m bench fanout`: one long job spoken by one queue worker, then by several at once.

Each run starts `python -m function worker` processes (COSYVOICE_THREADS each, the model warmed up before
they take work) on a bucket and a job queue of its own on a local moto_server, sends the text as one
seeded raw job split into at least `parts` parts (the largest part size that makes that many, or one
segment a part), and times it from the message's send to the status saying done. Every run must make the
same audio, byte for byte: the sha256 column says so, and the command fails when they differ. The ratio
is each run's wall time over the first run's (one worker, by default).

The text is bench.long_text's (~2,000 characters), continued with its own sentences where it has fewer
segments than `parts`; with random weights every segment runs to the LLM's longest output, so the audio
is longer than the text reads, the same in every run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.long_text import TEXT
from bench.serving import free_port
from bench.tables import Table
from bench.workload import SPEAKER

if TYPE_CHECKING:
    from function.cosyvoice.frontend import TextTokenizer

SEED = 20
JOB_TIMEOUT_SECONDS = 4 * 3600  # a bound for a stuck run, far above any run on a slow host
READY_TIMEOUT_SECONDS = 600  # model load and warm-up of one worker


@functools.cache
def _tokenizer(artifact: Path) -> TextTokenizer:
    """The artifact's text tokenizer, read once: the text is cut again and again while it is chosen."""
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.frontend import TextTokenizer

    opened = Artifact.open(artifact)
    return TextTokenizer.from_buffer(opened.file(opened.manifest.tokenizer.file))


def segments_of(artifact: Path, text: str) -> list[str]:
    """`text`'s segments, as the artifact's text front end cuts them."""
    from function.cosyvoice.frontend import prepare_text

    return prepare_text(text, _tokenizer(artifact))


def job_text(artifact: Path, parts: int) -> str:
    """bench.long_text's text, continued with its own sentences from the start until it has at least
    `parts` segments (a part never splits one): the shortest such text, the same for every run."""
    sentences = TEXT.split(". ")
    text, more = TEXT, 0
    while len(segments_of(artifact, text)) < parts:
        sentence = sentences[more % len(sentences)].rstrip(".")
        text, more = f"{text} {sentence}.", more + 1
    return text


def part_seconds(artifact: Path, text: str, parts: int) -> int:
    """The largest COSYVOICE_JOB_PART_SECONDS that splits `text`, as the artifact's text front end cuts
    it into segments, into at least `parts` parts (one segment a part at the least)."""
    from function.cosyvoice.budget import expected_speech_seconds
    from function.jobs.plan import Contract, split

    segments = segments_of(artifact, text)
    seconds = max(1, int(expected_speech_seconds(segments)))
    one_by_one = Contract(window=1, flow_steps=10, decode_rows=1, artifact="")  # only the cuts matter here
    while seconds > 1 and len(split(segments, seconds, one_by_one).parts) < parts:
        seconds -= 1
    return seconds


@contextmanager
def moto_server() -> Iterator[str]:
    """moto_server (S3, SQS) on a free loopback port; its endpoint."""
    import httpx

    port = free_port()
    binary = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen(
        [str(binary), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{endpoint}/moto-api/").status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait()


def _client(service: str, endpoint: str) -> Any:
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        region_name="us-east-1",
    )


def speak_job(
    endpoint: str, artifact: Path, workers: int, parallel: int, seconds: int, threads: int, text: str
) -> dict[str, Any]:
    """The job on `workers` fresh worker processes: its wall time, parts and audio digest."""
    import os

    s3, sqs = _client("s3", endpoint), _client("sqs", endpoint)
    name = f"fanout-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COSYVOICE_", "AWS_"))},
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ENDPOINT_URL_SQS": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "COSYVOICE_OUTPUT_BUCKET": name,
        "COSYVOICE_JOB_QUEUE_URL": queue,
        "COSYVOICE_JOB_PART_SECONDS": str(seconds),
        "COSYVOICE_JOB_PARALLEL": str(parallel),
        "COSYVOICE_THREADS": str(threads),
        "COSYVOICE_WARMUP": "1",
    }
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "function", "worker", "--artifacts", str(artifact)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        for process in processes:  # each prints its ready line once its model is loaded and warm
            assert process.stdout is not None
            ready_by = time.monotonic() + READY_TIMEOUT_SECONDS
            while "worker_ready" not in process.stdout.readline():
                if process.poll() is not None or time.monotonic() > ready_by:
                    raise RuntimeError(f"a worker exited before it was ready ({process.returncode})")
        job = {"id": name, "text": text, "speaker": SPEAKER, "seed": SEED, "format": "wav"}
        started = time.perf_counter()
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(job))
        status = _wait_done(s3, name, processes)
        wall = time.perf_counter() - started
        audio = s3.get_object(Bucket=name, Key=f"tts/{name}.wav")["Body"].read()
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        exits = [process.wait() for process in processes]
    if status["status"] != "done" or any(exits):
        raise RuntimeError(f"the job ended {status['status']!r}, workers exited {exits}: {status}")
    return {
        "workers": workers,
        "parallel": parallel,
        "threads": threads,
        "parts": status["progress"]["parts_total"],
        "part_seconds": seconds,
        "wall_s": wall,
        "audio_s": status["duration_seconds"],
        "sha256": hashlib.sha256(audio).hexdigest(),
    }


def _wait_done(s3: Any, name: str, processes: Sequence[subprocess.Popen[str]]) -> dict[str, Any]:
    key = f"tts/jobs/{name}/status.json"
    deadline = time.monotonic() + JOB_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            status: dict[str, Any] = json.loads(s3.get_object(Bucket=name, Key=key)["Body"].read())
        except s3.exceptions.NoSuchKey:
            status = {"status": "queued"}
        if status["status"] in ("done", "failed"):
            return status
        if any(process.poll() is not None for process in processes):
            raise RuntimeError("a worker exited while the job ran")
        time.sleep(0.2)
    raise RuntimeError(f"the job did not end in {JOB_TIMEOUT_SECONDS} s")


PROJECTED_CHARS = 100_000  # template.yaml's JobMaxTextChars
LAMBDA_PART_SECONDS = 150  # template.yaml's JobPartSeconds
LAMBDA_WORKERS = (1, 5, 10, 16, 20, 45)  # up to one environment per part of the projected job


def projection(seconds_per_audio_second: float, basis: str) -> Table:
    """Minutes for a PROJECTED_CHARS English job (bench.long_text's text repeated) on Lambda in parts of
    LAMBDA_PART_SECONDS of speech, each part taking `seconds_per_audio_second` per second of its audio,
    at each number of environments speaking parts at once (JobParallel within QueueMaxConcurrency): the
    parts go in rounds of that many. Cold starts and the join (S3 copies) are left out."""
    import math

    from function.cosyvoice.budget import expected_speech_seconds

    audio = expected_speech_seconds([TEXT]) * PROJECTED_CHARS / len(TEXT)
    parts = math.ceil(audio / LAMBDA_PART_SECONDS)
    part_seconds = LAMBDA_PART_SECONDS * seconds_per_audio_second
    table = Table(
        f"A {PROJECTED_CHARS:,}-character English job on Lambda, projected ({basis})",
        ["parts at once", "rounds", "minutes"],
    )
    for workers in LAMBDA_WORKERS:
        rounds = math.ceil(parts / workers)
        table.add(str(workers), str(rounds), f"{rounds * part_seconds / 60:.0f}")
    table.notes.append(
        f"~{audio / 60:.0f} min of speech in {parts} parts of {LAMBDA_PART_SECONDS} s, each"
        f" ~{part_seconds:.0f} s of synthesis at {seconds_per_audio_second:.2f} s per audio second;"
        " cold starts and the join left out"
    )
    return table


def run(
    artifact: Path, worker_counts: Sequence[int], parts: int, threads: int
) -> tuple[Table, list[dict[str, Any]]]:
    """The job (`job_text`) on each worker count in turn (the first the baseline); the table and the raw
    results."""
    text = job_text(artifact, parts)
    seconds = part_seconds(artifact, text, parts)
    parallel = max(worker_counts)  # the same window every run: only the workers differ
    with moto_server() as endpoint:
        results = [
            speak_job(endpoint, artifact, count, parallel, seconds, threads, text) for count in worker_counts
        ]
    base = results[0]
    table = Table(
        f"{len(text):,} characters as one job, {artifact.name}, {threads} thread(s) per worker",
        ["workers", "parts", "wall s", "audio s", f"× {base['workers']} worker(s)", "audio sha256"],
    )
    for result in results:
        table.add(
            str(result["workers"]),
            str(result["parts"]),
            f"{result['wall_s']:.1f}",
            f"{result['audio_s']:.1f}",
            f"{result['wall_s'] / base['wall_s']:.2f}",
            result["sha256"][:16],
        )
    table.notes.append(
        f"COSYVOICE_JOB_PART_SECONDS={seconds}, COSYVOICE_JOB_PARALLEL={parallel}; each run on a fresh"
        " bucket and queue of a local moto_server, timed from the job's message to its status saying done"
    )
    return table, results


__all__ = ["part_seconds", "projection", "run", "speak_job"]
