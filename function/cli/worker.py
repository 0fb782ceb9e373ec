"""`python -m function worker --artifacts DIR [--metrics-port PORT]`: consume the job queue
(COSYVOICE_JOB_QUEUE_URL) until SIGTERM, as function.jobs.consumer describes; exit 0 once the part in hand
is finished or handed back. With a metrics port (or COSYVOICE_METRICS_PORT) Prometheus' /metrics is
served there (function.observe.metrics), from a thread of its own."""

from __future__ import annotations

import argparse
import signal
from types import FrameType

from function.cli.base import add_artifacts_option, fail
from function.instance.settings import MAX_PORT, Settings, SettingsError, get_settings, use_settings


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("worker", help="consume the job queue (COSYVOICE_JOB_QUEUE_URL)")
    add_artifacts_option(parser)
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus' /metrics on this port (default: $COSYVOICE_METRICS_PORT)",
    )
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    try:
        if args.artifacts:  # the flag overrides $COSYVOICE_ARTIFACT; the rest comes from the environment
            use_settings(Settings.from_env(artifact=args.artifacts))
        settings = get_settings()
    except SettingsError as exc:
        return fail("function", str(exc))
    if settings.job_queue_url is None or settings.output_bucket is None:
        return fail("function", "a worker needs COSYVOICE_JOB_QUEUE_URL and COSYVOICE_OUTPUT_BUCKET")
    port = args.metrics_port or settings.metrics_port
    if port is not None and not 0 < port <= MAX_PORT:
        return fail("function", f"--metrics-port {port} is not a TCP port (1-{MAX_PORT})")
    from function.observe.lines import write_behind

    write_behind()  # no message waits on stdout
    if port is not None and settings.metrics:
        from prometheus_client import start_http_server

        start_http_server(port)
    from function.jobs.consumer import Stopping, consume

    stopping = Stopping()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.request()

    signal.signal(signal.SIGTERM, stop)  # from here on, even while the model loads: exit 0, nothing taken
    signal.signal(signal.SIGINT, stop)
    from function.instance.model import get_engine

    get_engine()
    print(f'{{"event": "worker_ready", "queue": "{settings.job_queue_url}"}}', flush=True)
    consume(settings, stopping)
    return 0


__all__ = ["register"]
