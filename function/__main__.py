"""`python -m function COMMAND`: serve, invoke, synth, speakers, verify (the pattern is function.cli's)."""

from __future__ import annotations

import sys

from function import cli

COMMANDS = (
    "function.local.serve",
    "function.local.invoke",
    "function.cli_synth",
    "function.cli_speakers",
    "function.cli_verify",
)


def main(argv: list[str] | None = None) -> int:
    return cli.main("function", "CosyVoice TTS function", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
