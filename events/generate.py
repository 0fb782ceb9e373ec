"""Regenerate the event files: `python events/generate.py [path/to/sam]`.

Each file starts as `sam local generate-event ...` output (so it has every field the real service
sends) and is then pointed at our routes with realistic bodies. The same files work with
`python -m function invoke events/X.json` and, where Docker exists, `sam local invoke -e events/X.json`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPEAKER = "英文女"  # a built-in speaker of CosyVoice-300M-SFT (and of the test models)
TTS = {"text": "Hello from CosyVoice on Lambda.", "speaker": SPEAKER, "format": "wav", "seed": 7}
SPEECH = {
    "model": "cosyvoice-300m-sft",
    "input": "Hello from the OpenAI route.",
    "voice": SPEAKER,
    "response_format": "wav",
}
JSON_HEADERS = {"content-type": "application/json", "accept": "*/*"}


def sam(sam_bin: str, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sam_bin, "local", "generate-event", *args], check=True, capture_output=True, text=True
    )
    return json.loads(result.stdout)


def body(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


def http_v2(sam_bin: str, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
    event = sam(sam_bin, "apigateway", "http-api-proxy", "--method", method, "--path", path.lstrip("/"))
    event.update(rawQueryString="", cookies=[], headers=dict(JSON_HEADERS), isBase64Encoded=False)
    for key in ("queryStringParameters", "pathParameters", "stageVariables"):
        event.pop(key, None)
    event["requestContext"].pop("authentication", None)
    event["requestContext"].pop("authorizer", None)
    if payload is None:
        event.pop("body", None)
    else:
        event["body"] = body(payload)
    return event


def function_url(sam_bin: str) -> dict[str, Any]:
    """Function URL events are HTTP API v2 events with a lambda-url domain and no stage variables."""
    event = http_v2(sam_bin, "POST", "/v1/tts", {**TTS, "format": "mp3"})
    context = event["requestContext"]
    context.update(
        domainName="abcdefghij.lambda-url.us-east-1.on.aws", domainPrefix="abcdefghij", apiId="abcdefghij"
    )
    # Binary-safe clients (and the Function URL service itself for non-text bodies) send base64.
    event["body"] = base64.b64encode(event["body"].encode()).decode()
    event["isBase64Encoded"] = True
    return event


def rest_v1(sam_bin: str) -> dict[str, Any]:
    event = sam(sam_bin, "apigateway", "aws-proxy", "--method", "POST", "--path", "v1/tts")
    event.update(
        body=body({**TTS, "format": "flac"}),
        isBase64Encoded=False,
        queryStringParameters=None,
        multiValueQueryStringParameters=None,
        headers={**event["headers"], "Content-Type": "application/json", "Accept": "audio/flac"},
    )
    event["multiValueHeaders"] = {name: [value] for name, value in event["headers"].items()}
    return event


def alb(sam_bin: str) -> dict[str, Any]:
    event = sam(sam_bin, "alb", "request", "--method", "POST", "--path", "v1/audio/speech")
    event.update(
        body=body(SPEECH),
        isBase64Encoded=False,
        queryStringParameters={},
        headers={**event.get("headers", {}), **JSON_HEADERS},
    )
    return event


def sqs(sam_bin: str) -> dict[str, Any]:
    event = sam(sam_bin, "sqs", "receive-message")
    template = event["Records"][0]
    jobs = [
        {"id": "example-job-1", "text": "The first queued sentence.", "speaker": SPEAKER, "format": "wav"},
        {
            "id": "example-job-2",
            "text": "A second one, as ogg.",
            "speaker": SPEAKER,
            "format": "ogg",
            "seed": 3,
        },
    ]
    event["Records"] = [
        {
            **template,
            "messageId": f"0000000{i}-0000-4000-8000-00000000000{i}",
            "body": body(job),
            "md5OfBody": hashlib.md5(body(job).encode()).hexdigest(),
        }
        for i, job in enumerate(jobs, start=1)
    ]
    return event


def main() -> None:
    sam_bin = sys.argv[1] if len(sys.argv) > 1 else shutil.which("sam")
    if not sam_bin:
        raise SystemExit("sam (aws-sam-cli) not found: pass its path")
    events = {
        "http-api-tts.json": http_v2(sam_bin, "POST", "/v1/tts", TTS),
        "http-api-speech.json": http_v2(sam_bin, "POST", "/v1/audio/speech", SPEECH),
        "http-api-speakers.json": http_v2(sam_bin, "GET", "/v1/speakers", None),
        "function-url-tts.json": function_url(sam_bin),
        "rest-api-tts.json": rest_v1(sam_bin),
        "alb-speech.json": alb(sam_bin),
        "sqs-batch.json": sqs(sam_bin),
        # Direct invokes have no generator: the event is the request itself.
        "direct-tts.json": {**TTS, "format": "wav"},
    }
    for name, event in events.items():
        (HERE / name).write_text(json.dumps(event, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote events/{name}")


if __name__ == "__main__":
    main()
