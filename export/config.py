"""cosyvoice.yaml → plain numbers, without importing any upstream class.

The release config is HyperPyYAML: `!new:pkg.Class` builds objects, `!name:` makes partials, `!ref <key>`
points elsewhere, `!apply:` calls functions. We read every tag as data: a `!new:`/`!name:` node becomes
its mapping plus the class name under `_class`, `!ref <key>` is replaced by the referenced value, and
`!apply:` (seeding) is dropped. Only what the export needs is turned into dataclasses below; where the
file leaves a runtime number out, the fallback is function.cosyvoice.params' default (written once, there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from export.errors import ConfigError
from function.cosyvoice.params import FlowParams, LLMParams, MelParams, ModelParams, VocoderParams

CLASS_KEY = "_class"
V1_CLASSES = {
    "llm": "cosyvoice.llm.llm.TransformerLM",
    "flow": "cosyvoice.flow.flow.MaskedDiffWithXvec",
    "hift": "cosyvoice.hifigan.generator.HiFTGenerator",
}


class _Ref(str):
    """A `!ref <key>` placeholder, resolved after loading."""


class _Loader(yaml.SafeLoader):
    # Own tables: other libraries register "!"-prefixed multi-constructors on SafeLoader (cfn-lint does),
    # and the first matching prefix would win over ours.
    yaml_constructors = dict(yaml.SafeLoader.yaml_constructors)
    yaml_multi_constructors: dict = {}


def _tagged(loader: _Loader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = {"_args": loader.construct_sequence(node, deep=True)}
    else:
        value = {}
    return {CLASS_KEY: suffix, **value}


def _ref(loader: _Loader, node: yaml.Node) -> _Ref:
    return _Ref(loader.construct_scalar(node))  # type: ignore[arg-type]


_Loader.add_multi_constructor("!new:", _tagged)
_Loader.add_multi_constructor("!name:", _tagged)
_Loader.add_multi_constructor("!apply:", lambda loader, suffix, node: None)
_Loader.add_constructor("!ref", _ref)


def _resolve(value: Any, root: dict) -> Any:
    if isinstance(value, _Ref):
        key = value.strip()
        if not (key.startswith("<") and key.endswith(">")):
            raise ConfigError(f"unsupported !ref expression {value!r}")
        target: Any = root
        for part in key[1:-1].split("."):
            if not isinstance(target, dict) or part not in target:
                raise ConfigError(f"!ref {value} points at nothing")
            target = target[part]
        return _resolve(target, root)
    if isinstance(value, dict):
        return {k: _resolve(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, root) for v in value]
    return value


def read_yaml(path: Path) -> dict:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path.name} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path.name} is not a mapping")
    return _resolve(raw, raw)


@dataclass(frozen=True)
class EncoderConfig:
    """A wenet-style Conformer/Transformer encoder as CosyVoice v1 configures it."""

    input_size: int
    output_size: int
    attention_heads: int
    linear_units: int
    num_blocks: int
    input_layer: str
    pos_enc_layer_type: str
    normalize_before: bool
    static_chunk_size: int
    macaron_style: bool
    use_cnn_module: bool
    kind: str  # "conformer" or "transformer"

    @classmethod
    def from_node(cls, node: dict, where: str) -> EncoderConfig:
        kind = node.get(CLASS_KEY, "").rsplit(".", 1)[-1]
        if kind not in ("ConformerEncoder", "TransformerEncoder"):
            raise ConfigError(f"{where}: unsupported encoder class {node.get(CLASS_KEY)!r}")
        return cls(
            input_size=int(node["input_size"]),
            output_size=int(node.get("output_size", 256)),
            attention_heads=int(node.get("attention_heads", 4)),
            linear_units=int(node.get("linear_units", 2048)),
            num_blocks=int(node.get("num_blocks", 6)),
            input_layer=str(node.get("input_layer", "conv2d")),
            pos_enc_layer_type=str(node.get("pos_enc_layer_type", "abs_pos")),
            normalize_before=bool(node.get("normalize_before", True)),
            static_chunk_size=int(node.get("static_chunk_size", 0)),
            macaron_style=bool(node.get("macaron_style", False)),
            use_cnn_module=bool(node.get("use_cnn_module", False)),
            kind="conformer" if kind == "ConformerEncoder" else "transformer",
        )


@dataclass(frozen=True)
class LLMConfig:
    text_encoder_input_size: int
    llm_input_size: int
    llm_output_size: int
    text_token_size: int
    speech_token_size: int
    spk_embed_dim: int
    text_encoder: EncoderConfig
    llm: EncoderConfig


@dataclass(frozen=True)
class EstimatorConfig:
    in_channels: int
    out_channels: int
    channels: tuple[int, ...]
    attention_head_dim: int
    n_blocks: int
    num_mid_blocks: int
    num_heads: int
    act_fn: str
    dropout: float


@dataclass(frozen=True)
class FlowConfig:
    input_size: int
    output_size: int
    spk_embed_dim: int
    vocab_size: int
    input_frame_rate: int
    encoder: EncoderConfig
    length_regulator_channels: int
    sampling_ratios: tuple[int, ...]
    decoder_in_channels: int
    inference_cfg_rate: float
    t_scheduler: str
    sigma_min: float
    estimator: EstimatorConfig

    def params(self) -> FlowParams:
        """The flow's runtime numbers (the mel frame rule among them), as the manifest stores them."""
        return FlowParams(
            n_mels=self.output_size,
            input_frame_rate=self.input_frame_rate,
            inference_cfg_rate=self.inference_cfg_rate,
            t_scheduler=self.t_scheduler,
        )


