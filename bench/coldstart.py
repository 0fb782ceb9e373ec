"""`python -m bench coldstart`: process start → ready → first response, fresh processes, both sides.

Runs alternate upstream and ours so machine drift hits both alike. Warm = the model files in the page
cache (read once beforehand); cold = those files evicted with posix_fadvise(DONTNEED) before each run
(Python, torch and onnxruntime libraries stay cached: only the model's bytes are cold). A third warm run
per round holds our artifact in memory, as the zip/SnapStart variant does once INIT has read it from S3
(its "load" is then the read from the page cache, standing in for the download).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config import BenchConfig
from bench.procs import drop_page_cache, resident_fraction
from bench.tables import Table, median, mib, minimum, ratio, seconds

SIDES = ("upstream", "ours")
# (row label, how to get seconds from one run's phases), in the seed's phase-table order.
PHASES: tuple[tuple[str, str], ...] = (
    ("interpreter + imports", "imports"),
    ("artifact / model load", "load"),
    ("session creation", "sessions"),
    ("ready (process start → loaded)", "ready"),
    ("warm-up", "warm_up"),
    ("first chunk (after warm-up)", "first_chunk"),
    ("first response (after warm-up)", "first_response"),
    ("process start → first response", "total"),
)


def model_files(directory: Path) -> list[Path]:
    return sorted(path for path in directory.iterdir() if path.is_file())


def prime(files: list[Path]) -> None:
    """Read files once so they are in the page cache."""
    for path in files:
        with path.open("rb") as handle:
            while handle.read(16 * 1024 * 1024):
                pass


def summarize_run(result: Any) -> dict[str, Any]:
    """Seconds per phase and bytes of memory for one run; phases a run stopped before are None."""
    phases = result.phases
    clock = result.data["clock"]
    responded = "response" in phases
    return {
        "imports": phases["interpreter"] + phases["imports"],
        "load": phases["load"],
        "sessions": phases["sessions"],
        "ready": result.since_spawn("sessions"),
        "warm_up": phases["warm_up"] if responded else None,
        "first_chunk": phases["first_chunk"] if responded else None,
        "first_response": phases["first_chunk"] + phases["response"] if responded else None,
        "total": result.since_spawn("response") if responded else None,
        "peak_rss": clock["final"]["peak_rss"],
        "ready_anonymous": clock["memory"]["sessions"]["anonymous"],
        "ready_file_backed": clock["memory"]["sessions"]["file_backed"],
        "final_anonymous": clock["final"]["anonymous"],
        "final_file_backed": clock["final"]["file_backed"],
        "audio_seconds": result.data.get("audio_seconds"),
    }


def run(config: BenchConfig) -> tuple[dict[str, Any], list[Table]]:
    config.workload()
    files = {side: model_files(config.source(side)) for side in SIDES}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        cache: {side: [] for side in SIDES} for cache in ("warm", "cold")
    }
    in_memory: list[dict[str, Any]] = []
    for cache in ("warm", "cold"):
        if cache == "warm":
            prime(files["upstream"] + files["ours"])
        for index in range(config.runs):
            for side in SIDES:
                resident = None
                if cache == "cold":
                    for path in files[side]:
                        drop_page_cache(path)
                    resident = max(resident_fraction(path) for path in files[side])
                # Cold runs stop at ready: the page cache matters for loading; after that both are warm.
                extra = ("--until-ready",) if cache == "cold" else ()
                summary = summarize_run(config.child(side, "coldstart", None, *extra))
                summary["resident_before"] = resident
                runs[cache][side].append(summary)
                _report(f"{cache} {side}", index, config.runs, summary)
            if cache == "warm":
                in_memory.append(summarize_run(config.child("ours", "coldstart", None, "--in-memory")))
                _report("warm ours, artifact in memory,", index, config.runs, in_memory[-1])
    tables = [
        table(
            runs[cache],
            f"page cache {cache} (median of {config.runs} fresh processes; min in brackets)",
            evicted=cache == "cold",
        )
        for cache in ("warm", "cold")
    ]
    tables.append(
        table(
            {"ours": in_memory, "upstream": runs["warm"]["upstream"]},
            "ours with the artifact read into memory (the zip/SnapStart variant), page cache warm"
            f" (median of {config.runs}; min in brackets)",
        )
    )
    return {"runs": runs, "in_memory": in_memory}, tables


def _report(what: str, index: int, count: int, summary: dict[str, Any]) -> None:
    print(
        f"coldstart {what} run {index + 1}/{count}:"
        f" ready {seconds(summary['ready'])}, first response {seconds(summary['total'])}",
        flush=True,
    )


def table(runs: dict[str, list[dict[str, Any]]], title: str, evicted: bool = False) -> Table:
    result = Table(f"Cold start, {title}", ("phase", "ours", "upstream", "upstream / ours"))

    def cell(side: str, key: str, fmt: Any) -> tuple[str, float | None]:
        values = [run[key] for run in runs[side] if run[key] is not None]
        middle = median(values)
        return f"{fmt(middle)} ({fmt(minimum(values))})", middle

    for label, key in PHASES:
        ours, ours_value = cell("ours", key, seconds)
        upstream, upstream_value = cell("upstream", key, seconds)
        result.add(label, ours, upstream, ratio(upstream_value, ours_value))
    for label, key in (
        ("peak RSS", "peak_rss"),
        ("anonymous at ready", "ready_anonymous"),
        ("file-backed at ready", "ready_file_backed"),
        ("anonymous at the end", "final_anonymous"),
        ("file-backed at the end", "final_file_backed"),
    ):
        ours, ours_value = cell("ours", key, mib)
        upstream, upstream_value = cell("upstream", key, mib)
        result.add(label, ours, upstream, ratio(upstream_value, ours_value))
    audio = runs["ours"][0]["audio_seconds"] if runs["ours"] else None
    if audio is not None:
        result.notes.append(
            f"first response: {audio:.2f} s of audio, streamed; both sides first warm up with the same text"
        )
    else:
        result.notes.append("cold runs stop at ready: after loading, the page cache no longer differs")
    if evicted:
        worst = max((run["resident_before"] or 0.0 for side in runs.values() for run in side), default=0.0)
        result.notes.append(f"cold: model files evicted before each run (at most {worst:.0%} still resident)")
    return result


__all__ = ["run"]
