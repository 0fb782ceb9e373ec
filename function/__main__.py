"""`python -m function COMMAND`: each command lives in a small module with `register(subparsers)`,
which adds its parser and sets `run` (args → exit code). Commands import their heavy parts in `run`,
so `--help` and every command start fast."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = (
    "function.local.serve",
    "function.local.invoke",
    "function.cli_synth",
    "function.cli_speakers",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m function", description="CosyVoice TTS function")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(commands)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
