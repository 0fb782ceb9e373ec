"""`python -m bench decode-batch`: the LLM's decode step at one row and at several, in the same run.

The same segments (seeded text token ids, each drawing exactly `tokens` speech tokens: EOS is held off
until then) are decoded once per row count, each in a fresh process so that its peak resident memory is
its own: one segment after another at one row, as one batch at more (function.cosyvoice.llm's
generate_segments). A step's wall time, divided by the rows it decoded, is the decode's cost per token
per row; a step reads the decoder's weights once whatever the rows, which is what a batch saves. The
LLM's whole time per token (prefills and sampling included) and each process's peak RSS come beside it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.procs import MIB, printed_results, read_memory, with_latest_baseline
from bench.tables import Table

SEGMENTS = 4
TEXT_TOKENS = 50  # a segment of about one sentence
SPEECH_TOKENS = 250  # five seconds of speech each


def decode(artifact_dir: Path, rows: int, threads: int | None, segments: int, tokens: int) -> dict[str, Any]:
    """Decode `segments` segments at `rows` rows in this process; what it cost."""
    import numpy as np

    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.llm import LLM, DecoderCache, LLMInput

    llm = LLM.load(Artifact.open(artifact_dir), threads)
    ratio = tokens / TEXT_TOKENS
    llm.params = replace(llm.params, min_token_text_ratio=ratio, max_token_text_ratio=ratio)
    steps: list[tuple[int, float]] = []  # (rows, seconds) of each decode step
    step = llm._step

    def timed(cache: DecoderCache) -> np.ndarray:
        started = time.perf_counter()
        logp = step(cache)
        steps.append((cache.rows, time.perf_counter() - started))
        return logp

    llm._step = timed  # type: ignore[method-assign]
    seeds = np.random.SeedSequence(0).spawn(segments)
    speaker = np.random.default_rng(1).standard_normal((1, 192)).astype(np.float32)
    empty = np.zeros(0, dtype=np.int64)
    texts = np.random.default_rng(2).integers(0, 50_000, (segments, TEXT_TOKENS))
    batch = [
        LLMInput(text, empty, speaker, empty, np.random.default_rng(seed))
        for text, seed in zip(texts, seeds, strict=True)
    ]
    resident_before = read_memory().rss
    started = time.perf_counter()
    drawn: list[list[int]] = [[]]  # each segment's tokens
    for token in llm.generate_segments(batch, rows):
        if token is None:
            drawn.append([])
        else:
            drawn[-1].append(token)
    wall = time.perf_counter() - started
    drawn.pop()  # after the last segment's None
    step_seconds = sum(seconds for _, seconds in steps)
    return {
        "rows": rows,
        "tokens": sum(map(len, drawn)),
        "steps": len(steps),
        "widest_step": max(width for width, _ in steps),
        "step_ms_per_token": 1000 * step_seconds / sum(width for width, _ in steps),
        "llm_ms_per_token": 1000 * wall / sum(map(len, drawn)),
        "rss_before_mib": resident_before / MIB,
        "peak_rss_mib": read_memory().peak_rss / MIB,
        "drawn": drawn,
    }


def run(artifact_dir: Path, row_counts: Sequence[int], threads: int | None) -> Table:
    """One fresh process per row count, in the order given; a table of what each cost."""
    arguments = [
        [str(artifact_dir), str(rows), *([] if threads is None else [str(threads)])] for rows in row_counts
    ]
    results = printed_results("bench.batch_decode", arguments)
    base_rows = results[0]["rows"]
    table = Table(
        f"decode of {SEGMENTS} segments × {SPEECH_TOKENS} tokens, {artifact_dir.name}",
        ["rows", "step ms/token/row", f"× rows={base_rows} before", "LLM ms/token", "peak RSS MiB"],
    )
    for result, base in with_latest_baseline(results, "rows"):
        table.add(
            str(result["rows"]),
            f"{result['step_ms_per_token']:.2f}",
            f"{result['step_ms_per_token'] / base['step_ms_per_token']:.2f}",
            f"{result['llm_ms_per_token']:.2f}",
            f"{result['peak_rss_mib']:.0f}",
        )
        if result["drawn"] != base["drawn"]:
            parted = [_first_difference(a, b) for a, b in zip(result["drawn"], base["drawn"], strict=True)]
            table.notes.append(
                f"rows={result['rows']}: each segment's tokens part from rows={base_rows}'s at token"
                f" {', '.join('-' if index is None else str(index) for index in parted)}"
            )
    if not table.notes:
        table.notes.append("every run drew the same tokens")
    return table


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token lists differ (one ending early counts); None when equal."""
    index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return None if len(a) == len(b) == index else index


def main(argv: Sequence[str]) -> None:
    artifact_dir, rows = Path(argv[0]), int(argv[1])
    threads = int(argv[2]) if len(argv) > 2 else None
    print(json.dumps(decode(artifact_dir, rows, threads, SEGMENTS, SPEECH_TOKENS)))


if __name__ == "__main__":
    main(sys.argv[1:])
