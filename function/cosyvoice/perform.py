"""A script performed: each spoken piece synthesised at its speed and gain, pauses as exact silence, and a
speech mark yielded just before the audio it describes.

Mark times count the samples actually yielded before the piece (at the model's rate), so they hold
whatever the LLM drew, the speed and the pauses: a mark and the audio of the same seed agree to the sample.
Each spoken piece gets its own seed spawned from the request's, so one seed pins the whole performance.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from function.core.deadline import Deadline
from function.core.options import SynthesisOptions
from function.core.script import Mark, Pause, Script, SpeechMark, Spoken

if TYPE_CHECKING:
    from function.cosyvoice.engine import Engine


def perform(
    engine: Engine, options: SynthesisOptions, script: Script, deadline: Deadline | None = None
) -> Iterator[np.ndarray | SpeechMark]:
    """Audio chunks (float32 mono, the model's rate) and speech marks, in the order they belong."""
    rate = engine.sample_rate
    samples = 0  # yielded so far
    seeds = (
        np.random.SeedSequence(options.seed).spawn(len(script.pieces)) if options.seed is not None else None
    )

    def now() -> int:
        return round(samples * 1000 / rate)

    for index, piece in enumerate(script.pieces):
        if isinstance(piece, Pause):
            silence = np.zeros(round(piece.seconds * rate), dtype=np.float32)
            samples += silence.size
            if silence.size:
                yield silence
        elif isinstance(piece, Mark):
            yield SpeechMark(now(), "ssml", piece.start, piece.end, piece.name)
        else:
            yield SpeechMark(now(), "sentence", piece.start, piece.end, piece.text)
            for chunk in engine.stream(_piece_options(options, piece, seeds, index), deadline):
                chunk = np.clip(chunk * piece.gain, -1.0, 1.0) if piece.gain != 1.0 else chunk
                samples += chunk.size
                yield chunk


def _piece_options(
    options: SynthesisOptions, piece: Spoken, seeds: list[np.random.SeedSequence] | None, index: int
) -> SynthesisOptions:
    seed = None if seeds is None else int(seeds[index].generate_state(1, np.uint64)[0] >> np.uint64(1))
    return replace(options, text=piece.model_text, speed=piece.speed, seed=seed, script=None)


def audio_only(performed: Iterator[np.ndarray | SpeechMark]) -> Iterator[np.ndarray]:
    """The performance's audio, its marks dropped."""
    return (item for item in performed if isinstance(item, np.ndarray))


__all__ = ["audio_only", "perform"]
