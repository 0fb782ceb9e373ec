"""The audit trail: one JSON line on stdout for each change a caller makes (a job submitted, a voice
created or deleted, a lexicon put or deleted, a Polly task started), naming the tenant, the action, the
object's id and the credential's fingerprint (function.core.tenant.fingerprint).

A line never carries a key, a secret or a request's text: only what is needed to say who changed what.
"""

from __future__ import annotations

import json
import time

from function.core.tenant import Caller

AUDIT_EVENT = "audit"


def audit(caller: Caller, action: str, resource: str, request_id: str | None = None) -> None:
    """Log that `caller` did `action` (e.g. "voice.created") to the object `resource` (its id)."""
    line = {
        "event": AUDIT_EVENT,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tenant": caller.tenant,
        "action": action,
        "id": resource,
        "credential": caller.credential,
        "request_id": request_id,
    }
    print(json.dumps(line, ensure_ascii=False), flush=True)


__all__ = ["AUDIT_EVENT", "audit"]
