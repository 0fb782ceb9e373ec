"""The voice library on a directory (COSYVOICE_VOICE_DIR): extraction once per artifact, re-extraction
from the stored recording for another artifact, the bounded cache and its emptying before a snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bench.workload import recording
from function.core.errors import UnknownSpeaker
from function.core.options import Mode, SynthesisOptions
from function.cosyvoice.prompt import PromptFeatures
from function.voices.library import (
    DirectoryObjects,
    VoiceCache,
    VoiceDeleted,
    VoiceLibrary,
    VoiceNotFound,
    open_library,
)


@dataclass
class FakeEngine:
    """What the library uses of an engine: the artifact's name and the prompt encoder, counted."""

    sha: str
    encoded: list[bytes] = field(default_factory=list)

    @property
    def artifact(self) -> Any:
        return SimpleNamespace(manifest_sha256=self.sha)

    def encode_prompt(self, audio: bytes, transcript: str | None) -> PromptFeatures:
        self.encoded.append(audio)
        seed = len(self.encoded) + len(self.sha)
        return PromptFeatures(
            np.full((1, 5), seed, np.int64),
            np.full((1, 192), seed, np.float32),
            np.zeros((1, 9, 80), np.float32),
        )


@pytest.fixture
def library(tmp_path: Path) -> VoiceLibrary:
    return VoiceLibrary(DirectoryObjects(tmp_path), VoiceCache(2))


def test_features_are_extracted_once_and_reused_from_storage(library: VoiceLibrary, tmp_path: Path) -> None:
    engine = FakeEngine("a" * 64)
    voice = library.create("n", recording(), "Hi there.", engine)  # type: ignore[arg-type]
    library.cache.clear()
    fresh = VoiceLibrary(DirectoryObjects(tmp_path))  # another instance on the same volume
    record, features = fresh.features(voice.id, engine)  # type: ignore[arg-type]
    assert len(engine.encoded) == 1 and record == voice
    assert features.speech_tokens.tolist() == [[1 + 64] * 5]
    options = fresh.apply(SynthesisOptions(text="x", speaker=voice.id), engine)  # type: ignore[arg-type]
    assert options.mode is Mode.ZERO_SHOT and options.prompt_text == "Hi there." and options.speaker is None


def test_a_voice_made_on_another_artifact_is_extracted_again_from_its_recording(
    library: VoiceLibrary, tmp_path: Path
) -> None:
    audio = recording()
    voice = library.create("n", audio, None, FakeEngine("a" * 64))  # type: ignore[arg-type]
    other = FakeEngine("b" * 64)
    _, features = library.features(voice.id, other)  # type: ignore[arg-type]
    assert other.encoded == [audio] and features.speech_tokens[0, 0] == 1 + 64
    assert (tmp_path / voice.id / f"features-{'b' * 64}.npz").is_file()
    assert library.get(voice.id).artifact == "a" * 64  # the record still names where it was made
    VoiceLibrary(DirectoryObjects(tmp_path)).features(voice.id, other)  # type: ignore[arg-type]
    assert len(other.encoded) == 1  # saved beside the first features: not extracted a third time


def test_the_cache_is_bounded_and_a_cleared_cache_sees_a_deletion(
    library: VoiceLibrary, tmp_path: Path
) -> None:
    engine = FakeEngine("a" * 64)
    voices = [library.create(str(i), recording(), None, engine) for i in range(3)]  # type: ignore[arg-type]
    assert len(library.cache._items) == 2
    snapshot = VoiceLibrary(DirectoryObjects(tmp_path))
    snapshot.features(voices[0].id, engine)  # type: ignore[arg-type]
    library.delete(voices[0].id)
    snapshot.cache.clear()  # what the before-snapshot hook does
    with pytest.raises(VoiceDeleted, match="deleted"):
        snapshot.features(voices[0].id, engine)  # type: ignore[arg-type]
    with pytest.raises(VoiceNotFound):
        library.get(voices[0].id)
    with pytest.raises(UnknownSpeaker):
        library.features("voice_" + "f" * 32, engine)  # type: ignore[arg-type]
    assert {voice.id for voice in library.saved()} == {voice.id for voice in voices[1:]}


def test_tenants_libraries_share_a_cache_but_never_a_voice(tmp_path: Path) -> None:
    """A directory holds the default tenant's library at its root and every other tenant's below
    `tenants/`: each lists and finds its own voices only, though one cache holds them all."""
    cache = VoiceCache(4)
    engine = FakeEngine("a" * 64)
    default = open_library(str(tmp_path), None, "tts/", cache=cache)
    alice = open_library(str(tmp_path), None, "tts/", "alice", cache)
    mine = alice.create("a", recording(), None, engine)  # type: ignore[arg-type]
    theirs = default.create("d", recording(), None, engine)  # type: ignore[arg-type]
    assert (tmp_path / "tenants" / "alice" / mine.id / "voice.json").is_file()
    assert [voice.id for voice in default.saved()] == [theirs.id]
    assert [voice.id for voice in alice.saved()] == [mine.id]
    alice.features(mine.id, engine)  # type: ignore[arg-type]  # now in the shared cache
    with pytest.raises(VoiceNotFound):
        default.get(mine.id)
    with pytest.raises(UnknownSpeaker):
        default.features(mine.id, engine)  # type: ignore[arg-type]
