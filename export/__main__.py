"""`python -m export MODEL_DIR OUT_DIR` (the default command, `export`), `python -m export fake DIR` and
`python -m export assets SDIST_DIR DEST`; the commands live in export.cli, registered the way
function.cli.base registers every package's commands."""

from __future__ import annotations

import sys

from function.cli.base import main as run_commands


def main(argv: list[str] | None = None) -> int:
    return run_commands(
        "export", "Export CosyVoice-300M models to ONNX artifacts.", ("export.cli",), argv, default="export"
    )


if __name__ == "__main__":
    sys.exit(main())
