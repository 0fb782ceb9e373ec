"""The baseline: upstream CosyVoice v1 in PyTorch, loaded and run the way upstream does it.

Construction follows `cosyvoice.cli.cosyvoice.CosyVoice.__init__`: HyperPyYAML builds the `!new:` classes
from the model directory's cosyvoice.yaml, `CosyVoiceModel.load` reads flow.pt and hift.pt, and the front
end creates its two onnxruntime sessions (campplus, speech tokenizer) and reads spk2info.pt. Synthesis
goes through upstream's own loop, `CosyVoiceModel.tts` (LLM thread, flow, HiFT), one call per text
segment as `CosyVoice.inference_sft` does.

Two departures, both in upstream's favour or neutral:
- The `cosyvoice-minicpmo` wheel comments the LLM out of `CosyVoiceModel.load` (MiniCPM-o brings its own);
  upstream CosyVoice loads llm.pt there, so it is loaded here the same way, right after.
- Upstream's text front end needs whisper, torchaudio and a text normaliser that are not installed; the
  parent process tokenises with our front end and passes the token ids, so upstream's figures exclude its
  text normalisation and the import of those packages (its real start-up is slower than measured here).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.procs import PhaseClock
from bench.stages import StageTimes
from function.cosyvoice.params import LLMParams

V1_LENGTH = LLMParams()  # the release's length ratios, the defaults ours runs with


def _install_stand_ins() -> None:
    """Make the reference classes importable without their unused heavy neighbours."""
    from bench import reference  # installs the stand-ins the v1 classes' neighbours need

    # cosyvoice.yaml names matcha.utils.audio.mel_spectrogram (`!name:`), whose module imports librosa's
    # mel filter bank at import time; SFT synthesis never calls it.
    reference.stub("librosa")
    reference.stub("librosa.filters", mel=None)
    # Its tail (as released) names whisper's tokenizer and the training data processors the same way;
    # their modules import whisper, pyarrow, torchaudio and pyworld, and synthesis calls none of them.
    import importlib.util

    for module, names in _TAIL_NAMES.items():
        reference.stub(module, **dict.fromkeys(names, _unused))
        parent, _, child = module.rpartition(".")
        if importlib.util.find_spec(parent) is None:
            reference.stub(parent)
        setattr(importlib.import_module(parent), child, sys.modules[module])  # pydoc.locate walks attributes


_TAIL_NAMES = {
    "whisper.tokenizer": ("get_tokenizer",),
    "cosyvoice.dataset.processor": (
        "parquet_opener", "tokenize", "filter", "resample", "compute_fbank",
        "parse_embedding", "shuffle", "sort", "batch", "padding",
    ),
}  # fmt: skip


def _unused(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a training-time function of cosyvoice.yaml, not used by synthesis")


class UpstreamBackend:
    name = "upstream"

    def __init__(self, model_dir: Path, threads: int | None, speaker: str, seed: int) -> None:
        self.model_dir = model_dir
        self.threads = threads
        self.speaker = speaker
        self.seed = seed
        self.model: Any = None
        self.embedding: Any = None
        self.sample_rate = 22050

    def import_stack(self) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        _install_stand_ins()
        import cosyvoice.cli.model  # noqa: F401
        import hyperpyyaml  # noqa: F401
        import onnxruntime  # noqa: F401  (upstream's front end imports it)

    def load(self, clock: PhaseClock) -> None:
        import onnxruntime
        import torch
        from cosyvoice.cli.model import CosyVoiceModel
        from hyperpyyaml import load_hyperpyyaml

        with (self.model_dir / "cosyvoice.yaml").open() as handle:
            configs = load_hyperpyyaml(handle)
        self.sample_rate = int(configs["sample_rate"])
        model = CosyVoiceModel(configs["llm"], configs["flow"], configs["hift"], fp16=False)
        model.load(
            str(self.model_dir / "llm.pt"), str(self.model_dir / "flow.pt"), str(self.model_dir / "hift.pt")
        )
        model.llm.load_state_dict(
            torch.load(self.model_dir / "llm.pt", map_location=model.device), strict=True
        )
        model.llm.to(model.device).eval()
        # v1's CosyVoiceModel runs the LLM at 3..30 speech tokens per text token (cli/model.py at the
        # release); the wheel's model leaves llm.py's 2..20 defaults, so bind the release's, as ours runs.
        model.llm.inference = functools.partial(
            model.llm.inference,
            min_token_text_ratio=V1_LENGTH.min_token_text_ratio,
            max_token_text_ratio=V1_LENGTH.max_token_text_ratio,
        )
        self.model = model
        clock.mark("load")
        # CosyVoiceFrontEnd.__init__: two onnxruntime sessions with upstream's options, then spk2info.
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = 1
        self.frontend_sessions = [
            onnxruntime.InferenceSession(
                str(self.model_dir / name), sess_options=options, providers=["CPUExecutionProvider"]
            )
            for name in ("campplus.onnx", "speech_tokenizer_v1.onnx")
            if (self.model_dir / name).exists()
        ]
        speakers = torch.load(self.model_dir / "spk2info.pt", map_location=model.device)
        self.embedding = speakers[self.speaker]["embedding"]
        clock.mark("sessions")

    def warm_up(self, request: dict[str, Any]) -> None:
        for _ in self.stream(request, stream=False):
            pass

    def stream(self, request: dict[str, Any], stream: bool) -> Iterator[Any]:
        import torch

        torch.manual_seed(self.seed)
        for segment in request["segments"]:
            text = torch.tensor([segment], dtype=torch.int32)
            for output in self.model.tts(
                text=text, flow_embedding=self.embedding, llm_embedding=self.embedding, stream=stream
            ):
                yield output["tts_speech"].numpy().reshape(-1)

    def instrument(self, times: StageTimes) -> None:
        model = self.model
        model.llm.inference = times.timed_tokens(model.llm.inference, _prefix_length)
        model.flow.inference = times.timed("flow", model.flow.inference)
        model.hift.inference = times.timed("vocoder", model.hift.inference)


def _prefix_length(**kwargs: Any) -> int:
    """Positions before the first speech token, as TransformerLM.inference lays them out."""
    speaker = 1 if kwargs["embedding"].shape[0] else 0
    return (
        2
        + speaker
        + int(kwargs["text"].shape[1])
        + int(kwargs["prompt_text"].shape[1])
        + int(kwargs["prompt_speech_token"].shape[1])
    )


__all__ = ["UpstreamBackend"]
