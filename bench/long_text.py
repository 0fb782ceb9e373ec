"""`python -m bench long-text`: a long English text as one whole request, by decode rows, beside its floor.

A text of about 2,000 characters is spoken as one seeded whole-utterance request, as a job's part is
(function.jobs), once per entry of `--rows`, each in a fresh process: at N rows the LLM decodes up to N
segments as one batch after the first (function.cosyvoice.engine). "replayed" is the same request with the
decode taking no time: each segment's tokens are handed over at once, so what remains is the flow and the
vocoder. No decode speed-up can bring the request below it.

With random weights the LLM would run every segment to 30 speech tokens per text token; here each segment
draws exactly TOKENS_PER_TEXT_TOKEN, about what English speech takes (some 3.5 text tokens a second at 50
speech tokens a second), so every run speaks the same length.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.procs import MIB, printed_results, read_memory, with_latest_baseline
from bench.tables import Table
from bench.workload import SPEAKER

TOKENS_PER_TEXT_TOKEN = 14
REPLAYED = "replayed"
TEXT = (
    "The harbour town woke slowly on the first cold morning of the year. Fishing boats rocked against the "
    "pier while gulls argued over the nets, and the baker on the corner pulled trays of bread from an oven "
    "that had been warm since four. Children walked to school in pairs, their scarves pulled up to their "
    "noses, counting the steps between the lamp posts. At the end of the street the old lighthouse stood "
    "white against a grey sky, no longer needed by the ships but kept painted by a town that liked to see "
    "it there. Inside the library, the new librarian sorted a box of letters that had arrived without "
    "names or dates. Each one described a walk along the coast: the path above the cliffs, the bench "
    "where two rivers meet, the field of stones that someone had arranged into a spiral. She read them "
    "in the quiet hour before opening and began to notice that the walks formed a single route, broken "
    "into pieces and posted over many years. By noon she had drawn the route on a map. It started at the "
    "library door and ended at the lighthouse, passing every place the letters mentioned. That afternoon "
    "she closed early, put on her boots and followed it. The wind was strong on the cliffs and the path "
    "was muddy near the rivers, but every landmark was where the letters said it would be. At the spiral "
    "of stones she found a small tin box wrapped in oilcloth. Inside was a key and a note that said only: "
    "for whoever reads carefully. The key opened the lighthouse door. At the top of the stairs, where the "
    "great lamp had once turned, someone had built shelves, and the shelves were full of books about the "
    "sea, the weather and the people who had lived on this coast for three hundred years. The librarian "
    "sat down by the window and opened the first one. Outside, the boats were coming home, and the town "
    "was lighting its windows one by one against the early dark."
)


def speak(artifact_dir: Path, rows: int | None, threads: int | None, text: str = TEXT) -> dict[str, Any]:
    """`text` at `rows` decode rows (None: replayed) in this process; what it cost."""
    import numpy as np

    from function.core.options import SynthesisOptions
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.engine import Engine, audio_only
    from function.cosyvoice.llm import LLMInput

    engine = Engine.load(Artifact.open(artifact_dir), threads)
    engine.warm_up()
    ratio = float(TOKENS_PER_TEXT_TOKEN)
    engine.llm.params = replace(engine.llm.params, min_token_text_ratio=ratio, max_token_text_ratio=ratio)
    engine.batch_decode(rows or 1)
    draws = np.random.default_rng(0)

    def replayed(segments: Sequence[LLMInput], rows: int) -> Iterator[int | None]:
        for segment in segments:
            count = TOKENS_PER_TEXT_TOKEN * np.asarray(segment.text_tokens).size
            yield from draws.integers(0, engine.llm.params.speech_token_size, count).tolist()
            yield None

    if rows is None:
        engine.llm.generate_segments = replayed  # type: ignore[method-assign]
    utterance = engine.prepare(SynthesisOptions(text=text, speaker=SPEAKER, seed=0))
    started = time.perf_counter()
    samples = sum(chunk.size for chunk in audio_only(engine.speak(utterance)))
    wall = time.perf_counter() - started
    audio_seconds = samples / engine.sample_rate
    return {
        "rows": REPLAYED if rows is None else rows,
        "segments": len(engine.model_inputs(utterance)),
        "wall_s": wall,
        "audio_s": audio_seconds,
        "s_per_audio_s": wall / audio_seconds,
        "peak_rss_mib": read_memory().peak_rss / MIB,
    }


def run(artifact_dir: Path, rows: Sequence[str], threads: int | None) -> Table:
    """One fresh process per entry of `rows` (a row count or "replayed"), in order; a table of each."""
    arguments = [[str(artifact_dir), entry, *([] if threads is None else [str(threads)])] for entry in rows]
    results = printed_results("bench.long_text", arguments)
    base_rows = results[0]["rows"]
    table = Table(
        f"{len(TEXT):,} characters, one whole request, {artifact_dir.name}",
        ["rows", "segments", "wall s", "audio s", "s per audio s", f"× rows={base_rows}", "peak RSS MiB"],
    )
    for result, base in with_latest_baseline(results, "rows"):
        table.add(
            str(result["rows"]),
            str(result["segments"]),
            f"{result['wall_s']:.1f}",
            f"{result['audio_s']:.1f}",
            f"{result['s_per_audio_s']:.2f}",
            f"{result['s_per_audio_s'] / base['s_per_audio_s']:.2f}",
            f"{result['peak_rss_mib']:.0f}",
        )
    table.notes.append(f"{REPLAYED}: the decode takes no time; no decode speed-up goes below it")
    return table


def main(argv: Sequence[str]) -> None:
    artifact_dir, entry = Path(argv[0]), argv[1]
    threads = int(argv[2]) if len(argv) > 2 else None
    print(json.dumps(speak(artifact_dir, None if entry == REPLAYED else int(entry), threads)))


if __name__ == "__main__":
    main(sys.argv[1:])
