"""The bench's commands, registered the way function.cli.base registers every package's commands.

    coldstart | speed | memory | lambda   measure, print tables, write results/<command>.json
    chunks                                the first streamed chunk's size, chunk by chunk (ours only)
    fanout                                one long job on one queue worker vs several (moto S3/SQS)
    scaling                               RTF and first chunk at each thread count up to the CPUs (ours)
    decode-batch                          the LLM's decode step at one row and at several (ours only)
    load                                  health probes while `serve` is saturated (loopback)
    soak                                  minutes of mixed traffic against `serve`: RSS, statuses, probes
    dropped-streams                       `serve` under clients that hang up mid-stream: never wedged
    voices                                a saved voice vs the recording inline: request bytes, first audio
    observe                               the request path's time with metrics on vs off, in one run
    report                                figures and summary.md from the results written so far
    all                                   the four measurements, then the report (what `make bench` runs)
    verify                                full-size parity against upstream (see bench.verify)

Each command imports its measurement module when it runs, so `--help` needs neither torch nor the model.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from bench.chunks import FIRST_SIZES
from bench.config import FULL, ROOT, BenchConfig
from bench.tables import Table, seconds
from bench.workload import TEXTS
from function.cli.base import fail

MEASUREMENTS = ("coldstart", "speed", "memory", "lambda")


def _source_options(parser: argparse.ArgumentParser) -> None:
    """The model directory and our artifact from it (the `--artifacts` name is every package's)."""
    parser.add_argument(
        "--model", type=Path, default=FULL / "model", help="model directory (upstream's input)"
    )
    parser.add_argument("--artifacts", type=Path, default=FULL / "artifact", help="our fp32 artifact")
    parser.add_argument("--results", type=Path, default=BenchConfig().results)


def register(commands: argparse._SubParsersAction) -> None:
    shared = argparse.ArgumentParser(add_help=False)
    _source_options(shared)
    shared.add_argument("--artifacts-int8", type=Path, default=None, help="default: ARTIFACTS-int8")
    shared.add_argument("--artifacts-int4", type=Path, default=None, help="default: ARTIFACTS-int4")
    shared.add_argument(
        "--runs", type=int, default=3, help="fresh processes per side and page-cache state (coldstart)"
    )
    shared.add_argument(
        "--lambda-runs", type=int, default=1, help="rounds of the lambda command (each ~2 min)"
    )
    shared.add_argument("--speed-runs", type=int, default=1, help="runs per text in the speed command")
    shared.add_argument("--texts", default=",".join(TEXTS), help=f"speed texts, from {', '.join(TEXTS)}")
    shared.add_argument(
        "--threads", type=int, default=None, help="intra-op threads (default: CPUs available)"
    )
    helps = {
        "coldstart": "process start → model ready, and session creation",
        "speed": "LLM per token, stages and real-time factor",
        "memory": "resident memory, one worker and several",
        "lambda": "the Lambda path through the real runtime client",
        "all": "every measurement, then the report",
    }
    for name, text in helps.items():
        commands.add_parser(name, parents=[shared], help=text).set_defaults(run=measure)
    load = commands.add_parser("load", help="health probes while `serve` is saturated (loopback)")
    load.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="any artifact")
    load.add_argument("--code", type=Path, default=ROOT, help="the checkout whose function/ serves")
    load.add_argument(
        "--set",
        action="append",
        default=["COSYVOICE_THREADS=1", "COSYVOICE_MAX_CONCURRENT=1", "COSYVOICE_MAX_QUEUED=2"],
        metavar="NAME=VALUE",
        help="server settings (default: one one-thread slot and two queue places)",
    )
    load.set_defaults(run=probe_under_load)
    chunks = commands.add_parser("chunks", help="streamed chunk sizes, chunk by chunk (ours only)")
    chunks.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="our artifact")
    chunks.add_argument(
        "--sizes",
        default=",".join(map(str, FIRST_SIZES)),
        help="first-chunk sizes, tokens (later: the engine's)",
    )
    chunks.add_argument(
        "--schedules", default="", help="whole schedules instead, e.g. '10,50,100;10,40,60,80,120,160'"
    )
    chunks.add_argument("--runs", type=int, default=3, help="streamed runs per schedule, alternating them")
    chunks.add_argument("--threads", type=int, default=None, help="intra-op threads (default: CPUs)")
    chunks.set_defaults(run=first_chunk_sizes)
    scaling = commands.add_parser("scaling", help="RTF and first chunk at 1..CPUs threads (ours only)")
    scaling.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="our artifact")
    scaling.add_argument("--up-to", type=int, default=None, help="most threads (default: every CPU)")
    scaling.add_argument("--text", choices=list(TEXTS), default="ten_seconds", help="what to synthesise")
    scaling.add_argument("--results", type=Path, default=BenchConfig().results)
    scaling.set_defaults(run=threads_scaling)
    batch = commands.add_parser("decode-batch", help="the LLM's decode at one row and several (ours only)")
    batch.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="our artifact")
    batch.add_argument("--rows", default="1,4", help="row counts, comma-separated, the first the baseline")
    batch.add_argument("--threads", type=int, default=None, help="intra-op threads (default: CPUs)")
    batch.set_defaults(run=decode_rows, measure=_batch_decode)
    shared = commands.add_parser(
        "shared-decode", help="requests at once: each decoding alone or sharing rows"
    )
    shared.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="our artifact")
    shared.add_argument("--rows", default="1,2", help="row caps, comma-separated, the first the baseline")
    shared.add_argument("--requests", type=int, default=2, help="requests started together (default 2)")
    shared.add_argument("--threads", type=int, default=None, help="intra-op threads (default: CPUs)")
    shared.set_defaults(run=shared_decode_rows, measure=_shared_decode)
    long_text = commands.add_parser("long-text", help="~2,000 characters as one request, by decode rows")
    long_text.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="our artifact")
    long_text.add_argument(
        "--rows",
        default="1,4,replayed",
        help="row counts or 'replayed', comma-separated, the first the baseline",
    )
    long_text.add_argument("--threads", type=int, default=None, help="intra-op threads (default: CPUs)")
    long_text.set_defaults(run=long_text_rows)
    fanout = commands.add_parser("fanout", help="one long job on one queue worker vs several (moto)")
    fanout.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="our artifact")
    fanout.add_argument(
        "--workers", default="1,2", help="worker counts, comma-separated, the first the baseline"
    )
    fanout.add_argument("--parts", type=int, default=8, help="about how many parts the job is split into")
    fanout.add_argument("--threads", type=int, default=1, help="intra-op threads per worker (default 1)")
    fanout.add_argument("--results", type=Path, default=BenchConfig().results)
    fanout.add_argument(
        "--project",
        type=float,
        default=None,
        metavar="RTF",
        help="no runs: project the Lambda table from this measured s per audio s (bench speed's RTF)",
    )
    fanout.set_defaults(run=fan_out)
    soak = commands.add_parser("soak", help="minutes of mixed traffic against `serve` (loopback)")
    soak.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="any artifact")
    soak.add_argument("--code", type=Path, default=ROOT, help="the checkout whose function/ serves")
    soak.add_argument("--minutes", type=float, default=10.0, help="how long (default 10)")
    soak.add_argument("--clients", type=int, default=4, help="concurrent clients (default 4)")
    soak.set_defaults(run=soak_server)
    dropped = commands.add_parser(
        "dropped-streams", help="`serve` under clients that hang up mid-stream, then a request and SIGTERM"
    )
    dropped.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="any artifact")
    dropped.add_argument("--code", type=Path, default=ROOT, help="the checkout whose function/ serves")
    dropped.add_argument("--runs", type=int, default=5, help="fresh servers, one after another (default 5)")
    dropped.add_argument("--seconds", type=float, default=60.0, help="load per run (default 60)")
    dropped.add_argument("--clients", type=int, default=4, help="concurrent clients (default 4)")
    dropped.set_defaults(run=dropped_streams)
    voices = commands.add_parser("voices", help="a saved voice vs the recording inline: bytes, first audio")
    voices.add_argument("--artifacts", type=Path, default=FULL / "artifact-int8", help="any artifact")
    voices.add_argument("--code", type=Path, default=ROOT, help="the checkout whose function/ serves")
    voices.add_argument("--runs", type=int, default=5, help="requests each way per prompt (default 5)")
    voices.set_defaults(run=voice_library)
    observe = commands.add_parser("observe", help="the request path's time with metrics on vs off")
    observe.add_argument("--artifacts", type=Path, default=ROOT / "demo" / "artifact", help="any artifact")
    observe.add_argument("--rounds", type=int, default=20, help="requests each way (default 20)")
    observe.set_defaults(run=cost_of_measuring)
    report = commands.add_parser("report", help="figures and summary.md from the results")
    report.add_argument("--results", type=Path, default=BenchConfig().results)
    report.set_defaults(run=write_report)
    verify = commands.add_parser("verify", help="full-size parity of our artifact against upstream")
    _source_options(verify)
    # One thread each: the machine is shared, and parity does not depend on the thread count.
    verify.add_argument("--threads", type=int, default=1, help="torch and onnxruntime intra-op threads")
    verify.set_defaults(run=parity)


