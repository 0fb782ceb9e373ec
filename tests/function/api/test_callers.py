"""Who calls, in this process: the Lambda event's JWT and IAM identities as tenants
(function.api.gateway, through function.api.keys), request ids (function.api.request_ids), and each
tenant's share of the synthesis slots (function.api.admission). Tenants against a real server:
test_tenants.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.requests import Request

from function.api import admission as admission_module
from function.api.admission import Admission, Admit
from function.api.gateway import EVENT, Forbidden, gateway_caller
from function.api.keys import RequireKey
from function.api.request_ids import RequestIds
from function.core.errors import Busy
from function.core.tenant import Caller, fingerprint
from function.http.context import SYNTHESIS, CallerOf, request_id_of
from function.instance import settings as settings_module
from function.instance.settings import Settings
from tests.function.support import EVENTS

ARN_ALICE = "arn:aws:sts::123456789012:assumed-role/alice-app/session"
ARN_OTHER = "arn:aws:iam::123456789012:user/someone"
SETTINGS = Settings(artifact="unused", tenant_claim="custom:tenant", iam_tenants={ARN_ALICE: "alice"})


def http_api_event(authorizer: dict[str, Any] | None) -> dict[str, Any]:
    """API Gateway's HTTP API (payload 2.0) event for GET /v1/voices, with this authorizer context."""
    event = json.loads((EVENTS / "http-api-speakers.json").read_text())
    event["requestContext"].pop("authorizer", None)
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    return event


def rest_api_event(**context: Any) -> dict[str, Any]:
    """API Gateway's REST API (payload 1.0) event, with these request context members."""
    event = json.loads((EVENTS / "rest-api-tts.json").read_text())
    event.setdefault("requestContext", {}).update(context)
    return event


def jwt(**claims: str) -> dict[str, Any]:
    return {"jwt": {"claims": claims, "scopes": None}}


def iam(arn: str, key: str = "ASIAEXAMPLEKEY") -> dict[str, Any]:
    return {"iam": {"accessKey": key, "accountId": "123456789012", "userArn": arn, "userId": "AIDA"}}


@pytest.mark.parametrize(
    ("event", "tenant", "credential"),
    [
        (http_api_event(jwt(sub="user-1", **{"custom:tenant": "alice"})), "alice", "user-1"),
        (http_api_event(jwt(sub="user-2")), "default", "user-2"),  # no claim: unmapped
        (http_api_event(iam(ARN_ALICE)), "alice", "ASIAEXAMPLEKEY"),
        (http_api_event(iam(ARN_OTHER)), "default", "ASIAEXAMPLEKEY"),
        (rest_api_event(authorizer={"claims": {"sub": "u", "custom:tenant": "bob"}}), "bob", "u"),
        (rest_api_event(identity={"userArn": ARN_ALICE, "accessKey": "AKIAREST"}), "alice", "AKIAREST"),
        (http_api_event(None), "default", None),
    ],
    ids=["jwt claim", "jwt without claim", "iam mapped", "iam unmapped", "rest jwt", "rest iam", "none"],
)
def test_the_gateways_identity_names_the_tenant(
    event: dict[str, Any], tenant: str, credential: str | None
) -> None:
    assert gateway_caller({EVENT: event}, SETTINGS) == Caller.of(tenant, credential)


def test_a_claim_that_is_no_tenant_name_is_refused_and_no_claim_setting_means_default() -> None:
    event = http_api_event(jwt(sub="u", **{"custom:tenant": "Not A Tenant"}))
    with pytest.raises(Forbidden, match="custom:tenant"):
        gateway_caller({EVENT: event}, SETTINGS)
    unclaimed = Settings(artifact="unused")
    assert gateway_caller({EVENT: event}, unclaimed).tenant == "default"


def app_seeing_the_caller() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/voices")
    def voices(request: Request, caller: CallerOf) -> dict[str, Any]:
        return {"tenant": caller.tenant, "credential": caller.credential, "id": request_id_of(request.scope)}

    return app


def test_inside_lambda_the_event_reaches_the_routes_as_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mangum's scope carries the event: RequireKey (without API keys) turns it into the caller."""
    monkeypatch.setattr(settings_module, "_settings", SETTINGS)
    stack = RequestIds(RequireKey(app_seeing_the_caller(), keys={}))

    def call(event: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "GET",
            "path": "/v1/voices",
            "raw_path": b"/v1/voices",
            "root_path": "",
            "query_string": b"",
            "headers": [],
            EVENT: event,
        }
        asyncio.run(stack(scope, receive, send))
        headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
        return sent[0]["status"], json.loads(sent[1]["body"]), headers

    status, body, headers = call(http_api_event(jwt(sub="user-1", **{"custom:tenant": "alice"})))
    assert status == 200 and body["tenant"] == "alice" and body["credential"] == fingerprint("user-1")
    assert body["id"] == headers["x-request-id"] == "id"  # API Gateway's own request id
    status, body, _ = call(http_api_event(iam(ARN_ALICE)))
    assert body["tenant"] == "alice" and body["credential"] == fingerprint("ASIAEXAMPLEKEY")
    status, body, _ = call(http_api_event(jwt(sub="u", **{"custom:tenant": "Bad"})))
    assert status == 403 and body["error"]["code"] == "forbidden"


