"""Amazon Polly's errors: the codes Polly's SDKs turn into their own exception classes, each with the
HTTP status Polly's service model gives it, the project's errors said in them, and their shape on the wire.

On the wire an error is the code in `x-amzn-ErrorType` and `{"message"}` as the body; the message is
always the project's own, so the reason reads the same on every route. Everything under /polly (POLLY_PREFIX)
answers so, the middleware's refusals included (function.api.error_replies).
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse

from function.core.errors import TTSError

POLLY_PREFIX = "/polly"
ERROR_TYPE_HEADER = "x-amzn-ErrorType"

# Polly's error codes this API answers with, and their statuses in Polly's service model (botocore's
# data/polly/*/service-2.json; the tests hold this table to it); then AWS's common errors, which every
# AWS service answers with: the signature's (403) and a path that is no operation (404).
POLLY_STATUS: Mapping[str, int] = {
    "ConflictException": 409,
    "EngineNotSupportedException": 400,
    "InvalidLexiconException": 400,
    "InvalidNextTokenException": 400,
    "InvalidS3BucketException": 400,
    "InvalidS3KeyException": 400,
    "InvalidSampleRateException": 400,
    "InvalidSnsTopicArnException": 400,
    "InvalidSsmlException": 400,
    "InvalidTaskIdException": 400,
    "LanguageNotSupportedException": 400,
    "LexiconNotFoundException": 404,
    "LexiconSizeExceededException": 400,
    "MarksNotSupportedForFormatException": 400,
    "ResourceNotFoundException": 404,
    "ServiceFailureException": 500,
    "SsmlMarksNotSupportedForTextTypeException": 400,
    "SynthesisTaskNotFoundException": 400,
    "TextLengthExceededException": 400,
    "ThrottlingException": 400,
    "ValidationException": 400,
}
COMMON_STATUS: Mapping[str, int] = {
    "IncompleteSignatureException": 403,
    "InvalidSignatureException": 403,
    "MissingAuthenticationTokenException": 403,
    "UnrecognizedClientException": 403,
    "UnknownOperationException": 404,
}
# The project's error codes that have a Polly code of their own; any other is ValidationException when it
# is the caller's (4xx), ServiceFailureException when it is ours.
FROM_PROJECT: Mapping[str, str] = {
    "text_too_long": "TextLengthExceededException",
    "output_too_large": "TextLengthExceededException",
    "unknown_speaker": "ResourceNotFoundException",  # a custom voice id that names none
    "voice_deleted": "ResourceNotFoundException",
    "voice_not_found": "ResourceNotFoundException",
    "job_not_found": "SynthesisTaskNotFoundException",
    "job_conflict": "ConflictException",
    "busy": "ThrottlingException",
    "body_too_large": "TextLengthExceededException",
}


class PollyError(TTSError):
    """An error in Polly's terms: `code` one of POLLY_STATUS's or COMMON_STATUS'."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = POLLY_STATUS[code] if code in POLLY_STATUS else COMMON_STATUS[code]


def as_polly(error: TTSError) -> PollyError:
    """The Polly error that says `error`, with its message."""
    if isinstance(error, PollyError):
        return error
    code = FROM_PROJECT.get(error.code)
    if code is None:
        code = "ValidationException" if 400 <= error.status < 500 else "ServiceFailureException"
    return PollyError(code, error.message)


def is_polly_path(path: str) -> bool:
    return path == POLLY_PREFIX or path.startswith(POLLY_PREFIX + "/")


def polly_reply(error: PollyError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"message": error.message},
        status_code=error.status,
        headers={**(headers or {}), ERROR_TYPE_HEADER: error.code},
    )


__all__ = [
    "COMMON_STATUS",
    "ERROR_TYPE_HEADER",
    "FROM_PROJECT",
    "POLLY_PREFIX",
    "POLLY_STATUS",
    "PollyError",
    "as_polly",
    "is_polly_path",
    "polly_reply",
]
