"""A stand-in engine for developing the edges before the real one runs on the tiny artifact.

`install()` makes function.model load FakeEngine whatever the artifact; entry points:
  python -m tests.function.fake serve ...           (function's CLI with the fake installed)
  handler tests.function.fake.lambda_handler        (function.handler with the fake installed)
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from function.errors import InvalidPromptAudio, UnknownSpeaker
from function.options import SynthesisOptions


class FakeEngine:
    sample_rate = 22050
    speakers = ["英文女", "中文男"]

    def __init__(self) -> None:
        self._entropy = np.random.SeedSequence()

    def stream(self, options: SynthesisOptions) -> Iterator[np.ndarray]:
        options.validated()
        if options.prompt_audio is not None:
            import soundfile

            try:
                soundfile.read(io.BytesIO(options.prompt_audio))
            except Exception:
                raise InvalidPromptAudio("prompt_audio is not audio") from None
        elif options.speaker not in self.speakers:
            raise UnknownSpeaker(f"unknown speaker {options.speaker!r}")
        seed = np.random.SeedSequence(options.seed) if options.seed is not None else self._entropy.spawn(1)[0]
        rng = np.random.default_rng(seed)
        for _ in range(max(1, len(options.text) // 10)):
            yield (rng.standard_normal(2205) * 0.1).astype(np.float32)

    def synthesize(self, options: SynthesisOptions) -> np.ndarray:
        return np.concatenate(list(self.stream(options)))

    def warm_up(self) -> None:
        self.synthesize(SynthesisOptions(text="Hello.", speaker="英文女", seed=0))

    def reseed(self) -> None:
        self._entropy = np.random.SeedSequence()


def install() -> None:
    import function.engine
    import function.loader

    function.engine.Engine.load = classmethod(lambda cls, artifact, threads=None: FakeEngine())  # type: ignore
    function.loader.open_artifact = lambda location: None  # type: ignore


def __getattr__(name: str) -> Any:
    if name == "lambda_handler":
        install()
        import function.handler

        return function.handler.lambda_handler
    raise AttributeError(name)


if __name__ == "__main__":
    install()
    from function.__main__ import main

    sys.exit(main(sys.argv[1:]))
