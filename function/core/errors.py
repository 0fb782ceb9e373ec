"""Typed errors. Edges map `status` to an HTTP code, a failed SQS record, or a CLI exit with one line."""

from __future__ import annotations


class TTSError(Exception):
    """Base of every error this package raises on purpose. `code` is stable; `message` is for people."""

    code = "tts_error"
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


class ArtifactError(TTSError):
    """The exported model is missing, corrupt, or from an incompatible export."""

    code = "artifact_error"
    status = 500


class InvalidRequest(TTSError):
    """The request cannot be served as given: bad text, options, or prompt audio."""

    code = "invalid_request"
    status = 400


class UnknownSpeaker(InvalidRequest):
    code = "unknown_speaker"


class UnsupportedFormat(InvalidRequest):
    code = "unsupported_format"


class InvalidPromptAudio(InvalidRequest):
    code = "invalid_prompt_audio"


class TextTooLong(InvalidRequest):
    code = "text_too_long"
    status = 413


class OutputTooLarge(TTSError):
    """The audio would not fit a synchronous response; the batch (SQS → S3) path has no such limit."""

    code = "output_too_large"
    status = 413


class Stalled(TTSError):
    """A synthesis made no progress for its bound (a stage that stopped answering): it was failed and its
    slot given back; the instance's health check says whether it can still recover by itself."""

    code = "stalled"
    status = 503


class Busy(TTSError):
    """Every synthesis slot and queue place of this server is taken (function.api.admission): retry later."""

    code = "busy"
    status = 429


__all__ = [
    "ArtifactError",
    "Busy",
    "InvalidPromptAudio",
    "InvalidRequest",
    "OutputTooLarge",
    "Stalled",
    "TTSError",
    "TextTooLong",
    "UnknownSpeaker",
    "UnsupportedFormat",
]
