"""`serve` as the load and soak benches run it: a checkout's function/ on a loopback port, in a process of
its own, with only the settings the bench gives it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from function.instance.settings import DEFAULT_DRAIN_SECONDS

EXIT_MARGIN_SECONDS = 30  # past the server's drain: the interpreter's own exit


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(code: Path, artifact: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COSYVOICE_")}
    environ |= {"PYTHONPATH": str(code), **env}
    if "COSYVOICE_WHISPER_ASSETS" in os.environ:
        environ["COSYVOICE_WHISPER_ASSETS"] = os.environ["COSYVOICE_WHISPER_ASSETS"]
    command = [sys.executable, "-m", "function", "serve", "--artifacts", str(artifact), "--port", str(port)]
    return subprocess.Popen(
        [*command, "--log-level", "warning"],
        cwd=code,
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_ready(server: subprocess.Popen[bytes], url: str) -> None:
    """Until /readyz answers 200; RuntimeError if the server exits first. One client asks every time:
    each new one would load the CA bundle again."""
    with httpx.Client(timeout=5) as client:
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with {server.returncode}")
            try:
                if client.get(f"{url}/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)


def stop(
    server: subprocess.Popen[bytes], seconds: float = DEFAULT_DRAIN_SECONDS + EXIT_MARGIN_SECONDS
) -> None:
    """SIGTERM, then up to `seconds` for the drain and the exit. A server still running after that is
    killed and reported, so a shutdown that hangs fails the bench instead of hanging it."""
    server.terminate()
    try:
        server.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        raise RuntimeError(f"the server did not exit within {seconds:g} s of SIGTERM") from None


__all__ = ["free_port", "start", "stop", "wait_ready"]
