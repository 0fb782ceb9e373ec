"""`python -m bench chunks`: the first streamed chunk's size, tried chunk by chunk on one artifact.

For each first-chunk size (in speech tokens; later chunks as the engine has them) one warm process streams
the same text several times and records when each chunk arrives and how much audio it holds. Playback
starts when the first chunk arrives; chunk k is due when the audio before it has played. The margin of
a run is the least, over its chunks, of due time minus arrival: negative means playback waited. The
soonest first chunk whose margin stays positive is the size to ship (function.cosyvoice.engine's
CHUNK_TOKENS).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.tables import Table, median, seconds
from bench.workload import SEED, SPEAKER, TEXTS

FIRST_SIZES = (10, 15, 20, 25, 35)
TEXT = "ten_seconds"


@dataclass(frozen=True)
class Playback:
    first: float  # seconds from the request to the first chunk
    margin: float  # least (due − arrival) over the later chunks; negative: playback waited
    waited: float  # seconds playback spent waiting, over the whole stream


def playback(arrivals: Sequence[float], durations: Sequence[float]) -> Playback:
    """How a listener fares: chunk k (arriving at arrivals[k], holding durations[k] s) is due once what
    came before it has played; a late chunk delays everything after it."""
    if not arrivals or len(arrivals) != len(durations):
        raise ValueError("need one duration per arrival, and at least one chunk")
    clock, margin, waited = arrivals[0] + durations[0], float("inf"), 0.0
    for arrival, duration in zip(arrivals[1:], durations[1:], strict=True):
        margin = min(margin, clock - arrival)
        waited += max(0.0, arrival - clock)
        clock = max(clock, arrival) + duration
    return Playback(arrivals[0], margin, waited)


def stream_once(engine: Any, text: str) -> Playback:
    from function.core.options import SynthesisOptions

    options = SynthesisOptions(text=text, speaker=SPEAKER, seed=SEED, stream=True)
    arrivals, durations = [], []
    start = time.perf_counter()
    for chunk in engine.stream(options):
        arrivals.append(time.perf_counter() - start)
        durations.append(chunk.size / engine.sample_rate)
    return playback(arrivals, durations)


def run(artifact_dir: Path, sizes: Sequence[int], runs: int, threads: int | None) -> Table:
    """Alternates the sizes run by run, so a noisy neighbour spreads over all of them."""
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine

    engine = Engine.load(Artifact.open(artifact_dir), threads=threads)
    engine.warm_up()
    later = engine.chunk_tokens[1:]
    results: dict[int, list[Playback]] = {size: [] for size in sizes}
    for _ in range(runs):
        for size in sizes:
            engine.chunk_tokens = (size, *later)
            results[size].append(stream_once(engine, TEXTS[TEXT]))
    table = Table(
        f"First chunk size, streamed {TEXT} on {artifact_dir.name} (median of {runs} runs)",
        ("first chunk tokens", "first chunk", "least margin", "playback waited"),
    )
    for size, played in results.items():
        table.add(
            str(size),
            seconds(median([p.first for p in played])),
            seconds(median([p.margin for p in played])),
            seconds(median([p.waited for p in played])),
        )
    table.notes.append(
        f"later chunks {', '.join(map(str, later))} tokens; margin: the least time a chunk arrived before"
        " it was due (negative: the listener waited)"
    )
    return table


__all__ = ["FIRST_SIZES", "Playback", "playback", "run"]
