"""`python -m bench speed`: warm synthesis speed, upstream fp32 beside ours with fp32 / int8 / int4 LLM.

One fresh process per variant: load, warm up, then each text `runs` times (non-streamed), then the first
chunk of a streamed request. Ours also runs the fast tier in the same process: the 10-second text again at
FAST_FLOW_STEPS flow steps (the same seed: the same tokens and noise), its figures set beside the 10-step
ones as ratios, and how far the mel moves at fewer steps.
Real-time factor = synthesis seconds / audio seconds (lower is faster).
The quantised variants (`make bench` builds them with `--llm-weights int8|int4 --flow-weights int8`) run
the 10-second text alone: it reaches every reported context length, and its flow and vocoder share per
second of audio is what the other texts would show; running all three would put a first `make bench`
over its time budget.
"""

from __future__ import annotations

from typing import Any

from bench import cost
from bench.chunks import playback
from bench.config import BenchConfig
from bench.floor import with_cache_ms
from bench.stages import CONTEXTS
from bench.tables import Table, median, plain, ratio, seconds
from bench.workload import SPEECH_TOKENS_PER_TEXT_TOKEN
from function.core.options import COMPARED_FLOW_STEPS, FAST_FLOW_STEPS

STREAM_TEXT = "ten_seconds"
FULL_TEXT_VARIANTS = ("upstream fp32", "ours fp32")  # the others only run STREAM_TEXT


def variants(config: BenchConfig) -> tuple[list[tuple[str, str, Any]], list[str]]:
    """(label, side, source) for each variant that exists, alternating sides, and notes on the missing."""
    found: list[tuple[str, str, Any]] = [("upstream fp32", "upstream", config.model_dir)]
    missing = []
    for weights, path in config.artifacts.items():
        if (path / "manifest.json").exists():
            found.append((f"ours {weights}", "ours", path))
        else:
            missing.append(
                f"ours {weights}: no artifact at {path} (skipped; build it with"
                f" `python -m export {config.model_dir} {path} --llm-weights {weights} --flow-weights int8"
                " --vocoder-weights int8`)"
            )
    return found, missing


def run(config: BenchConfig, texts: tuple[str, ...]) -> tuple[dict[str, Any], list[Table]]:
    workload = config.workload()
    found, missing = variants(config)
    results: dict[str, Any] = {}
    for label, side, source in found:
        variant_texts = texts if label in FULL_TEXT_VARIANTS or STREAM_TEXT not in texts else (STREAM_TEXT,)
        child = config.child(
            side,
            "speed",
            source,
            "--runs",
            str(config.runs),
            "--texts",
            ",".join(variant_texts),
            "--stream-text",
            STREAM_TEXT,
            *(["--fast-steps", str(FAST_FLOW_STEPS)] if side == "ours" else []),
        )
        results[label] = child.data
        print(f"speed {label}: done in {seconds(child.ended - child.spawned)}", flush=True)
    memory_mb = cost.template_memory_mb()
    return {"variants": results, "missing": missing, "workload": workload["texts"], "memory_mb": memory_mb}, [
        table(results, texts, workload, missing, config.runs),
        cost.table(tier_rtfs(results), memory_mb),
    ]


def tier_rtfs(results: dict[str, Any]) -> dict[str, float | None]:
    """Each of our variants' whole-utterance RTF on the stream text, and its fast tier's beside it: the
    rows of the cost table."""
    rtfs: dict[str, float | None] = {}
    for label, data in results.items():
        if not label.startswith("ours"):
            continue
        rtfs[label] = _rtf(_runs(data, STREAM_TEXT))
        fast = data.get("fast")
        if fast:
            rtfs[f"{label}, {fast['steps']} flow steps"] = _rtf(fast.get("runs", []))
    return rtfs


def _runs(data: dict[str, Any], text: str) -> list[dict[str, Any]]:
    return data["texts"].get(text, [])


def _rtf(runs: list[dict[str, Any]]) -> float | None:
    return median([run["wall"] / run["audio_seconds"] for run in runs if run["audio_seconds"] > 0])


def _per_audio_second(runs: list[dict[str, Any]], stage: str) -> float | None:
    return median(
        [run["stages"].get(stage, 0.0) / run["audio_seconds"] for run in runs if run["audio_seconds"] > 0]
    )


def _step_ms(runs: list[dict[str, Any]], context: int) -> float | None:
    return median(
        [run["step_ms"][str(context)] for run in runs if run["step_ms"].get(str(context)) is not None]
    )


