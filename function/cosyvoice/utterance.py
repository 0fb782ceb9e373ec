"""A request planned once: who speaks, what is said in which order, and what each segment draws from.

`Engine.prepare` turns validated options into an `Utterance`; `Engine.speak` performs it. Plain text is
one spoken piece; a script (SSML, or text asking for speech marks) is its pieces in order: spoken text,
pauses and marks. Each spoken piece is cut into the text segments the model reads (upstream v1's
text_normalize(split=True)), here and only here, so a job's worker that speaks the segments a few at a
time (`Utterance.part`) never segments the text again.

Randomness. Every segment owns three generators (the LLM's sampling, the flow's noise, the vocoder's
source), spawned in segment order from its piece's seed: what one segment draws cannot shift another's,
whatever the chunking, the overlap or the part of the utterance being spoken. The first spoken piece takes
the request's seed, so a one-sentence request sounds the same with speech marks as without; each later
piece takes its own seed spawned from the request's, so one seed pins the whole performance and adding a
break or a mark changes nothing else. Without a seed, each piece draws fresh entropy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain

import numpy as np

from function.core.options import SynthesisOptions
from function.core.script import Mark, Pause, Script, Spoken
from function.cosyvoice.stream import Conditioning

SEGMENT_GENERATORS = 3  # LLM sampling, flow noise, vocoder source


@dataclass(frozen=True)
class Segment:
    """One text segment as the model reads it, and the seeds of its three generators."""

    text: str  # normalised
    seeds: tuple[np.random.SeedSequence, ...]  # SEGMENT_GENERATORS of them, in the order above

    def generators(self) -> tuple[np.random.Generator, ...]:
        """Fresh generators at their start: speaking the segment again draws the same values."""
        return tuple(np.random.default_rng(seed) for seed in self.seeds)


@dataclass(frozen=True)
class Sentence:
    """A spoken piece of the request (a `sentence` speech mark), cut into segments."""

    piece: Spoken
    segments: tuple[Segment, ...]
    first: int  # the index of its first segment in the whole utterance


Step = Sentence | Pause | Mark


@dataclass(frozen=True)
class Utterance:
    options: SynthesisOptions
    conditioning: Conditioning  # who speaks: the resolved inputs of the LLM and the flow
    steps: tuple[Step, ...]
    marked: bool  # whether speech marks are yielded: the options carry a script
    only: range | None = None  # speak just these segments, with the pauses and marks they carry

    @property
    def segments(self) -> list[Segment]:
        """Every segment of the utterance, in order (whatever `only` picks)."""
        return list(chain.from_iterable(step.segments for step in self.steps if isinstance(step, Sentence)))

    def part(self, only: range) -> Utterance:
        """The same utterance speaking only the segments in `only` (clipped to those there are), each
        with the randomness it has in a run of the whole, and the pauses and marks they carry
        (`performed`)."""
        return replace(self, only=range(len(self.segments))[only.start : only.stop])

    def performed(self) -> Iterator[tuple[Step, bool]]:
        """Each step, and whether this utterance performs its pause or mark (a sentence's mark): every
        one in the whole; in a part, those its segments carry. A sentence's mark goes with its first
        segment, a pause or a mark with the segment after it (after the last segment: with the last), so
        the parts of an utterance, spoken one after another, perform every step exactly once."""
        last = len(self.segments) - 1
        following = last
        carriers: list[int] = []
        for step in reversed(self.steps):
            if isinstance(step, Sentence):
                following = step.first
            carriers.append(following)
        for step, carrier in zip(self.steps, reversed(carriers), strict=True):
            yield step, self.only is None or carrier in self.only

    def chosen(self, sentence: Sentence) -> tuple[Segment, ...]:
        """The segments of `sentence` that this utterance speaks."""
        if self.only is None:
            return sentence.segments
        return tuple(
            segment
            for index, segment in enumerate(sentence.segments, start=sentence.first)
            if index in self.only
        )


def script_of(options: SynthesisOptions) -> Script:
    """The options' script, or their text as one spoken piece at their speed."""
    if options.script is not None:
        return options.script
    return Script((Spoken(options.text, 0, len(options.text.encode()), options.speed),))


def piece_seeds(
    seed: int | None, pieces: int, entropy: np.random.SeedSequence
) -> list[np.random.SeedSequence]:
    """One seed sequence per spoken piece (see the module docstring)."""
    if seed is None:
        return entropy.spawn(pieces)
    spawned = np.random.SeedSequence(seed).spawn(pieces)
    # A later piece's seed is an integer below 2**63, as a request's own seed is.
    return [
        np.random.SeedSequence(
            seed if index == 0 else int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))
        )
        for index, child in enumerate(spawned)
    ]


def segment_seeds(piece_seed: np.random.SeedSequence, count: int) -> list[tuple[np.random.SeedSequence, ...]]:
    """Each of `count` segments' generator seeds, spawned in segment order."""
    return [tuple(piece_seed.spawn(SEGMENT_GENERATORS)) for _ in range(count)]


__all__ = ["Segment", "Sentence", "Step", "Utterance", "piece_seeds", "script_of", "segment_seeds"]
