"""Tenants: who a credential belongs to, and where that tenant's objects live.

A deployment serves many tenants. Each credential (an API key, a SigV4 key pair, an API Gateway identity)
names one; a bare one belongs to `default`. The default tenant keeps the layout a deployment had before
tenants, so nothing it stored moves; every other tenant's objects live under
`{prefix}tenants/{tenant}/`, where no other tenant's request can name them.
"""

from __future__ import annotations

import re

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"[a-z0-9][a-z0-9-]{0,31}"
TENANTS_FOLDER = "tenants/"


class TenantNameError(ValueError):
    """A tenant name outside TENANT_PATTERN."""


def checked_tenant(name: str) -> str:
    """`name` when it is a valid tenant name; raises TenantNameError otherwise."""
    if re.fullmatch(TENANT_PATTERN, name) is None:
        raise TenantNameError(f"tenant {name!r} is not a name of 1-32 lowercase letters, digits and '-'")
    return name


def tenant_prefix(prefix: str, tenant: str) -> str:
    """The key prefix of `tenant`'s objects under the deployment's output `prefix`."""
    if tenant == DEFAULT_TENANT:
        return prefix
    return f"{prefix}{TENANTS_FOLDER}{checked_tenant(tenant)}/"


__all__ = [
    "DEFAULT_TENANT",
    "TENANTS_FOLDER",
    "TENANT_PATTERN",
    "TenantNameError",
    "checked_tenant",
    "tenant_prefix",
]
