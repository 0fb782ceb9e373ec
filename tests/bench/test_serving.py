"""bench.serving.stop: a server that does not exit after SIGTERM is killed and reported, never waited on
for ever."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import serving

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(600)"
)


def test_a_server_that_ignores_sigterm_is_killed_and_reported() -> None:
    server = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE)
    assert server.stdout is not None
    server.stdout.readline()  # the handler is in place
    with pytest.raises(RuntimeError, match="did not exit within 0.5 s of SIGTERM"):
        serving.stop(server, seconds=0.5)
    assert server.returncode == -9  # SIGKILL


def test_a_server_that_exits_on_sigterm_stops_quietly() -> None:
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    serving.stop(server, seconds=30)
    assert server.returncode == -15  # SIGTERM
