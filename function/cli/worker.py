"""`python -m function worker --artifacts DIR`: consume the job queue (COSYVOICE_JOB_QUEUE_URL) until
SIGTERM, as function.jobs.consumer describes; exit 0 once the part in hand is finished or handed back."""

from __future__ import annotations

import argparse
import signal
from types import FrameType

from function.cli.base import add_artifacts_option, fail
from function.instance.settings import Settings, SettingsError, get_settings, use_settings


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("worker", help="consume the job queue (COSYVOICE_JOB_QUEUE_URL)")
    add_artifacts_option(parser)
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
