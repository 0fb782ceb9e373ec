"""An error answered in the shape of the API its route belongs to: Polly's under /polly (its code in
`x-amzn-ErrorType` and `{"message"}`, so that Polly's SDKs raise their own exception classes), the
project's `{"error": {"code", "message"}}` everywhere else. For the middleware that answers before any
route runs (function.api.keys, function.api.admission, function.api.watchdog, function.api.app.Guard)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse
from starlette.types import Scope

from function.core.errors import TTSError
from function.polly.errors import as_polly, is_polly_path, polly_reply


def error_reply(scope: Scope, error: TTSError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """`error` as the API of the request in `scope` answers it."""
    if is_polly_path(str(scope.get("path", ""))):
        return polly_reply(as_polly(error), headers)
    return JSONResponse(error.to_dict(), status_code=error.status, headers=headers)


__all__ = ["error_reply"]
