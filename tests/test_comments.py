"""Comments and docstrings say what a thing is for and why, never when: no dates, clock times, CPU models
or issue numbers in the prose of function/, export/, infra/ and template.yaml.

Such things are true of one run on one host, or mean something only to whoever filed the issue; git and
bench/results keep them. Only the prose is read (Python comments and docstrings, `#` comments of the
Dockerfile, shell and YAML files): a date or a time that is code, such as an API version in a path or a
format spec, is not prose. The few literals prose must quote are allowed by name, each with its reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("function", "export", "infra")
TOP_LEVEL = ("template.yaml",)
# Prose files, not comments: documentation pages are judged by their own review.
NOT_COMMENTED = {".md", ".typed", ".json"}

FORBIDDEN = {
    "a date": re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"),
    "a clock time": re.compile(r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b"),
    "an issue number": re.compile(r"\bissues? +(?:no\.? *)?#?\d+|#\d+\b", re.IGNORECASE),
    "a CPU model": re.compile(r"\b(?:EPYC|Xeon|Ryzen|Zen ?\d)\b"),
}
# Literals that look like one of the above but name an interface or an input, never a run.
ALLOWED = {
    "2018-06-01": "the Lambda Runtime API's version, a segment of its paths",
    "2015-03-31": "the Lambda Invoke API's version, a segment of its path",
    "2024-03-05": "an ISO date, as <say-as interpret-as='date'> takes it",
    "14:30": "a time, as <say-as interpret-as='time'> takes it",
    "13:00": "a 24-hour time the text normaliser reads",
    "#12345": "an order number the text normaliser reads digit by digit",
}


def python_prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every string statement (docstrings, attribute docstrings)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value


def hash_comments(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every `#` comment of a shell, Dockerfile, YAML or TOML file: a `#` that starts a line
    or follows a blank (one inside a word, like a URL's fragment, is not a comment)."""
    for number, line in enumerate(source.splitlines(), 1):
        match = re.search(r"(?:^|\s)#(.*)", line)
        if match:
            yield number, match.group(1)


def prose_of(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text()
    return python_prose(source) if path.suffix == ".py" else hash_comments(source)


def faults(text: str) -> list[tuple[int, str]]:
    """What in `text` says when rather than what or why: (line within `text`, "<kind> '<literal>'")."""
    return [
        (text.count("\n", 0, match.start()), f"{kind} {match.group(0)!r}")
        for kind, pattern in FORBIDDEN.items()
        for match in pattern.finditer(text)
        if match.group(0) not in ALLOWED
    ]


def commented_files() -> list[Path]:
    files = [ROOT / name for name in TOP_LEVEL]
    for folder in FOLDERS:
        files += [
            path
            for path in sorted((ROOT / folder).rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in NOT_COMMENTED
        ]
    return files


def test_the_prose_says_what_and_why_never_when() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line + offset}: {fault}"
        for path in commented_files()
        for line, text in prose_of(path)
        for offset, fault in faults(text)
    ]
    assert not found, "\n".join(found)


def test_every_allowed_literal_is_still_quoted() -> None:
    prose = "\n".join(text for path in commented_files() for _, text in prose_of(path))
    assert [literal for literal in ALLOWED if literal not in prose] == []


@pytest.mark.parametrize(
    "source",
    [
        "# measured 2026-12-02 on the slow host\nx = 1\n",
        'def f():\n    """Run at 19:25, 0.9 s."""\n',
        '"""The second round (issue 25)."""\n',
        'class A:\n    limit = 3\n    """48 requests (see #12)."""\n',
        "x = 1  # on a 2-vCPU EPYC\n",
    ],
)
def test_python_prose_with_a_when_is_found(source: str) -> None:
    assert [fault for _, text in python_prose(source) for _, fault in faults(text)]


@pytest.mark.parametrize(
    "source",
    [
        'PREFIX = "/2018-06-01/runtime"\n',
        'row = f"{size / 2**20:10.2f} MiB"\n',
        'EXAMPLE = "2024-12-02 at 19:25"  # a date and a time as data, not prose\n',
        '"""Takes ISO dates (2024-03-05) and times (14:30)."""\n',
    ],
)
def test_python_code_and_allowed_literals_pass(source: str) -> None:
    assert [fault for _, text in python_prose(source) for _, fault in faults(text)] == []


def test_hash_comments_are_read_and_code_is_not() -> None:
    source = 'Version: "2012-10-17"\nurl: http://x/#12\ntimeout: 3s  # issue 6 set this\n# 2026-12-03\n'
    assert [(line, fault) for line, text in hash_comments(source) for _, fault in faults(text)] == [
        (3, "an issue number 'issue 6'"),
        (4, "a date '2026-12-03'"),
    ]
