"""The function's runtime requirements, read from pyproject.toml (the one place they are declared).

Both deployment packages install exactly this list: the Lambda zip (`infra.build_zip`) and the container
image (`infra/Dockerfile` runs this file as a script, so it must stay stdlib-only).

    python infra/requirements.py pyproject.toml > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# The managed python3.12 runtime and the Lambda base image ship the runtime interface client; a second
# copy in /var/task would only add weight. snapshot-restore-py stays: the handler imports it, and the
# pinned copy is what the tests ran against.
PROVIDED_BY_LAMBDA = frozenset({"awslambdaric"})
FUNCTION_EXTRA = "function"

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirement_name(requirement: str) -> str:
    """The PEP 503 normalised project name of a requirement string ("Mangum==0.22" -> "mangum")."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def runtime_requirements(pyproject: Path) -> list[str]:
    """[project].dependencies + the `function` extra, minus what Lambda provides, in declared order."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    declared = list(project["dependencies"]) + list(project["optional-dependencies"][FUNCTION_EXTRA])
    return [req for req in declared if requirement_name(req) not in PROVIDED_BY_LAMBDA]


def main(argv: list[str]) -> int:
    pyproject = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "pyproject.toml"
    print("\n".join(runtime_requirements(pyproject)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
