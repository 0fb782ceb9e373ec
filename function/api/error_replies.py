"""An error answered in the shape of the API its route belongs to: Polly's under /polly (its code in
`x-amzn-ErrorType` and `{"message"}`, so that Polly's SDKs raise their own exception classes), the
project's `{"error": {"code", "message"}}` everywhere else. For the middleware that answers before any
route runs (function.api.admission, function.api.watchdog, function.api.sigv4)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse
from starlette.types import Scope

from function.core.errors import TTSError
from function.service.polly_errors import PollyError, as_polly

POLLY_PREFIX = "/polly"
ERROR_TYPE_HEADER = "x-amzn-ErrorType"


def is_polly_path(path: str) -> bool:
    return path == POLLY_PREFIX or path.startswith(POLLY_PREFIX + "/")


def polly_reply(error: PollyError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"message": error.message},
        status_code=error.status,
        headers={**(headers or {}), ERROR_TYPE_HEADER: error.code},
    )


def error_reply(scope: Scope, error: TTSError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """`error` as the API of the request in `scope` answers it."""
    if is_polly_path(str(scope.get("path", ""))):
        return polly_reply(as_polly(error), headers)
    return JSONResponse(error.to_dict(), status_code=error.status, headers=headers)


__all__ = ["ERROR_TYPE_HEADER", "POLLY_PREFIX", "error_reply", "is_polly_path", "polly_reply"]
