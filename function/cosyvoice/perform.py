"""A script performed: each spoken piece synthesised at its speed and gain, pauses as exact silence, and a
speech mark yielded just before the audio it describes.

Mark times count the samples actually yielded before the piece (at the model's rate), so they hold
whatever the LLM drew, the speed and the pauses: a mark and the audio of the same seed agree to the sample.
The first spoken piece is synthesised with the request's seed (a one-sentence request then sounds as it
does without marks); each later one with its own seed spawned from it, so one seed pins the whole
performance, and adding a break or a mark changes nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from function.core.deadline import Deadline
from function.core.options import SynthesisOptions
from function.core.script import Mark, Pause, Script, SpeechMark, Spoken

# One piece's audio: the engine's stream (function.cosyvoice.engine.Engine.stream) for a script-free request.
Synthesize = Callable[[SynthesisOptions, Deadline | None], Iterator[np.ndarray]]


def perform(
    synthesize: Synthesize, rate: int, options: SynthesisOptions, script: Script, deadline: Deadline | None
) -> Iterator[np.ndarray | SpeechMark]:
    """Audio chunks (float32 mono at `rate`, the model's) and speech marks, in the order they belong."""
    samples = 0  # yielded so far
    spoken = sum(isinstance(piece, Spoken) for piece in script.pieces)
    seeds = np.random.SeedSequence(options.seed).spawn(spoken) if options.seed is not None else None
    index = 0  # of the next spoken piece

    def now() -> int:
        return round(samples * 1000 / rate)

    for piece in script.pieces:
        if isinstance(piece, Pause):
            silence = np.zeros(round(piece.seconds * rate), dtype=np.float32)
            samples += silence.size
            if silence.size:
                yield silence
        elif isinstance(piece, Mark):
            yield SpeechMark(now(), "ssml", piece.start, piece.end, piece.name)
        else:
            yield SpeechMark(now(), "sentence", piece.start, piece.end, piece.text)
            for chunk in synthesize(_piece_options(options, piece, seeds, index), deadline):
                chunk = np.clip(chunk * piece.gain, -1.0, 1.0) if piece.gain != 1.0 else chunk
                samples += chunk.size
                yield chunk
            index += 1


def _piece_options(
    options: SynthesisOptions, piece: Spoken, seeds: list[np.random.SeedSequence] | None, index: int
) -> SynthesisOptions:
    seed = options.seed
    if seeds is not None and index > 0:
        seed = int(seeds[index].generate_state(1, np.uint64)[0] >> np.uint64(1))  # below 2**63
    return replace(options, text=piece.model_text, speed=piece.speed, seed=seed, script=None)


def audio_only(performed: Iterator[np.ndarray | SpeechMark]) -> Iterator[np.ndarray]:
    """The performance's audio, its marks dropped."""
    return (item for item in performed if isinstance(item, np.ndarray))


__all__ = ["audio_only", "perform"]
