"""Inside Lambda, each request and each job message writes one CloudWatch embedded-metric document
(function.core.emf): its log line, with the metrics beside it, in COSYVOICE_METRICS_NAMESPACE.

The dimension is `Operation` (each metric is published without it too: the deployment's totals): the
route's template (`/v1/tts`, `/polly/v1/speech`), or `Job` / `JobPart` for the queue's work. The metrics
carry Polly's names where Polly publishes the same thing, so a dashboard made for Polly reads them
unchanged:

    RequestCharacters  billable characters            ResponseLatency  ms, arrival to reply
    2XXCount, 4XXCount, 5XXCount  1 for the status class the request ended in, 0 for the others
and ours beside them:
    AudioSeconds       audio synthesized               TimeToFirstAudio  ms, a streamed reply's
    RealtimeFactor     compute seconds / audio second  PartsDone, JobsFailed  a job message's

The Lambda handler turns them on at INIT (`embed_metrics`); `serve` and the worker publish Prometheus
metrics instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from function.core.emf import COUNT, MILLISECONDS, NONE, SECONDS, emf_document
from function.instance.settings import get_settings
from function.observe import lines
from function.observe.tally import Tally

OPERATION = "Operation"
# Every metric a document may carry: what a dashboard or an alarm on this namespace may name.
METRICS = (
    "RequestCharacters",
    "ResponseLatency",
    "2XXCount",
    "4XXCount",
    "5XXCount",
    "AudioSeconds",
    "TimeToFirstAudio",
    "RealtimeFactor",
    "PartsDone",
    "JobsFailed",
)
_embedding = False


def embed_metrics() -> None:
    """From now on a unit's log line carries its embedded metrics (the Lambda handler, at INIT)."""
    global _embedding
    _embedding = True


def embedding() -> bool:
    """Whether a unit's log line carries embedded metrics: inside Lambda, unless COSYVOICE_METRICS=off."""
    return _embedding and get_settings().metrics


def status_counts(status: int) -> dict[str, tuple[float, str]]:
    """Polly's 2XXCount, 4XXCount and 5XXCount for a reply of `status` (a 3xx counts in none)."""
    return {f"{kind}XXCount": (float(status // 100 == kind), COUNT) for kind in (2, 4, 5)}


def work_metrics(tally: Tally) -> dict[str, tuple[float, str]]:
    """What `tally` measured, under the names above: characters and audio always, the rest when known."""
    metrics = {
        "RequestCharacters": (float(tally.characters), COUNT),
        "AudioSeconds": (round(tally.audio_seconds, 3), SECONDS),
    }
    if tally.streamed and tally.first_audio_seconds is not None:
        metrics["TimeToFirstAudio"] = (round(tally.first_audio_seconds * 1000, 1), MILLISECONDS)
    factor = tally.realtime_factor
    if factor is not None:
        metrics["RealtimeFactor"] = (round(factor, 4), NONE)
    return metrics


def document(
    operation: str, metrics: Mapping[str, tuple[float, str]], line: Mapping[str, Any]
) -> dict[str, Any]:
    """The EMF document of one unit of work: its log `line` with `metrics` under `operation`, and under
    no dimension (the deployment's totals, which the alarms read)."""
    return emf_document(get_settings().metrics_namespace, {OPERATION: operation}, metrics, line, rollup=True)


def write(line: Mapping[str, Any], operation: str, metrics: Mapping[str, tuple[float, str]]) -> None:
    """A unit of work's log line: inside Lambda one JSON line that is also its EMF document, with
    `metrics` under `operation`; else the line alone, in COSYVOICE_LOG_FORMAT's shape."""
    if embedding():
        lines.write(lines.json_line(document(operation, metrics, line)))
    elif get_settings().log_format == "text":
        lines.write(lines.text_line(line))
    else:
        lines.write(lines.json_line(line))


__all__ = [
    "METRICS",
    "OPERATION",
    "document",
    "embed_metrics",
    "embedding",
    "status_counts",
    "work_metrics",
    "write",
]
