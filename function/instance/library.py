"""The instance's libraries of saved voices (function.voices.library), one a tenant, opened from the
settings when a tenant first needs its own, all sharing one cache of features.

The SnapStart before-snapshot hook empties that cache (`clear_cached_voices`), so no restored clone serves
a voice deleted since the snapshot.
"""

from __future__ import annotations

import threading

from function.core.tenant import DEFAULT_TENANT
from function.instance.settings import get_settings
from function.voices.library import VoiceCache, VoiceLibrary, open_library

_cache = VoiceCache()
_libraries: dict[str, VoiceLibrary] = {}
_lock = threading.Lock()


def voice_library(tenant: str = DEFAULT_TENANT) -> VoiceLibrary:
    """`tenant`'s library: in COSYVOICE_VOICE_DIR, else the output bucket; VoicesUnavailable without."""
    with _lock:
        library = _libraries.get(tenant)
        if library is None:
            settings = get_settings()
            library = open_library(
                settings.voice_dir, settings.output_bucket, settings.output_prefix, tenant, _cache
            )
            _libraries[tenant] = library
        return library


def clear_cached_voices() -> None:
    """Forget every voice held in memory (before a SnapStart snapshot)."""
    _cache.clear()


__all__ = ["clear_cached_voices", "voice_library"]
