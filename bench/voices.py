"""`python -m bench voices`: a saved voice against the same recording sent inline, side by side in one run.

One `serve` (saved voices in a temporary COSYVOICE_VOICE_DIR); for each prompt length a voice is saved once,
then the same streamed /v1/tts request is sent RUNS times each way, alternating: naming the voice, and with
the recording base64 in the body. Reported: the request body's bytes and the median time to the first
audio byte (the inline request extracts the prompt's features every time; the saved voice did it once).
The prompts are a synthetic modulated tone at 16 kHz, so the figures measure transport and extraction,
not cloning quality.
"""

from __future__ import annotations

import base64
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench import serving
from bench.tables import Table
from bench.workload import recording

PROMPT_SECONDS = (5.0, 20.0)
TEXT = "Hello there, this is a short sentence."
TRANSCRIPT = "This is what the speaker says in the recording."


def first_audio(client: httpx.Client, body: bytes) -> float:
    """Seconds from sending `body` to /v1/tts (streamed) until its first audio byte arrives."""
    started = time.perf_counter()
    headers = {"content-type": "application/json"}
    with client.stream("POST", "/v1/tts", content=body, headers=headers) as response:
        response.raise_for_status()
        next(response.iter_raw())
        return time.perf_counter() - started


def run(code: Path, artifact: Path, runs: int) -> Table:
    table = Table(
        f"Saved voice vs inline recording (/v1/tts streamed, median of {runs})",
        ["prompt", "way", "request bytes", "first audio (s)"],
    )
    with tempfile.TemporaryDirectory() as voices:
        port = serving.free_port()
        server = serving.start(code, artifact, port, {"COSYVOICE_VOICE_DIR": voices})
        url = f"http://127.0.0.1:{port}"
        try:
            serving.wait_ready(server, url)
            with httpx.Client(base_url=url, timeout=600) as client:
                for seconds in PROMPT_SECONDS:
                    audio = base64.b64encode(recording(seconds)).decode()
                    saved = client.post(
                        "/v1/voices", json={"name": "bench", "audio": audio, "transcript": TRANSCRIPT}
                    )
                    saved.raise_for_status()
                    common = {"text": TEXT, "seed": 1, "stream": True, "format": "pcm"}
                    bodies = {
                        "saved voice": json.dumps({**common, "speaker": saved.json()["id"]}).encode(),
                        "inline": json.dumps(
                            {**common, "prompt_audio": audio, "prompt_text": TRANSCRIPT}
                        ).encode(),
                    }
                    times: dict[str, list[float]] = {way: [] for way in bodies}
                    for _ in range(runs):
                        for way, body in bodies.items():
                            times[way].append(first_audio(client, body))
                    for way, body in bodies.items():
                        table.add(
                            f"{seconds:.0f} s", way, f"{len(body):,}", f"{statistics.median(times[way]):.3f}"
                        )
        finally:
            serving.stop(server)
    return table


__all__ = ["run"]
