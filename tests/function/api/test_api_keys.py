"""API keys on the container API (function.api.keys): the ASGI check in front of everything, and the
settings that name the keys. The real server with a key file: tests/function/api/test_openai_client.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from function.api.keys import RequireKey
from function.instance.settings import Settings, SettingsError

KEYS = ("first-key", "second-key")


class Inner:
    """The app behind the check: counts the requests that reach it."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


Sent = tuple[int, dict[bytes, bytes], bytes, Inner]


def call(path: str, headers: dict[str, str], keys: tuple[str, ...] = KEYS) -> Sent:
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


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json", "/docs"])
def test_probes_and_docs_stay_open(path: str) -> None:
    assert call(path, {})[0] == 200


def test_without_keys_the_api_is_open() -> None:
    assert call("/v1/tts", {}, keys=())[0] == 200


def test_keys_come_from_the_variable_and_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "keys"
    secret.write_text("file-key\n\n  other-key  \n")
    env = {"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS": " a, b ,", "COSYVOICE_API_KEYS_FILE": str(secret)}
    assert Settings.from_env(env).api_keys == ("a", "b", "file-key", "other-key")
    assert Settings.from_env({"COSYVOICE_ARTIFACT": "x"}).api_keys == ()


def test_a_missing_or_empty_key_file_is_a_settings_error_not_an_open_api(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot be read"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS_FILE": str(tmp_path / "gone")})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SettingsError, match="holds no key"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "x", "COSYVOICE_API_KEYS_FILE": str(tmp_path / "empty")})


@pytest.mark.parametrize("path", ["/polly/v1/speech", "/polly"])
def test_pollys_api_is_left_to_its_signature_check(path: str) -> None:
    status, _, _, inner = call(path, {})  # function.api.sigv4 checks it, inside
    assert status == 200 and inner.calls == 1
    assert call("/pollyx", {})[0] == 401
