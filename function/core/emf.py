"""CloudWatch's embedded metric format (EMF): a JSON log line that CloudWatch Logs also reads as metrics.

Lambda ships a function's stdout to CloudWatch Logs, so a line in this shape becomes metrics without an
agent, an API call or any I/O beyond the log line itself. Every EMF document of the process is made here:
the startup record (function.instance.startup) and each request's and job message's (function.observe).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

# The units CloudWatch takes that these documents use.
MILLISECONDS, SECONDS, COUNT, NONE = "Milliseconds", "Seconds", "Count", "None"


def emf_document(
    namespace: str,
    dimensions: Mapping[str, str],
    metrics: Mapping[str, tuple[float, str]],
    properties: Mapping[str, Any] | None = None,
    rollup: bool = False,
) -> dict[str, Any]:
    """One EMF document: `metrics` (name → (value, unit)) in `namespace` under the dimension set
    `dimensions`, and with `rollup` under no dimension too (the total an alarm reads without adding up
    every dimension's), beside `properties` (searchable in Logs Insights, not metrics)."""
    names: Sequence[str] = list(dimensions)
    return {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [names, []] if rollup else [names],
                    "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in metrics.items()],
                }
            ],
        },
        **(properties or {}),
        **dimensions,
        **{name: value for name, (value, _) in metrics.items()},
    }


__all__ = ["COUNT", "MILLISECONDS", "NONE", "SECONDS", "emf_document"]
