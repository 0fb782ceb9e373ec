"""Per-stage timing inside a synthesis: LLM steps (by context length), flow and vocoder seconds.

Backends wrap their own objects' methods with these timers, so the inference loop that runs is still the
backend's own (upstream's `CosyVoiceModel.tts`, our `Engine.speak`); only clocks are added around calls.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CONTEXTS = (64, 128, 256, 512)  # cached positions at which LLM ms/token is reported


@dataclass
class StageTimes:
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    first_token: list[float] = field(default_factory=list)  # prefill + first step, per LLM call
    steps: list[tuple[int, float]] = field(
        default_factory=list
    )  # (cached positions, seconds) per later token

    def reset(self) -> None:
        self.seconds.clear()
        self.first_token.clear()
        self.steps.clear()

    def timed(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[stage] += time.monotonic() - start

        return wrapper

    def timed_tokens(
        self, fn: Callable[..., Iterator[int]], prefix: Callable[..., int]
    ) -> Callable[..., Iterator[int]]:
        """Wrap a token generator; time spent by the consumer between tokens is not counted."""

        def wrapper(*args: Any, **kwargs: Any) -> Iterator[int]:
            cached = prefix(*args, **kwargs)
            tokens = fn(*args, **kwargs)
            index = 0
            while True:
                start = time.monotonic()
                try:
                    token = next(tokens)
                except StopIteration:
                    self.seconds["llm"] += time.monotonic() - start
                    return
                elapsed = time.monotonic() - start
                self.seconds["llm"] += elapsed
                if index == 0:
                    self.first_token.append(elapsed)
                else:
                    self.steps.append((cached + index - 1, elapsed))
                index += 1
                yield token

        return wrapper

    def step_ms_at(self, context: int, window: int = 25) -> float | None:
        """Median ms per decoded token with `context` ± `window` cached positions; None if none ran there."""
        near = [seconds for cached, seconds in self.steps if abs(cached - context) <= window]
        return 1000 * statistics.median(near) if near else None

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": dict(self.seconds), "first_token": self.first_token, "steps": self.steps}


class TimedProxy:
    """Stands in for an object whose calls should be timed; everything else passes through."""

    def __init__(self, target: Any, stage: str, times: StageTimes, methods: tuple[str, ...]) -> None:
        self._target = target
        self._call = times.timed(stage, target) if "__call__" in methods else None
        self._timed = {
            name: times.timed(stage, getattr(target, name)) for name in methods if name != "__call__"
        }

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._call is None:
            raise TypeError(f"{type(self._target).__name__} calls are not proxied")
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        timed = self.__dict__.get("_timed", {})
        return timed[name] if name in timed else getattr(self._target, name)


__all__ = ["CONTEXTS", "StageTimes", "TimedProxy"]