def test_request_ids_are_the_callers_sane_one_or_new_and_in_the_log_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings_module, "_settings", Settings(artifact="unused"))
    http = TestClient(RequestIds(app_seeing_the_caller()))
    mine = http.get("/v1/voices", headers={"X-Request-Id": "trace-42:a.b"})
    assert mine.headers["x-request-id"] == "trace-42:a.b" == mine.json()["id"]
    for unsafe in ("x" * 129, "a b", "a/b", ""):
        fresh = http.get("/v1/voices", headers={"X-Request-Id": unsafe})
        assert fresh.headers["x-request-id"] != unsafe and len(fresh.headers["x-request-id"]) == 32
    polly = http.get("/polly/v1/voices")
    assert "x-amzn-requestid" in polly.headers and "x-request-id" not in polly.headers
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    requests = [line for line in lines if line["event"] == "request"]
    assert requests[0] | {"duration_ms": 0} == {
        "event": "request",
        "request_id": "trace-42:a.b",
        "method": "GET",
        "path": "/v1/voices",
        "route": "other",  # this middleware was given no routes to name
        "status": 200,
        "code": None,
        "tenant": "default",
        "characters": 0,
        "audio_seconds": 0.0,
        "duration_ms": 0,
        "first_audio_ms": None,
    }
    assert requests[-1]["request_id"] == polly.headers["x-amzn-requestid"]


def test_a_tenant_beyond_its_share_is_refused_while_others_are_admitted() -> None:
    async def scenario() -> None:
        limit = Admission(capacity=2, max_queued=2, tenant_share=1)
        await limit.enter("alice")
        with pytest.raises(Busy, match="'alice'"):
            await limit.enter("alice")  # one running: its share
        await limit.enter("bob")
        waiting = asyncio.create_task(limit.enter("carol"))  # slots full: carol waits in line
        await asyncio.sleep(0)
        assert limit.counts() == {"in_flight": 2, "queued": 1, "capacity": 2}
        with pytest.raises(Busy, match="'carol'"):
            await limit.enter("carol")  # waiting counts against the share too
        limit.leave("alice")
        await waiting
        limit.leave("bob")
        limit.leave("carol")
        assert limit.counts() == {"in_flight": 0, "queued": 0, "capacity": 2}
        await limit.enter("alice")  # its share is free again
        limit.leave("alice")

    asyncio.run(scenario())


def test_the_middleware_admits_by_the_callers_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    app = FastAPI()

    @app.post("/v1/tts", tags=[SYNTHESIS])
    def tts() -> dict[str, str]:
        return {"ok": "yes"}

    limit = Admission(capacity=4, max_queued=0, tenant_share=1)
    monkeypatch.setattr(admission_module, "_admission", limit)
    http = TestClient(RequireKey(Admit(app, app.routes), keys={"a-key": "alice", "b-key": "bob"}))

    async def held() -> None:
        await limit.enter("alice")

    asyncio.run(held())  # alice has a synthesis running
    refused = http.post("/v1/tts", headers={"X-API-Key": "a-key"})
    assert refused.status_code == 429 and "alice" in refused.json()["error"]["message"]
    assert http.post("/v1/tts", headers={"X-API-Key": "b-key"}).status_code == 200


def test_oversized_requests_under_polly_get_pollys_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's own middleware (function.api.app): headers beyond its limit and a signed body beyond
    COSYVOICE_MAX_BODY_BYTES are Polly's errors under /polly, the project's elsewhere."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from function.api.app import MAX_HEADER_BYTES, app
    from function.instance.settings import SigV4Key

    limits = Settings(artifact="unused", max_body_bytes=1024, sigv4_keys={"AKIDONE": SigV4Key("s")})
    monkeypatch.setattr(settings_module, "_settings", limits)
    http = TestClient(app)
    padding = {"X-Padding": "x" * MAX_HEADER_BYTES}
    headers = http.post("/polly/v1/speech", headers=padding)
    assert (headers.status_code, headers.headers["x-amzn-errortype"]) == (400, "ValidationException")
    assert set(headers.json()) == {"message"} and headers.headers["x-amzn-requestid"]
    assert http.post("/v1/tts", headers=padding).json()["error"]["code"] == "headers_too_large"

    body = json.dumps({"Text": "x" * 2048, "VoiceId": "Joanna", "OutputFormat": "mp3"}).encode()
    signed = AWSRequest(method="POST", url="http://testserver/polly/v1/speech", data=body)
    SigV4Auth(Credentials("AKIDONE", "s"), "polly", "us-east-1").add_auth(signed)
    large = http.post("/polly/v1/speech", content=body, headers=dict(signed.headers.items()))
    assert (large.status_code, large.headers["x-amzn-errortype"]) == (400, "TextLengthExceededException")
    ours = http.post("/v1/tts", content=body, headers={"content-type": "application/json"})
    assert (ours.status_code, ours.json()["error"]["code"]) == (413, "body_too_large")
