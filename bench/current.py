"""`python -m bench.current ARTIFACT`: exit 0 when the artifact is in the format this runtime loads (the
bench then reuses it), 1 when it is missing or older (`make bench` exports it again)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from function.cosyvoice.contract import FORMAT_VERSION, MANIFEST_FILE


def is_current(artifact: Path) -> bool:
    try:
        manifest = json.loads((artifact / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format_version") == FORMAT_VERSION


if __name__ == "__main__":
    sys.exit(0 if len(sys.argv) == 2 and is_current(Path(sys.argv[1])) else 1)
