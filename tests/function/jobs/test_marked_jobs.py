"""A job with SSML and speech marks (direct invoke with an id, under the real runtime client, S3 on
moto_server): the audio, `<id>.marks.jsonl` and `<id>.vtt` side by side, listed with presigned URLs."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile

from tests.function.support import SPEAKER, local_lambda

pytestmark = pytest.mark.engine
DOCUMENT = '<speak><s>Hello.</s><break time="1s"/><mark name="middle"/><s>Good bye.</s></speak>'


def test_a_marked_job_writes_audio_marks_and_captions_beside_each_other(
    artifact_location: str, bucket: str, s3: Any, s3_env: dict[str, str]
) -> None:
    event = {"id": "marked-1", "text": DOCUMENT, "text_type": "ssml", "speaker": SPEAKER, "seed": 7}
    with local_lambda(artifact_location, COSYVOICE_OUTPUT_BUCKET=bucket, **s3_env) as runtime:
        runtime.wait_init()
        reply = runtime.invoke(event).json()
    assert reply["status"] == "done", reply
    names = {item["Key"].rsplit("/", 1)[-1] for item in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert {"marked-1.wav", "marked-1.marks.jsonl", "marked-1.vtt"} <= names
    assert "marked-1.marks.jsonl" in reply["marks_url"] and "marked-1.vtt" in reply["captions_url"]
    audio, rate = soundfile.read(io.BytesIO(httpx.get(reply["url"]).content), dtype="int16")
    marks = [json.loads(line) for line in httpx.get(reply["marks_url"]).text.splitlines()]
    assert [(m["type"], m["value"]) for m in marks] == [
        ("sentence", "Hello."),
        ("ssml", "middle"),
        ("sentence", "Good bye."),
    ]
    second = round(marks[2]["time"] * rate / 1000)
    margin = rate // 2000 + 1  # marks are whole ms
    assert np.all(audio[second - rate + margin : second - margin] == 0)  # the break, just before the mark
    captions = httpx.get(reply["captions_url"]).text
    end = f"00:00:{audio.size * 1000 // rate // 1000:02d}.{round(audio.size * 1000 / rate) % 1000:03d}"
    assert captions.startswith("WEBVTT\n\n1\n00:00:00.000 --> ")
    assert "\nHello.\n" in captions and captions.rstrip().endswith(f"--> {end}\nGood bye.")
