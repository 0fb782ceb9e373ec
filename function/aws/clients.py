"""AWS clients, created on first use and dropped after a SnapStart restore.

boto3 is slow to import (`python -X importtime -c "import boto3"`), so nothing imports it unless the
deployment touches S3, SQS or SNS. Connections made before a snapshot must not be trusted after restore (they
belong to another machine's sockets), hence `reset_clients()`. Endpoints come from the standard variables
(AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_SNS for a local server).
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_sessions: list[Any] = []  # the one boto3 session the clients are made from, once the first is made


def _client(service: str, pool: int) -> Any:
    """The service's client, made on first use from the shared session: a session of its own would load
    botocore's endpoint and retry data again for each client. Under the lock, since a boto3 session is not
    safe to make clients from on several threads at once."""
    with _lock:
        if service not in _clients:
            if not _sessions:
                _sessions.append(_session())
            _clients[service] = _sessions[0].client(service, config=_config(pool))
        return _clients[service]


def _session() -> Any:
    import boto3

    return boto3.session.Session()


def _config(pool: int) -> Any:
    from botocore.config import Config

    return Config(max_pool_connections=pool, retries={"mode": "standard"})


def s3_client() -> Any:
    # A pool as wide as the parallel ranged GETs of the artifact loader.
    return _client("s3", 32)


def sqs_client() -> Any:
    return _client("sqs", 4)


def sns_client() -> Any:
    return _client("sns", 4)


def reset_clients() -> None:
    """Drop the clients and their session: the next use makes new ones (credentials read again too)."""
    with _lock:
        _clients.clear()
        _sessions.clear()


__all__ = ["reset_clients", "s3_client", "sns_client", "sqs_client"]
