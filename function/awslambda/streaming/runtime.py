"""The streaming runtime's process: INIT, the SnapStart handshake, then one invocation at a time.

INIT imports function.awslambda.handler, as awslambdaric would: the model loads at module scope and the
SnapStart hooks register; a failure goes to /init/error and the process exits 1. With
AWS_LAMBDA_INITIALIZATION_TYPE=snap-start, the before-snapshot hooks run (last registered first), the process
waits on /restore/next, then the after-restore hooks run (in order); a failing hook goes to /init/error (exit
64) or /restore/error (exit 65), the codes awslambdaric exits with.

A Function URL event streams through the app (function_url.py), whose scope says the transport streams
(function.service.synthesis.STREAMING_TRANSPORT): a streamed reply is not bound by the 6 MB payload
(Lambda streams up to 200 MB, and the text limit keeps ours far below that). Every other event goes to
`lambda_handler` and its result is posted whole; an exception is posted as awslambdaric posts it
({"errorMessage", "errorType", "requestId", "stackTrace"}), and the loop goes on.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn

from snapshot_restore_py import get_after_restore, get_before_snapshot

from function.awslambda.streaming.client import Invocation, RuntimeClient
from function.awslambda.streaming.function_url import is_function_url, stream_http

HANDLER_MODULE = "function.awslambda.handler"
BEFORE_SNAPSHOT_ERROR = "Runtime.BeforeSnapshotError"
AFTER_RESTORE_ERROR = "Runtime.AfterRestoreError"
UNMARSHAL_ERROR = "Runtime.UnmarshalError"


def fault(exc: BaseException, request_id: str | None = None) -> dict[str, Any]:
    """An exception as the Runtime API's error document (awslambdaric's shape)."""
    return {
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "requestId": request_id or "",
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
    }


def log_level(name: str) -> int:
    """The Python level for Lambda's log level setting (TRACE is DEBUG); Python's default otherwise."""
    name = {"TRACE": "DEBUG"}.get(name.upper(), name.upper())
    return logging.getLevelNamesMapping().get(name, logging.WARNING)


def _exit(
    report: Callable[[dict[str, Any], str], None], exc: Exception, error_type: str, code: int
) -> NoReturn:
    logging.getLogger(__name__).exception("%s", error_type)
    report(fault(exc), error_type)
    sys.exit(code)


def init(client: RuntimeClient) -> ModuleType:
    """The handler module's INIT, then, under SnapStart, the snapshot and the restore."""
    try:
        handler = importlib.import_module(HANDLER_MODULE)
    except Exception as exc:
        _exit(client.init_error, exc, type(exc).__name__, 1)
    if os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") == "snap-start":
        try:
            hooks = get_before_snapshot()
            while hooks:
                func, args, kwargs = hooks.pop()
                func(*args, **kwargs)
            client.restore_next()
        except Exception as exc:
            _exit(client.init_error, exc, BEFORE_SNAPSHOT_ERROR, 64)
        try:
            for func, args, kwargs in get_after_restore():
                func(*args, **kwargs)
        except Exception as exc:
            _exit(client.restore_error, exc, AFTER_RESTORE_ERROR, 65)
    return handler


class Runtime:
    def __init__(self, client: RuntimeClient, handler: ModuleType, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.handler = handler
        self.loop = loop

    def serve(self, invocation: Invocation) -> None:
        request_id = invocation.context.aws_request_id
        if invocation.trace_id is None:
            os.environ.pop("_X_AMZN_TRACE_ID", None)
        else:
            os.environ["_X_AMZN_TRACE_ID"] = invocation.trace_id
        try:
            event = json.loads(invocation.event)
        except ValueError as exc:
            self.client.fail(request_id, {**fault(exc, request_id), "errorType": UNMARSHAL_ERROR})
            return
        if is_function_url(event):
            # As in the handler: an on-demand INIT leaves the web stack to the first HTTP event.
            from function.api.app import app

            self.loop.run_until_complete(
                stream_http(app, event, invocation.context, lambda: self.client.stream(request_id))
            )
            return
        try:
            result = self.handler.lambda_handler(event, invocation.context)
        except Exception as exc:
            logging.getLogger(__name__).exception("invocation %s failed", request_id)
            self.client.fail(request_id, fault(exc, request_id))
            return
        self.client.respond(request_id, result)

    def run(self) -> NoReturn:
        while True:
            self.serve(self.client.next())


def main() -> NoReturn:
    # Lambda captures stdout and stderr; a pipe would hold log lines back until its buffer fills.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    logging.basicConfig(
        stream=sys.stdout,
        format="[%(levelname)s]\t%(asctime)s\t%(name)s\t%(message)s",
        level=log_level(os.environ.get("AWS_LAMBDA_LOG_LEVEL", "")),
    )
    # One event loop for the process, current before INIT: Mangum (buffered HTTP events) runs on it too.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = RuntimeClient.from_env()
    Runtime(client, init(client), loop).run()


__all__ = ["Runtime", "fault", "init", "log_level", "main"]
