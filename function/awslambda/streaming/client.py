"""The Lambda Runtime API (2018-06-01) as the streaming runtime uses it, over http.client.

    GET  /runtime/invocation/next           the next event, its request id and deadline in the headers
    POST /runtime/invocation/{id}/response  a buffered reply (JSON), or with
                                            Lambda-Runtime-Function-Response-Mode: streaming a chunked one
    POST /runtime/invocation/{id}/error     a failure, before any reply was started
    POST /runtime/init/error                INIT or a before-snapshot hook failed
    GET  /runtime/restore/next              SnapStart: returns once the environment has been restored
    POST /runtime/restore/error             an after-restore hook failed

A streamed reply declares its trailers up front (HTTP/1.1 allows no others) and reports an error found
after it started in `Lambda-Runtime-Function-Error-Type` / `-Body` (base64); Lambda wants its connection
closed once the reply is written, so each streamed reply has a connection of its own.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mangum.types import LambdaCognitoIdentity, LambdaMobileClientContext

PREFIX = "/2018-06-01/runtime"
ERROR_TYPE = "Lambda-Runtime-Function-Error-Type"
ERROR_BODY = "Lambda-Runtime-Function-Error-Body"
RESPONSE_MODE = "Lambda-Runtime-Function-Response-Mode"
# The content type that tells Lambda a streamed body starts with an HTTP prelude (status, headers).
HTTP_INTEGRATION = "application/vnd.awslambda.http-integration-response"


class RuntimeAPIError(RuntimeError):
    """The Runtime API answered with an unexpected status: the environment is unusable."""


@dataclass
class LambdaContext:
    """The handler's `context`: awslambdaric's attributes (Mangum's LambdaContext protocol) and
    `get_remaining_time_in_millis`. Mobile-SDK identity and client context are not passed on."""

    aws_request_id: str
    invoked_function_arn: str
    deadline_ms: int  # epoch milliseconds (Lambda-Runtime-Deadline-Ms)
    function_name: str
    function_version: str
    memory_limit_in_mb: int
    log_group_name: str
    log_stream_name: str
    identity: LambdaCognitoIdentity | None = None
    client_context: LambdaMobileClientContext | None = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


@dataclass(frozen=True)
class Invocation:
    event: bytes
    context: LambdaContext
    trace_id: str | None  # X-Ray's, for _X_AMZN_TRACE_ID


class ResponseStream:
    """One streamed reply: the request head at construction, then `write` per chunk, then `close`."""

    TRAILERS = (ERROR_TYPE, ERROR_BODY)

    def __init__(self, host: str, port: int, request_id: str, content_type: str) -> None:
        self._connection = http.client.HTTPConnection(host, port)  # http.client sets TCP_NODELAY
        self._connection.putrequest("POST", f"{PREFIX}/invocation/{request_id}/response")
        self._connection.putheader(RESPONSE_MODE, "streaming")
        self._connection.putheader("Transfer-Encoding", "chunked")
        self._connection.putheader("Content-Type", content_type)
        self._connection.putheader("Trailer", ", ".join(self.TRAILERS))
        self._connection.endheaders()

    def write(self, data: bytes) -> None:
        if data:  # an empty chunk would end the body
            self._connection.send(b"%x\r\n%s\r\n" % (len(data), data))

    def close(self, error_type: str | None = None, error: dict[str, Any] | None = None) -> None:
        """End the body, with the error trailers when the reply broke off; then wait for Lambda's answer."""
        trailers = b""
        if error_type is not None:
            encoded = base64.b64encode(json.dumps(error).encode()).decode("ascii")
            trailers = f"{ERROR_TYPE}: {error_type}\r\n{ERROR_BODY}: {encoded}\r\n".encode()
        try:
            self._connection.send(b"0\r\n" + trailers + b"\r\n")
            response = self._connection.getresponse()
            body = response.read()
        finally:
            self._connection.close()
        if response.status != 202:
            raise RuntimeAPIError(f"streamed reply refused: {response.status} {body[:200]!r}")


class RuntimeClient:
    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)
        self._connection = http.client.HTTPConnection(self.host, self.port)  # keep-alive, as awslambdaric

    @classmethod
    def from_env(cls) -> RuntimeClient:
        return cls(os.environ["AWS_LAMBDA_RUNTIME_API"])

    def _call(
        self,
        method: str,
        path: str,
        expected: int,
        body: bytes | None = None,
        content_type: str = "",
        error_type: str = "",
    ) -> http.client.HTTPResponse:
        headers = {"Content-Type": content_type} if content_type else {}
        if error_type:
            headers[ERROR_TYPE] = error_type
        self._connection.request(method, PREFIX + path, body=body, headers=headers)
        response = self._connection.getresponse()
        if response.status != expected:
            raise RuntimeAPIError(f"{method} {path}: {response.status} {response.read()[:200]!r}")
        return response

    def next(self) -> Invocation:
        response = self._call("GET", "/invocation/next", 200)
        event = response.read()
        context = LambdaContext(
            aws_request_id=response.headers["Lambda-Runtime-Aws-Request-Id"],
            invoked_function_arn=response.headers.get("Lambda-Runtime-Invoked-Function-Arn", ""),
            deadline_ms=int(response.headers["Lambda-Runtime-Deadline-Ms"]),
            function_name=os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""),
            function_version=os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", ""),
            memory_limit_in_mb=int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "0")),
            log_group_name=os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", ""),
            log_stream_name=os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", ""),
        )
        return Invocation(event, context, response.headers.get("Lambda-Runtime-Trace-Id"))

    def _post_json(self, path: str, document: Any, error_type: str = "") -> None:
        self._call("POST", path, 202, json.dumps(document).encode(), "application/json", error_type).read()

    def respond(self, request_id: str, result: Any) -> None:
        self._post_json(f"/invocation/{request_id}/response", result)

    def fail(self, request_id: str, error: dict[str, Any]) -> None:
        self._post_json(f"/invocation/{request_id}/error", error, error["errorType"])

    def stream(self, request_id: str, content_type: str = HTTP_INTEGRATION) -> ResponseStream:
        return ResponseStream(self.host, self.port, request_id, content_type)

    def init_error(self, error: dict[str, Any], error_type: str) -> None:
        self._post_json("/init/error", error, error_type)

    def restore_next(self) -> None:
        self._call("GET", "/restore/next", 200).read()
        # The connection was opened before the snapshot; it need not survive the restore: open a new one.
        self._connection.close()

    def restore_error(self, error: dict[str, Any], error_type: str) -> None:
        self._post_json("/restore/error", error, error_type)


__all__ = [
    "HTTP_INTEGRATION",
    "Invocation",
    "LambdaContext",
    "ResponseStream",
    "RuntimeAPIError",
    "RuntimeClient",
]
