"""`python -m bench chunks`: a streamed request's chunk sizes, tried chunk by chunk on one artifact.

For each schedule of chunk sizes (in speech tokens, the last one repeating; by default each first size
with the engine's later ones) one warm process streams the same text several times, alternating the
schedules, and records when each chunk arrives and how much audio it holds. Playback starts when the
first chunk arrives; chunk k is due when the audio before it has played. The margin of a run is the
least, over its chunks, of due time minus arrival: negative means playback waited, and `waited` sums
those waits. The schedule to ship (function.cosyvoice.engine's CHUNK_TOKENS) trades the first chunk,
the waits and the streamed RTF (every chunk's flow call also computes its context) against each other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.tables import Table, median, plain, seconds
from bench.workload import SEED, SPEAKER, TEXTS

FIRST_SIZES = (10, 15, 20, 25, 35)
TEXT = "ten_seconds"


@dataclass(frozen=True)
class Playback:
    first: float  # seconds from the request to the first chunk
    margin: float  # least (due − arrival) over the later chunks; negative: playback waited
    waited: float  # seconds playback spent waiting, over the whole stream
    rtf: float  # seconds from the request to the last chunk, per second of audio


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
    return Playback(arrivals[0], margin, waited, arrivals[-1] / sum(durations))


def stream_once(engine: Any, text: str) -> Playback:
    from function.core.options import SynthesisOptions
    from function.cosyvoice.engine import audio_only

    options = SynthesisOptions(text=text, speaker=SPEAKER, seed=SEED, stream=True)
    arrivals, durations = [], []
    start = time.perf_counter()
    for chunk in audio_only(engine.speak(engine.prepare(options))):
        arrivals.append(time.perf_counter() - start)
        durations.append(chunk.size / engine.sample_rate)
    return playback(arrivals, durations)


def run(artifact_dir: Path, schedules: Sequence[tuple[int, ...]], runs: int, threads: int | None) -> Table:
    """Alternates the schedules run by run, so a noisy neighbour spreads over all of them."""
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine

    engine = Engine.load(Artifact.open(artifact_dir), threads=threads)
    engine.warm_up()
    results: dict[tuple[int, ...], list[Playback]] = {schedule: [] for schedule in schedules}
    for _ in range(runs):
        for schedule in schedules:
            engine.chunk_tokens = schedule
            results[schedule].append(stream_once(engine, TEXTS[TEXT]))
    table = Table(
        f"Chunk sizes, streamed {TEXT} on {artifact_dir.name} (median of {runs} runs)",
        ("chunk tokens", "first chunk", "least margin", "playback waited", "streamed RTF"),
    )
    for schedule, played in results.items():
        table.add(
            ", ".join(map(str, schedule)),
            seconds(median([p.first for p in played])),
            seconds(median([p.margin for p in played])),
            seconds(median([p.waited for p in played])),
            plain(median([p.rtf for p in played])),
        )
    table.notes.append(
        "the last size repeats; margin: the least time a chunk arrived before it was due (negative: the"
        " listener waited); streamed RTF: request to last chunk, per second of audio"
    )
    return table


__all__ = ["FIRST_SIZES", "Playback", "playback", "run"]
