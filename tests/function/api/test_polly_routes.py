"""Polly's error shape on every way a /polly route can fail (function.polly.routes.PollyRoute), on a
bare app: the project's errors in Polly's codes, the body's validation, and our own bugs as a 500 that
says nothing of them."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from function.core.errors import OutputTooLarge, TextTooLong, UnknownSpeaker
from function.jobs.store import JobNotFound
from function.polly.routes import PollyRoute
from function.voices.library import VoicesUnavailable


class Body(BaseModel):
    Text: str


def client(error: Exception) -> TestClient:
    router = APIRouter(route_class=PollyRoute)

    @router.post("/fail")
    def fail(body: Body) -> None:
        raise error

    app = FastAPI()
    app.include_router(router)
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (TextTooLong("too long"), 400, "TextLengthExceededException"),
        (OutputTooLarge("too large"), 400, "TextLengthExceededException"),
        (UnknownSpeaker("no voice"), 404, "ResourceNotFoundException"),
        (JobNotFound("no job"), 400, "SynthesisTaskNotFoundException"),
        (VoicesUnavailable("no storage"), 500, "ServiceFailureException"),
    ],
)
def test_the_projects_errors_leave_in_pollys_codes_with_their_messages(
    error: Exception, status: int, code: str
) -> None:
    reply = client(error).post("/fail", json={"Text": "x"})
    assert (reply.status_code, reply.headers["x-amzn-ErrorType"]) == (status, code)
    assert reply.json() == {"message": str(error)}


def test_a_body_of_the_wrong_shape_is_a_validation_exception() -> None:
    reply = client(RuntimeError()).post("/fail", json={"Text": 5})
    assert reply.status_code == 400 and reply.headers["x-amzn-ErrorType"] == "ValidationException"
    assert "Text" in reply.json()["message"]


def test_our_own_failure_is_a_service_failure_that_says_nothing_of_it() -> None:
    reply = client(RuntimeError("secret detail")).post("/fail", json={"Text": "x"})
    assert reply.status_code == 500 and reply.headers["x-amzn-ErrorType"] == "ServiceFailureException"
    assert reply.json() == {"message": "internal error"}


def test_middleware_refusals_under_polly_take_pollys_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full server's 429 and a watchdog's 503 are answered before any route runs: under /polly as
    Polly's ThrottlingException and ServiceFailureException, elsewhere in the project's shape."""
    from function.api import admission as admission_module
    from function.api.admission import SYNTHESIS, Admission, Admit
    from function.api.error_replies import error_reply
    from function.core.errors import Stalled

    app = FastAPI()

    @app.post("/polly/v1/speech", tags=[SYNTHESIS])
    def speech() -> None:
        raise AssertionError("refused before it runs")

    @app.post("/v1/tts", tags=[SYNTHESIS])
    def tts() -> None:
        raise AssertionError("refused before it runs")

    full = Admission(capacity=1, max_queued=0)
    full.in_flight = 1
    monkeypatch.setattr(admission_module, "_admission", full)
    http = TestClient(Admit(app, app.routes))
    polly, ours = http.post("/polly/v1/speech"), http.post("/v1/tts")
    assert (polly.status_code, polly.headers["x-amzn-ErrorType"]) == (400, "ThrottlingException")
    assert polly.headers["retry-after"] == "1" and "synthesis slots" in polly.json()["message"]
    assert (ours.status_code, ours.json()["error"]["code"]) == (429, "busy")

    stalled = error_reply({"path": "/polly/v1/speech"}, Stalled("no progress"))
    assert (stalled.status_code, bytes(stalled.body)) == (500, b'{"message":"no progress"}')
    assert stalled.headers["x-amzn-ErrorType"] == "ServiceFailureException"
