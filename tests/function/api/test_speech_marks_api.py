"""SSML and speech marks over HTTP (uvicorn on loopback): the JSON reply, marks alone, the NDJSON stream
with each mark before its audio, the OpenAI route's <speak> input, and SSML errors as 400s."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile

from tests.function.support import SPEAKER, assert_error

pytestmark = pytest.mark.engine


# Marks are in whole ms, as Polly's: a mark's sample is known to within half a millisecond.
def ms_margin(rate: int) -> int:
    return rate // 2000 + 1


def longest_zero_run(audio: np.ndarray) -> int:
    edges = np.diff(np.concatenate([[0], (audio == 0).astype(np.int8), [0]]))
    return int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max(initial=0))


DOCUMENT = '<speak><s>Hello.</s><break time="500ms"/><mark name="next"/><s>Good bye.</s></speak>'


@pytest.fixture(scope="module")
def client(server: str) -> httpx.Client:
    with httpx.Client(base_url=server, timeout=120) as client:
        yield client


def tts(client: httpx.Client, **fields: Any) -> httpx.Response:
    body = {"text": DOCUMENT, "text_type": "ssml", "speaker": SPEAKER, "seed": 4, **fields}
    return client.post("/v1/tts", json=body)


def test_ssml_audio_has_the_break_as_exact_silence(client: httpx.Client) -> None:
    response = tts(client)
    assert response.status_code == 200, response.text
    audio, rate = soundfile.read(io.BytesIO(response.content), dtype="int16")
    marks = tts(client, marks_only=True).text.splitlines()
    after_break = [json.loads(line) for line in marks][1]["time"]
    start, margin = round(after_break * rate / 1000) - rate // 2, ms_margin(rate)
    assert np.all(audio[start + margin : start + rate // 2 - margin] == 0)
    assert longest_zero_run(audio) == rate // 2  # exactly the break's samples (speech around it is not 0)


def test_marks_with_audio_in_one_json_reply_agree_with_the_audio(client: httpx.Client) -> None:
    response = tts(client, speech_marks=["sentence", "ssml"])
    assert response.status_code == 200, response.text
    body = response.json()
    audio, rate = soundfile.read(io.BytesIO(base64.b64decode(body["audio"])), dtype="int16")
    assert body["format"] == "wav" and body["sample_rate"] == rate
    assert base64.b64decode(body["audio"]) == tts(client).content  # the same seed, the same audio
    marks = body["marks"]
    assert [(m["type"], m["value"]) for m in marks] == [
        ("sentence", "Hello."),
        ("ssml", "next"),
        ("sentence", "Good bye."),
    ]
    raw = DOCUMENT.encode()
    assert raw[marks[0]["start"] : marks[0]["end"]] == b"Hello."
    assert raw[marks[1]["start"] : marks[1]["end"]] == b'<mark name="next"/>'
    second, margin = round(marks[2]["time"] * rate / 1000), ms_margin(rate)
    assert np.all(audio[second - rate // 2 + margin : second - margin] == 0)
    assert np.any(audio[second + margin : second + 2000] != 0)
    only_sentences = tts(client, speech_marks=["sentence"]).json()["marks"]
    assert [m["type"] for m in only_sentences] == ["sentence", "sentence"]


def test_marks_alone_are_polly_json_lines(client: httpx.Client) -> None:
    response = tts(client, marks_only=True, speech_marks=["ssml"])
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-ndjson"
    (line,) = response.text.splitlines()
    assert set(json.loads(line)) == {"time", "type", "start", "end", "value"}


def test_a_plain_text_request_gets_sentence_marks(client: httpx.Client) -> None:
    text = "Hello there. How are you?"
    response = client.post("/v1/tts", json={"text": text, "speaker": SPEAKER, "seed": 1, "marks_only": True})
    marks = [json.loads(line) for line in response.text.splitlines()]
    assert [m["value"] for m in marks] == ["Hello there.", "How are you?"]
    assert marks[0]["time"] == 0 < marks[1]["time"]


def test_a_streamed_request_sends_each_mark_before_its_audio(client: httpx.Client) -> None:
    lines = []
    with client.stream(
        "POST",
        "/v1/tts",
        json={
            "text": DOCUMENT,
            "text_type": "ssml",
            "speaker": SPEAKER,
            "seed": 4,
            "stream": True,
            "speech_marks": ["sentence", "ssml"],
            "format": "pcm",
        },
    ) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]
    rate = int(response.headers["x-sample-rate"])
    heard = 0  # samples received before each mark
    for line in lines:
        if "audio" in line:
            heard += len(base64.b64decode(line["audio"])) // 2
        else:
            assert abs(line["mark"]["time"] - heard * 1000 / rate) <= 1  # no audio of the piece came first
    assert sum("mark" in line for line in lines) == 3


def test_punctuation_after_a_closing_tag_is_spoken_not_refused(client: httpx.Client) -> None:
    response = tts(client, text='<speak>Say it <prosody rate="fast">quickly</prosody>.</speak>')
    assert response.status_code == 200, response.text
    audio, _ = soundfile.read(io.BytesIO(response.content), dtype="int16")
    assert audio.size > 0 and np.any(audio != 0)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("<speak><s>Hello</p></speak>", "line 1, column 18: mismatched tag"),
        ("<speak><audio src='x'/></speak>", "<audio>"),
        ('<speak><prosody pitch="+10%">Hi</prosody></speak>', "pitch"),
        ('<speak><prosody rate="400%">Hi</prosody></speak>', "outside"),
        ('<!DOCTYPE a [<!ENTITY b "c">]><speak>&b;</speak>', "DOCTYPE"),
    ],
)
def test_bad_ssml_is_a_400_that_says_where(client: httpx.Client, text: str, words: str) -> None:
    response = tts(client, text=text)
    assert_error(response, 400, "invalid_request")
    assert words in response.json()["error"]["message"]


def test_the_openai_route_takes_a_speak_document(client: httpx.Client) -> None:
    body = {
        "model": "tts-1",
        "input": '<speak>Hi.<break time="2s"/>Bye.</speak>',
        "voice": SPEAKER,
        "response_format": "wav",
        "seed": 3,
    }
    with_break = client.post("/v1/audio/speech", json=body)
    assert with_break.status_code == 200, with_break.text
    audio, rate = soundfile.read(io.BytesIO(with_break.content), dtype="int16")
    # The two seconds, resampled to 24 kHz: the resampler's filter reaches a few ms into each edge.
    assert 2 * rate - 0.01 * rate <= longest_zero_run(audio) <= 2 * rate


def sse_events(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


@pytest.mark.parametrize("stream_format", ["sse"])
def test_the_openai_sse_stream_sends_each_mark_before_its_audio(
    client: httpx.Client, stream_format: str
) -> None:
    body = {"model": "tts-1", "input": DOCUMENT, "voice": SPEAKER, "response_format": "pcm", "seed": 4}
    events = sse_events(client, {**body, "stream_format": "sse"})
    assert [e["mark"]["value"] for e in events if e["type"] == "speech.mark"] == [
        "Hello.",
        "next",
        "Good bye.",
    ]
    heard = 0  # 24 kHz samples received before each mark
    for event in events:
        if event["type"] == "speech.audio.delta":
            heard += len(base64.b64decode(event["audio"])) // 2
        elif event["type"] == "speech.mark":
            # Marks are timed at the model's rate; the 24 kHz resampler holds back a few ms at most.
            assert heard * 1000 / 24000 <= event["mark"]["time"] + 1
    assert events[-1]["type"] == "speech.audio.done"
    plain = sse_events(client, {**body, "input": "Hello.", "stream_format": "sse"})
    assert not any(e["type"] == "speech.mark" for e in plain)


def test_a_streamed_marked_request_with_bad_input_is_still_a_400(client: httpx.Client) -> None:
    response = tts(client, speaker="nobody", stream=True, speech_marks=["sentence"], format="pcm")
    assert_error(response, 400, "unknown_speaker")
    body = {"model": "tts-1", "input": DOCUMENT, "voice": "nobody", "stream_format": "sse"}
    assert client.post("/v1/audio/speech", json=body).status_code == 400
