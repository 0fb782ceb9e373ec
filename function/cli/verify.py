"""`python -m function verify --artifacts DIR|s3://...`: check every artifact file against the manifest.

Sizes and each file's sha256 (every byte: 1.7 GB for an fp32 artifact), without creating a
session: for a deploy pipeline before `infra.upload`, or after copying an artifact. A damaged file is one
error line and exit status 2; a good artifact prints what was checked.
"""

from __future__ import annotations

import argparse

from function.cli.base import add_artifacts_option
from function.cli.synth import artifact_location, fail
from function.core.errors import TTSError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("verify", help="check the artifact's files against the manifest's sha256")
    add_artifacts_option(parser)
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    from function.instance.loader import open_artifact

    try:
        artifact = open_artifact(artifact_location(args.artifacts), verify_hashes=True)
    except (TTSError, OSError) as exc:
        return fail(exc)
    files = artifact.manifest.files()
    total = sum(entry.size for entry in files)
    print(f"{len(files)} files, {total / 2**20:,.1f} MiB: sizes and sha256 match the manifest")
    return 0


__all__ = ["register"]
