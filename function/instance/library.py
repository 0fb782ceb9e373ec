"""The instance's library of saved voices (function.voices.library), opened once from the settings.

The SnapStart before-snapshot hook empties its in-memory cache (`clear_cached_voices`), so no restored
clone serves a voice deleted since the snapshot.
"""

from __future__ import annotations

import threading

from function.instance.settings import get_settings
from function.voices.library import VoiceLibrary, open_library

_library: VoiceLibrary | None = None
_lock = threading.Lock()


def voice_library() -> VoiceLibrary:
    """The process's library: COSYVOICE_VOICE_DIR, else the output bucket; VoicesUnavailable without."""
    global _library
    with _lock:
        if _library is None:
            settings = get_settings()
            _library = open_library(settings.voice_dir, settings.output_bucket, settings.output_prefix)
        return _library


def clear_cached_voices() -> None:
    """Forget every voice held in memory (before a SnapStart snapshot)."""
    if _library is not None:
        _library.clear_cache()


__all__ = ["clear_cached_voices", "voice_library"]
