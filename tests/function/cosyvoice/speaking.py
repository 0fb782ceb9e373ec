"""The engine's audio for the engine tests: `Engine.prepare` then `Engine.speak`, marks dropped; and
whether the LLM threads a request started have ended."""

from __future__ import annotations

import threading
import time
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


def llm_threads_end(seconds: float = 30.0) -> bool:
    """Whether every LLM thread ends within `seconds`: a request that ended, however, tells its thread to
    stop, and it stops at its next token by itself."""
    ends = time.monotonic() + seconds
    while any(thread.name == "cosyvoice-llm" for thread in threading.enumerate()):
        if time.monotonic() > ends:
            return False
        time.sleep(0.01)
    return True


__all__ = ["llm_threads_end", "spoken"]
