"""`python -m bench coldstart|speed|memory|lambda|report|all`: each prints its tables and writes JSON."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.config import FULL, BenchConfig
from bench.tables import seconds
from bench.workload import TEXTS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("command", choices=("coldstart", "speed", "memory", "lambda", "report", "all"))
    parser.add_argument(
        "--model", type=Path, default=FULL / "model", help="model directory (upstream's input)"
    )
    parser.add_argument("--artifact", type=Path, default=FULL / "artifact", help="our fp32 artifact")
    parser.add_argument("--artifact-int8", type=Path, default=None, help="default: ARTIFACT-int8")
    parser.add_argument("--artifact-int4", type=Path, default=None, help="default: ARTIFACT-int4")
    parser.add_argument("--results", type=Path, default=BenchConfig().results)
    parser.add_argument(
        "--runs", type=int, default=3, help="fresh processes per side and page-cache state (coldstart)"
    )
    parser.add_argument(
        "--lambda-runs", type=int, default=1, help="rounds of the lambda command (each ~2 min)"
    )
    parser.add_argument("--speed-runs", type=int, default=1, help="runs per text in the speed command")
    parser.add_argument("--texts", default=",".join(TEXTS), help=f"speed texts, from {', '.join(TEXTS)}")
    parser.add_argument(
        "--threads", type=int, default=None, help="intra-op threads (default: CPUs available)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = BenchConfig(
        model_dir=args.model,
        artifacts={
            "fp32": args.artifact,
            "int8": args.artifact_int8 or args.artifact.with_name(args.artifact.name + "-int8"),
            "int4": args.artifact_int4 or args.artifact.with_name(args.artifact.name + "-int4"),
        },
        results=args.results,
        runs=args.runs,
        lambda_runs=args.lambda_runs,
        threads=args.threads,
    )
    commands = (
        ("coldstart", "speed", "memory", "lambda", "report") if args.command == "all" else (args.command,)
    )
    for command in commands:
        if command == "report":
            from bench import report

            print(f"wrote {report.run(config.results)}")
            continue
        if (
            not (config.model_dir / "cosyvoice.yaml").exists()
            or not (config.artifact / "manifest.json").exists()
        ):
            print(
                f"bench: need a model directory {config.model_dir} and its artifact {config.artifact}"
                " (make bench builds both)",
                file=sys.stderr,
            )
            return 2
        started = time.monotonic()
        data, tables = _run(command, config, args)
        for table in tables:
            print(table.render())
        took = seconds(time.monotonic() - started)
        print(f"wrote {config.save(command, data, tables)} ({command} took {took})\n", flush=True)
    return 0


def _run(command: str, config: BenchConfig, args: argparse.Namespace) -> tuple[dict, list]:
    if command == "coldstart":
        from bench import coldstart

        return coldstart.run(config)
    if command == "speed":
        from dataclasses import replace

        from bench import speed

        return speed.run(replace(config, runs=args.speed_runs), tuple(args.texts.split(",")))
    if command == "memory":
        from bench import memory

        return memory.run(config)
    from bench import lambda_start

    return lambda_start.run(config)


if __name__ == "__main__":
    sys.exit(main())
