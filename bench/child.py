"""One timed process: `python -m bench.child BACKEND MODE --source DIR --workload FILE --result FILE`.

The parent (`python -m bench ...`) starts a fresh interpreter per measurement; this module runs inside
it, drives one backend (ours or upstream) through the same steps and writes what it saw as JSON.

Modes
  coldstart  imports → load → sessions → warm-up → first (streamed) response, with memory at each mark
             (--until-ready stops after sessions)
  speed      after load and warm-up: non-streamed synthesis of each text (stage times, LLM ms/token),
             ours with --fast-steps: the stream text again at that many flow steps, and how far the mel
             moves at fewer steps; then the latency of the first streamed chunk
  scaling    after load and warm-up: one non-streamed and one streamed run of a text (ours)
  worker     load, one response, then report and stay alive until stdin closes (separate processes)
  forks      load and one response (INIT), then fork workers that answer one request each and stay
             alive until released, growing the group (1, 2, 4): fork → response times and total PSS
  lambda     INIT (load + warm-up); fork() → one response (the SnapStart stand-in); then the first
             response and a warm call in the process itself (ours uses function.local.invoke for this)
"""

import time

STARTED = time.monotonic()  # first statement: everything before it is interpreter start-up

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.procs import PhaseClock, read_memory, total_pss, write_json  # noqa: E402


def _backend(args: argparse.Namespace, speaker: str, seed: int) -> Any:
    if args.backend == "ours":
        from bench.ours import OursBackend

        return OursBackend(args.source, args.threads, speaker, seed, in_memory=args.in_memory)
    from bench.upstream import UpstreamBackend

    return UpstreamBackend(args.source, args.threads, speaker, seed)


def _respond(backend: Any, request: dict[str, Any]) -> int:
    """Run one request (not streamed) to the end; the number of samples."""
    return sum(int(chunk.size) for chunk in backend.stream(request, False))


def coldstart(backend: Any, workload: dict[str, Any], clock: PhaseClock, args: argparse.Namespace) -> dict:
    backend.import_stack()
    clock.mark("imports")
    backend.load(clock)  # marks "load" and "sessions"
    if args.until_ready:
        return {}
    backend.warm_up(workload["warm_up"])
    clock.mark("warm_up")
    chunks = backend.stream(workload["first"], True)
    samples = next(chunks).size
    clock.mark("first_chunk", sample_memory=False)
    samples += sum(chunk.size for chunk in chunks)
    clock.mark("response")
    return {"audio_seconds": samples / backend.sample_rate}


