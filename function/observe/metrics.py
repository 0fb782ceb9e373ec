"""The Prometheus metrics (prometheus_client, in its default registry beside the process and platform
collectors it gives), and how a finished request is counted in them.

Base units and `_total` counters. Labels stay bounded: `route` is a route's template (`/v1/jobs/{job_id}`,
`other` for a path no route matches; `Job` and `JobPart` for the queue's work), `tenant` one the
deployment's credentials name (Settings.named_tenants; any other is `other`), `code` the HTTP status.
docs/observability.md lists every metric and what to alert on.

Recording adds to numbers in memory and nothing else; with COSYVOICE_METRICS=off nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib import metadata

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from function.instance.model import loaded_engine
from function.instance.settings import get_settings
from function.observe.tally import Tally

OTHER = "other"  # the label value of what the configuration does not name
PROJECT = "cosyvoice-serverless"
# Seconds: a probe's few milliseconds up to a long request's minutes.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
FIRST_AUDIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30)
# Compute seconds per audio second: under 1 is faster than real time.
REALTIME_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10)

REQUESTS = Counter(
    "cosyvoice_requests", "Requests answered, by route and status.", ["route", "code", "tenant"]
)
REQUEST_SECONDS = Histogram(
    "cosyvoice_request_duration_seconds",
    "From a request's arrival to its reply's last byte.",
    ["route"],
    buckets=DURATION_BUCKETS,
)
FIRST_AUDIO_SECONDS = Histogram(
    "cosyvoice_time_to_first_audio_seconds",
    "From a streamed request's arrival to its first audio.",
    ["route"],
    buckets=FIRST_AUDIO_BUCKETS,
)
CHARACTERS = Counter(
    "cosyvoice_request_characters",
    "Billable characters (the spoken text, no SSML tags), as Polly counts RequestCharacters.",
    ["route", "tenant"],
)
AUDIO_SECONDS = Counter("cosyvoice_audio_seconds", "Seconds of audio synthesized.", ["route", "tenant"])
REALTIME_FACTOR = Histogram(
    "cosyvoice_realtime_factor",
    "Compute seconds per second of audio, per request or job message that synthesized.",
    buckets=REALTIME_BUCKETS,
)
SLOTS_BUSY = Gauge("cosyvoice_slots_busy", "Synthesis slots taken (function.api.admission).")
REQUESTS_WAITING = Gauge("cosyvoice_requests_waiting", "Synthesis requests waiting for a slot.")
REJECTED = Counter("cosyvoice_rejected", "Requests refused, by reason.", ["reason"])
JOB_PARTS = Counter("cosyvoice_job_parts", "Job messages worked on, by outcome.", ["outcome"])
JOBS_FINISHED = Counter("cosyvoice_jobs_finished", "Jobs that ended, by status (done, failed).", ["status"])
JOB_REDRIVES = Counter("cosyvoice_job_redrives", "Stalled jobs whose messages the sweeper sent again.")

# The refusals counted in cosyvoice_rejected_total: an error code (the project's, or Polly's for /polly)
# → its reason.
REJECTIONS = {
    "busy": "saturated",
    "ThrottlingException": "saturated",
    "text_too_long": "too_long",
    "body_too_large": "too_long",
    "headers_too_large": "too_long",
    "output_too_large": "too_long",
    "TextLengthExceededException": "too_long",
    "exceeds_time_limit": "over_time",
    "deadline_exceeded": "deadline",
    "stalled": "stalled",
    "unauthorized": "unauthorized",
    "forbidden": "unauthorized",
    "IncompleteSignatureException": "unauthorized",
    "InvalidSignatureException": "unauthorized",
    "MissingAuthenticationTokenException": "unauthorized",
    "UnrecognizedClientException": "unauthorized",
}


def enabled() -> bool:
    return get_settings().metrics


def tenant_label(tenant: str) -> str:
    """`tenant` when the deployment's credentials name it, else `other`."""
    return tenant if tenant in get_settings().named_tenants else OTHER


def count_request(
    route: str, status: int, tenant: str, work: Tally, seconds: float, error_code: str | None
) -> None:
    """A request answered with `status` after `seconds`, having done `work` (error_code: its error's,
    if any). Its first audio is counted only for a streamed reply, what its caller waited for."""
    if not enabled():
        return
    REQUESTS.labels(route, str(status), tenant_label(tenant)).inc()
    REQUEST_SECONDS.labels(route).observe(seconds)
    count_work(route, tenant, work, work.characters)
    if work.streamed and work.first_audio_seconds is not None:
        FIRST_AUDIO_SECONDS.labels(route).observe(work.first_audio_seconds)
    reason = REJECTIONS.get(error_code or "")
    if reason is not None:
        REJECTED.labels(reason).inc()


def count_work(route: str, tenant: str, work: Tally, characters: int) -> None:
    """What a request or a job message synthesized, `characters` billed for it."""
    tenant = tenant_label(tenant)
    if characters:
        CHARACTERS.labels(route, tenant).inc(characters)
    if work.audio_seconds:
        AUDIO_SECONDS.labels(route, tenant).inc(work.audio_seconds)
    if work.realtime_factor is not None:
        REALTIME_FACTOR.observe(work.realtime_factor)


def _weights(quantizations: Iterable[tuple[str, str]], prefix: str) -> str:
    """The quantizations of the graphs named `prefix`*, e.g. "int8", or "fp32+int8" when they differ."""
    return "+".join(sorted({kind for name, kind in quantizations if name.startswith(prefix)})) or "none"


class BuildInfo(Collector):
    """cosyvoice_build_info = 1, labelled with the code's version and the loaded artifact: its manifest's
    sha256 (first 12 hex digits) and each model part's weights. Read at scrape time: empty until the
    model has loaded."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "cosyvoice_build_info",
            "The code's version and the artifact it serves.",
            labels=["version", "artifact", "llm_weights", "flow_weights", "vocoder_weights"],
        )
        engine = loaded_engine()
        if engine is not None:
            graphs = [(name, entry.quantization) for name, entry in engine.artifact.manifest.graphs.items()]
            family.add_metric(
                [
                    _version(),
                    engine.artifact.manifest_sha256[:12],
                    _weights(graphs, "llm_"),
                    _weights(graphs, "flow_"),
                    _weights(graphs, "hift_"),
                ],
                1,
            )
        yield family


def _version() -> str:
    try:
        return metadata.version(PROJECT)
    except metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "unknown"


REGISTRY.register(BuildInfo())

__all__ = [
    "AUDIO_SECONDS",
    "CHARACTERS",
    "FIRST_AUDIO_SECONDS",
    "JOBS_FINISHED",
    "JOB_PARTS",
    "JOB_REDRIVES",
    "OTHER",
    "REALTIME_FACTOR",
    "REJECTED",
    "REJECTIONS",
    "REQUESTS",
    "REQUESTS_WAITING",
    "REQUEST_SECONDS",
    "SLOTS_BUSY",
    "count_request",
    "count_work",
    "enabled",
    "tenant_label",
]
