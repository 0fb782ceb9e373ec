"""API keys on the container API (function.api.keys): the ASGI check in front of everything, the tenant
each key names, and the settings that name the keys. The real server with a key file:
tests/function/api/test_openai_client.py; tenants end to end: tests/function/api/test_tenants.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from function.api.keys import RequireKey
from function.core.tenant import Caller
from function.http.context import caller_of
from function.instance.settings import Settings, SettingsError

KEYS = {"first-key": "default", "second-key": "alice"}


class Inner:
    """The app behind the check: counts the requests that reach it."""

    def __init__(self) -> None:
        self.calls = 0
        self.caller: Caller | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        self.caller = caller_of(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


Sent = tuple[int, dict[bytes, bytes], bytes, Inner]


def call(path: str, headers: dict[str, str], keys: dict[str, str] = KEYS) -> Sent:
    """One request through RequireKey for a deployment with `keys`: status, headers, body, the inner app."""
    inner, sent = Inner(), []
    guarded = RequireKey(inner, keys)

    async def receive() -> Any:
        raise AssertionError("the body was read before the key was checked")

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers.items()],
    }
    asyncio.run(guarded(scope, receive, send))
    start, body = sent[0], b"".join(message.get("body", b"") for message in sent[1:])
    return start["status"], dict(start["headers"]), body, inner


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic first-key"}, {"X-API-Key": "first-ke"}],
    ids=["none", "wrong bearer", "other scheme", "wrong x-api-key"],
)
def test_a_request_without_a_valid_key_is_401_before_its_body_is_read(headers: dict[str, str]) -> None:
    status, sent_headers, body, inner = call("/v1/tts", headers)
    assert status == 401 and inner.calls == 0
    assert sent_headers[b"www-authenticate"] == b"Bearer"
    assert b'"code":"unauthorized"' in body


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer first-key"},
        {"authorization": "bearer second-key"},
        {"X-API-Key": "second-key"},
    ],
)
def test_any_configured_key_passes_as_bearer_or_x_api_key(headers: dict[str, str]) -> None:
    status, _, _, inner = call("/v1/audio/speech", headers)
    assert status == 200 and inner.calls == 1


def test_the_key_names_the_callers_tenant_and_its_fingerprint() -> None:
    _, _, _, first = call("/v1/tts", {"X-API-Key": "first-key"})
    _, _, _, second = call("/v1/tts", {"X-API-Key": "second-key"})
    assert first.caller == Caller.of("default", "first-key")
    assert second.caller is not None and second.caller.tenant == "alice"
    assert second.caller.credential is not None and len(second.caller.credential) == 8
    assert "second-key" not in repr(second.caller)


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json", "/docs"])
def test_probes_and_docs_stay_open(path: str) -> None:
    assert call(path, {})[0] == 200


def test_without_keys_the_api_is_open() -> None:
    status, _, _, inner = call("/v1/tts", {}, keys={})
    assert status == 200 and inner.caller == Caller()


def test_keys_come_from_the_variable_and_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "keys"
    secret.write_text("file-key\n\n  bob=other-key  \n")
    env = {"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS": " a, b ,", "COSYVOICE_API_KEYS_FILE": str(secret)}
    assert Settings.from_env(env).api_keys == {
        "a": "default",
        "b": "default",
        "file-key": "default",
        "other-key": "bob",
    }
    assert Settings.from_env({"COSYVOICE_ARTIFACT": "x"}).api_keys == {}


@pytest.mark.parametrize("tenant", ["Alice", "-x", "a_b", "a" * 33, ""])
def test_a_bad_tenant_name_fails_at_start_without_showing_the_entry(tenant: str) -> None:
    """A bare key holding "=" reads as TENANT=KEY: what comes before it may be most of a key."""
    with pytest.raises(SettingsError, match="names a tenant") as raised:
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS": f"{tenant}=s3cr3t"})
    assert "s3cr3t" not in str(raised.value) and (not tenant or tenant not in str(raised.value))


def test_a_key_given_to_two_tenants_is_refused() -> None:
    with pytest.raises(SettingsError, match="two tenants"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS": "alice=k,bob=k"})


def test_a_missing_or_empty_key_file_is_a_settings_error_not_an_open_api(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot be read"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS_FILE": str(tmp_path / "gone")})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SettingsError, match="holds no key"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS_FILE": str(tmp_path / "empty")})


@pytest.mark.parametrize("path", ["/polly/v1/speech", "/polly"])
def test_pollys_api_is_left_to_its_signature_check(path: str) -> None:
    status, _, _, inner = call(path, {})  # function.polly.sigv4 checks it, inside
    assert status == 200 and inner.calls == 1
    assert call("/pollyx", {})[0] == 401