def speed(backend: Any, workload: dict[str, Any], clock: PhaseClock, args: argparse.Namespace) -> dict:
    from bench.stages import CONTEXTS, StageTimes

    backend.import_stack()
    backend.load(clock)
    backend.warm_up(workload["warm_up"])
    times = StageTimes()
    backend.instrument(times)

    def timed(request: dict[str, Any], flow_steps: int | None = None) -> dict[str, Any]:
        """One non-streamed run: wall and audio seconds, stage seconds, LLM ms per token by context."""
        times.reset()
        start = time.monotonic()
        if flow_steps is None:
            samples = _respond(backend, request)
        else:
            samples = sum(int(chunk.size) for chunk in backend.stream(request, False, flow_steps=flow_steps))
        return {
            "wall": time.monotonic() - start,
            "audio_seconds": samples / backend.sample_rate,
            "stages": dict(times.seconds),
            "tokens": len(times.steps) + len(times.first_token),
            "first_token": list(times.first_token),
            "step_ms": {str(c): times.step_ms_at(c) for c in CONTEXTS},
        }

    texts = {
        name: [timed(workload["texts"][name]) for _ in range(args.runs)] for name in args.texts.split(",")
    }
    # The fast tier (ours): how far the last 10-step segment's mel moves at fewer steps, then the streamed
    # text again at the fast tier's steps, the same seed drawing the same tokens and noise.
    fast = None
    if backend.name == "ours" and args.fast_steps:
        from function.core.options import COMPARED_FLOW_STEPS

        fast = {
            "steps": args.fast_steps,
            "mel": backend.mel_moved(COMPARED_FLOW_STEPS),
            "runs": [timed(workload["texts"][args.stream_text], args.fast_steps) for _ in range(args.runs)],
        }
    # Ours only: upstream's weights are the same.
    floor = backend.decode_floor(args.floor_attempts) if backend.name == "ours" else None
    # Counted on as much audio as the streamed text gave (one segment): the flow's attention per audio
    # second grows with the segment's length.
    stream_runs = texts.get(args.stream_text, [])
    segment_seconds = stream_runs[0]["audio_seconds"] if stream_runs else 0.0
    arithmetic = (
        backend.arithmetic_floor(segment_seconds, args.floor_attempts)
        if backend.name == "ours" and segment_seconds > 0
        else None
    )
    # Streaming last: upstream's LLM thread cannot be stopped once started, so nothing may run after it.
    # Ours streams to the end (its busy stages overlap there); upstream only to its first chunk, as its
    # whole streamed run would take minutes.
    times.reset()
    start = time.monotonic()
    chunks = backend.stream(workload["texts"][args.stream_text], True)
    sizes = [int(next(chunks).size)]
    arrivals = [time.monotonic() - start]
    streamed = None
    if backend.name == "ours":
        for chunk in chunks:  # when each chunk arrives and what it holds: when a listener would wait
            arrivals.append(time.monotonic() - start)
            sizes.append(int(chunk.size))
        streamed = {
            "wall": time.monotonic() - start,
            "audio_seconds": sum(sizes) / backend.sample_rate,
            "stages": dict(times.seconds),
            "arrivals": arrivals,
            "durations": [n / backend.sample_rate for n in sizes],
        }
    return {
        "texts": texts,
        "first_chunk": {args.stream_text: arrivals[0]},
        "streamed": {args.stream_text: streamed},
        "fast": fast,
        "floor": floor,
        "arithmetic": arithmetic,
        "exit_now": True,
    }


def scaling(backend: Any, workload: dict[str, Any], clock: PhaseClock, args: argparse.Namespace) -> dict:
    backend.import_stack()
    backend.load(clock)
    backend.warm_up(workload["warm_up"])
    request = workload["texts"][args.stream_text]
    start = time.monotonic()
    samples = _respond(backend, request)
    whole = {"wall": time.monotonic() - start, "audio_seconds": samples / backend.sample_rate}
    start = time.monotonic()
    chunks = backend.stream(request, True)
    samples = int(next(chunks).size)
    first_chunk = time.monotonic() - start
    samples += sum(int(chunk.size) for chunk in chunks)
    streamed = {
        "wall": time.monotonic() - start,
        "audio_seconds": samples / backend.sample_rate,
        "first_chunk": first_chunk,
    }
    return {"whole": whole, "streamed": streamed}


def worker(backend: Any, workload: dict[str, Any], clock: PhaseClock, args: argparse.Namespace) -> dict:
    backend.import_stack()
    backend.load(clock)
    _respond(backend, workload["first"])
    clock.mark("response")
    return {"pid": os.getpid(), "hold": True}


def _clone(backend: Any, request: dict[str, Any], report_w: int, release: tuple[int, int] | None) -> int:
    """fork() a worker that answers one request, reports its fork → response time, then waits to be
    released (EOF on the `release` pipe, once the parent closes its write end) or exits at once."""
    forked_at = time.monotonic()
    pid = os.fork()
    if pid == 0:
        if release is not None:
            os.close(release[1])  # or the parent's close would never reach EOF here
        _respond(backend, request)
        line = json.dumps({"pid": os.getpid(), "fork_to_response": time.monotonic() - forked_at}) + "\n"
        os.write(report_w, line.encode())
        if release is not None:
            os.read(release[0], 1)
        os._exit(0)
    return pid


