"""API keys for the container API (`serve`): when COSYVOICE_API_KEYS or COSYVOICE_API_KEYS_FILE name any,
every route but the probes and the OpenAPI docs needs one, as `Authorization: Bearer <key>` (what the
OpenAI SDK sends as its api_key) or `X-API-Key: <key>`.

The check sits in the ASGI layer, outermost: a request without a valid key is answered 401 `unauthorized`
with `WWW-Authenticate: Bearer` before its body is read or a synthesis slot is taken. Keys are compared
in constant time, each of them every time, so neither the key nor which key matched shows in the timing.
Inside Lambda IAM or the JWT authoriser guards the API, and the check is off unless keys are set.
Polly's API (/polly) is not asked for a key: its SDKs sign every request, and function.api.sigv4 checks that.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from function.api.error_replies import is_polly_path
from function.core.errors import TTSError
from function.instance.settings import get_settings

# Open whatever the keys: the orchestrator's probes, and the API's own description.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
CHALLENGE = {"WWW-Authenticate": "Bearer"}


class Unauthorized(TTSError):
    code = "unauthorized"
    status = 401


def presented_key(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The key a request carries: `Authorization: Bearer <key>`, else `X-API-Key`."""
    found = dict(headers)
    scheme, _, token = found.get(b"authorization", b"").partition(b" ")
    if scheme.lower() == b"bearer" and token.strip():
        return token.strip()
    return found.get(b"x-api-key", b"").strip() or None


def matches(key: bytes, keys: tuple[bytes, ...]) -> bool:
    matched = False
    for known in keys:  # no early exit: every key is compared
        matched |= hmac.compare_digest(key, known)
    return matched


class RequireKey:
    """ASGI middleware: 401 for a request to a guarded route without one of the deployment's keys."""

    def __init__(self, app: ASGIApp, keys: Sequence[str] | None = None) -> None:
        """`keys`: None takes the process's settings (COSYVOICE_API_KEYS...), read on the first request."""
        self.app = app
        self._keys = None if keys is None else tuple(key.encode() for key in keys)

    @property
    def keys(self) -> tuple[bytes, ...]:
        if self._keys is None:
            self._keys = tuple(key.encode() for key in get_settings().api_keys)
        return self._keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in OPEN_PATHS or is_polly_path(path) or not self.keys:
            await self.app(scope, receive, send)
            return
        key = presented_key(scope.get("headers") or [])
        if key is not None and matches(key, self.keys):
            await self.app(scope, receive, send)
            return
        refused = Unauthorized(
            "an API key is required: send `Authorization: Bearer <key>` or `X-API-Key: <key>`"
            if key is None
            else "the API key is not valid"
        )
        await JSONResponse(refused.to_dict(), status_code=refused.status, headers=CHALLENGE)(
            scope, receive, send
        )


__all__ = ["OPEN_PATHS", "RequireKey", "Unauthorized", "matches", "presented_key"]
