"""Tenants: who a credential belongs to, and where that tenant's objects live.

A deployment serves many tenants. Each credential (an API key, a SigV4 key pair, an API Gateway identity)
names one; a bare one belongs to `default`. The default tenant keeps the layout a deployment had before
tenants, so nothing it stored moves; every other tenant's objects live under
`{prefix}tenants/{tenant}/`, where no other tenant's request can name them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"[a-z0-9][a-z0-9-]{0,31}"
TENANTS_FOLDER = "tenants/"
FINGERPRINT_HEX = 8  # the hex digits of a credential's sha256 an audit line shows


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


def in_tenant_folder(key: str, prefix: str, tenant: str) -> bool:
    """Whether the object `key` lies inside `tenant`'s folder under `prefix` (and is not the folder
    itself). The default tenant's folder holds every other tenant's: a key reaching into
    `{prefix}tenants/` is not the default tenant's."""
    folder = tenant_prefix(prefix, tenant)
    if not key.startswith(folder) or key == folder or ".." in key.split("/"):
        return False
    return tenant != DEFAULT_TENANT or not key[len(folder) :].startswith(TENANTS_FOLDER)


def fingerprint(key_id: str) -> str:
    """A credential's name in logs: the first hex digits of its key id's sha256, never the id itself."""
    return hashlib.sha256(key_id.encode()).hexdigest()[:FINGERPRINT_HEX]


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: its tenant and the fingerprint of the credential it presented (None
    for a request no credential names: an open deployment's)."""

    tenant: str = DEFAULT_TENANT
    credential: str | None = None

    @classmethod
    def of(cls, tenant: str, key_id: str | None) -> Caller:
        """The caller presenting the credential `key_id` (an API key, an access key id, an identity)."""
        return cls(tenant, None if key_id is None else fingerprint(key_id))


ANONYMOUS = Caller()

__all__ = [
    "ANONYMOUS",
    "Caller",
    "DEFAULT_TENANT",
    "TENANTS_FOLDER",
    "TENANT_PATTERN",
    "TenantNameError",
    "checked_tenant",
    "fingerprint",
    "in_tenant_folder",
    "tenant_prefix",
]
