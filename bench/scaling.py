"""`python -m bench scaling`: how the engine's speed grows with the CPUs it gets, one count at a time.

For each thread count from 1 to the CPUs this process may use, one fresh process loads the artifact with
that many threads (split between the stages by function.cosyvoice.threads, named in the table), warms up,
then synthesises one text whole and once streamed: RTF whole and streamed, the first streamed chunk, and
the whole RTF's speed-up over one thread. A run on a machine with more CPUs fills in the columns a
2-vCPU host cannot measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import workload as workloads
from bench.config import BenchConfig
from bench.tables import Table, plain, seconds
from function.cosyvoice.threads import ThreadSplit

TEXT = "ten_seconds"


def thread_counts(up_to: int, cpus: int) -> range:
    """1..up_to; ValueError unless 1 <= up_to <= cpus (more threads than CPUs would measure the host's
    scheduler, not the engine)."""
    if not 1 <= up_to <= cpus:
        raise ValueError(f"--up-to must be from 1 to the {cpus} CPU(s) this process may use, got {up_to}")
    return range(1, up_to + 1)


def rtf(run: dict[str, Any]) -> float | None:
    """Seconds of synthesis per second of audio; None for a run without audio."""
    return run["wall"] / run["audio_seconds"] if run["audio_seconds"] > 0 else None


def speed_up(whole_rtf: float | None, one_thread_rtf: float | None) -> float | None:
    """How many times faster than on one thread (> 1: faster)."""
    if whole_rtf is None or one_thread_rtf is None or whole_rtf <= 0:
        return None
    return one_thread_rtf / whole_rtf


def table(results: dict[int, dict[str, Any]], artifact: str, text: str) -> Table:
    """One row per thread count, from each child's {"whole": run, "streamed": run + first_chunk}."""
    result = Table(
        f"Scaling with threads: {artifact}, {text} (one run per count, a fresh process each)",
        ("threads", "split", "RTF whole", "RTF streamed", "first chunk", "whole: speed-up vs 1 thread"),
    )
    one = rtf(results[1]["whole"]) if 1 in results else None
    for count, data in sorted(results.items()):
        whole = rtf(data["whole"])
        result.add(
            str(count),
            ThreadSplit.for_cpus(count).describe(),
            plain(whole),
            plain(rtf(data["streamed"])),
            seconds(data["streamed"]["first_chunk"]),
            _times(speed_up(whole, one)),
        )
    result.notes.append(
        "split: intra-op threads of the LLM's decode step and of each estimator call (its two guidance rows"
        " side by side), the other sessions taking every thread (function.cosyvoice.threads); RTF: compute"
        " seconds per audio second (lower is faster); streamed: request to last chunk"
    )
    return result


def run(config: BenchConfig, artifact: Path, counts: range, text: str = TEXT) -> tuple[dict, list[Table]]:
    workloads.write(artifact, config.workload_path)
    results: dict[int, dict[str, Any]] = {}
    for count in counts:
        child = config.child("ours", "scaling", artifact, "--stream-text", text, threads=count)
        results[count] = child.data
        print(f"scaling: {count} thread(s) done", flush=True)
    data = {"artifact": str(artifact), "text": text, "threads": {str(n): r for n, r in results.items()}}
    return data, [table(results, artifact.name, text)]


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


__all__ = ["TEXT", "rtf", "run", "speed_up", "table", "thread_counts"]
