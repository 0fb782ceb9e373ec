"""`python -m function COMMAND`: serve, invoke, synth, speakers, verify, worker, sweep (the pattern is
function.cli.base's)."""

from __future__ import annotations

import sys

from function.cli.base import main as run_commands

COMMANDS = (
    "function.local.serve",
    "function.local.invoke",
    "function.cli.synth",
    "function.cli.speakers",
    "function.cli.verify",
    "function.cli.worker",
    "function.cli.sweep",
)


def main(argv: list[str] | None = None) -> int:
    return run_commands("function", "CosyVoice TTS function", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
