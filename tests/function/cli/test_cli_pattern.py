"""The command-line pattern every package uses (function.cli.base), in-process.

GIVEN a package whose commands register themselves on the subparsers
WHEN it is run with a command, with no command name (a default command), or with a usage mistake
THEN the chosen command runs with its arguments, and a mistake is one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import types

import pytest

from function.cli import base as cli
from function.instance.settings import Settings, get_settings, use_settings


@pytest.fixture
def package(monkeypatch: pytest.MonkeyPatch) -> str:
    """A module registering `greet NAME` and `count`; runs return what they saw."""
    module = types.ModuleType("pattern_commands")

    def register(commands: argparse._SubParsersAction) -> None:
        greet = commands.add_parser("greet")
        greet.add_argument("name")
        greet.set_defaults(run=lambda args: 10 + len(args.name))
        count = commands.add_parser("count")
        count.add_argument("--to", type=int, required=True)
        count.set_defaults(run=lambda args: args.to)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pattern_commands", module)
    return "pattern_commands"


def test_the_named_command_runs(package: str) -> None:
    assert cli.main("demo", "a demo", [package], ["greet", "ada"]) == 13
    assert cli.main("demo", "a demo", [package], ["count", "--to", "4"]) == 4


def test_without_a_command_name_the_default_command_runs(package: str) -> None:
    assert cli.main("demo", "a demo", [package], ["grace"], default="greet") == 15
    assert cli.main("demo", "a demo", [package], ["count", "--to", "2"], default="greet") == 2


def test_usage_errors_are_one_line_with_exit_status_2(
    package: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main("demo", "a demo", [package], ["count"])
    assert exited.value.code == cli.EXIT_ERROR
    assert capsys.readouterr().err == (
        "demo: error: the following arguments are required: --to (see python -m demo count --help)\n"
    )
    with pytest.raises(SystemExit):
        cli.main("demo", "a demo", [package], ["shout"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("demo: error: argument command: invalid choice: 'shout'")


def test_a_command_reports_its_own_errors_in_the_same_style(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.fail("demo", "the model is missing") == cli.EXIT_ERROR
    assert capsys.readouterr().err == "demo: error: the model is missing\n"


def test_settings_given_by_a_command_line_are_the_process_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("function.instance.settings._settings", None)
    given = Settings(artifact="/given/by/flag")
    use_settings(given)
    assert get_settings() is given