def forks(backend: Any, workload: dict[str, Any], clock: PhaseClock, args: argparse.Namespace) -> dict:
    backend.import_stack()
    backend.load(clock)
    _respond(backend, workload["first"])  # INIT's warm-up: pages touched, caches filled before forking
    clock.mark("init")
    report_r, report_w = os.pipe()
    release = os.pipe()
    reports = os.fdopen(report_r)
    children: list[int] = []
    groups: dict[str, dict[str, Any]] = {}
    for count in (int(n) for n in args.workers.split(",")):  # grow the group: 1, then 2, then 4 workers
        added = [_clone(backend, workload["first"], report_w, release) for _ in range(count - len(children))]
        children += added
        answers = [json.loads(reports.readline()) for _ in added]
        groups[str(count)] = {"total_pss": total_pss([os.getpid(), *children]), "workers": answers}
    os.close(release[1])
    for pid in children:
        os.waitpid(pid, 0)
    return {"parent_pss": read_memory().pss, "groups": groups}


def lambda_(backend: Any, workload: dict[str, Any], clock: PhaseClock, args: argparse.Namespace) -> dict:
    """Upstream shaped like a Lambda function (ours goes through function.local.invoke instead).

    INIT is load + warm-up. A fork() then plays the SnapStart restore (one response in the clone); once
    the clone is gone, this process, still as INIT left it, serves its first response and a warm call.
    One INIT serves both paths: upstream's costs ~20 s at one thread."""
    backend.import_stack()
    backend.load(clock)
    backend.warm_up(workload["warm_up"])
    clock.mark("init")
    report_r, report_w = os.pipe()
    pid = _clone(backend, workload["first"], report_w, None)
    with os.fdopen(report_r) as reports:
        restored = json.loads(reports.readline())
    os.waitpid(pid, 0)
    clock.mark("restore_done")
    _respond(backend, workload["first"])
    clock.mark("first_response")
    _respond(backend, workload["first"])
    clock.mark("warm_call")
    return {"restore": restored}


MODES = {
    "coldstart": coldstart,
    "speed": speed,
    "scaling": scaling,
    "worker": worker,
    "forks": forks,
    "lambda": lambda_,
}


def main() -> None:
    clock = PhaseClock(STARTED)
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    parser.add_argument("backend", choices=("ours", "upstream"))
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument(
        "--source", type=Path, required=True, help="artifact dir (ours) or model dir (upstream)"
    )
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--texts", default="")
    parser.add_argument("--stream-text", default="")
    parser.add_argument("--fast-steps", type=int, default=0, help="speed (ours): the fast tier's flow steps")
    parser.add_argument(
        "--floor-attempts",
        type=int,
        default=None,
        help="speed (ours): measurements, a second apart, each floor is the least of (default bench.floor's)",
    )
    parser.add_argument("--workers", default="1", help="forks: group sizes, e.g. 1,2,4")
    parser.add_argument("--until-ready", action="store_true", help="coldstart: stop once the model is loaded")
    parser.add_argument("--in-memory", action="store_true", help="ours: read the artifact into memory first")
    args = parser.parse_args()
    if args.floor_attempts is not None and args.floor_attempts < 1:
        parser.error(
            f"--floor-attempts {args.floor_attempts}: a floor is the least of one measurement or more"
        )
    workload = json.loads(args.workload.read_text())
    backend = _backend(args, workload["speaker"], workload["seed"])
    data = MODES[args.mode](backend, workload, clock, args)
    hold, exit_now = data.pop("hold", False), data.pop("exit_now", False)
    data["clock"] = clock.to_dict()
    write_json(args.result, data)
    if hold:  # a worker stays resident until the parent has measured it
        print("ready", flush=True)
        sys.stdin.read()
    if exit_now:
        sys.stdout.flush()
        os._exit(0)  # an upstream LLM thread may still be generating; its result is not wanted


if __name__ == "__main__":
    main()
