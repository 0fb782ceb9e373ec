"""Reading what an instance publishes: Prometheus' exposition (with prometheus_client's own parser) and
the JSON log lines."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import Any

import httpx
import soundfile
from prometheus_client.parser import text_string_to_metric_families

Samples = list[tuple[str, dict[str, str], float]]


def scrape(url: str) -> Samples:
    """Every sample of `url`/metrics: (name, labels, value)."""
    response = httpx.get(f"{url}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    ]


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels`."""
    return sum(
        value
        for found, have, value in samples
        if found == name and all(have.get(key) == wanted for key, wanted in labels.items())
    )


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)


def seconds_of(audio: bytes) -> float:
    """The duration of an audio file this service wrote."""
    data, rate = soundfile.read(io.BytesIO(audio))
    return len(data) / rate


def json_lines(lines: Iterable[str], event: str) -> list[dict[str, Any]]:
    """The JSON log lines whose `event` is `event`."""
    found = []
    for line in lines:
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == event:
                found.append(record)
    return found
