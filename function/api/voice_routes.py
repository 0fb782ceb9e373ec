"""The voice library's routes (function.voices.library): save a recording as a voice, list every voice
a request may name, look one up, delete one. Included by function.api.app.create_app.

Saving extracts the recording's features, so POST /v1/voices is admitted like a synthesis route.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from function.api.admission import SYNTHESIS
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
def create_voice(body: VoiceRequest) -> Any:
    library = voice_library()  # refuse before the recording is decoded
    voice = library.create(body.name, body.recording(), body.transcript, get_engine())
    return JSONResponse(voice.describe(), status_code=201)


@router.get(
    "/v1/voices",
    summary="Every voice a request may name: built-in speakers, OpenAI names, saved voices",
    responses={503: _UNAVAILABLE},
)
def list_voices() -> dict[str, Any]:
    engine = get_engine()
    mapped = usable_voices(get_settings().voices, engine.speakers)
    return {
        "voices": [
            *({"id": speaker, "type": "speaker"} for speaker in engine.speakers),
            *({"id": name, "type": "openai", "speaker": speaker} for name, speaker in mapped.items()),
            *({**voice.describe(), "type": "saved"} for voice in voice_library().saved()),
        ]
    }


@router.get("/v1/voices/{voice_id}", summary="A saved voice", responses={404: _NOT_FOUND, 503: _UNAVAILABLE})
def get_voice(voice_id: str) -> dict[str, Any]:
    return voice_library().get(voice_id).describe()


@router.delete(
    "/v1/voices/{voice_id}",
    status_code=204,
    summary="Delete a saved voice: requests naming it are refused from then on",
    responses={404: _NOT_FOUND, 503: _UNAVAILABLE},
)
def delete_voice(voice_id: str) -> Response:
    voice_library().delete(voice_id)
    return Response(status_code=204)


__all__ = ["router"]
