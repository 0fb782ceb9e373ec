"""Who calls the HTTP API (every route but Polly's, which function.polly.sigv4 identifies by signature).

Under `serve`, when COSYVOICE_API_KEYS or COSYVOICE_API_KEYS_FILE name any, every route but the probes,
/metrics and the OpenAPI docs needs one, as `Authorization: Bearer <key>` (what the OpenAI SDK sends as
its api_key) or `X-API-Key: <key>`, and the request acts for the key's tenant (`TENANT=KEY`; a bare key
is the tenant `default`'s). The check sits in the ASGI layer, before admission control: a request without
a valid key is answered 401 `unauthorized` with `WWW-Authenticate: Bearer` before its body is read or a
synthesis slot is taken. Keys are compared in constant time, each of them every time, so neither the key
nor which key matched shows in the timing.

Inside Lambda IAM or the JWT authoriser guards the API, and without keys the caller is the identity API
Gateway vouched for (function.api.gateway). The caller goes on the scope for the routes
(function.http.context).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from function.api.error_replies import error_reply
from function.api.gateway import EVENT, Forbidden, gateway_caller
from function.core.errors import TTSError
from function.core.tenant import Caller
from function.http.context import set_caller
from function.instance.settings import get_settings
from function.polly.errors import is_polly_path

# Open whatever the keys: the orchestrator's probes and Prometheus' scrape, and the API's own description.
OPEN_PATHS = frozenset(
    {"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
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


def tenant_of(key: bytes, keys: Mapping[bytes, str]) -> str | None:
    """The tenant of `key` among `keys`; None when it is none of them."""
    matched = None
    for known, tenant in keys.items():  # no early exit: every key is compared
        if hmac.compare_digest(key, known):
            matched = tenant
    return matched


class RequireKey:
    """ASGI middleware: the caller of a request to a route but Polly's, by its API key (401 without one
    of the deployment's keys, when it has keys) or by API Gateway's word."""

    def __init__(self, app: ASGIApp, keys: Mapping[str, str] | None = None) -> None:
        """`keys`: key → tenant; None takes the process's settings (COSYVOICE_API_KEYS...), read on the
        first request."""
        self.app = app
        self._keys = None if keys is None else {key.encode(): tenant for key, tenant in keys.items()}

    @property
    def keys(self) -> Mapping[bytes, str]:
        if self._keys is None:
            self._keys = {key.encode(): tenant for key, tenant in get_settings().api_keys.items()}
        return self._keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in OPEN_PATHS or is_polly_path(path):
            await self.app(scope, receive, send)
            return
        if not self.keys:
            try:
                if EVENT in scope:  # inside Lambda; else the default tenant's anonymous caller
                    set_caller(scope, gateway_caller(scope, get_settings()))
            except Forbidden as forbidden:
                await error_reply(scope, forbidden)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        key = presented_key(scope.get("headers") or [])
        tenant = None if key is None else tenant_of(key, self.keys)
        if key is not None and tenant is not None:
            set_caller(scope, Caller.of(tenant, key.decode("latin-1")))
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


__all__ = ["OPEN_PATHS", "RequireKey", "Unauthorized", "presented_key", "tenant_of"]
