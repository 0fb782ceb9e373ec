"""What the middleware and a request's routes tell each other, on the request's ASGI scope.

The middleware (function.api.app's stack) says who calls, a `Caller` (its tenant and credential), and
the request's id; a route asks for admission control with the SYNTHESIS tag. Routes take the caller
as a dependency (`CallerOf`) and record their changes in the audit trail (`audit_change`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import Request
from starlette.types import Scope

from function.core.audit import audit
from function.core.tenant import ANONYMOUS, Caller

SYNTHESIS = "synthesis"  # the OpenAPI tag that puts a route under admission control (function.api.admission)
_CALLER, _REQUEST_ID = "caller", "request_id"


def _state(scope: Scope) -> dict[str, object]:
    state: dict[str, object] = scope.setdefault("state", {})  # what Starlette's `request.state` reads
    return state


def set_caller(scope: Scope, caller: Caller) -> None:
    _state(scope)[_CALLER] = caller


def caller_of(scope: Scope) -> Caller:
    """The request's caller; the default tenant's anonymous caller when no credential named one (an
    open deployment)."""
    found = _state(scope).get(_CALLER)
    return found if isinstance(found, Caller) else ANONYMOUS


def set_request_id(scope: Scope, request_id: str) -> None:
    _state(scope)[_REQUEST_ID] = request_id


def request_id_of(scope: Scope) -> str | None:
    found = _state(scope).get(_REQUEST_ID)
    return found if isinstance(found, str) else None


def request_caller(request: Request) -> Caller:
    return caller_of(request.scope)


# A route's parameter `caller: CallerOf` is the request's caller.
CallerOf = Annotated[Caller, Depends(request_caller)]


def audit_change(request: Request, action: str, resource: str) -> None:
    """The audit line (function.core.audit) of a change `request` made to the object `resource`."""
    audit(caller_of(request.scope), action, resource, request_id_of(request.scope))


__all__ = [
    "SYNTHESIS",
    "CallerOf",
    "audit_change",
    "caller_of",
    "request_caller",
    "request_id_of",
    "set_caller",
    "set_request_id",
]
