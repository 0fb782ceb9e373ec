"""AWS clients, created on first use and dropped after a SnapStart restore.

boto3 is slow to import (`python -X importtime -c "import boto3"`), so nothing imports it unless the
deployment touches S3, SQS or SNS. Connections made before a snapshot must not be trusted after restore (they
belong to another machine's sockets), hence `reset_clients()`. Endpoints come from the standard variables
(AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_SNS for a local server).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_clients: dict[str, Any] = {}


def _cached(service: str, create: Callable[[], Any]) -> Any:
    with _lock:
        if service not in _clients:
            _clients[service] = create()
        return _clients[service]


def _session() -> Any:
    import boto3

    return boto3.session.Session()


def _config(pool: int) -> Any:
    from botocore.config import Config

    return Config(max_pool_connections=pool, retries={"mode": "standard"})


def s3_client() -> Any:
    # A pool as wide as the parallel ranged GETs of the artifact loader.
    return _cached("s3", lambda: _session().client("s3", config=_config(32)))


def sqs_client() -> Any:
    return _cached("sqs", lambda: _session().client("sqs", config=_config(4)))


def sns_client() -> Any:
    return _cached("sns", lambda: _session().client("sns", config=_config(4)))


def reset_clients() -> None:
    with _lock:
        _clients.clear()


__all__ = ["reset_clients", "s3_client", "sns_client", "sqs_client"]
