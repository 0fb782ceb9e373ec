"""`python -m bench coldstart|speed|memory|lambda|report|all|verify`: the commands are bench.cli's."""

from __future__ import annotations

import sys

from function.cli.base import main as run_commands


def main(argv: list[str] | None = None) -> int:
    return run_commands("bench", "Measure ours against upstream PyTorch CosyVoice.", ("bench.cli",), argv)


if __name__ == "__main__":
    sys.exit(main())
