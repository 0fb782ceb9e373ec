"""`python -m function speakers --artifacts DIR`: the artifact's built-in speakers, one per line.

Reads only the manifest (no sessions are created), so it answers at once. Errors as in `synth`.
"""

from __future__ import annotations

import argparse

from function.cli.base import add_artifacts_option
from function.cli.synth import artifact_location, fail, say
from function.core.errors import TTSError


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("speakers", help="list the built-in speakers (for synth --speaker)")
    add_artifacts_option(parser)
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    from function.instance.loader import open_artifact

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
