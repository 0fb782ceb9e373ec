"""AWS Signature Version 4 on Polly's API (/polly), verified by the function itself.

Polly's SDKs sign every request for service `polly`; API Gateway's IAM authorisation only accepts
`execute-api`, so the /polly routes are left open at the gateway and checked here against the key pairs the
deployment is given (COSYVOICE_SIGV4_KEYS, COSYVOICE_SIGV4_KEYS_FILE: ACCESS_KEY_ID:SECRET). The canonical
request is rebuilt from what arrived (method, path, query, the headers the client says it signed, the
body's sha256) and signed again with botocore's own SigV4 signer and the secret of the request's access
key id; the credential scope must be today's (the request's date) for service `polly`, the request's time
within five minutes of the function's clock, and the signatures are compared in constant time.

Refusals are 403 with AWS's codes, which Polly's SDKs raise as they would from Polly:
MissingAuthenticationTokenException (not signed), IncompleteSignatureException (a malformed
Authorization), UnrecognizedClientException (an access key id this deployment does not know, or no key
pairs at all: the API is then off), InvalidSignatureException (a wrong or stale signature, another
service's or day's scope). The check runs before any route, inside function.api.app.Guard (so the body it
hashes is already capped), and the API-key check (function.api.keys) leaves /polly to it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials
from starlette.types import ASGIApp, Receive, Scope, Send

from function.api.error_replies import is_polly_path, polly_reply
from function.api.replay import replaying
from function.instance.settings import get_settings
from function.service.polly_errors import PollyError

SERVICE = "polly"
ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW = timedelta(minutes=5)
AMZ_DATE = "%Y%m%dT%H%M%SZ"
_FIELDS = re.compile(r"\s*(Credential|SignedHeaders|Signature)=([^,\s]+)\s*(?:,|$)")


class _Signer(SigV4Auth):
    """botocore's SigV4 signer over exactly the headers the client signed (botocore's own choice would
    leave some out, and add a host it guesses from the URL)."""

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        return request.headers


def _authorization(value: str) -> dict[str, str]:
    """The Credential, SignedHeaders and Signature of an Authorization header."""
    algorithm, _, rest = value.partition(" ")
    if algorithm != ALGORITHM:
        raise PollyError(
            "IncompleteSignatureException",
            f"the Authorization header is not {ALGORITHM}: sign requests with AWS Signature Version 4",
        )
    fields = {match.group(1): match.group(2) for match in _FIELDS.finditer(rest)}
    if set(fields) != {"Credential", "SignedHeaders", "Signature"}:
        raise PollyError(
            "IncompleteSignatureException",
            "the Authorization header needs Credential=, SignedHeaders= and Signature=",
        )
    return fields


def verify(
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    keys: Mapping[str, str],
    now: datetime,
) -> str:
    """The access key id of a request signed with one of `keys`' secrets; PollyError (403) otherwise.
    `url`: scheme, host, path and query as the client sent them; `headers`: names in lower case."""
    found: dict[str, list[str]] = {}
    for name, value in headers:
        found.setdefault(name, []).append(value)
    authorization = found.get("authorization", [""])[0]
    if not authorization:
        raise PollyError(
            "MissingAuthenticationTokenException",
            "Polly's API takes requests signed with AWS Signature Version 4 for service 'polly' (what the"
            " AWS SDKs send): give the client one of this deployment's access key pairs",
        )
    fields = _authorization(authorization)
    key_id, _, scope = fields["Credential"].partition("/")
    day, region, service, terminator = (scope.split("/") + ["", "", "", ""])[:4]
    if service != SERVICE or terminator != "aws4_request" or not region:
        raise PollyError(
            "InvalidSignatureException",
            f"the credential scope {scope!r} is not <date>/<region>/{SERVICE}/aws4_request",
        )
    stamp = found.get("x-amz-date", [""])[0]
    try:
        signed_at = datetime.strptime(stamp, AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        raise PollyError(
            "IncompleteSignatureException", "X-Amz-Date is missing or not YYYYMMDD'T'HHMMSS'Z'"
        ) from None
    if day != stamp[:8]:
        raise PollyError(
            "InvalidSignatureException", f"the credential scope's date {day!r} is not X-Amz-Date's day"
        )
    if abs(now - signed_at) > MAX_SKEW:
        raise PollyError(
            "InvalidSignatureException",
            f"Signature expired: signed at {stamp}, more than {MAX_SKEW.seconds // 60} minutes from this"
            f" server's time {now.strftime(AMZ_DATE)}; check the client's clock",
        )
    secret = keys.get(key_id)
    if secret is None:
        raise PollyError(
            "UnrecognizedClientException", f"the access key id {key_id!r} is not one this deployment knows"
        )
    signed_names = fields["SignedHeaders"].split(";")
    if "host" not in signed_names or any(name not in found for name in signed_names):
        raise PollyError(
            "IncompleteSignatureException", "SignedHeaders must name host and only headers the request has"
        )
    claimed = found.get("x-amz-content-sha256", [None])[0]
    if claimed is not None and not hmac.compare_digest(claimed, hashlib.sha256(body).hexdigest()):
        raise PollyError("InvalidSignatureException", "the body's sha256 is not X-Amz-Content-SHA256")
    signed = HTTPHeaders()
    for name in signed_names:
        for value in found[name]:
            signed[name] = value
    request = AWSRequest(method=method, url=url, headers=signed, data=body)
    request.context["timestamp"] = stamp
    signer = _Signer(Credentials(key_id, secret), SERVICE, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected.encode(), fields["Signature"].encode()):
        raise PollyError(
            "InvalidSignatureException",
            "the request signature does not match the one computed with this access key's secret: check"
            " the secret, and that nothing rewrote the request on its way",
        )
    return key_id


def request_url(scope: Scope) -> str:
    """The request's URL as the client signed it: its Host, and its path and query as they arrived."""
    host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else quote(scope.get("root_path", "") + scope["path"], safe="/-_.~")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"http://{host}{path}" + (f"?{query}" if query else "")


class RequireSignature:
    """ASGI middleware: /polly requests pass only with a valid SigV4 signature; others pass untouched."""

    def __init__(self, app: ASGIApp, keys: Mapping[str, str] | None = None) -> None:
        """`keys`: None takes the process's settings (COSYVOICE_SIGV4_KEYS...), read on the first request."""
        self.app = app
        self._keys = keys

    @property
    def keys(self) -> Mapping[str, str]:
        if self._keys is None:
            self._keys = get_settings().sigv4_keys
        return self._keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_polly_path(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = [
            (name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in scope["headers"]
        ]
        try:
            if not self.keys:
                raise PollyError(
                    "UnrecognizedClientException",
                    "Polly's API is off: this deployment has no SigV4 key pairs (COSYVOICE_SIGV4_KEYS)",
                )
            verify(scope["method"], request_url(scope), headers, body, self.keys, datetime.now(UTC))
        except PollyError as refused:
            await polly_reply(refused)(scope, receive, send)
            return

        await self.app(scope, replaying(body, receive), send)


__all__ = ["MAX_SKEW", "RequireSignature", "request_url", "verify"]
