"""Saved voices (POST /v1/voices): a prompt recording cloned once, then named by its id wherever a speaker
is named (/v1/tts's `speaker`, /v1/audio/speech's `voice`, job bodies, SQS messages).

Each tenant has a library of its own (function.core.tenant): the default tenant's under `voices/` in the
output bucket's COSYVOICE_OUTPUT_PREFIX, or in COSYVOICE_VOICE_DIR; any other tenant's under
`tenants/<tenant>/voices/` in the prefix, or `tenants/<tenant>/` in the directory. A request names only its
tenant's voices. Each voice lives under `<id>/` in its library, every object written once:

    voice.json              the record: name, created, duration, transcript, the artifact it was made with
    recording               the original recording, as sent
    features-<sha256>.npz   speech tokens, embedding and mel as extracted with the artifact of that manifest
                            sha256; a voice used with another artifact is re-extracted from its recording
                            then, and those features saved beside the first ones
    deleted.json            written by DELETE (which removes the rest): a request naming the voice is then
                            told it is gone instead of that it is unknown

Ids are `voice_` + 32 hex digits, or, for a voice made through Polly's CreateVoice
(function.polly.routes), `vc-` + 29 (Polly's custom voice ids: at most 32 characters): one library, so
either kind is usable wherever a speaker is named.

An instance keeps the features of recently used voices in memory (at most CACHE_VOICES, across every
tenant's library: `VoiceCache`); the SnapStart before-snapshot hook empties that, so no restored clone
serves a voice deleted since the snapshot.
"""

from __future__ import annotations

import io
import json
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from function.aws import s3
from function.core.errors import InvalidRequest, TTSError, UnknownSpeaker
from function.core.options import SynthesisOptions
from function.core.tenant import DEFAULT_TENANT, tenant_prefix
from function.cosyvoice.prompt import PromptFeatures, decode_prompt

if TYPE_CHECKING:
    from function.cosyvoice.engine import Engine

# 128 (or Polly's form: 116) random bits: unguessable, and safe in a key
VOICE_ID = re.compile(r"^(?:voice_[0-9a-f]{32}|vc-[0-9a-f]{29})$")
CACHE_VOICES = 32  # features held per instance: a 30 s prompt's mel is ~0.8 MB
MAX_NAME_CHARS = 100
_RECORD, _RECORDING, _DELETED = "voice.json", "recording", "deleted.json"
_JSON = "application/json"


class VoiceNotFound(TTSError):
    """GET or DELETE of an id that names no saved voice."""

    code = "voice_not_found"
    status = 404


class VoiceDeleted(InvalidRequest):
    """A request names a voice that was deleted."""

    code = "voice_deleted"


class VoicesUnavailable(TTSError):
    """Neither COSYVOICE_VOICE_DIR nor an output bucket is configured."""

    code = "voices_unavailable"
    status = 503


@dataclass(frozen=True)
class SavedVoice:
    id: str
    name: str
    created: str  # ISO 8601, UTC
    duration_seconds: float
    transcript: str | None  # None: the voice speaks cross-lingually
    artifact: str  # the manifest sha256 of the artifact it was first extracted with
    language: str | None = None  # the Polly language code it was created with (CreateVoice)

    def describe(self) -> dict[str, Any]:
        """The API's view (POST's 201, GET): the transcript only as whether there is one."""
        return {
            "id": self.id,
            "name": self.name,
            "created": self.created,
            "duration_seconds": self.duration_seconds,
            "transcript": self.transcript is not None,
        }


class Objects(Protocol):
    """Where voices are kept: keys relative to the voices' root, named by `location`."""

    location: str

    def read(self, key: str) -> bytes | None: ...

    def write(self, key: str, data: bytes) -> None: ...  # once: an existing key is left as it is

    def delete(self, keys: list[str]) -> None: ...

    def keys(self, prefix: str) -> list[str]: ...


class BucketObjects:
    """S3 under a prefix (function.aws.s3: write-once PUTs)."""

    def __init__(self, bucket: str, prefix: str) -> None:
        self.bucket, self.prefix = bucket, prefix
        self.location = f"s3://{bucket}/{prefix}"

    def read(self, key: str) -> bytes | None:
        found = s3.read(self.bucket, self.prefix + key)
        return None if found is None else found[0]

    def write(self, key: str, data: bytes) -> None:
        s3.put(
            self.bucket,
            self.prefix + key,
            data,
            _JSON if key.endswith(".json") else "application/octet-stream",
        )

    def delete(self, keys: list[str]) -> None:
        s3.delete(self.bucket, [self.prefix + key for key in keys])

    def keys(self, prefix: str) -> list[str]:
        return [key[len(self.prefix) :] for key in s3.sizes(self.bucket, self.prefix + prefix)]


