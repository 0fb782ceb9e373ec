"""Our side of every measurement: `function.cosyvoice.engine.Engine` on an exported artifact (no torch
anywhere)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.procs import PhaseClock
from bench.stages import StageTimes, TimedProxy


class OursBackend:
    name = "ours"

    def __init__(
        self, artifact_dir: Path, threads: int | None, speaker: str, seed: int, in_memory: bool = False
    ) -> None:
        self.artifact_dir = artifact_dir
        self.threads = threads
        self.speaker = speaker
        self.seed = seed
        self.in_memory = in_memory  # hold the artifact as the zip variant does after INIT's S3 reads
        self.engine: Any = None
        self._flow: RecordedFlow | None = None  # set by instrument()

    def import_stack(self) -> None:
        import function.cosyvoice.engine  # noqa: F401  (the measured import: onnxruntime, numpy, tiktoken, ours)

    def load(self, clock: PhaseClock) -> None:
        from function.cosyvoice.artifact import Artifact
        from function.cosyvoice.engine import Engine

        directory = self.artifact_dir
        artifact = _read_into_memory(directory) if self.in_memory else Artifact.open(directory)
        clock.mark("load")
        self.engine = Engine.load(artifact, threads=self.threads)
        clock.mark("sessions")

    @property
    def sample_rate(self) -> int:
        return int(self.engine.sample_rate)

    def warm_up(self, request: dict[str, Any]) -> None:
        from function.cosyvoice.frontend import preload_normalizer

        self.engine.warm_up()  # the engine's own warm-up, as deployed (the request is upstream's twin)
        preload_normalizer()  # then the text graphs, on their own thread, as function.instance.model does

    def stream(self, request: dict[str, Any], stream: bool, flow_steps: int | None = None) -> Iterator[Any]:
        """The request's audio chunks; `flow_steps` None: the engine's default (v1's 10)."""
        from function.core.options import SynthesisOptions
        from function.cosyvoice.engine import audio_only

        options = SynthesisOptions(
            text=request["text"], speaker=self.speaker, seed=self.seed, stream=stream, flow_steps=flow_steps
        )
        return audio_only(self.engine.speak(self.engine.prepare(options)))

    def mel_moved(self, steps: tuple[int, ...]) -> dict[str, Any]:
        """How far the mel moves at each of `steps` Euler steps from the step count of the last flow call
        since `instrument` (its tokens, speaker and noise solved again; not timed): relative L2."""
        if self._flow is None or self._flow.last is None:
            raise RuntimeError("mel_moved needs a synthesis after instrument()")
        args, kwargs, reference = self._flow.last
        moved = {
            str(count): relative_l2(self._flow.flow(*args, **{**kwargs, "steps": count}), reference)
            for count in steps
        }
        return {"reference_steps": kwargs.get("steps"), "frames": int(reference.shape[-1]), "moved": moved}

    def decode_floor(self, attempts: int | None = None) -> dict[str, float]:
        """The memory-bandwidth floor of one decode step of this artifact (bench.floor), same threads, the
        least of `attempts` (default bench.floor.ATTEMPTS)."""
        from bench.floor import ATTEMPTS, measure
        from function.cosyvoice.graphs import available_cpus

        threads = self.threads or available_cpus()
        return measure(self.artifact_dir, threads, ATTEMPTS if attempts is None else attempts)

    def arithmetic_floor(self, seconds: float, attempts: int | None = None) -> dict[str, Any]:
        """The flow's and the vocoder's multiply-adds on a `seconds`-long segment over this CPU's GEMM
        rates (bench.arithmetic), each rate the best of `attempts` (default bench.floor.ATTEMPTS)."""
        from bench.arithmetic import measure
        from bench.floor import ATTEMPTS
        from function.cosyvoice.graphs import available_cpus

        threads = self.threads or available_cpus()
        return measure(self.artifact_dir, threads, seconds, ATTEMPTS if attempts is None else attempts)

    def instrument(self, times: StageTimes) -> None:
        engine = self.engine
        engine.llm.generate = times.timed_tokens(engine.llm.generate, _prefix_length)
        self._flow = RecordedFlow(engine.flow)
        engine.flow = TimedProxy(self._flow, "flow", times, ("__call__",))
        engine.vocoder = TimedProxy(engine.vocoder, "vocoder", times, ("f0", "sine_waves", "generate"))


class RecordedFlow:
    """The engine's flow, keeping its last call's inputs and mel (arrays the caller does not change)."""

    def __init__(self, flow: Any) -> None:
        self.flow = flow
        self.last: tuple[tuple[Any, ...], dict[str, Any], Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        mel = self.flow(*args, **kwargs)
        self.last = (args, kwargs, mel)
        return mel

    def __getattr__(self, name: str) -> Any:
        return getattr(self.flow, name)


def relative_l2(candidate: Any, reference: Any) -> float:
    """||candidate - reference|| / ||reference||, in float64."""
    import numpy as np

    difference = np.asarray(candidate, np.float64) - np.asarray(reference, np.float64)
    return float(np.linalg.norm(difference) / np.linalg.norm(np.asarray(reference, np.float64)))


def _read_into_memory(directory: Path) -> Any:
    """Every file of the artifact in one bytearray, as function.instance.loader lays out an S3 artifact."""
    from function.cosyvoice.artifact import Artifact
    from function.instance.loader import one_buffer

    paths = {path.name: path for path in sorted(directory.iterdir()) if path.is_file()}
    files = one_buffer({name: path.stat().st_size for name, path in paths.items()})
    for name, view in files.items():
        with paths[name].open("rb") as handle:
            handle.readinto(view)
    return Artifact.from_files(files)


def _prefix_length(text: Any, prompt_text: Any, embedding: Any, prompt_tokens: Any, *rest: Any) -> int:
    """Positions before the first speech token: sos, speaker (0 or 1), prompt text + text, task id, prompt."""
    return (
        2
        + int(text.shape[1])
        + int(prompt_text.shape[1])
        + int(embedding.shape[0])
        + int(prompt_tokens.shape[1])
    )


__all__ = ["OursBackend", "RecordedFlow", "relative_l2"]
