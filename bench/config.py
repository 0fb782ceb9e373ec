"""Where the benchmarks find their inputs and put their results, and how they start child processes."""

from __future__ import annotations

import datetime
import os
import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import workload as workloads
from bench.procs import ChildResult, read_memory, run_child, write_json
from bench.tables import Table

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / ".cache" / "full"


@dataclass(frozen=True)
class BenchConfig:
    model_dir: Path = FULL / "model"
    artifacts: dict[str, Path] = field(
        default_factory=lambda: {
            "fp32": FULL / "artifact",
            "int8": FULL / "artifact-int8",
            "int4": FULL / "artifact-int4",
        }
    )
    results: Path = ROOT / "bench" / "results"
    runs: int = 3
    lambda_runs: int = 1  # each is two fresh runtimes per side; one round keeps `make bench` in budget
    threads: int | None = None
    timeout: float = 1200.0

    @property
    def artifact(self) -> Path:
        return self.artifacts["fp32"]

    @property
    def workload_path(self) -> Path:
        return self.results / "workload.json"

    def workload(self) -> dict[str, Any]:
        return workloads.write(self.artifact, self.workload_path)

    def source(self, side: str) -> Path:
        return self.model_dir if side == "upstream" else self.artifact

    def child(
        self,
        side: str,
        mode: str,
        source: Path | None = None,
        *extra: str,
        threads: int | None = None,
        env: dict[str, str] | None = None,
    ) -> ChildResult:
        threads = threads or self.threads
        args = [
            side,
            mode,
            "--source",
            str(source or self.source(side)),
            "--workload",
            str(self.workload_path),
            *(["--threads", str(threads)] if threads else []),
            *extra,
        ]
        return run_child(
            "bench.child",
            args,
            self.results / f".{side}-{mode}.json",
            self.timeout,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), **(env or {})},
        )

    def save(self, command: str, data: dict[str, Any], tables: list[Table]) -> Path:
        path = self.results / f"{command}.json"
        write_json(
            path,
            {
                "command": f"python -m bench {command}",
                "machine": machine(),
                "finished": datetime.datetime.now().isoformat(timespec="seconds"),
                "tables": [table.to_dict() for table in tables],
                "data": data,
            },
        )
        return path


def machine() -> dict[str, Any]:
    """Enough to tell which machine and software produced a result."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {
        "cpu": cpu,
        "cpus": len(os.sched_getaffinity(0)),
        "memory_bytes": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "torch": version("torch"),
        "onnxruntime": version("onnxruntime"),
        "load_average": os.getloadavg(),
        "parent_rss": read_memory().rss,
    }


__all__ = ["BenchConfig", "machine"]
