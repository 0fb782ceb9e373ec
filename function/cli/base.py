"""The command-line pattern of every package here (`python -m function|export|bench COMMAND`).

Each command lives in a module with `register(commands)`, which adds its parser to the subparsers and
sets `run` (args → exit code); `main` builds the parser from a list of such modules. Commands import
their heavy parts in `run`, so `--help` and every command start fast. Every error, a usage error as
much as one the command reports, is one line on stderr, `PACKAGE: error: MESSAGE`, with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

EXIT_ERROR = 2


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (argparse prints the whole usage first).

    Subparsers are made of the same class, so `parser_for` gives each package a subclass naming it."""

    package = "python"

    def error(self, message: str) -> NoReturn:
        fail(self.package, f"{message} (see {self.prog} --help)")
        sys.exit(EXIT_ERROR)


def parser_for(package: str) -> type[Parser]:
    return type(f"{package.capitalize()}Parser", (Parser,), {"package": package})


def fail(package: str, message: str) -> int:
    """Report one error line; returns the exit status for the command to return."""
    print(f"{package}: error: {message}", file=sys.stderr, flush=True)
    return EXIT_ERROR


def add_artifacts_option(parser: argparse.ArgumentParser) -> None:
    """`--artifacts`: the one name every command uses for where an artifact is."""
    parser.add_argument("--artifacts", help="artifact directory or s3:// URL (default: $COSYVOICE_ARTIFACT)")


def main(
    package: str,
    description: str,
    modules: Sequence[str],
    argv: Sequence[str] | None = None,
    default: str | None = None,
) -> int:
    """Parse `argv` against the commands the modules register and run the chosen one.

    default: the command meant when the first argument names none (`python -m export MODEL_DIR OUT_DIR`).
    """
    parser = parser_for(package)(prog=f"python -m {package}", description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    for module in modules:
        importlib.import_module(module).register(commands)
    arguments = list(sys.argv[1:] if argv is None else argv)
    named = bool(arguments) and (arguments[0] in commands.choices or arguments[0] in ("-h", "--help"))
    if default is not None and not named:
        arguments.insert(0, default)
    args = parser.parse_args(arguments)
    return int(args.run(args) or 0)


__all__ = ["EXIT_ERROR", "Parser", "add_artifacts_option", "fail", "main", "parser_for"]
