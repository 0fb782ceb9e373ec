"""`python -m function sweep`: one pass of the job sweeper (function.jobs.sweep) over the deployment's jobs
that are not final, with the settings of the environment (COSYVOICE_OUTPUT_BUCKET, COSYVOICE_JOB_QUEUE_URL,
COSYVOICE_JOB_STALL_SECONDS, …); prints what it did as one JSON line. No model is loaded."""

from __future__ import annotations

import argparse
import os

from function.cli.base import fail
from function.core.errors import TTSError
from function.instance.settings import Settings, SettingsError

# The sweeper reads no model: an environment without COSYVOICE_ARTIFACT is enough for it.
NO_ARTIFACT = "unused: the sweeper loads no model"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("sweep", help="re-drive the jobs that stopped moving (one pass)")
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    from function.jobs.sweep import sweep

    try:
        settings = Settings.from_env(artifact=os.environ.get("COSYVOICE_ARTIFACT") or NO_ARTIFACT)
    except SettingsError as exc:
        return fail("function", str(exc))
    if settings.job_queue_url is None or settings.output_bucket is None:
        return fail("function", "a sweep needs COSYVOICE_JOB_QUEUE_URL and COSYVOICE_OUTPUT_BUCKET")
    try:
        sweep(settings)
    except TTSError as exc:
        return fail("function", exc.message)
    return 0


__all__ = ["register"]
