"""Amazon Polly's REST-JSON API under /polly, so Polly's SDKs work unchanged with
`endpoint_url="https://<api>/polly"`: each operation at the method and path Polly's service model gives
it, each a translation onto what the other routes use.

    POST   /polly/v1/speech                    SynthesizeSpeech   the service path (function.polly.shapes)
    GET    /polly/v1/voices                    DescribeVoices     the voice table (function.polly.voices)
                                                                  and the custom voices
    POST   /polly/v1/voices                    CreateVoice        the saved-voice library (vc-… ids)
    GET    /polly/v1/voices/{VoiceId}          GetVoice
    DELETE /polly/v1/voices/{VoiceId}          DeleteVoice
    POST   /polly/v1/synthesisTasks            StartSpeechSynthesisTask   the jobs (function.polly.tasks)
    GET    /polly/v1/synthesisTasks/{TaskId}   GetSpeechSynthesisTask
    GET    /polly/v1/synthesisTasks            ListSpeechSynthesisTasks
    PUT    /polly/v1/lexicons/{LexiconName}    PutLexicon         alias lexicons (function.polly.lexicons)
    GET    /polly/v1/lexicons/{LexiconName}    GetLexicon
    GET    /polly/v1/lexicons                  ListLexicons
    DELETE /polly/v1/lexicons/{LexiconName}    DeleteLexicon

Every request acts for the tenant its key pair names (function.polly.sigv4): its custom voices, lexicons
and tasks are that tenant's alone, and another tenant's answer as ids that name nothing.

Custom voices (CreateVoice, function.polly.custom_voices) are made at once, so `active` when CreateVoice
answers. DescribeVoices, GetVoice and DeleteVoice know Polly's custom voices (`vc-` ids) only;
SynthesizeSpeech speaks the tenant's other saved voices too.

Every error leaves in Polly's shape (function.polly.errors): its code in `x-amzn-ErrorType`, the
project's message as `{"message"}`. Requests are signed with SigV4 (function.polly.sigv4, before any
route). The router is made by `polly_router` with the app's way into the service path, so the Polly routes
synthesise as every other route does (the text limit, the deadline, the response limit).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.requests import Request

from function.core.errors import TTSError
from function.core.options import SynthesisOptions
from function.core.script import MarkType
from function.http.context import SYNTHESIS, CallerOf, audit_change
from function.http.streams import SynthesisStream
from function.instance.library import voice_library
from function.instance.model import get_engine
from function.instance.settings import get_settings
from function.markup.marks import marks_jsonl
from function.observe.tally import current
from function.polly import lexicons, tasks
from function.polly.custom_voices import (
    CUSTOM_VOICE_PREFIX,
    create_custom_voice,
    custom_voice,
    custom_voice_id,
    recording_bytes,
)
from function.polly.errors import POLLY_PREFIX, PollyError, as_polly, polly_reply
from function.polly.shapes import CustomVoiceRequest, LexiconRequest, PollySpeech, PollyTask
from function.polly.voices import ENGINES, LANGUAGE_CODES, language_tag, polly_speaker, polly_voices
from function.service.schema import describe
from function.service.synthesis import Synthesis
from function.voices.library import VoicesUnavailable, is_voice_id

logger = logging.getLogger(__name__)

PREFIX = POLLY_PREFIX
# The app's way into the service path (function.api.app.synthesis_for): options, the request, the marks.
SynthesisFor = Callable[[SynthesisOptions, Request, tuple[MarkType, ...]], Synthesis]


class PollyRoute(APIRoute):
    """A route whose errors leave in Polly's shape, the body's validation errors included."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def polly_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except TTSError as exc:
                return polly_reply(as_polly(exc))
            except RequestValidationError as exc:
                errors = list(exc.errors())
                invalid_json = any(item.get("type") == "json_invalid" for item in errors)
                message = "the request body is not valid JSON" if invalid_json else describe(errors)
                return polly_reply(PollyError("ValidationException", message))
            except Exception:  # ours: the traceback to the log, never into the response
                logger.exception("unhandled error in %s %s", request.method, request.url.path)
                return polly_reply(PollyError("ServiceFailureException", "internal error"))

        return polly_handler


