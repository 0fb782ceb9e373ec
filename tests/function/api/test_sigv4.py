"""SigV4 verification (function.polly.sigv4) on requests signed by botocore's own signer, at fixed times:
what passes, and each way a signature is refused; the key pairs' settings; Polly's error table against
botocore's service model."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import botocore.auth
import botocore.loaders
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from function.instance.settings import Settings, SettingsError, SigV4Key
from function.polly.errors import FROM_PROJECT, POLLY_STATUS, PollyError
from function.polly.sigv4 import MAX_SKEW, request_url, verify

KEYS = {"AKIDONE": "secret-one", "AKIDTWO": "secret/two+"}
SIGNED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
URL = "http://127.0.0.1:8080/polly/v1/voices?Engine=neural&LanguageCode=en-US"
BODY = b'{"Text": "Hello", "VoiceId": "Joanna", "OutputFormat": "mp3"}'


def signed(
    key_id: str = "AKIDONE",
    secret: str = "secret-one",
    service: str = "polly",
    method: str = "POST",
    url: str = URL,
    body: bytes = BODY,
    at: datetime = SIGNED_AT,
    **headers: str,
) -> dict[str, Any]:
    """The parts of a request botocore signed at `at`, as verify takes them."""
    request = AWSRequest(
        method=method, url=url, data=body, headers={"Content-Type": "application/json", **headers}
    )
    with mock.patch.object(botocore.auth, "get_current_datetime", lambda: at.replace(tzinfo=None)):
        SigV4Auth(Credentials(key_id, secret), service, "eu-west-1").add_auth(request)
    sent = [(name.lower(), value) for name, value in request.headers.items()]
    return {"method": method, "url": url, "headers": [*sent, ("host", "127.0.0.1:8080")], "body": body}


def check(request: dict[str, Any], now: datetime = SIGNED_AT, keys: dict[str, str] = KEYS) -> str:
    return verify(request["method"], request["url"], request["headers"], request["body"], keys, now)


def refused(request: dict[str, Any], code: str, now: datetime = SIGNED_AT) -> str:
    with pytest.raises(PollyError) as raised:
        check(request, now)
    assert raised.value.code == code and raised.value.status == 403
    return raised.value.message


def test_a_request_signed_with_a_known_pair_passes_within_the_skew() -> None:
    assert check(signed()) == "AKIDONE"
    assert check(signed("AKIDTWO", "secret/two+", method="GET", body=b"")) == "AKIDTWO"
    for skew in (MAX_SKEW, -MAX_SKEW, timedelta(seconds=1)):
        assert check(signed(), now=SIGNED_AT + skew) == "AKIDONE"


def test_stale_or_future_signatures_are_refused() -> None:
    for skew in (MAX_SKEW + timedelta(seconds=1), -MAX_SKEW - timedelta(seconds=1)):
        assert "expired" in refused(signed(), "InvalidSignatureException", SIGNED_AT + skew)


def test_wrong_unknown_and_missing_signatures_are_refused() -> None:
    assert "does not match" in refused(signed(secret="secret-two"), "InvalidSignatureException")
    assert "'AKIDNONE'" in refused(signed("AKIDNONE"), "UnrecognizedClientException")
    unsigned = signed()
    unsigned["headers"] = [(n, v) for n, v in unsigned["headers"] if n != "authorization"]
    refused(unsigned, "MissingAuthenticationTokenException")


def test_what_was_signed_cannot_change() -> None:
    for change in (
        {"body": BODY.replace(b"Hello", b"Jello")},
        {"url": URL.replace("neural", "standard")},
        {"url": URL.replace("/voices", "/speech")},
        {"method": "PUT"},
    ):
        refused({**signed(), **change}, "InvalidSignatureException")
    request = signed()
    request["headers"] = [(n, "text/plain" if n == "content-type" else v) for n, v in request["headers"]]
    refused(request, "InvalidSignatureException")


def test_the_scope_must_be_pollys_and_the_days() -> None:
    assert "polly" in refused(signed(service="execute-api"), "InvalidSignatureException")
    request = signed()
    request["headers"] = [
        (n, v.replace("20260301/", "20260228/") if n == "authorization" else v) for n, v in request["headers"]
    ]
    assert "date" in refused(request, "InvalidSignatureException")


def test_a_claimed_body_hash_must_be_the_bodys() -> None:
    good = signed(**{"X-Amz-Content-SHA256": hashlib.sha256(BODY).hexdigest()})
    assert check(good) == "AKIDONE"
    lying = signed(**{"X-Amz-Content-SHA256": hashlib.sha256(b"other").hexdigest()})
    refused({**lying, "body": BODY}, "InvalidSignatureException")


def test_malformed_authorizations_are_incomplete_signatures() -> None:
    for value in ("AWS4-HMAC-SHA256 Credential=AKIDONE/20260301/eu-west-1/polly/aws4_request", "Bearer abc"):
        request = signed()
        request["headers"] = [(n, value if n == "authorization" else v) for n, v in request["headers"]]
        refused(request, "IncompleteSignatureException")
    no_date = signed()
    no_date["headers"] = [(n, v) for n, v in no_date["headers"] if n != "x-amz-date"]
    refused(no_date, "IncompleteSignatureException")


def test_the_url_is_rebuilt_as_it_arrived() -> None:
    scope = {
        "path": "/polly/v1/voices",
        "raw_path": b"/polly/v1/voices",
        "query_string": b"Engine=neural",
        "headers": [(b"host", b"example.com")],
    }
    assert request_url(scope) == "http://example.com/polly/v1/voices?Engine=neural"
    assert (
        request_url({**scope, "raw_path": None, "query_string": b""}) == "http://example.com/polly/v1/voices"
    )


def test_key_pairs_are_read_from_the_variable_and_the_file(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs"
    pairs.write_text("alice=AKIDTWO:secret/two+\n\n")
    env = {
        "COSYVOICE_ARTIFACT": "x",
        "COSYVOICE_SIGV4_KEYS": " AKIDONE:secret-one=, AKIDTHREE:a=b",
        "COSYVOICE_SIGV4_KEYS_FILE": str(pairs),
    }
    assert Settings.from_env(env).sigv4_keys == {
        "AKIDONE": SigV4Key("secret-one="),
        "AKIDTHREE": SigV4Key("a=b"),  # "=" after the id: a bare pair's secret holds it
        "AKIDTWO": SigV4Key("secret/two+", "alice"),
    }
    assert Settings.from_env({"COSYVOICE_ARTIFACT": "x"}).sigv4_keys == {}
    bad_pairs = ("AKIDONE", "AKIDONE:", ":secret", "AKID-ONE:secret", "AKIDONE:a,AKIDONE:b", "AKIDONE:sécret")
    for bad in (*bad_pairs, "Alice=AKIDONE:sécret", "a,b=AKIDONE:sécret", "a=AKIDONE:x,b=AKIDONE:x"):
        with pytest.raises(SettingsError) as raised:
            Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_SIGV4_KEYS": bad})
        assert "sécret" not in str(raised.value)  # a secret is never echoed
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SettingsError, match="holds no key pair"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_SIGV4_KEYS_FILE": str(tmp_path / "empty")})


def test_the_error_table_is_pollys_service_model() -> None:
    model = botocore.loaders.create_loader().load_service_model("polly", "service-2")
    shapes = model["shapes"]
    for code, status in POLLY_STATUS.items():
        assert shapes[code]["exception"] and shapes[code]["error"]["httpStatusCode"] == status, code
    assert set(FROM_PROJECT.values()) <= set(POLLY_STATUS)
