"""AWS Signature Version 4 on Polly's API (/polly), verified by the function itself.

Polly's SDKs sign every request for service `polly`; API Gateway's IAM authorisation only accepts
`execute-api`, so the /polly routes are left open at the gateway and checked here against the key pairs the
deployment is given (COSYVOICE_SIGV4_KEYS, COSYVOICE_SIGV4_KEYS_FILE: [TENANT=]ACCESS_KEY_ID:SECRET, each
pair acting for its tenant). The canonical request is rebuilt from what arrived (method, path, query, the
headers the client says it signed, the body's sha256) and signed again with botocore's own SigV4 signer
and the secret of the request's access key id; the credential scope must be today's (the request's date)
for service `polly`, the request's time within five minutes of the function's clock, and the signatures
are compared in constant time.

Refusals are 403 with AWS's codes, which Polly's SDKs raise as they would from Polly:
MissingAuthenticationTokenException (not signed), IncompleteSignatureException (a malformed
Authorization), UnrecognizedClientException (an access key id this deployment does not know, or no key
pairs at all: the API is then off), InvalidSignatureException (a wrong or stale signature, another
service's or day's scope). The check runs before admission control and any route (RequireSignature), and
the API-key check (function.api.keys) leaves /polly to it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials
from starlette.types import ASGIApp, Receive, Scope, Send

from function.core.errors import TTSError
from function.core.tenant import Caller
from function.http.bodies import read_body, replaying
from function.http.context import set_caller
from function.instance.settings import SigV4Key, get_settings
from function.polly.errors import PollyError, as_polly, is_polly_path, polly_reply

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


@dataclass(frozen=True)
class Claim:
    """What a request's signature says of itself, checked before its body is read: a known access key id,
    a well-formed Authorization, a date within the skew, a scope for `polly`."""

    key_id: str
    secret: str
    region: str
    stamp: str  # X-Amz-Date
    signed_names: tuple[str, ...]
    signature: str
    headers: Mapping[str, list[str]]  # by lower-case name


def claim(headers: list[tuple[str, str]], keys: Mapping[str, str], now: datetime) -> Claim:
    """The header part of a request's signature, checked against `keys` (access key id → secret) at
    `now`; PollyError (403) for anything wrong. `headers`: names in lower case."""
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
    signed_names = tuple(fields["SignedHeaders"].split(";"))
    if "host" not in signed_names or any(name not in found for name in signed_names):
        raise PollyError(
            "IncompleteSignatureException", "SignedHeaders must name host and only headers the request has"
        )
    return Claim(key_id, secret, region, stamp, signed_names, fields["Signature"], found)


def check_body(claimed: Claim, method: str, url: str, body: bytes) -> None:
    """The rest of the signature, once the body has arrived: its sha256 as claimed, and the signature
    computed over the canonical request with the key's secret; PollyError (403) otherwise. `url`:
    scheme, host, path and query as the client sent them."""
    sha256 = claimed.headers.get("x-amz-content-sha256", [None])[0]
    if sha256 is not None and not hmac.compare_digest(sha256, hashlib.sha256(body).hexdigest()):
        raise PollyError("InvalidSignatureException", "the body's sha256 is not X-Amz-Content-SHA256")
    signed = HTTPHeaders()
    for name in claimed.signed_names:
        for value in claimed.headers[name]:
            signed[name] = value
    request = AWSRequest(method=method, url=url, headers=signed, data=body)
    request.context["timestamp"] = claimed.stamp
    signer = _Signer(Credentials(claimed.key_id, claimed.secret), SERVICE, claimed.region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected.encode(), claimed.signature.encode()):
        raise PollyError(
            "InvalidSignatureException",
            "the request signature does not match the one computed with this access key's secret: check"
            " the secret, and that nothing rewrote the request on its way",
        )


def verify(
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    keys: Mapping[str, str],
    now: datetime,
) -> str:
    """The access key id of a request signed with one of `keys`' secrets; PollyError (403) otherwise."""
    claimed = claim(headers, keys, now)
    check_body(claimed, method, url, body)
    return claimed.key_id


def request_url(scope: Scope) -> str:
    """The request's URL as the client signed it: its Host, and its path and query as they arrived."""
    host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else quote(scope.get("root_path", "") + scope["path"], safe="/-_.~")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"http://{host}{path}" + (f"?{query}" if query else "")


class RequireSignature:
    """ASGI middleware: /polly requests pass only with a valid SigV4 signature, as the caller its key pair
    names (function.http.context); others pass untouched.

    The signature's header part is checked first, then the body is read (within COSYVOICE_MAX_BODY_BYTES)
    and the rest checked: it sits outside admission control (function.api.admission), so neither an
    unsigned client nor a signed one that never sends its body ever holds a synthesis slot."""

    def __init__(self, app: ASGIApp, keys: Mapping[str, SigV4Key] | None = None) -> None:
        """`keys`: None takes the process's settings (COSYVOICE_SIGV4_KEYS...), read on the first request."""
        self.app = app
        self._keys = keys

    @property
    def keys(self) -> Mapping[str, SigV4Key]:
        if self._keys is None:
            self._keys = get_settings().sigv4_keys
        return self._keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_polly_path(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        headers = [
            (name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in scope["headers"]
        ]
        try:
            if not self.keys:
                raise PollyError(
                    "UnrecognizedClientException",
                    "Polly's API is off: this deployment has no SigV4 key pairs (COSYVOICE_SIGV4_KEYS)",
                )
            secrets = {key_id: pair.secret for key_id, pair in self.keys.items()}
            claimed = claim(headers, secrets, datetime.now(UTC))
            body = await read_body(scope, receive, get_settings().max_body_bytes)
            if body is None:
                return  # the client went away
            check_body(claimed, scope["method"], request_url(scope), body)
        except TTSError as refused:
            await polly_reply(as_polly(refused))(scope, receive, send)
            return
        set_caller(scope, Caller.of(self.keys[claimed.key_id].tenant, claimed.key_id))
        await self.app(scope, replaying(body, receive), send)


__all__ = ["MAX_SKEW", "Claim", "RequireSignature", "check_body", "claim", "request_url", "verify"]