def speaker_of(voice_id: str) -> str:
    """What the service path takes for a VoiceId: a saved voice's id as it is, else the built-in
    speaker the Polly name maps onto."""
    if is_voice_id(voice_id):
        return voice_id
    return polly_speaker(voice_id, get_settings().polly_voices, get_engine().speakers)


def polly_router(synthesis_for: SynthesisFor) -> APIRouter:
    """The /polly routes, synthesising through `synthesis_for`."""
    router = APIRouter(prefix=PREFIX, route_class=PollyRoute, tags=["polly"])

    @router.post("/v1/speech", tags=[SYNTHESIS], summary="Polly's SynthesizeSpeech", response_class=Response)
    def synthesize_speech(body: PollySpeech, request: Request, caller: CallerOf) -> Response:
        named = lexicons.named(caller.tenant, body.LexiconNames)
        polly = body.translated(speaker_of(body.VoiceId), named)
        synthesis = synthesis_for(polly.options, request, polly.marks)
        current().characters = polly.characters  # Polly's count: before a lexicon's aliases
        headers = {**synthesis.headers, "x-amzn-RequestCharacters": str(polly.characters)}
        if polly.marks_only:
            synthesis.drain()
            return Response(marks_jsonl(synthesis.marks), media_type=polly.content_type, headers=headers)
        if synthesis.streamed:
            return SynthesisStream(synthesis.pieces(), synthesis, polly.content_type, headers)
        audio = synthesis.whole()
        assert isinstance(audio, bytes)  # an HTTP reply never spills
        return Response(audio, media_type=polly.content_type, headers=headers)

    @router.get("/v1/voices", summary="Polly's DescribeVoices")
    def describe_voices(
        caller: CallerOf,
        Engine: str | None = None,  # noqa: N803 - Polly's query parameter names
        LanguageCode: str | None = None,  # noqa: N803
        IncludeAdditionalLanguageCodes: bool = False,  # noqa: N803
        NextToken: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        if NextToken:
            raise PollyError("InvalidNextTokenException", "NextToken is not one this API gave: it gives none")
        if Engine is not None and Engine not in ENGINES:
            raise PollyError("ValidationException", f"Engine {Engine!r} is not one of {', '.join(ENGINES)}")
        if LanguageCode is not None and LanguageCode not in LANGUAGE_CODES:
            raise PollyError("ValidationException", f"LanguageCode {LanguageCode!r} is not one of Polly's")
        voices = [
            voice.describe() for voice in polly_voices(get_settings().polly_voices, get_engine().speakers)
        ]
        with suppress(VoicesUnavailable):  # a deployment without voice storage has built-in voices only
            saved = voice_library(caller.tenant).saved()
            voices += [custom_voice(voice) for voice in saved if voice.id.startswith(CUSTOM_VOICE_PREFIX)]
        if LanguageCode is not None:
            voices = [
                voice
                for voice in voices
                if voice.get("LanguageCode") == LanguageCode
                or (
                    IncludeAdditionalLanguageCodes
                    and LanguageCode in voice.get("AdditionalLanguageCodes", ())
                )
            ]
        return {"Voices": voices}

    @router.post("/v1/voices", tags=[SYNTHESIS], summary="Polly's CreateVoice: a saved voice (vc-…)")
    def create_voice(body: CustomVoiceRequest, request: Request, caller: CallerOf) -> dict[str, Any]:
        if not body.TermsAccepted:
            raise PollyError(
                "ValidationException",
                "TermsAccepted must be true: it says you have the speaker's consent to clone their voice",
            )
        if language_tag(body.LanguageCode) is None:
            raise PollyError(
                "ValidationException",
                f"LanguageCode {body.LanguageCode!r} is not a language of this model (cmn-CN, en-US and the"
                " other en-*, ja-JP, yue-CN, ko-KR)",
            )
        recordings = body.VoiceCreationData.Recordings
        if len(recordings) != 1:
            raise PollyError(
                "ValidationException",
                "this model clones a voice from one recording (1 to 30 s of the speaker),"
                f" not {len(recordings)}",
            )
        library = voice_library(caller.tenant)  # refuse before the recording is read
        audio = recording_bytes(recordings[0].Data, caller.tenant)
        voice, created = create_custom_voice(body, library, audio)
        if created:
            audit_change(request, "voice.created", voice.id)
        return {"Voice": custom_voice(voice)}

    @router.get("/v1/voices/{VoiceId}", summary="Polly's GetVoice")
    def get_voice(VoiceId: str, caller: CallerOf) -> dict[str, Any]:  # noqa: N803
        return {"Voice": custom_voice(voice_library(caller.tenant).get(custom_voice_id(VoiceId)))}

    @router.delete("/v1/voices/{VoiceId}", summary="Polly's DeleteVoice")
    def delete_voice(VoiceId: str, request: Request, caller: CallerOf) -> dict[str, Any]:  # noqa: N803
        voice_library(caller.tenant).delete(custom_voice_id(VoiceId))
        audit_change(request, "voice.deleted", VoiceId)
        return {}

    @router.post("/v1/synthesisTasks", summary="Polly's StartSpeechSynthesisTask: a job")
    def start_task(body: PollyTask, request: Request, caller: CallerOf) -> dict[str, Any]:
        engine = get_engine()
        task = tasks.start(body, speaker_of(body.VoiceId), engine.sample_rate, get_settings(), caller)
        audit_change(request, "task.started", task["TaskId"])
        return {"SynthesisTask": task}

    @router.get("/v1/synthesisTasks/{TaskId}", summary="Polly's GetSpeechSynthesisTask")
    def get_task(TaskId: str, caller: CallerOf) -> dict[str, Any]:  # noqa: N803
        return {"SynthesisTask": tasks.describe(get_settings(), caller.tenant, TaskId)}

    @router.get("/v1/synthesisTasks", summary="Polly's ListSpeechSynthesisTasks")
    def list_tasks(
        caller: CallerOf,
        MaxResults: int = tasks.MAX_RESULTS,  # noqa: N803
        NextToken: str | None = None,  # noqa: N803
        Status: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        return tasks.listed(get_settings(), caller.tenant, Status, MaxResults, NextToken)

    @router.put("/v1/lexicons/{LexiconName}", summary="Polly's PutLexicon: an alias lexicon")
    def put_lexicon(
        LexiconName: str,  # noqa: N803
        body: LexiconRequest,
        request: Request,
        caller: CallerOf,
    ) -> dict[str, Any]:
        lexicons.put(caller.tenant, LexiconName, body.Content)
        audit_change(request, "lexicon.put", LexiconName)
        return {}

    @router.get("/v1/lexicons", summary="Polly's ListLexicons")
    def list_lexicons(caller: CallerOf, NextToken: str | None = None) -> dict[str, Any]:  # noqa: N803
        if NextToken:
            raise PollyError("InvalidNextTokenException", "NextToken is not one this API gave: it gives none")
        return lexicons.listed(caller.tenant)

    @router.get("/v1/lexicons/{LexiconName}", summary="Polly's GetLexicon")
    def get_lexicon(LexiconName: str, caller: CallerOf) -> dict[str, Any]:  # noqa: N803
        return lexicons.get(caller.tenant, LexiconName)

    @router.delete("/v1/lexicons/{LexiconName}", summary="Polly's DeleteLexicon")
    def delete_lexicon(LexiconName: str, request: Request, caller: CallerOf) -> dict[str, Any]:  # noqa: N803
        lexicons.delete(caller.tenant, LexiconName)
        audit_change(request, "lexicon.deleted", LexiconName)
        return {}

    @router.api_route(
        "/{path:path}", methods=["GET", "POST", "PUT", "DELETE", "PATCH"], include_in_schema=False
    )
    def unknown_operation(path: str, request: Request) -> Response:
        raise PollyError(
            "UnknownOperationException",
            f"{request.method} /polly/{path} is not an operation of Polly's API here",
        )

    return router


__all__ = ["PREFIX", "PollyRoute", "polly_router"]