def write_report(args: argparse.Namespace) -> int:
    from bench import report

    print(f"wrote {report.run(args.results)}")
    return 0


def probe_under_load(args: argparse.Namespace) -> int:
    from bench import load

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make demo or make bench builds one)")
    settings = dict(item.split("=", 1) for item in args.set)
    print(load.run(args.code.resolve(), args.artifacts.resolve(), settings).render())
    return 0


def first_chunk_sizes(args: argparse.Namespace) -> int:
    from bench import chunks
    from function.cosyvoice.engine import CHUNK_TOKENS

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make bench builds one)")
    try:
        if args.schedules:
            schedules = _token_lists(args.schedules)
        else:
            (first_sizes,) = _token_lists(args.sizes)  # one list: a ';' here is an error too
            schedules = [(size, *CHUNK_TOKENS[1:]) for size in first_sizes]
    except ValueError:
        option, given = ("--schedules", args.schedules) if args.schedules else ("--sizes", args.sizes)
        return fail("bench", f"{option} must be positive token counts, comma-separated, got {given!r}")
    if args.runs < 1:
        return fail("bench", "--runs must be at least 1")
    print(chunks.run(args.artifacts, schedules, args.runs, args.threads).render())
    return 0


def threads_scaling(args: argparse.Namespace) -> int:
    from bench import scaling
    from function.cosyvoice.graphs import available_cpus

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make bench builds one)")
    cpus = available_cpus()
    try:
        counts = scaling.thread_counts(cpus if args.up_to is None else args.up_to, cpus)
    except ValueError as exc:
        return fail("bench", str(exc))
    config = BenchConfig(results=args.results)
    started = time.monotonic()
    data, tables = scaling.run(config, args.artifacts.resolve(), counts, args.text)
    for table in tables:
        print(table.render())
    took = seconds(time.monotonic() - started)
    print(f"wrote {config.save('scaling', data, tables)} (scaling took {took})", flush=True)
    return 0


