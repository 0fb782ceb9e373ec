"""`python -m bench memory`: total PSS of 1, 2 and 4 workers on one model, both sides.

Separate processes: each loads the model itself and answers one request, then stays resident while the
PSS of all live workers is summed (workers are added to the same group: 1, then 2, then 4).
Fork after INIT: one process loads and answers once, then forks the workers (a preloading server; the
Lambda snapshot is the same idea); the parent is counted too. Every worker runs one intra-op thread:
onnxruntime's and torch's thread pools do not survive fork(), and 4 workers share 2 cores anyway.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.config import ROOT, BenchConfig
from bench.procs import read_memory, total_pss
from bench.tables import Table, mib, plain, ratio

COUNTS = (1, 2, 4)
SIDES = ("upstream", "ours")


def available_memory() -> int:
    line = next(
        line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemAvailable")
    )
    return int(line.split()[1]) * 1024


def separate(config: BenchConfig, side: str) -> dict[str, Any]:
    """Start workers one group at a time; sum their PSS at 1, 2 and 4 live workers."""
    workers: list[subprocess.Popen[str]] = []
    totals: dict[str, int] = {}
    notes: list[str] = []
    try:
        for count in COUNTS:
            needed = count - len(workers)
            peak = max((read_memory(w.pid).peak_rss for w in workers), default=0)
            if peak and needed * peak > 0.8 * available_memory():
                notes.append(
                    f"{side}: {count} separate workers skipped ({mib(needed * peak)} more would not fit)"
                )
                break
            for index in range(needed):
                command = [
                    sys.executable,
                    "-m",
                    "bench.child",
                    side,
                    "worker",
                    "--source",
                    str(config.source(side)),
                    "--workload",
                    str(config.workload_path),
                    "--threads",
                    "1",
                    "--result",
                    str(config.results / f".{side}-worker-{len(workers) + index}.json"),
                ]
                workers.append(
                    subprocess.Popen(
                        command,
                        cwd=ROOT,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        text=True,
                    )
                )
            for worker in workers[-needed:]:
                _wait_ready(worker, side)
            totals[str(count)] = total_pss(w.pid for w in workers)
            print(f"memory {side} separate x{count}: {mib(totals[str(count)])}", flush=True)
    finally:
        for worker in workers:
            worker.communicate(timeout=60)  # closing stdin releases the worker
    return {"total_pss": totals, "notes": notes}


def _wait_ready(worker: subprocess.Popen[str], side: str) -> None:
    assert worker.stdout is not None
    for line in worker.stdout:  # libraries may print first; the worker's last word is "ready"
        if line.strip() == "ready":
            return
    raise RuntimeError(f"{side} worker {worker.pid} exited before it was ready")


def forked(config: BenchConfig, side: str) -> dict[str, Any]:
    groups = config.child(side, "forks", None, "--workers", ",".join(map(str, COUNTS)), threads=1).data[
        "groups"
    ]
    for count, group in groups.items():
        print(f"memory {side} fork x{count}: {mib(group['total_pss'])}", flush=True)
    return {
        "total_pss": {count: group["total_pss"] for count, group in groups.items()},
        "fork_to_response": {
            count: [w["fork_to_response"] for w in group["workers"]] for count, group in groups.items()
        },
    }


def run(config: BenchConfig) -> tuple[dict[str, Any], list[Table]]:
    config.workload()
    data: dict[str, Any] = {"separate": {}, "fork": {}}
    for side in SIDES:
        data["separate"][side] = separate(config, side)
        data["fork"][side] = forked(config, side)
    return data, [table(data)]


def table(data: dict[str, Any]) -> Table:
    result = Table(
        "Memory: total PSS of N workers on one model (after one request each)",
        ("workers", "ours", "upstream", "upstream / ours", "ours vs 1", "upstream vs 1"),
    )
    for layout in ("separate", "fork"):
        ours, upstream = data[layout]["ours"]["total_pss"], data[layout]["upstream"]["total_pss"]
        one_ours = data["separate"]["ours"]["total_pss"].get("1")
        one_upstream = data["separate"]["upstream"]["total_pss"].get("1")
        for count in COUNTS:
            key = str(count)
            label = f"{count} {'separate process' if layout == 'separate' else 'forked after INIT'}"
            result.add(
                label + ("es" if layout == "separate" and count > 1 else ""),
                mib(ours.get(key)),
                mib(upstream.get(key)),
                ratio(upstream.get(key), ours.get(key)),
                _times(ours.get(key), one_ours),
                _times(upstream.get(key), one_upstream),
            )
        result.notes += data[layout]["ours"].get("notes", []) + data[layout]["upstream"].get("notes", [])
    result.notes.append(
        "'vs 1' = total PSS ÷ one separate worker's PSS; forked groups include their parent;"
        " one intra-op thread per worker"
    )
    return result


def _times(value: int | None, one: int | None) -> str:
    return "–" if value is None or not one else f"{plain(value / one)}×"


__all__ = ["run"]
