"""`python -m bench shared-decode`: requests speaking at once, each decoding alone or in one shared batch.

`requests` unseeded whole-utterance requests of the same text start together on one engine, as `serve`
runs them with COSYVOICE_MAX_CONCURRENT at that count. Each row count given runs in a fresh process (so
its peak resident memory is its own): at one row every request decodes on its own, beside the others; at
more, their segments are rows of the process's shared batch (function.cosyvoice.shared_decode). Audio
seconds per wall second is the throughput; each ratio is against the latest run at the first row count
given, in the same invocation.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.procs import MIB, printed_results, read_memory, with_latest_baseline
from bench.tables import Table
from bench.workload import SPEAKER, TEXTS

TEXT = TEXTS["ten_seconds"]


def speak_at_once(artifact_dir: Path, rows: int, requests: int, threads: int | None) -> dict[str, Any]:
    """`requests` requests started together on one engine decoding `rows` rows at most; what it cost."""
    import numpy as np

    from function.core.options import SynthesisOptions
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine, audio_only

    engine = Engine.load(Artifact.open(artifact_dir), threads)
    engine.warm_up()
    engine.batch_decode(rows)
    options = SynthesisOptions(text=TEXT, speaker=SPEAKER)  # unseeded: may share the batch
    samples = [0] * requests
    start = threading.Barrier(requests + 1)

    def speak(index: int) -> None:
        utterance = engine.prepare(options)
        start.wait()
        samples[index] = sum(chunk.size for chunk in audio_only(engine.speak(utterance)))

    speakers = [threading.Thread(target=speak, args=(index,)) for index in range(requests)]
    for speaker in speakers:
        speaker.start()
    start.wait()
    started = time.perf_counter()
    for speaker in speakers:
        speaker.join()
    wall = time.perf_counter() - started
    audio_seconds = float(np.sum(samples)) / engine.sample_rate
    return {
        "rows": rows,
        "requests": requests,
        "wall_s": wall,
        "audio_s": audio_seconds,
        "audio_s_per_s": audio_seconds / wall,
        "shared_steps": engine.shared_decoder.steps if engine.shared_decoder is not None else None,
        "peak_rss_mib": read_memory().peak_rss / MIB,
    }


def run(artifact_dir: Path, row_counts: Sequence[int], requests: int, threads: int | None) -> Table:
    """One fresh process per row count, in the order given; a table of what each did."""
    arguments = [
        [str(artifact_dir), str(rows), str(requests), *([] if threads is None else [str(threads)])]
        for rows in row_counts
    ]
    results = printed_results("bench.shared_decode", arguments)
    base_rows = results[0]["rows"]
    table = Table(
        f"{requests} unseeded requests at once ({TEXT[:24]}…), {artifact_dir.name}",
        ["rows", "wall s", "audio s", "audio s per s", f"× rows={base_rows}", "shared steps", "peak RSS MiB"],
    )
    for result, base in with_latest_baseline(results, "rows"):
        table.add(
            str(result["rows"]),
            f"{result['wall_s']:.1f}",
            f"{result['audio_s']:.1f}",
            f"{result['audio_s_per_s']:.3f}",
            f"{result['audio_s_per_s'] / base['audio_s_per_s']:.2f}",
            "-" if result["shared_steps"] is None else str(result["shared_steps"]),
            f"{result['peak_rss_mib']:.0f}",
        )
    table.notes.append("throughput ratio > 1: more audio per second than each request decoding alone")
    return table


def main(argv: Sequence[str]) -> None:
    artifact_dir, rows, requests = Path(argv[0]), int(argv[1]), int(argv[2])
    threads = int(argv[3]) if len(argv) > 3 else None
    print(json.dumps(speak_at_once(artifact_dir, rows, requests, threads)))


if __name__ == "__main__":
    main(sys.argv[1:])