def table(
    results: dict[str, Any], texts: tuple[str, ...], workload: dict[str, Any], missing: list[str], runs: int
) -> Table:
    labels = list(results)
    ours = [label for label in labels if label.startswith("ours")]
    result = Table(
        f"Warm speed (median of {runs} run(s) per text; RTF = compute seconds per audio second)",
        ("measure", *labels, "upstream / best ours"),
    )

    def add(label: str, values: dict[str, float | None], fmt: Any) -> None:
        best = min((value for value in (values[o] for o in ours) if value is not None), default=None)
        result.add(label, *(fmt(values[name]) for name in labels), ratio(values.get("upstream fp32"), best))

    def add_cells(label: str, cells: dict[str, str]) -> None:
        result.add(label, *(cells[name] for name in labels), "–")

    for text in texts:
        audio = median([run["audio_seconds"] for data in results.values() for run in _runs(data, text)])
        add(
            f"RTF, {text} ({plain(audio, 1)} s audio)",
            {n: _rtf(_runs(d, text)) for n, d in results.items()},
            plain,
        )
        result.notes += _short_runs(results, text, audio)
    all_runs = {name: [run for text in texts for run in _runs(data, text)] for name, data in results.items()}
    for context in CONTEXTS:
        add(
            f"LLM ms/token at {context} positions",
            {n: _step_ms(r, context) for n, r in all_runs.items()},
            _ms,
        )
    add("decode weight-read floor, ms/token", {n: _floor_ms(d) for n, d in results.items()}, _ms)
    for context in (CONTEXTS[0], CONTEXTS[-1]):
        add(
            f"… LLM ms/token at {context} ÷ floor",
            {n: _over_floor(_step_ms(all_runs[n], context), d) for n, d in results.items()},
            _times,
        )
    for context in (CONTEXTS[0], CONTEXTS[-1]):
        add(
            f"… LLM ms/token at {context} ÷ floor with the cache it reads",
            {
                n: _over(_step_ms(all_runs[n], context), _cache_floor_ms(d, context))
                for n, d in results.items()
            },
            _times,
        )
    # The stages on the streamed text's utterance, the one every variant runs and the floors are counted on.
    timed = {name: _runs(data, STREAM_TEXT) for name, data in results.items()}
    for stage in ("llm", "flow", "vocoder"):
        add(f"{stage} s per audio s", {n: _per_audio_second(r, stage) for n, r in timed.items()}, plain)
        if stage == "llm":
            continue
        floors = {n: _arithmetic_floor(d, stage) for n, d in results.items()}
        add(f"… {stage} arithmetic floor, s per audio s", floors, plain)
        add(
            f"… {stage} ÷ its floor",
            {n: _over(_per_audio_second(timed[n], stage), floors[n]) for n in results},
            _times,
        )
    _fast_tier_rows(add, add_cells, results, timed)
    streamed = {n: _streamed(d) for n, d in results.items()}
    add(f"RTF streamed, {STREAM_TEXT}", {n: _rtf([r]) if r else None for n, r in streamed.items()}, plain)
    add(
        "… stage busy seconds ÷ wall seconds (overlap)",
        {n: sum(r["stages"].values()) / r["wall"] if r else None for n, r in streamed.items()},
        _times,
    )
    add(
        "… playback stalls after the first chunk, s",
        {
            n: playback(r["arrivals"], r["durations"]).waited if r and "arrivals" in r else None
            for n, r in streamed.items()
        },
        plain,
    )
    add(
        f"first streamed chunk ({STREAM_TEXT})",
        {n: d["first_chunk"][STREAM_TEXT] for n, d in results.items()},
        seconds,
    )
    result.notes.append(
        "floor: a prepacked fp32 GEMV chain over as many bytes as one decode step's weights, same threads,"
        " same run (bench/floor.py); with the cache: weights plus the keys, values and position rows a step"
        " at that context reads, at the bandwidth the chain measured; stalls: the seconds a listener who"
        " starts playing at the first chunk waits for later ones (bench/chunks.py);"
        f" stage rows: {STREAM_TEXT}, one segment; arithmetic floor: the stage's"
        " matrix-product, convolution and attention multiply-adds per audio second on a segment as long,"
        " counted from a profiled run of its graphs, over this CPU's prepacked GEMM rate at each product's"
        " precision (fp32, or int8 for quantised products), same threads, same run (bench/arithmetic.py);"
        " stage busy time is each stage's own wall time, so with the LLM on its own thread their sum"
        " exceeds the request's wall time"
    )
    if any(data.get("fast") for data in results.values()):
        result.notes.append(
            f"fast tier: {STREAM_TEXT} again in the same process at {FAST_FLOW_STEPS} flow steps (the same"
            " seed: the same speech tokens and noise); mel moved: the last 10-step segment's flow inputs"
            " solved again at fewer steps, relative L2 from the 10-step mel. Random weights cannot tell"
            " what a trained model loses by fewer steps: listen before you ship it"
        )
    result.notes += missing
    if any(label not in FULL_TEXT_VARIANTS for label in labels):
        result.notes.append(
            f"quantised variants run only {STREAM_TEXT}; as built by `make bench`, ours int8 / int4 have"
            " int8 / int4 LLM weights, int8 flow MatMuls (--flow-weights int8) and int8 vocoder convolutions"
            " (--vocoder-weights int8)"
        )
    result.notes.append(
        f"random weights: a segment usually runs to {SPEECH_TOKENS_PER_TEXT_TOKEN:g} speech tokens per text"
        " token (v1's bound, on both sides; EOS is rarely drawn), so audio length follows from the text's"
        " token count"
    )
    return result


