"""The model's numbers: what the runtime needs besides the graphs, with upstream v1's values as defaults.

The exporter fills them from cosyvoice.yaml (export.config takes its fallbacks from these defaults, so each
is written once) and the manifest stores them; sampling, the flow's ODE, the vocoder's source and the
prompt features read them. They do not depend on how the artifact is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from function.core.errors import ArtifactError


@dataclass(frozen=True)
class LLMParams:
    speech_token_size: int = 4096  # EOS is this id; the decoder emits speech_token_size + 1 logits
    top_p: float = 0.8
    top_k: int = 25
    win_size: int = 10  # repetition-aware sampling window
    tau_r: float = 0.1
    # v1's CosyVoiceModel.llm_job runs the LLM at 3..30 speech tokens per text token (its llm.py's own
    # defaults, 2..20, are the later releases' values and never reach the released checkpoints).
    min_token_text_ratio: float = 3.0
    max_token_text_ratio: float = 30.0
    max_context: int = 5000  # positions the relative encoding is defined for


@dataclass(frozen=True)
class FlowParams:
    n_mels: int = 80
    input_frame_rate: int = 50  # speech tokens per second
    n_timesteps: int = 10
    inference_cfg_rate: float = 0.7
    t_scheduler: str = "cosine"
    # The flow's own mel frame rate, which upstream hard-codes (22050 / 256) to size mu from token counts.
    sample_rate: int = 22050
    hop_size: int = 256

    @property
    def mel_rate(self) -> float:
        """Mel frames per second."""
        return self.sample_rate / self.hop_size

    def mel_frames(self, n_tokens: int) -> int:
        """Frames for `n_tokens` speech tokens, rounded down like upstream (250 tokens → 430 frames).

        The one place this rule is written: the exporter sizes its example inputs and the encoder graph's
        edge frames with it, and the runtime sizes mu and the noise with it.
        """
        return int(n_tokens / self.input_frame_rate * self.sample_rate / self.hop_size)


@dataclass(frozen=True)
class VocoderParams:
    sample_rate: int = 22050
    upsample_factor: int = 256  # samples per mel frame: prod(upsample_rates) * istft hop
    n_fft: int = 16
    hop_len: int = 4
    nb_harmonics: int = 8  # overtones; the source has nb_harmonics + 1 sines
    sine_amp: float = 0.1
    noise_std: float = 0.003
    voiced_threshold: float = 10.0
    audio_limit: float = 0.99


@dataclass(frozen=True)
class MelParams:
    """The flow's mel features (matcha's mel_spectrogram), used for zero-shot prompts."""

    sample_rate: int = 22050
    n_fft: int = 1024
    num_mels: int = 80
    hop_size: int = 256
    win_size: int = 1024
    fmin: float = 0.0
    fmax: float = 8000.0
    center: bool = False


@dataclass(frozen=True)
class ModelParams:
    llm: LLMParams = field(default_factory=LLMParams)
    flow: FlowParams = field(default_factory=FlowParams)
    vocoder: VocoderParams = field(default_factory=VocoderParams)
    mel: MelParams = field(default_factory=MelParams)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelParams:
        return cls(
            llm=strict(LLMParams, data.get("llm", {})),
            flow=strict(FlowParams, data.get("flow", {})),
            vocoder=strict(VocoderParams, data.get("vocoder", {})),
            mel=strict(MelParams, data.get("mel", {})),
        )


def strict(cls: type, data: Mapping[str, Any]) -> Any:
    """`cls(**data)` for a manifest dataclass, refusing keys it does not know (a newer or damaged export)."""
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ArtifactError(f"manifest: unknown {cls.__name__} fields {sorted(unknown)}")
    return cls(**data)


__all__ = ["FlowParams", "LLMParams", "MelParams", "ModelParams", "VocoderParams", "strict"]