@dataclass(frozen=True)
class HiFTConfig:
    in_channels: int
    base_channels: int
    nb_harmonics: int
    sampling_rate: int
    nsf_alpha: float
    nsf_sigma: float
    nsf_voiced_threshold: float
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    istft_n_fft: int
    istft_hop_len: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    source_resblock_kernel_sizes: tuple[int, ...]
    source_resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    lrelu_slope: float
    audio_limit: float
    f0_num_class: int
    f0_in_channels: int
    f0_cond_channels: int

    def params(self) -> VocoderParams:
        """The vocoder's runtime numbers (its source's among them), as the manifest stores them."""
        return VocoderParams(
            sample_rate=self.sampling_rate,
            upsample_factor=_product(self.upsample_rates) * self.istft_hop_len,
            n_fft=self.istft_n_fft,
            hop_len=self.istft_hop_len,
            nb_harmonics=self.nb_harmonics,
            sine_amp=self.nsf_alpha,
            noise_std=self.nsf_sigma,
            voiced_threshold=self.nsf_voiced_threshold,
            audio_limit=self.audio_limit,
        )


@dataclass(frozen=True)
class ModelConfig:
    sample_rate: int
    llm: LLMConfig
    flow: FlowConfig
    hift: HiFTConfig
    mel: MelParams
    sampling: dict[str, float]

    def params(self) -> ModelParams:
        """The numbers the runtime needs, as the manifest stores them."""
        return ModelParams(
            llm=LLMParams(
                speech_token_size=self.llm.speech_token_size,
                top_p=float(self.sampling.get("top_p", LLMParams.top_p)),
                top_k=int(self.sampling.get("top_k", LLMParams.top_k)),
                win_size=int(self.sampling.get("win_size", LLMParams.win_size)),
                tau_r=float(self.sampling.get("tau_r", LLMParams.tau_r)),
            ),
            flow=self.flow.params(),
            vocoder=self.hift.params(),
            mel=self.mel,
        )


