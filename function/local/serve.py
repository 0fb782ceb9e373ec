"""`python -m function serve --artifacts DIR`: the HTTP API under uvicorn (containers, Kubernetes).

The model loads before the server binds its socket (on a thread of its own while uvicorn and the app
are imported), so the first request finds it ready and /readyz is true from the start. Responses are
not size-capped here, and `stream: true` is sent chunked.

SIGTERM drains (function.local.drain): no new connections, up to COSYVOICE_DRAIN_SECONDS for the requests
already accepted (running, or queued by function.api.admission) to finish, then exit 0; by then the
process has exited whatever a request is doing. A synthesis that makes no progress for
COSYVOICE_STALL_SECONDS is failed by the watchdog (function.api.watchdog), which /healthz reports. GET
/metrics is Prometheus' (function.observe), on the same port.
"""

from __future__ import annotations

import argparse

from function.cli.base import add_artifacts_option
from function.instance.settings import Settings, get_settings, use_settings

# h11 drops a connection whose request head is still incomplete past its 16 KiB default, so whether an
# oversize head met the app's JSON 431 or a reset would depend on how the bytes arrived. Heads up to 1 MiB
# reach the app, which refuses anything over its own limit (function.api.app.MAX_HEADER_BYTES) with JSON.
HEAD_READ_LIMIT = 1024 * 1024


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("serve", help="serve the HTTP API with uvicorn")
    add_artifacts_option(parser)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info")
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    if args.artifacts:  # the flag overrides $COSYVOICE_ARTIFACT; the rest still comes from the environment
        use_settings(Settings.from_env(artifact=args.artifacts))
    from function.instance.model import get_engine, start_loading
    from function.instance.startup import STARTUP

    start_loading()  # first: uvicorn and the app import while the sessions are created
    import uvicorn

    from function.api.admission import get_admission
    from function.api.app import app
    from function.api.watchdog import Watchdog
    from function.local.drain import DrainingServer
    from function.observe.lines import write_behind

    get_engine()
    STARTUP.emit("init")
    write_behind()  # no request waits on stdout for its log line
    settings = get_settings()
    admission = get_admission()
    admission.watchdog = Watchdog(settings.stall_seconds)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        h11_max_incomplete_event_size=HEAD_READ_LIMIT,
    )
    DrainingServer(config, admission, settings.drain_seconds).run()
    return 0


__all__ = ["register"]
