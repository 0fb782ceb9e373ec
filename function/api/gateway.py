"""The caller API Gateway vouched for, inside Lambda: the identity its authorizer checked, as a tenant.

Mangum (and the streaming Function URL runtime) put the invocation's event on the scope (`aws.event`); its
request context names the caller:

- a JWT authorizer (ApiAuth=jwt): the token's claims. COSYVOICE_TENANT_CLAIM names the claim that carries
  the tenant; a token without it is the tenant `default`, one whose value is no tenant name is refused
  403. The credential is the token's subject (`sub`).
- IAM (ApiAuth=iam, or an IAM-signed Function URL): the caller's ARN, mapped by COSYVOICE_IAM_TENANTS; an
  ARN it does not name is the tenant `default`. The credential is the signing access key id.

Anything else (no authorizer, or `serve`, where no event exists) is the default tenant's anonymous caller.
Both payload versions are read: HTTP APIs' 2.0 (`authorizer.jwt.claims`, `authorizer.iam`) and REST
APIs' 1.0 (`authorizer.claims`, `identity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.types import Scope

from function.core.errors import TTSError
from function.core.tenant import ANONYMOUS, DEFAULT_TENANT, Caller, TenantNameError, checked_tenant
from function.instance.settings import Settings

EVENT = "aws.event"  # where Mangum puts the Lambda event on the scope


class Forbidden(TTSError):
    code = "forbidden"
    status = 403


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def gateway_caller(scope: Scope, settings: Settings) -> Caller:
    """The caller of the request in `scope` as its API Gateway request context names it."""
    context = _mapping(_mapping(scope.get(EVENT)).get("requestContext"))
    authorizer = _mapping(context.get("authorizer"))
    claims = _mapping(_mapping(authorizer.get("jwt")).get("claims")) or _mapping(authorizer.get("claims"))
    if claims:
        return _jwt_caller(claims, settings.tenant_claim)
    iam = _mapping(authorizer.get("iam")) or _mapping(context.get("identity"))
    arn = iam.get("userArn")
    if isinstance(arn, str) and arn:
        key_id = iam.get("accessKey")
        tenant = settings.iam_tenants.get(arn, DEFAULT_TENANT)
        return Caller.of(tenant, key_id if isinstance(key_id, str) and key_id else arn)
    return ANONYMOUS


def _jwt_caller(claims: Mapping[str, Any], claim: str | None) -> Caller:
    subject = claims.get("sub")
    credential = str(subject) if subject is not None else None
    value = claims.get(claim) if claim is not None else None
    if value is None:
        return Caller.of(DEFAULT_TENANT, credential)
    try:
        return Caller.of(checked_tenant(str(value)), credential)
    except TenantNameError:
        raise Forbidden(
            f"the token's {claim!r} claim is not a tenant name (1-32 lowercase letters, digits and '-')"
        ) from None


__all__ = ["EVENT", "Forbidden", "gateway_caller"]
