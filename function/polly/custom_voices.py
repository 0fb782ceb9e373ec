"""Polly's custom voices (CreateVoice, GetVoice, DeleteVoice): a tenant's saved voices
(function.voices.library) made through Polly's API, with ids in Polly's form (`vc-…`).

A custom voice is made at once (its features extracted while CreateVoice waits), so it is `active` when
CreateVoice answers; a recording that cannot be used is refused then (ValidationException, the reason in
its message) rather than kept as a `failed` voice. It is read from `Bytes`, or from an `S3Url` naming one
of the tenant's own objects in the deployment's output bucket; Polly takes up to ten recordings, this model
one. The same ClientToken (Polly's SDKs send a fresh one unless the caller gives its own) returns the same
voice: the token's sha256 names a record in the tenant's library, `polly/client-tokens/`, of the voice it
made and the request it came with.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime
from typing import Any

from function.aws import s3
from function.core.tenant import in_tenant_folder, tenant_prefix
from function.instance.model import get_engine
from function.instance.settings import get_settings
from function.polly.errors import PollyError
from function.polly.shapes import CustomVoiceRequest, RecordingData
from function.polly.voices import ENGINES
from function.voices.library import SavedVoice, VoiceLibrary

CUSTOM_VOICE_PREFIX = "vc-"
CLIENT_TOKENS = "polly/client-tokens/"  # in a tenant's voice library: a CreateVoice token → its voice


def custom_voice(voice: SavedVoice) -> dict[str, Any]:
    """A saved voice as Polly's Voice: every one is a customer's, made at once, so active."""
    described: dict[str, Any] = {
        "Id": voice.id,
        "Name": voice.name,
        "Origin": "customer",
        "Status": "active",
        "SupportedEngines": list(ENGINES),
        "CreationTime": datetime.fromisoformat(voice.created).timestamp(),
    }
    if voice.language is not None:
        described["LanguageCode"] = voice.language
    return described


def custom_voice_id(voice_id: str) -> str:
    """A VoiceId GetVoice and DeleteVoice take: a custom voice's (vc-…), not the project's own ids."""
    if not voice_id.startswith(CUSTOM_VOICE_PREFIX):
        raise PollyError("ValidationException", f"VoiceId {voice_id!r} is not a custom voice's id (vc-…)")
    return voice_id


def recording_bytes(data: RecordingData, tenant: str) -> bytes:
    """A recording's audio: its base64 bytes, or the object its S3Url names among `tenant`'s own in the
    output bucket."""
    if (data.Bytes is None) == (data.S3Url is None):
        raise PollyError("ValidationException", "give a recording's Data exactly one of Bytes and S3Url")
    if data.Bytes is not None:
        try:
            audio = base64.b64decode(data.Bytes, validate=True)
        except (binascii.Error, ValueError):
            raise PollyError("ValidationException", "the recording's Bytes are not valid base64") from None
        return audio
    settings = get_settings()
    bucket, prefix = settings.output_bucket, tenant_prefix(settings.output_prefix, tenant)
    found_bucket, _, key = (data.S3Url or "").removeprefix("s3://").partition("/")
    if bucket is None or not (data.S3Url or "").startswith("s3://") or found_bucket != bucket:
        raise PollyError(
            "ValidationException",
            f"S3Url must be s3://{bucket or '<output bucket>'}/{prefix}<key>: this function reads the"
            " deployment's output bucket only, under its prefix",
        )
    if not in_tenant_folder(key, settings.output_prefix, tenant):
        raise PollyError("ValidationException", f"S3Url's key must be one of your objects, under {prefix!r}")
    found = s3.read(bucket, key)
    if found is None:
        raise PollyError("ValidationException", f"no object at {data.S3Url}")
    return found[0]


def _request_digest(body: CustomVoiceRequest, audio: bytes) -> str:
    """What a ClientToken stands for: the voice's name, language and recording."""
    asked = {"Name": body.Name, "LanguageCode": body.LanguageCode, "audio": hashlib.sha256(audio).hexdigest()}
    return hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()


def _token_key(token: str) -> str:
    return f"{CLIENT_TOKENS}{hashlib.sha256(token.encode()).hexdigest()}.json"


def _token_voice(library: VoiceLibrary, token: str, digest: str) -> str | None:
    """The voice a ClientToken made, if it made one; ValidationException if it came with another request."""
    found = library.objects.read(_token_key(token))
    if found is None:
        return None
    record = json.loads(found)
    if record["request"] != digest:
        raise PollyError("ValidationException", "this ClientToken was given with another CreateVoice request")
    return str(record["voice"])


def create_custom_voice(
    body: CustomVoiceRequest, library: VoiceLibrary, audio: bytes
) -> tuple[SavedVoice, bool]:
    """The voice CreateVoice answers with, and whether it is new: the one its ClientToken made before, or
    a new one (the token recorded with it, written once: of two requests racing with one token, the
    second's voice is deleted and the first's returned)."""
    token, digest = body.ClientToken, _request_digest(body, audio)
    if token is not None:
        made = _token_voice(library, token, digest)
        if made is not None:
            return library.get(made), False
    voice = library.create(body.Name, audio, None, get_engine(), language=body.LanguageCode, polly_id=True)
    if token is None:
        return voice, True
    library.objects.write(_token_key(token), json.dumps({"voice": voice.id, "request": digest}).encode())
    made = _token_voice(library, token, digest)
    if made is not None and made != voice.id:
        library.delete(voice.id)
        return library.get(made), False
    return voice, True


__all__ = [
    "CUSTOM_VOICE_PREFIX",
    "create_custom_voice",
    "custom_voice",
    "custom_voice_id",
    "recording_bytes",
]
