"""The engine's audio for the engine tests: `Engine.prepare` then `Engine.speak`, marks dropped."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from function.core.deadline import Deadline
from function.core.options import SynthesisOptions
from function.cosyvoice.engine import Engine, audio_only


def spoken(
    engine: Engine, options: SynthesisOptions, deadline: Deadline | None = None
) -> Iterator[np.ndarray]:
    """The audio of `options` chunk by chunk, through the engine's one entry point."""
    return audio_only(engine.speak(engine.prepare(options), deadline))


__all__ = ["spoken"]
