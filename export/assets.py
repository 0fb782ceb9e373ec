"""whisper's tokenizer vocabulary and mel filters, located without importing whisper (which imports torch).

Looked for, in order: the model directory, $COSYVOICE_WHISPER_ASSETS, an installed `whisper` package,
and the checkout's .cache/whisper-assets (where `make setup` puts them).
`python -m export assets SDIST_DIR DEST` pulls them out of the openai-whisper source archive
(the Makefile downloads it from PyPI once).
"""

from __future__ import annotations

import importlib.util
import os
import tarfile
from pathlib import Path

TOKENIZER_ASSET = "multilingual.tiktoken"
MEL_FILTERS_ASSET = "mel_filters.npz"
_WANTED = (TOKENIZER_ASSET, MEL_FILTERS_ASSET)


def find_asset(name: str, model_dir: Path | None = None) -> Path:
    candidates: list[Path] = []
    if model_dir is not None:
        candidates.append(model_dir / name)
    if env := os.environ.get("COSYVOICE_WHISPER_ASSETS"):
        candidates.append(Path(env) / name)
    spec = importlib.util.find_spec("whisper")
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / "assets" / name)
    candidates.append(Path(__file__).resolve().parents[1] / ".cache" / "whisper-assets" / name)
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{name} not found (looked in {', '.join(map(str, candidates)) or 'nowhere'}); "
        "run `make setup` or set COSYVOICE_WHISPER_ASSETS to a folder holding whisper's assets"
    )


def extract(sdist_dir: Path, dest: Path) -> None:
    archives = sorted(sdist_dir.glob("openai_whisper-*.tar.gz")) + sorted(
        sdist_dir.glob("openai-whisper-*.tar.gz")
    )
    if not archives:
        raise FileNotFoundError(f"no openai-whisper source archive in {sdist_dir}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archives[-1]) as archive:
        for member in archive.getmembers():
            if member.isfile() and Path(member.name).name in _WANTED and "/whisper/assets/" in member.name:
                source = archive.extractfile(member)
                assert source is not None
                (dest / Path(member.name).name).write_bytes(source.read())
    missing = [name for name in _WANTED if not (dest / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{archives[-1].name} lacks {missing}")
