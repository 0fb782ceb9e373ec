"""A local Lambda Runtime API (version 2018-06-01) on 127.0.0.1, for the real awslambdaric client.

It serves the endpoints the runtime client calls:
  GET  /2018-06-01/runtime/invocation/next           blocks until the driver hands out an event
  POST /2018-06-01/runtime/invocation/{id}/response  the handler's result: whole, or streamed (chunked,
                                                     with Lambda-Runtime-Function-Response-Mode:
                                                     streaming), each chunk's arrival time recorded
  POST /2018-06-01/runtime/invocation/{id}/error     an unhandled exception
  POST /2018-06-01/runtime/init/error                INIT (or a before-snapshot hook) failed
  GET  /2018-06-01/runtime/restore/next              SnapStart: blocks until the driver "restores"
  POST /2018-06-01/runtime/restore/error             an after-restore hook failed
Each waiting /next call is a slot the driver can fill with an event (`invoke`) or leave waiting
(`park`), which lets it give exactly one event to each of several forked clones.

A streamed result keeps its chunks as they came and its trailers; `Invocation.http()` splits a Function
URL reply into its prelude (status, headers, cookies) and the body chunks after the 8 NUL bytes.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = "/2018-06-01/runtime"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:000000000000:function:cosyvoice-local"
RESPONSE_MODE = "Lambda-Runtime-Function-Response-Mode"
PRELUDE_END = b"\0" * 8


@dataclass(frozen=True)
class Chunk:
    at: float  # when it was read: perf_counter, or seconds since the event was handed out (Invocation)
    data: bytes


@dataclass(frozen=True)
class HTTPReply:
    """A streamed Function URL reply: the prelude's fields and the body's chunks as they arrived."""

    status: int
    headers: dict[str, str]
    cookies: list[str]
    chunks: list[Chunk]  # the body after the prelude; a chunk that held both keeps its body part

    @property
    def body(self) -> bytes:
        return b"".join(chunk.data for chunk in self.chunks)


@dataclass(frozen=True)
class Invocation:
    request_id: str
    ok: bool  # False: the runtime posted to /error
    body: bytes
    error_type: str | None
    seconds: float  # event handed out → result posted (a streamed one: its last chunk read)
    streamed: bool = False  # posted with the streaming response mode
    content_type: str | None = None
    chunks: tuple[Chunk, ...] = ()  # a streamed body as it arrived (`at`: seconds since handed out)
    declared_trailers: tuple[str, ...] = ()  # the request's Trailer header
    trailers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)

    def http(self) -> HTTPReply:
        """The streamed body as a Function URL reply; ValueError when it has no prelude."""
        end = self.body.find(PRELUDE_END)
        if not self.streamed or end < 0:
            raise ValueError("not a streamed reply with an HTTP prelude")
        prelude = json.loads(self.body[:end])
        start, offset, chunks = end + len(PRELUDE_END), 0, []
        for chunk in self.chunks:
            skip = max(0, start - offset)
            if skip < len(chunk.data):
                chunks.append(Chunk(chunk.at, chunk.data[skip:]))
            offset += len(chunk.data)
        return HTTPReply(prelude["statusCode"], prelude["headers"], prelude["cookies"], chunks)


Slot = queue.Queue[tuple[str, bytes]]  # one waiting /next call; put (request id, event) to answer it


@dataclass(frozen=True)
class Pending:
    """An event handed to a runtime, awaiting its result."""

    request_id: str
    sent: float
    results: queue.Queue[Invocation]  # `seconds` and the chunks' `at` still perf_counter values

    def result(self, timeout: float) -> Invocation:
        posted = self.results.get(timeout=timeout)
        chunks = tuple(Chunk(chunk.at - self.sent, chunk.data) for chunk in posted.chunks)
        return replace(posted, seconds=posted.seconds - self.sent, chunks=chunks)


@dataclass(frozen=True)
class Call:
    """One request the runtime made, for the timeline."""

    at: float  # time.perf_counter()
    method: str
    path: str


class RuntimeAPI:
    def __init__(self, deadline_seconds: float = 900.0) -> None:
        self.deadline_seconds = deadline_seconds
        self.calls: list[Call] = []
        self.init_errors: list[bytes] = []
        self.restore_errors: list[bytes] = []
        self._polls: queue.Queue[Slot] = queue.Queue()
        self._restore_waits: queue.Queue[threading.Event] = queue.Queue()
        self._results: dict[str, queue.Queue[Invocation]] = {}
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _handler_class(self))
        self._server.daemon_threads = True  # parked /next calls never return; they must not block exit
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> RuntimeAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # The driver's side. Calls taking `timeout` raise queue.Empty when it passes.

    def wait_poll(self, timeout: float) -> Slot:
        """The next runtime call waiting on /next; unless given an event (`send`) it stays parked."""
        return self._polls.get(timeout=timeout)

    def requeue(self, slot: Slot) -> None:
        self._polls.put(slot)

    def send(self, slot: Slot, event: bytes) -> Pending:
        pending = Pending(str(uuid.uuid4()), time.perf_counter(), queue.Queue(1))
        with self._lock:
            self._results[pending.request_id] = pending.results
        slot.put((pending.request_id, event))
        return pending

    def pending_restores(self) -> int:
        return self._restore_waits.qsize()

    def restore(self, timeout: float) -> float:
        """Let one runtime waiting on /restore/next through; returns when that happened (perf_counter)."""
        gate = self._restore_waits.get(timeout=timeout)
        at = time.perf_counter()
        gate.set()
        return at

    # The runtime's side (called from the request handler threads).

    def _next(self) -> tuple[str, bytes]:
        slot: Slot = queue.Queue(1)
        self._polls.put(slot)
        return slot.get()

    def _restore_next(self) -> None:
        gate = threading.Event()
        self._restore_waits.put(gate)
        gate.wait()

    def _result(self, posted: Invocation) -> bool:
        with self._lock:
            results = self._results.pop(posted.request_id, None)
        if results is None:
            return False
        results.put(posted)
        return True


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a runtime killed mid-request (the end of every session) is not news


def _handler_class(api: RuntimeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the runtime client expects

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> tuple[list[Chunk], dict[str, str]]:
            """The request body, as chunks with their arrival times, and its trailers."""
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                return [Chunk(time.perf_counter(), body)], {}
            chunks, trailers = [], {}
            while size := int(self.rfile.readline().split(b";")[0], 16):
                data = self.rfile.read(size)
                chunks.append(Chunk(time.perf_counter(), data))
                self.rfile.readline()  # the CRLF after the data
            while line := self.rfile.readline().strip():
                name, _, value = line.decode("latin-1").partition(":")
                trailers[name.strip()] = value.strip()
            return chunks, trailers

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            api.calls.append(Call(time.perf_counter(), "GET", self.path))
            if self.path == f"{PREFIX}/invocation/next":
                request_id, event = api._next()
                deadline = int((time.time() + api.deadline_seconds) * 1000)
                self._reply(
                    200,
                    event,
                    {
                        "Lambda-Runtime-Aws-Request-Id": request_id,
                        "Lambda-Runtime-Deadline-Ms": str(deadline),
                        "Lambda-Runtime-Invoked-Function-Arn": FUNCTION_ARN,
                        "Lambda-Runtime-Trace-Id": f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]}",
                    },
                )
            elif self.path == f"{PREFIX}/restore/next":
                api._restore_next()
                self._reply(200)
            else:
                self._reply(404, b'{"errorMessage": "unknown path"}')

        def do_POST(self) -> None:  # noqa: N802
            api.calls.append(Call(time.perf_counter(), "POST", self.path))
            chunks, trailers = self._body()
            body = b"".join(chunk.data for chunk in chunks)
            parts = self.path[len(PREFIX) :].strip("/").split("/")
            if len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error"):
                ok = parts[2] == "response"
                streamed = self.headers.get(RESPONSE_MODE) == "streaming"
                declared = [name.strip() for name in self.headers.get("Trailer", "").split(",")]
                posted = Invocation(
                    parts[1],
                    ok,
                    body,
                    None if ok else self.headers.get("Lambda-Runtime-Function-Error-Type"),
                    time.perf_counter(),
                    streamed,
                    self.headers.get("Content-Type"),
                    tuple(chunks) if streamed else (),
                    tuple(filter(None, declared)),
                    trailers,
                )
                if api._result(posted):
                    self._reply(202, b'{"status": "OK"}')
                else:
                    self._reply(400, b'{"errorMessage": "unknown request id"}')
            elif self.path == f"{PREFIX}/init/error":
                api.init_errors.append(body)
                self._reply(202, b'{"status": "OK"}')
            elif self.path == f"{PREFIX}/restore/error":
                api.restore_errors.append(body)
                self._reply(202, b'{"status": "OK"}')
            else:
                self._reply(404, b'{"errorMessage": "unknown path"}')

    return Handler


__all__ = ["Call", "Chunk", "HTTPReply", "Invocation", "Pending", "RuntimeAPI", "Slot"]
