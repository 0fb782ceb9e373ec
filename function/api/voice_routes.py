"""The voice library's routes (function.voices.library): save a recording as a voice, list every voice
a request may name, look one up, delete one, each in the library of the caller's tenant (another tenant's
voice answers as an id that names none). Included by function.api.app.create_app.

Saving extracts the recording's features, so POST /v1/voices is admitted like a synthesis route.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from starlette.requests import Request

from function.http.context import SYNTHESIS, CallerOf, audit_change
from function.instance.library import voice_library
from function.instance.model import get_engine
from function.instance.settings import get_settings
from function.service.schema import ErrorBody, VoiceRequest
from function.voices.openai import usable_voices

router = APIRouter(tags=["voices"])

_UNAVAILABLE = {"model": ErrorBody, "description": "No COSYVOICE_VOICE_DIR and no output bucket."}
_NOT_FOUND = {"model": ErrorBody, "description": "No saved voice has that id."}


@router.post(
    "/v1/voices",
    status_code=201,
    tags=[SYNTHESIS],
    summary="Save a voice: clone a recording once, then name it by its id",
    responses={
        400: {"model": ErrorBody, "description": "Unusable audio (undecodable, not 1-30 s, silent)."},
        422: {"model": ErrorBody, "description": "The body does not match the schema."},
        503: _UNAVAILABLE,
    },
)
def create_voice(body: VoiceRequest, request: Request, caller: CallerOf) -> Any:
    library = voice_library(caller.tenant)  # refuse before the recording is decoded
    voice = library.create(body.name, body.recording(), body.transcript, get_engine())
    audit_change(request, "voice.created", voice.id)
    return JSONResponse(voice.describe(), status_code=201)


@router.get(
    "/v1/voices",
    summary="Every voice a request may name: built-in speakers, OpenAI names, saved voices",
    responses={503: _UNAVAILABLE},
)
def list_voices(caller: CallerOf) -> dict[str, Any]:
    engine = get_engine()
    mapped = usable_voices(get_settings().voices, engine.speakers)
    return {
        "voices": [
            *({"id": speaker, "type": "speaker"} for speaker in engine.speakers),
            *({"id": name, "type": "openai", "speaker": speaker} for name, speaker in mapped.items()),
            *({**voice.describe(), "type": "saved"} for voice in voice_library(caller.tenant).saved()),
        ]
    }


@router.get("/v1/voices/{voice_id}", summary="A saved voice", responses={404: _NOT_FOUND, 503: _UNAVAILABLE})
def get_voice(voice_id: str, caller: CallerOf) -> dict[str, Any]:
    return voice_library(caller.tenant).get(voice_id).describe()


@router.delete(
    "/v1/voices/{voice_id}",
    status_code=204,
    summary="Delete a saved voice: requests naming it are refused from then on",
    responses={404: _NOT_FOUND, 503: _UNAVAILABLE},
)
def delete_voice(voice_id: str, request: Request, caller: CallerOf) -> Response:
    voice_library(caller.tenant).delete(voice_id)
    audit_change(request, "voice.deleted", voice_id)
    return Response(status_code=204)


__all__ = ["router"]