def _product(values: tuple[int, ...]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def _require_class(raw: dict, key: str) -> dict:
    node = raw.get(key)
    if not isinstance(node, dict):
        raise ConfigError(f"cosyvoice.yaml has no `{key}` model")
    found = node.get(CLASS_KEY)
    if found != V1_CLASSES[key]:
        hint = " (this looks like CosyVoice2/3, which is not supported)" if found else ""
        raise ConfigError(f"cosyvoice.yaml `{key}` is {found!r}, expected {V1_CLASSES[key]}{hint}")
    return node


def load_config(model_dir: Path) -> ModelConfig:
    path = model_dir / "cosyvoice.yaml"
    if not path.is_file():
        if (model_dir / "cosyvoice2.yaml").is_file() or (model_dir / "cosyvoice3.yaml").is_file():
            raise ConfigError(
                f"{model_dir} is a CosyVoice2/3 model directory; only CosyVoice-300M (v1) is supported"
            )
        raise ConfigError(f"{model_dir} has no cosyvoice.yaml")
    raw = read_yaml(path)
    try:
        return _model_config(raw)
    except KeyError as exc:
        raise ConfigError(f"cosyvoice.yaml lacks {exc}") from exc


def _model_config(raw: dict) -> ModelConfig:
    llm, flow, hift = (_require_class(raw, key) for key in ("llm", "flow", "hift"))
    decoder = flow["decoder"]
    cfm = decoder.get("cfm_params", {})
    cfm = cfm.get("content", cfm)
    estimator = decoder["estimator"]
    regulator = flow["length_regulator"]
    f0 = hift["f0_predictor"]
    mel = raw.get("feat_extractor", {})
    sampling = raw.get("llm", {}).get("sampling") or {}
    sample_rate = int(raw.get("sample_rate", hift.get("sampling_rate", VocoderParams.sample_rate)))
    return ModelConfig(
        sample_rate=sample_rate,
        llm=LLMConfig(
            text_encoder_input_size=int(llm["text_encoder_input_size"]),
            llm_input_size=int(llm["llm_input_size"]),
            llm_output_size=int(llm["llm_output_size"]),
            text_token_size=int(llm["text_token_size"]),
            speech_token_size=int(llm["speech_token_size"]),
            spk_embed_dim=int(llm.get("spk_embed_dim", 192)),
            text_encoder=EncoderConfig.from_node(llm["text_encoder"], "llm.text_encoder"),
            llm=EncoderConfig.from_node(llm["llm"], "llm.llm"),
        ),
        flow=FlowConfig(
            input_size=int(flow["input_size"]),
            output_size=int(flow["output_size"]),
            spk_embed_dim=int(flow.get("spk_embed_dim", 192)),
            vocab_size=int(flow["vocab_size"]),
            input_frame_rate=int(flow.get("input_frame_rate", FlowParams.input_frame_rate)),
            encoder=EncoderConfig.from_node(flow["encoder"], "flow.encoder"),
            length_regulator_channels=int(regulator["channels"]),
            sampling_ratios=tuple(int(r) for r in regulator["sampling_ratios"]),
            decoder_in_channels=int(decoder.get("in_channels", 240)),
            inference_cfg_rate=float(cfm.get("inference_cfg_rate", FlowParams.inference_cfg_rate)),
            t_scheduler=str(cfm.get("t_scheduler", FlowParams.t_scheduler)),
            sigma_min=float(cfm.get("sigma_min", 1e-6)),
            estimator=EstimatorConfig(
                in_channels=int(estimator["in_channels"]),
                out_channels=int(estimator["out_channels"]),
                channels=tuple(int(c) for c in estimator.get("channels", (256, 256))),
                attention_head_dim=int(estimator.get("attention_head_dim", 64)),
                n_blocks=int(estimator.get("n_blocks", 1)),
                num_mid_blocks=int(estimator.get("num_mid_blocks", 2)),
                num_heads=int(estimator.get("num_heads", 4)),
                act_fn=str(estimator.get("act_fn", "snake")),
                dropout=float(estimator.get("dropout", 0.05)),
            ),
        ),
        hift=HiFTConfig(
            in_channels=int(hift.get("in_channels", 80)),
            base_channels=int(hift.get("base_channels", 512)),
            nb_harmonics=int(hift.get("nb_harmonics", VocoderParams.nb_harmonics)),
            sampling_rate=int(hift.get("sampling_rate", sample_rate)),
            nsf_alpha=float(hift.get("nsf_alpha", VocoderParams.sine_amp)),
            nsf_sigma=float(hift.get("nsf_sigma", VocoderParams.noise_std)),
            nsf_voiced_threshold=float(hift.get("nsf_voiced_threshold", VocoderParams.voiced_threshold)),
            upsample_rates=tuple(int(r) for r in hift.get("upsample_rates", (8, 8))),
            upsample_kernel_sizes=tuple(int(k) for k in hift.get("upsample_kernel_sizes", (16, 16))),
            istft_n_fft=int(hift.get("istft_params", {}).get("n_fft", VocoderParams.n_fft)),
            istft_hop_len=int(hift.get("istft_params", {}).get("hop_len", VocoderParams.hop_len)),
            resblock_kernel_sizes=tuple(int(k) for k in hift.get("resblock_kernel_sizes", (3, 7, 11))),
            resblock_dilation_sizes=tuple(
                tuple(int(d) for d in ds) for ds in hift.get("resblock_dilation_sizes", [[1, 3, 5]] * 3)
            ),
            source_resblock_kernel_sizes=tuple(
                int(k) for k in hift.get("source_resblock_kernel_sizes", (7, 11))
            ),
            source_resblock_dilation_sizes=tuple(
                tuple(int(d) for d in ds)
                for ds in hift.get("source_resblock_dilation_sizes", [[1, 3, 5]] * 2)
            ),
            lrelu_slope=float(hift.get("lrelu_slope", 0.1)),
            audio_limit=float(hift.get("audio_limit", VocoderParams.audio_limit)),
            f0_num_class=int(f0.get("num_class", 1)),
            f0_in_channels=int(f0.get("in_channels", 80)),
            f0_cond_channels=int(f0.get("cond_channels", 512)),
        ),
        mel=MelParams(
            sample_rate=int(mel.get("sampling_rate", sample_rate)),
            n_fft=int(mel.get("n_fft", MelParams.n_fft)),
            num_mels=int(mel.get("num_mels", MelParams.num_mels)),
            hop_size=int(mel.get("hop_size", MelParams.hop_size)),
            win_size=int(mel.get("win_size", MelParams.win_size)),
            fmin=float(mel.get("fmin", MelParams.fmin)),
            fmax=float(mel.get("fmax", MelParams.fmax)),
            center=bool(mel.get("center", MelParams.center)),
        ),
        sampling={k: v for k, v in sampling.items() if k != CLASS_KEY},
    )
