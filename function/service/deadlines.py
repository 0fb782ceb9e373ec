"""Where each edge's deadline comes from: the Lambda invocation, API Gateway, this server, the caller.

The edge keeps the earliest of them as one `function.core.deadline.Deadline`, which the engine refuses
work against and stops at.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from function.core.deadline import REPLY_MARGIN_SECONDS, Deadline, earliest
from function.core.errors import InvalidRequest

# The ASGI scope key of when the server took the request (time.monotonic()), set by the outermost
# middleware (function.api.admission), so time spent waiting for a synthesis slot counts against the limits.
RECEIVED = "cosyvoice.received"
API_GATEWAY_SECONDS = 30.0  # HTTP and REST APIs' integration timeout (not raisable for HTTP APIs)


def invocation_deadline(context: Any) -> Deadline | None:
    """The Lambda invocation's end (a context with get_remaining_time_in_millis), else None."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return Deadline.after(remaining() / 1000, "the function's timeout")


def gateway_deadline(event: Any) -> Deadline | None:
    """API Gateway's 30 s for events that came through a gateway (Function URLs and ALBs have no limit of
    their own), counted from when the gateway took the request (`requestContext.timeEpoch`, HTTP API v2;
    `requestTimeEpoch`, REST v1). A time more than 30 s past cannot be a live gateway request (a replayed
    or generated event, or a skewed clock): then the 30 s count from now."""
    context = event.get("requestContext") if isinstance(event, dict) else None
    if not isinstance(context, dict) or "elb" in context:
        return None
    if ".lambda-url." in str(context.get("domainName", "")):
        return None
    received_ms = context.get("timeEpoch", context.get("requestTimeEpoch"))
    elapsed = time.time() - received_ms / 1000 if isinstance(received_ms, int | float) else 0.0
    if not 0.0 <= elapsed < API_GATEWAY_SECONDS:
        elapsed = 0.0
    return Deadline(
        time.monotonic() + API_GATEWAY_SECONDS - elapsed - REPLY_MARGIN_SECONDS,
        "API Gateway's 30 s limit",
        API_GATEWAY_SECONDS,
    )


def client_deadline(header: str | None, since: float | None = None) -> Deadline | None:
    """The caller's own limit, `X-Request-Timeout: SECONDS`, from `since` (default now)."""
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < 86_400:
        raise InvalidRequest(f"X-Request-Timeout must be a number of seconds above 0, got {header!r}")
    return Deadline.after(seconds, "the caller's X-Request-Timeout", since=since)


def http_deadline(scope: Mapping[str, Any], server_limit: float | None) -> Deadline | None:
    """The earliest limit on an HTTP request: inside Lambda the invocation's and the gateway's (from the
    ASGI scope Mangum fills in: `aws.context`, `aws.event`), in a container the server's longest allowed
    request, and the caller's header."""
    header = None
    for name, value in scope.get("headers") or []:
        if name.lower() == b"x-request-timeout":
            header = value.decode("latin-1")
    received = scope.get(RECEIVED)
    server = None
    if server_limit:
        server = Deadline.after(server_limit, "this server's longest request", since=received)
    return earliest(
        invocation_deadline(scope.get("aws.context")),
        gateway_deadline(scope.get("aws.event")),
        server,
        client_deadline(header, since=received),
    )


__all__ = [
    "API_GATEWAY_SECONDS",
    "RECEIVED",
    "client_deadline",
    "gateway_deadline",
    "http_deadline",
    "invocation_deadline",
]
