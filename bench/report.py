"""`python -m bench report`: the seed-style phase table, every command's tables, and a PNG bar chart.

Reads the JSON the other commands wrote under bench/results/ and writes summary.md and phases.png there
(the two committed results; the raw JSON stays local).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.tables import Table, median, ratio, seconds

COMMANDS = ("coldstart", "speed", "memory", "lambda")
# Seed-style phases: (label, keys of a coldstart run summed), in the order they happen.
SEED_PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("environment init (interpreter + imports)", ("imports",)),
    ("model load (files + sessions)", ("load", "sessions")),
    ("warm-up", ("warm_up",)),
    ("service ready (process start → warmed up)", ("imports", "load", "sessions", "warm_up")),
    ("first response after ready", ("first_response",)),
)
CHART_PHASES = (
    ("imports", "interpreter + imports"),
    ("load", "model load"),
    ("sessions", "sessions"),
    ("warm_up", "warm-up"),
    ("first_response", "first response"),
)


def load_results(directory: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for command in COMMANDS:
        path = directory / f"{command}.json"
        if path.exists():
            found[command] = json.loads(path.read_text())
    return found


def phase_medians(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> float | None:
    return median([sum(run[key] for key in keys) for run in runs])


def seed_table(coldstart: dict[str, Any], cache: str = "warm") -> Table:
    runs = coldstart["data"]["runs"][cache]
    result = Table(
        f"Start-up phases, page cache {cache} (median of {len(runs['ours'])} fresh processes)",
        ("phase", "upstream (PyTorch)", "ours (onnxruntime)", "upstream / ours"),
    )
    for label, keys in SEED_PHASES:
        upstream, ours = phase_medians(runs["upstream"], keys), phase_medians(runs["ours"], keys)
        result.add(label, seconds(upstream), seconds(ours), ratio(upstream, ours))
    return result


def chart(coldstart: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = (("upstream", "upstream (PyTorch)"), ("ours", "ours (onnxruntime)"))
    figure, axes = plt.subplots(figsize=(9, 3.2))
    for row, (side, _) in enumerate(sides):
        runs = coldstart["data"]["runs"]["warm"][side]
        left = 0.0
        for index, (key, label) in enumerate(CHART_PHASES):
            width = phase_medians(runs, (key,)) or 0.0
            axes.barh(row, width, left=left, color=f"C{index}", label=label if row == 0 else None)
            left += width
        axes.text(left, row, f"  {left:.2f} s", va="center")
    axes.set_yticks(range(len(sides)), [label for _, label in sides])
    axes.invert_yaxis()
    axes.set_xlabel("seconds from process start (median, page cache warm)")
    axes.set_title("Cold start to first response, CosyVoice-300M, same machine and weights")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), fontsize="small", ncols=len(CHART_PHASES))
    axes.margins(x=0.12)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def render(directory: Path) -> str:
    results = load_results(directory)
    if not results:
        raise FileNotFoundError(
            f"no results under {directory}: run `python -m bench coldstart` (or `make bench`)"
        )
    parts = ["# Benchmarks: ours vs upstream PyTorch, same machine, same random full-size weights", ""]
    machine = next(iter(results.values()))["machine"]
    parts.append(
        f"Machine: {machine['cpu']}, {machine['cpus']} CPUs, {machine['memory_bytes'] / 2**30:.0f} GiB;"
        f" Python {machine['python']}, torch {machine['torch']}, onnxruntime {machine['onnxruntime']}."
    )
    parts.append("")
    if "coldstart" in results:
        parts.append(seed_table(results["coldstart"]).render())
        chart(results["coldstart"], directory / "phases.png")
        parts.append("![start-up phases](phases.png)\n")
    for result in results.values():
        parts.append(f"## `{result['command']}` ({result['finished']})\n")
        for data in result["tables"]:
            table = Table(data["title"], data["headers"], data["rows"], data["notes"])
            parts.append(table.render())
    return "\n".join(parts)


def run(directory: Path) -> Path:
    path = directory / "summary.md"
    path.write_text(render(directory))
    return path


__all__ = ["render", "run", "seed_table"]
