"""Where the log lines of requests and job messages go: stdout, one line each.

By default a line is written on the caller's thread: inside Lambda an invocation's lines must be out
before it returns (the environment is frozen after). `serve` and the queue worker call `write_behind`
first: lines are then queued and written by a thread of their own, so no request waits on stdout (a
slow pipe, a full log buffer); what is queued at exit is written before the process ends.

COSYVOICE_LOG_FORMAT says the shape: `json`, one object a line; `text`, `key=value` pairs, for people.
"""

from __future__ import annotations

import atexit
import json
import queue
import sys
import threading
from collections.abc import Mapping
from typing import Any

_queue: queue.SimpleQueue[str | None] | None = None


def json_line(fields: Mapping[str, Any]) -> str:
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def text_line(fields: Mapping[str, Any]) -> str:
    """`event key=value ...`, the fields that have a value; values with spaces quoted as JSON strings."""
    pairs = []
    for name, value in fields.items():
        if value is None or name == "event":
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        pairs.append(f"{name}={json.dumps(shown, ensure_ascii=False) if ' ' in shown else shown}")
    return " ".join([str(fields.get("event", "")), *pairs])


def write(line: str) -> None:
    """One line to stdout: now, or by the writer thread after `write_behind`."""
    if _queue is not None:
        _queue.put(line)
    else:
        print(line, flush=True)


def write_behind() -> None:
    """From now on lines are written by a thread of their own (see the module docstring)."""
    global _queue
    if _queue is not None:
        return
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def writer() -> None:
        while (line := lines.get()) is not None:
            sys.stdout.write(line + "\n")
            if lines.empty():
                sys.stdout.flush()
        sys.stdout.flush()

    thread = threading.Thread(target=writer, name="cosyvoice-log-lines", daemon=True)
    thread.start()

    def drain() -> None:
        lines.put(None)
        thread.join(timeout=5)

    atexit.register(drain)
    _queue = lines


__all__ = ["json_line", "text_line", "write", "write_behind"]
