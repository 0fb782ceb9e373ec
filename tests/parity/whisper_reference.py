"""whisper's own `audio` and `tokenizer` modules, loaded from the openai-whisper source archive.

`import whisper` pulls in the whole package (model, numba timing, ...); these two modules need only torch /
tiktoken, so they are loaded by file under a bare `whisper` package pointing into the extracted archive.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import tarfile
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDIST_DIR = ROOT / ".cache" / "sdist"


def load_whisper_module(name: str, scratch: Path) -> types.ModuleType:
    """`name` is "audio" or "tokenizer"; the archive is extracted under `scratch` once per session."""
    if "whisper" not in sys.modules or not hasattr(sys.modules["whisper"], "__path__"):
        archives = sorted(SDIST_DIR.glob("openai_whisper-*.tar.gz"))
        if not archives:
            pytest.skip(f"no openai-whisper source archive in {SDIST_DIR}: run `make setup`")
        with tarfile.open(archives[-1]) as archive:
            archive.extractall(scratch, filter="data")
        location = str(next(scratch.glob("openai_whisper-*/whisper")))
        package = types.ModuleType("whisper")
        package.__path__ = [location]
        # A spec as an import would give it: code that looks whisper up (export.assets) may run after this.
        package.__spec__ = importlib.machinery.ModuleSpec("whisper", None, is_package=True)
        package.__spec__.submodule_search_locations = [location]
        sys.modules["whisper"] = package
    return importlib.import_module(f"whisper.{name}")
