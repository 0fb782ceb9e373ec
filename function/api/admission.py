"""Admission control for synthesis: at most `capacity` run at once, at most `max_queued` wait for a slot,
and anything beyond is refused at once with 429 `busy` and Retry-After.

Synthesis is CPU-bound: more of them at once than the cores hold only makes each one slower, and without a
limit the excess queues unseen in the thread pool, ahead of the health probes, until every /healthz times out
(`python -m bench load` probes a saturated server). The limit sits in the ASGI layer, on the event loop,
before the body is read, so a refused request costs no work. Routes opt in with the `synthesis` tag
(SYNTHESIS); a streamed response holds its slot until its last byte is sent or the client goes away. /readyz
reports the counts, and 503 while the queue is full or the server drains.

With COSYVOICE_TENANT_MAX_CONCURRENT each tenant (the caller's, function.http.context) has a share: a
tenant with that many syntheses running or waiting is refused 429 at once, while other tenants' requests
are still admitted, so one tenant cannot take every slot and queue place.

Inside Lambda (Mangum) an environment serves one request at a time, so the limit is on but never reached.
Under `serve` a watchdog (function.api.watchdog) also fails a synthesis that stops making progress, so a
slot can never be held for good.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Sequence
from contextlib import suppress

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from function.api.error_replies import error_reply
from function.api.route_templates import flattened
from function.api.watchdog import Watchdog
from function.core.errors import Busy
from function.core.tenant import DEFAULT_TENANT
from function.cosyvoice.graphs import available_cpus
from function.http.context import SYNTHESIS, caller_of
from function.instance.settings import Settings, get_settings
from function.observe.metrics import REQUESTS_WAITING, SLOTS_BUSY
from function.service.deadlines import RECEIVED

# Whole seconds (RFC 9110). A refusal is cheap, and behind a load balancer the retry may meet another pod.
RETRY_AFTER_SECONDS = 1


class Admission:
    """Counts of the syntheses running and waiting. Used on the event loop only, so it needs no lock."""

    def __init__(self, capacity: int, max_queued: int, tenant_share: int | None = None) -> None:
        self.capacity = capacity
        self.max_queued = max_queued
        self.tenant_share = tenant_share  # syntheses one tenant may have running and waiting; None: any
        self.in_flight = 0
        self._held: Counter[str] = Counter()  # by tenant: running and waiting
        self.draining = False  # set once the server shuts down (function.local.serve)
        self.watchdog: Watchdog | None = None  # set by `serve`: see function.api.watchdog
        self._waiting: deque[asyncio.Future[None]] = deque()

    @classmethod
    def from_settings(cls, settings: Settings) -> Admission:
        """COSYVOICE_MAX_CONCURRENT, else as many syntheses as the CPUs hold sessions of `threads` each."""
        cpus = available_cpus()
        capacity = settings.max_concurrent or max(1, cpus // (settings.threads or cpus))
        queued = 2 * capacity if settings.max_queued is None else settings.max_queued
        return cls(capacity, queued, settings.tenant_max_concurrent)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def saturated(self) -> bool:
        """Whether the next synthesis request would be refused."""
        return self.in_flight >= self.capacity and self.queued >= self.max_queued

    def counts(self) -> dict[str, int]:
        return {"in_flight": self.in_flight, "queued": self.queued, "capacity": self.capacity}

    def describe(self) -> str:
        return (
            f"{self.in_flight} of {self.capacity} synthesis slots and {self.queued} of {self.max_queued} "
            "queue places taken"
        )

    def drain(self) -> None:
        self.draining = True

    async def enter(self, tenant: str = DEFAULT_TENANT) -> None:
        """Take a slot for `tenant`, waiting in line for one if need be; Busy if the line is full too, or
        the tenant has its share running and waiting already."""
        if self.tenant_share is not None and self._held[tenant] >= self.tenant_share:
            raise Busy(
                f"tenant {tenant!r} has {self._held[tenant]} syntheses running or waiting, its share"
                f" (COSYVOICE_TENANT_MAX_CONCURRENT): retry later"
            )
        self._held[tenant] += 1  # waiting counts against the share too
        try:
            await self._take_slot()
        except BaseException:
            self._unhold(tenant)
            raise

    def leave(self, tenant: str = DEFAULT_TENANT) -> None:
        """Give `tenant`'s slot back: to the longest-waiting request, else to the pool."""
        self._unhold(tenant)
        self._pass_slot()

    def _unhold(self, tenant: str) -> None:
        self._held[tenant] -= 1
        if self._held[tenant] <= 0:
            del self._held[tenant]

    async def _take_slot(self) -> None:
        if self.in_flight < self.capacity:  # slots pass straight to waiters, so none is waiting here
            self.in_flight += 1
            return
        if self.queued >= self.max_queued:
            raise Busy(f"{self.describe()}: retry later")
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._pass_slot()  # the slot arrived as the request was cancelled: pass it on
            else:
                with suppress(ValueError):  # leave() may have dropped the cancelled waiter already
                    self._waiting.remove(waiter)
            raise

    def _pass_slot(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.in_flight -= 1


_admission: Admission | None = None


def get_admission() -> Admission:
    """The process's admission, sized from its settings on first use; its counts are the gauges
    cosyvoice_slots_busy and cosyvoice_requests_waiting, read when the metrics are."""
    global _admission
    if _admission is None:
        admission = _admission = Admission.from_settings(get_settings())
        SLOTS_BUSY.set_function(lambda: admission.in_flight)
        REQUESTS_WAITING.set_function(lambda: admission.queued)
    return _admission


class Admit:
    """ASGI middleware: requests for routes tagged SYNTHESIS pass through the process's admission, or
    get 429."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes  # the app's own list, so routes added later are seen too

    def admits(self, scope: Scope) -> bool:
        return any(
            SYNTHESIS in getattr(route, "tags", ()) and route.matches(scope)[0] is Match.FULL
            for route in flattened(self.routes)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[RECEIVED] = time.monotonic()  # a wait for a slot counts against the request's limits
        if scope["type"] != "http" or not self.admits(scope):
            await self.app(scope, receive, send)
            return
        admission = get_admission()
        tenant = caller_of(scope).tenant
        try:
            await admission.enter(tenant)
        except Busy as exc:
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
            await error_reply(scope, exc, headers)(scope, receive, send)  # Polly's ThrottlingException
            return
        try:
            # Returns once the response is sent (a stream's last chunk), the client has gone away, or the
            # watchdog has failed the request for making no progress.
            if admission.watchdog is not None:
                await admission.watchdog.run(self.app, scope, receive, send)
            else:
                await self.app(scope, receive, send)
        finally:
            admission.leave(tenant)


__all__ = ["RETRY_AFTER_SECONDS", "SYNTHESIS", "Admission", "Admit", "get_admission"]