class DirectoryObjects:
    """Files in a directory (a container's volume); each written whole to a temporary name, then renamed."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.location = str(self.root)

    def read(self, key: str) -> bytes | None:
        path = self.root / key
        return path.read_bytes() if path.is_file() else None

    def write(self, key: str, data: bytes) -> None:
        path = self.root / key
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        partial.write_bytes(data)
        partial.replace(path)

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            (self.root / key).unlink(missing_ok=True)

    def keys(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(str(path.relative_to(self.root)) for path in base.rglob("*") if path.is_file())


class VoiceCache:
    """The features of the voices used last, at most `size`, whatever library (tenant) they are in: by
    (library location, voice id, artifact)."""

    def __init__(self, size: int = CACHE_VOICES) -> None:
        self._items: OrderedDict[tuple[str, str, str], tuple[SavedVoice, PromptFeatures]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[SavedVoice, PromptFeatures] | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, str], value: tuple[SavedVoice, PromptFeatures]) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def forget(self, location: str, voice_id: str) -> None:
        with self._lock:
            for key in [key for key in self._items if key[:2] == (location, voice_id)]:
                del self._items[key]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class VoiceLibrary:
    """Saved voices in `objects`, their features held in `cache` (one of the library's own by default)."""

    def __init__(self, objects: Objects, cache: VoiceCache | None = None) -> None:
        self.objects = objects
        self.cache = VoiceCache() if cache is None else cache

    def create(
        self,
        name: str,
        audio: bytes,
        transcript: str | None,
        engine: Engine,
        language: str | None = None,
        polly_id: bool = False,
    ) -> SavedVoice:
        """Check and extract the recording once (the same 4xx errors as an inline prompt_audio), store it.
        `polly_id`: an id in Polly's form (vc-...), for CreateVoice."""
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS:
            raise InvalidRequest(f"name must be 1 to {MAX_NAME_CHARS} characters")
        samples, rate = decode_prompt(audio)
        features = engine.encode_prompt(audio, transcript)
        voice = SavedVoice(
            id=f"vc-{secrets.token_hex(15)[:29]}" if polly_id else f"voice_{secrets.token_hex(16)}",
            name=name,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            duration_seconds=round(len(samples) / rate, 3),
            transcript=transcript or None,
            artifact=engine.artifact.manifest_sha256,
            language=language,
        )
        folder = f"{voice.id}/"
        self.objects.write(folder + _RECORDING, audio)
        self.objects.write(folder + _features_key(voice.artifact), _pack(_as_features(features)))
        # The record last: a voice is listed only once everything it needs is stored.
        self.objects.write(folder + _RECORD, json.dumps(voice.__dict__, ensure_ascii=False).encode())
        self._remember(voice, _as_features(features))
        return voice

    def get(self, voice_id: str) -> SavedVoice:
        """The record; VoiceNotFound for an id that names none (or no longer does)."""
        data = self.objects.read(f"{voice_id}/{_RECORD}") if VOICE_ID.match(voice_id) else None
        if data is None:
            raise VoiceNotFound(f"no saved voice {voice_id!r}")
        return SavedVoice(**json.loads(data))

    def saved(self) -> list[SavedVoice]:
        """Every saved voice, oldest first (the records at `<id>/voice.json`: a directory's libraries of
        other tenants, below it in `tenants/`, are not this library's)."""
        keys = self.objects.keys("")
        records = (self.objects.read(key) for key in keys if _record_of(key) is not None)
        voices = [SavedVoice(**json.loads(data)) for data in records if data is not None]
        return sorted(voices, key=lambda voice: (voice.created, voice.id))

    def delete(self, voice_id: str) -> None:
        voice = self.get(voice_id)
        folder = f"{voice.id}/"
        self.objects.write(folder + _DELETED, json.dumps({"deleted": _now()}).encode())
        self.objects.delete([key for key in self.objects.keys(folder) if key != folder + _DELETED])
        self.cache.forget(self.objects.location, voice.id)

    def features(self, voice_id: str, engine: Engine) -> tuple[SavedVoice, PromptFeatures]:
        """A voice's record and its features for `engine`'s artifact: from memory, from storage, or
        extracted again from the recording when the voice was made with another artifact."""
        artifact = engine.artifact.manifest_sha256
        cached = self.cache.get((self.objects.location, voice_id, artifact))
        if cached is not None:
            return cached
        try:
            voice = self.get(voice_id)
        except VoiceNotFound:
            if self.objects.read(f"{voice_id}/{_DELETED}") is not None:
                raise VoiceDeleted(
                    f"voice {voice_id!r} was deleted: save it again (POST /v1/voices)"
                ) from None
            raise UnknownSpeaker(
                f"unknown voice {voice_id!r}: no saved voice has that id (GET /v1/voices)"
            ) from None
        key = f"{voice.id}/{_features_key(artifact)}"
        packed = self.objects.read(key)
        if packed is not None:
            features = _unpack(packed)
        else:
            recording = self.objects.read(f"{voice.id}/{_RECORDING}")
            if recording is None:
                raise VoiceDeleted(f"voice {voice_id!r} was deleted: save it again (POST /v1/voices)")
            features = _as_features(engine.encode_prompt(recording, voice.transcript))
            self.objects.write(key, _pack(features))
        self._remember(voice, features)
        return voice, features

    def apply(self, options: SynthesisOptions, engine: Engine) -> SynthesisOptions:
        """`options` with a saved voice named as the speaker turned into its prompt: the same options as
        its recording and transcript sent inline, features already extracted. Other options unchanged."""
        if not names_saved_voice(options):
            return options
        assert options.speaker is not None
        voice, features = self.features(options.speaker, engine)
        return replace(
            options, speaker=None, instruct=None, prompt_text=voice.transcript, prompt_features=features
        )

    def _remember(self, voice: SavedVoice, features: PromptFeatures) -> None:
        self.cache.put((self.objects.location, voice.id, voice.artifact), (voice, features))


def is_voice_id(name: str) -> bool:
    return VOICE_ID.match(name) is not None


def names_saved_voice(options: SynthesisOptions) -> bool:
    """Whether the options' speaker is a saved voice's id (and no recording is sent inline instead)."""
    return not options.cloned and options.speaker is not None and is_voice_id(options.speaker)


def _record_of(key: str) -> str | None:
    """The voice id of a key that is a voice's record (`<id>/voice.json`), else None."""
    voice_id, slash, name = key.partition("/")
    return voice_id if slash and name == _RECORD and is_voice_id(voice_id) else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _features_key(artifact: str) -> str:
    return f"features-{artifact}.npz"


def _as_features(encoded: Any) -> PromptFeatures:
    return PromptFeatures(encoded.speech_tokens, encoded.embedding, encoded.mel)


def _pack(features: PromptFeatures) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, speech_tokens=features.speech_tokens, embedding=features.embedding, mel=features.mel)
    return buffer.getvalue()