def _fast_tier_rows(
    add: Any, add_cells: Any, results: dict[str, Any], timed: dict[str, list[dict[str, Any]]]
) -> None:
    """The fast tier beside the 10-step figures of the same process, and how far its mel moves."""
    fast = {name: data.get("fast") or {} for name, data in results.items()}
    steps = next((f["steps"] for f in fast.values() if f), None)
    if steps is None:
        return
    fast_runs = {name: f.get("runs", []) for name, f in fast.items()}
    fast_rtf = {name: _rtf(runs) for name, runs in fast_runs.items()}
    add(f"fast tier ({steps} flow steps): RTF, {STREAM_TEXT}", fast_rtf, plain)
    add("… ÷ the 10-step RTF", {n: _over(fast_rtf[n], _rtf(timed[n])) for n in results}, _times)
    fast_flow = {name: _per_audio_second(runs, "flow") for name, runs in fast_runs.items()}
    add("fast tier: flow s per audio s", fast_flow, plain)
    add(
        "… ÷ the 10-step figure",
        {n: _over(fast_flow[n], _per_audio_second(timed[n], "flow")) for n in results},
        _times,
    )
    reference = next(f["mel"]["reference_steps"] for f in fast.values() if f)
    add(
        "… the flow's arithmetic floor at the same ratio",
        {n: _floor_ratio(d, steps, reference) for n, d in results.items()},
        _times,
    )
    add_cells(
        "mel moved from 10 steps at " + " / ".join(map(str, COMPARED_FLOW_STEPS)) + " steps (relative L2)",
        {n: _moved(f["mel"]["moved"]) if f else "–" for n, f in fast.items()},
    )


def _floor_ratio(data: dict[str, Any], steps: int, reference_steps: int) -> float | None:
    """The flow's arithmetic floor at `steps` Euler steps ÷ at `reference_steps`: the least the fast
    tier's ratio can be while the encoder runs once a segment."""
    arithmetic = data.get("arithmetic") or {}
    graph_seconds = arithmetic.get("graph_seconds")
    if not graph_seconds:
        return None
    from bench.arithmetic import flow_floor_at  # onnx and onnxruntime: only where a floor was measured

    at = flow_floor_at(steps, reference_steps, graph_seconds)
    return at / flow_floor_at(reference_steps, reference_steps, graph_seconds)


def _moved(moved: dict[str, float]) -> str:
    return " / ".join(f"{moved[str(count)]:.3f}" for count in COMPARED_FLOW_STEPS)


def _floor_ms(data: dict[str, Any]) -> float | None:
    floor = data.get("floor")
    return floor["ms"] if floor else None


def _cache_floor_ms(data: dict[str, Any], positions: int) -> float | None:
    floor = data.get("floor")
    return with_cache_ms(floor, positions) if floor and "cache_bytes_per_position" in floor else None


def _over_floor(step_ms: float | None, data: dict[str, Any]) -> float | None:
    return _over(step_ms, _floor_ms(data))


def _arithmetic_floor(data: dict[str, Any], stage: str) -> float | None:
    arithmetic = data.get("arithmetic")
    return arithmetic["seconds"][stage] if arithmetic else None


def _over(measured: float | None, floor: float | None) -> float | None:
    return measured / floor if measured is not None and floor else None


def _streamed(data: dict[str, Any]) -> dict[str, Any] | None:
    run = data.get("streamed", {}).get(STREAM_TEXT)
    return run if run and run["audio_seconds"] > 0 else None


def _ms(value: float | None) -> str:
    return plain(value, 1)


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _short_runs(results: dict[str, Any], text: str, audio: float | None) -> list[str]:
    """Variants whose sampler drew EOS early on `text`: their figures cover less audio than the others'."""
    notes = []
    for name, data in results.items():
        own = median([run["audio_seconds"] for run in _runs(data, text)])
        if audio and own is not None and own < 0.95 * audio:
            notes.append(
                f"{name} drew EOS early on {text}: {plain(own, 1)} s of audio, not {plain(audio, 1)};"
                " its RTF, per-audio-second figures and longest LLM context cover that shorter run"
            )
    return notes


__all__ = ["run"]