def decode_rows(args: argparse.Namespace) -> int:
    """decode-batch and shared-decode: an artifact, row counts, and the measurement to run at each."""
    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make bench builds one)")
    try:
        (row_counts,) = _token_lists(args.rows)
    except ValueError:
        return fail("bench", f"--rows must be positive row counts, comma-separated, got {args.rows!r}")
    print(args.measure(args.artifacts.resolve(), row_counts, args).render())
    return 0


def _batch_decode(artifact: Path, row_counts: tuple[int, ...], args: argparse.Namespace) -> Table:
    from bench import batch_decode

    return batch_decode.run(artifact, row_counts, args.threads)


def shared_decode_rows(args: argparse.Namespace) -> int:
    """shared-decode: decode_rows, for at least one request."""
    if args.requests < 1:
        return fail("bench", f"--requests must be at least 1, got {args.requests}")
    return decode_rows(args)


def _shared_decode(artifact: Path, row_counts: tuple[int, ...], args: argparse.Namespace) -> Table:
    from bench import shared_decode

    return shared_decode.run(artifact, row_counts, args.requests, args.threads)


def long_text_rows(args: argparse.Namespace) -> int:
    from bench import long_text

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make bench builds one)")
    entries = args.rows.split(",")
    if not all(entry == long_text.REPLAYED or (entry.isdigit() and int(entry) >= 1) for entry in entries):
        return fail("bench", f"--rows must be row counts or {long_text.REPLAYED!r}, got {args.rows!r}")
    print(long_text.run(args.artifacts.resolve(), entries, args.threads).render())
    return 0


def _token_lists(text: str) -> list[tuple[int, ...]]:
    """'10,50;20,40' → [(10, 50), (20, 40)]; ValueError unless every entry is a positive integer."""
    lists = [tuple(int(size) for size in item.split(",")) for item in text.split(";")]
    if any(size < 1 for sizes in lists for size in sizes):
        raise ValueError(text)
    return lists


