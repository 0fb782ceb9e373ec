"""Where each edge's deadline comes from: the gateway's 30 s, the invocation, the server, the caller."""

from __future__ import annotations

import time

import pytest

from function.core.deadline import REPLY_MARGIN_SECONDS
from function.core.errors import InvalidRequest
from function.service.deadlines import API_GATEWAY_SECONDS, RECEIVED, gateway_deadline, http_deadline


class Context:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


def gateway_event(received: float, domain: str = "abc.execute-api.us-east-1.amazonaws.com") -> dict:
    context = {"http": {"method": "POST"}, "domainName": domain, "timeEpoch": received * 1000}
    return {"requestContext": context}


# Clock reads a test brackets an instant with agree to this (timeEpoch is whole milliseconds).
CLOCKS = 2e-3


def test_the_gateway_limit_counts_from_when_the_gateway_took_the_request() -> None:
    before = time.monotonic()
    taken = time.time() - 10  # the gateway took the request 10 s before this instant
    after = time.monotonic()
    deadline = gateway_deadline(gateway_event(taken))
    assert deadline is not None
    # However long the call took, the deadline is 30 s (less the reply's margin) from that instant.
    end = API_GATEWAY_SECONDS - 10 - REPLY_MARGIN_SECONDS
    assert before + end - CLOCKS <= deadline.at <= after + end + CLOCKS
    assert "API Gateway" in deadline.reason


def test_a_replayed_gateway_event_gets_the_full_30_s_and_function_urls_and_albs_none() -> None:
    before = time.monotonic()
    replayed = gateway_deadline(gateway_event(1583348638.39))  # sam local generate-event's timestamp
    after = time.monotonic()
    assert replayed is not None
    end = API_GATEWAY_SECONDS - REPLY_MARGIN_SECONDS  # counted from the call
    assert before + end <= replayed.at <= after + end
    assert gateway_deadline(gateway_event(time.time(), "abc.lambda-url.us-east-1.on.aws")) is None
    assert gateway_deadline({"requestContext": {"elb": {"targetGroupArn": "arn"}}}) is None
    assert gateway_deadline(None) is None


def test_an_http_request_gets_the_earliest_of_its_limits() -> None:
    scope = {
        "headers": [(b"x-request-timeout", b"5")],
        "aws.context": Context(600),
        "aws.event": gateway_event(time.time()),
    }
    deadline = http_deadline(scope, server_limit=None)
    assert deadline is not None and "X-Request-Timeout" in deadline.reason
    scope["headers"] = []
    deadline = http_deadline(scope, server_limit=None)
    assert deadline is not None and "API Gateway" in deadline.reason
    scope["aws.context"] = Context(3)
    deadline = http_deadline(scope, server_limit=None)
    assert deadline is not None and "timeout" in deadline.reason
    assert http_deadline({"headers": []}, server_limit=None) is None
    before = time.monotonic()
    server = http_deadline({"headers": []}, server_limit=120)
    after = time.monotonic()
    assert server is not None and before <= server.at - (120 - REPLY_MARGIN_SECONDS) <= after  # from now
    received = time.monotonic() - 100  # the request waited 100 s for the server
    queued = http_deadline({"headers": [], RECEIVED: received}, server_limit=120)
    assert queued is not None and queued.at == pytest.approx(received + 120 - REPLY_MARGIN_SECONDS)


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan", "inf"])
def test_a_bad_request_timeout_header_is_a_clear_400(value: str) -> None:
    with pytest.raises(InvalidRequest, match="X-Request-Timeout"):
        http_deadline({"headers": [(b"X-Request-Timeout", value.encode())]}, server_limit=None)