def _unpack(data: bytes) -> PromptFeatures:
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return PromptFeatures(arrays["speech_tokens"], arrays["embedding"], arrays["mel"])


def open_library(
    voice_dir: str | None,
    bucket: str | None,
    prefix: str,
    tenant: str = DEFAULT_TENANT,
    cache: VoiceCache | None = None,
) -> VoiceLibrary:
    """`tenant`'s library in `voice_dir` (a container's volume), else under its prefix + "voices/" in
    `bucket`; VoicesUnavailable with neither."""
    if voice_dir is not None:
        return VoiceLibrary(DirectoryObjects(Path(voice_dir) / tenant_prefix("", tenant)), cache)
    if bucket is not None:
        return VoiceLibrary(BucketObjects(bucket, tenant_prefix(prefix, tenant) + "voices/"), cache)
    raise VoicesUnavailable(
        "saved voices need COSYVOICE_VOICE_DIR or COSYVOICE_OUTPUT_BUCKET; this deployment has neither"
    )


__all__ = [
    "BucketObjects",
    "CACHE_VOICES",
    "DirectoryObjects",
    "SavedVoice",
    "VoiceCache",
    "VoiceDeleted",
    "VoiceLibrary",
    "VoiceNotFound",
    "VoicesUnavailable",
    "is_voice_id",
    "names_saved_voice",
    "open_library",
]