def fan_out(args: argparse.Namespace) -> int:
    import json

    from bench import fanout

    if args.project is not None:
        if args.project <= 0:
            return fail("bench", "--project must be a positive real-time factor")
        print(fanout.projection(args.project, f"{args.project:.2f} s per audio second, given").render())
        return 0
    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make bench builds one)")
    try:
        counts = [int(entry) for entry in args.workers.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or args.parts < 1 or args.threads < 1:
        return fail("bench", "--workers must be worker counts and --parts, --threads at least 1")
    table, results = fanout.run(args.artifacts.resolve(), counts, args.parts, args.threads)
    print(table.render())
    alone = results[0]
    basis = f"the {alone['workers']}-worker run's {args.threads} thread(s), parts and S3 included"
    print(fanout.projection(alone["wall_s"] / alone["audio_s"], basis).render())
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "fanout.json").write_text(json.dumps(results, indent=2) + "\n")
    if len({result["sha256"] for result in results}) != 1:
        return fail("bench", "the runs made different audio: the job's result depends on its workers")
    return 0


def soak_server(args: argparse.Namespace) -> int:
    from bench import soak

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make demo or make bench builds one)")
    if not 0 < args.minutes <= 24 * 60 or args.clients < 1:
        return fail("bench", "--minutes must be in (0, 1440] and --clients at least 1")
    result = soak.run(args.code.resolve(), args.artifacts.resolve(), args.minutes * 60, args.clients)
    for table in result.tables():
        print(table.render())
    return 0 if result.met() else 1


def dropped_streams(args: argparse.Namespace) -> int:
    from bench import dropped_streams

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make demo or make bench builds one)")
    if not 0 < args.seconds <= 3600 or not 1 <= args.runs <= 100 or args.clients < 1:
        return fail("bench", "--seconds must be in (0, 3600], --runs in 1..100 and --clients at least 1")
    code, artifacts = args.code.resolve(), args.artifacts.resolve()
    runs = [dropped_streams.run_once(code, artifacts, args.seconds, args.clients) for _ in range(args.runs)]
    print(dropped_streams.table(runs, args.seconds, args.clients).render())
    return 0 if not any(run.wedged for run in runs) else 1


def voice_library(args: argparse.Namespace) -> int:
    from bench import voices

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make demo or make bench builds one)")
    if args.runs < 1:
        return fail("bench", "--runs must be at least 1")
    print(voices.run(args.code.resolve(), args.artifacts.resolve(), args.runs).render())
    return 0


def cost_of_measuring(args: argparse.Namespace) -> int:
    from bench import observe

    if not (args.artifacts / "manifest.json").exists():
        return fail("bench", f"no artifact at {args.artifacts} (make demo builds one)")
    if args.rounds < 1:
        return fail("bench", "--rounds must be at least 1")
    print(observe.run(args.artifacts.resolve(), args.rounds).render())
    return 0


def parity(args: argparse.Namespace) -> int:
    from bench import verify

    return verify.run(args.model, args.artifacts, args.results, args.threads)


def measure(args: argparse.Namespace) -> int:
    config = BenchConfig(
        model_dir=args.model,
        artifacts={
            "fp32": args.artifacts,
            "int8": args.artifacts_int8 or args.artifacts.with_name(args.artifacts.name + "-int8"),
            "int4": args.artifacts_int4 or args.artifacts.with_name(args.artifacts.name + "-int4"),
        },
        results=args.results,
        runs=args.runs,
        lambda_runs=args.lambda_runs,
        threads=args.threads,
    )
    if not (config.model_dir / "cosyvoice.yaml").exists() or not (config.artifact / "manifest.json").exists():
        need = f"need a model directory {config.model_dir} and its artifact {config.artifact}"
        return fail("bench", f"{need} (make bench builds both)")
    for command in MEASUREMENTS if args.command == "all" else (args.command,):
        started = time.monotonic()
        data, tables = _measure(command, config, args)
        for table in tables:
            print(table.render())
        took = seconds(time.monotonic() - started)
        print(f"wrote {config.save(command, data, tables)} ({command} took {took})\n", flush=True)
    if args.command == "all":
        write_report(args)
    return 0


def _measure(command: str, config: BenchConfig, args: argparse.Namespace) -> tuple[dict, list[Table]]:
    if command == "coldstart":
        from bench import coldstart

        return coldstart.run(config)
    if command == "speed":
        from bench import speed

        return speed.run(replace(config, runs=args.speed_runs), tuple(args.texts.split(",")))
    if command == "memory":
        from bench import memory

        return memory.run(config)
    from bench import lambda_start

    return lambda_start.run(config)


__all__ = ["register"]
