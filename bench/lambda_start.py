"""`python -m bench lambda`: what a Lambda caller waits for; ours through the real runtime and handler.

Ours runs `function.local.invoke.measure`: awslambdaric against a local Runtime API, importing
function.awslambda.handler as Lambda does, in three ways:
  cold start  a fresh runtime process: INIT (load + warm-up) → the first response
  restore     the SnapStart stand-in: INIT, before-snapshot hooks (warm-up), then fork() plays the
              restore: after-restore hooks → the first response
  warm call   the next request in an initialised environment (one per round, as upstream's)
Upstream has no handler: bench.child's lambda mode does the same steps in one process, with upstream's
load + warm-up as INIT and one synthesis as the request. Everything runs one intra-op thread, as forked
clones need.
"""

from __future__ import annotations

import json
from typing import Any

from bench.config import BenchConfig
from bench.tables import Table, median, ratio, seconds

THREADS = 1


def ours(config: BenchConfig, workload: dict[str, Any]) -> dict[str, float]:
    """Seconds for each path, from function.local.invoke's milliseconds."""
    from function.local.invoke import measure

    event = {"text": workload["first"]["text"], "speaker": workload["speaker"], "seed": workload["seed"]}
    ms = measure(json.dumps(event).encode(), {"COSYVOICE_ARTIFACT": str(config.artifact)}, warm_calls=1)
    return {
        "cold": (ms["cold_init_ms"] + ms["cold_first_response_ms"]) / 1000,
        "restore": (ms["restore_ms"] + ms["restored_first_response_ms"]) / 1000,
        "warm": ms["warm_call_ms"] / 1000,
    }


def upstream(config: BenchConfig) -> dict[str, float]:
    child = config.child("upstream", "lambda", None, threads=THREADS)
    return {
        # INIT, then the first response; the restore clone ran in between and is not counted.
        "cold": child.since_spawn("init") + child.phases["first_response"],
        "restore": child.data["restore"]["fork_to_response"],
        "warm": child.phases["warm_call"],
    }


def run(config: BenchConfig) -> tuple[dict[str, Any], list[Table]]:
    workload = config.workload()
    runs: dict[str, list[dict[str, float]]] = {"upstream": [], "ours": []}
    for index in range(config.lambda_runs):
        runs["upstream"].append(upstream(config))
        runs["ours"].append(ours(config, workload))
        print(
            f"lambda run {index + 1}/{config.lambda_runs}:"
            f" ours {runs['ours'][-1]}, upstream {runs['upstream'][-1]}",
            flush=True,
        )
    result = Table(
        f"Lambda-shaped start ({_rounds(config.lambda_runs)};"
        " ours through awslambdaric + function.awslambda.handler)",
        ("path to the first response", "ours", "upstream", "upstream / ours"),
    )
    for key, label in (
        ("cold", "cold start: process start → response"),
        ("restore", "restore stand-in: fork → response"),
        ("warm", "warm call"),
    ):
        ours_value = median([run[key] for run in runs["ours"]])
        upstream_value = median([run[key] for run in runs["upstream"]])
        result.add(label, seconds(ours_value), seconds(upstream_value), ratio(upstream_value, ours_value))
    result.notes.append(
        f"request: {workload['first']['text']!r}, SFT speaker, wav; one intra-op thread everywhere"
    )
    return {"runs": runs}, [result]


def _rounds(count: int) -> str:
    return "one round" if count == 1 else f"median of {count} rounds"


__all__ = ["run"]
