"""A synthesis that stops making progress is failed and its slot given back, and a process that cannot
get its work back says so on /healthz.

Under `serve` each admitted synthesis runs as a task of its own with a `Heartbeat`
(function.core.progress): the engine beats at every speech token, flow step and chunk, the response at
every message it sends. Once the heart has been silent for `stall_seconds`, the request is answered 503
`stalled` (or, when its response has started, its connection is cut), its slot goes back to the
admission, and its task is left to end by itself: the thread that runs it cannot be stopped from outside.
Abandoned work that has not ended after another `stall_seconds`, or an LLM thread told to stop that still
runs after as long (function.cosyvoice.run_ahead.stuck_producers), means the process will not recover
by itself: /healthz then answers 503 and a liveness probe restarts the container.

Lambda has no watchdog: an environment serves one request, which its invocation deadline stops.
"""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from function.api.error_replies import error_reply
from function.core.errors import Stalled
from function.core.progress import Heartbeat, watched
from function.cosyvoice.run_ahead import stuck_producers

logger = logging.getLogger(__name__)


class Watchdog:
    """Watches the syntheses of one process; `run` is one request under watch."""

    def __init__(self, stall_seconds: float) -> None:
        if stall_seconds <= 0:
            raise ValueError(f"stall_seconds must be positive, got {stall_seconds}")
        self.stall_seconds = stall_seconds
        self.stalled = 0  # syntheses failed for want of progress since the process started
        self._abandoned: dict[asyncio.Task[None], float] = {}  # still running → when it was failed

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """`app` on this request, failed (503 `stalled`, or the connection cut once the response has
        started) when it makes no progress for `stall_seconds`."""
        heartbeat = Heartbeat()
        started = taken_over = False

        async def beating_send(message: Message) -> None:
            nonlocal started
            if taken_over:
                raise Stalled("this request was failed for making no progress")
            started = started or message["type"] == "http.response.start"
            heartbeat.beat()
            await send(message)

        with watched(heartbeat):  # the task starts from a copy of this context, heartbeat included
            task = asyncio.ensure_future(app(scope, receive, beating_send))
        try:
            while not task.done():
                silent = heartbeat.silent_for()
                if silent >= self.stall_seconds:
                    break
                await asyncio.wait({task}, timeout=self.stall_seconds - silent)
        except asyncio.CancelledError:
            task.cancel()  # the server is cutting this request: its work goes with it
            raise
        if task.done():
            task.result()  # its own end: returned, or its error raised here as it would have been
            return
        taken_over = True
        self._abandon(task)
        stalled = Stalled(
            f"synthesis made no progress for {self.stall_seconds:g} s and was stopped; retry the request"
        )
        logger.error("%s %s: %s", scope.get("method"), scope.get("path"), stalled.message)
        if started:
            raise stalled  # too late for a status: the server cuts the connection
        await error_reply(scope, stalled)(scope, receive, send)

    def _abandon(self, task: asyncio.Task[None]) -> None:
        self.stalled += 1
        self._abandoned[task] = time.monotonic()
        # Not cancelled: a cancelled task may end while its thread runs on, and it is that thread which
        # is counted. Once the thread returns, the task's next send fails and it ends.
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._abandoned.pop(task, None)
        error = None if task.cancelled() else task.exception()
        logger.warning("a stalled request's work ended after all%s", f": {error!r}" if error else "")

    @property
    def abandoned(self) -> int:
        """Requests failed for want of progress whose work is still running."""
        return len(self._abandoned)

    def wedged(self) -> str | None:
        """Why this process cannot recover by itself, or None while it can."""
        now = time.monotonic()
        lost = sum(1 for since in self._abandoned.values() if now - since > self.stall_seconds)
        if lost:
            return (
                f"{lost} stalled synthesis request(s) still running {self.stall_seconds:g} s after they"
                " were failed"
            )
        stuck = stuck_producers(self.stall_seconds)
        if stuck:
            return f"{stuck} LLM thread(s) told to stop {self.stall_seconds:g} s ago still running"
        return None


__all__ = ["Watchdog"]
