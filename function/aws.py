"""AWS clients, created on first use and dropped after a SnapStart restore.

boto3 costs ~100+ ms to import, so nothing imports it unless the deployment touches S3. Connections made
before a snapshot must not be trusted after restore (they belong to another machine's sockets), hence
`reset_clients()`. Endpoints come from the standard variables (AWS_ENDPOINT_URL_S3 for a local server).
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[str, Any] = {}


def s3_client() -> Any:
    with _lock:
        if "s3" not in _clients:
            import boto3
            from botocore.config import Config

            # A pool as wide as the parallel ranged GETs of the artifact loader.
            _clients["s3"] = boto3.session.Session().client(
                "s3", config=Config(max_pool_connections=32, retries={"mode": "standard"})
            )
        return _clients["s3"]


def reset_clients() -> None:
    with _lock:
        _clients.clear()


__all__ = ["reset_clients", "s3_client"]
