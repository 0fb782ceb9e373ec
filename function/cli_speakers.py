"""`python -m function speakers --artifacts DIR`: the artifact's built-in speakers, one per line.

Reads only the manifest (no sessions are created), so it answers at once. Errors as in `synth`.
"""

from __future__ import annotations

import argparse

from function.cli_synth import ARTIFACT_VARIABLE, artifact_location, fail, one_line_usage_errors, say
from function.errors import TTSError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("speakers", help="list the built-in speakers (for synth --speaker)")
    parser.add_argument(
        "--artifacts", help=f"artifact directory or s3:// URL (default: ${ARTIFACT_VARIABLE})"
    )
    one_line_usage_errors(parser)
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    from function.loader import open_artifact

    try:
        speakers = sorted(open_artifact(artifact_location(args.artifacts)).manifest.speakers)
    except (TTSError, OSError) as exc:
        return fail(exc)
    for name in speakers:
        print(name)
    if not speakers:
        say("this model has no built-in speakers: clone a voice with synth --prompt-wav")
    return 0


__all__ = ["register"]
