"""AWS clients, created on first use and dropped after a SnapStart restore.

boto3 costs ~100+ ms to import, so nothing imports it unless the deployment touches S3 or SQS. Connections
made before a snapshot must not be trusted after restore (they belong to another machine's sockets), hence
`reset_clients()`. Endpoints come from the standard variables (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SQS
for a local server).
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_POOLS = {"s3": 32, "sqs": 4}  # S3: as wide as the parallel ranged GETs of the artifact loader


def _client(service: str) -> Any:
    with _lock:
        if service not in _clients:
            import boto3
            from botocore.config import Config

            config = Config(max_pool_connections=_POOLS[service], retries={"mode": "standard"})
            _clients[service] = boto3.session.Session().client(service, config=config)
        return _clients[service]


def s3_client() -> Any:
    return _client("s3")


def sqs_client() -> Any:
    return _client("sqs")


def reset_clients() -> None:
    with _lock:
        _clients.clear()


__all__ = ["reset_clients", "s3_client", "sqs_client"]
