"""Random-weight CosyVoice-300M model directories in the released layout, for tests and benchmarks.

`full` has the released sizes (436M parameters, 1.74 GB fp32), so timings and memory are real; `tiny`
keeps every kind of layer with small widths and depths. The same seed gives the same bytes.
The audio such a model makes is noise: the weights are random.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from export.config import load_config
from export.errors import OptionsError

SFT_SPEAKERS = ("中文女", "中文男", "日语男", "粤语女", "英文女", "英文男", "韩语女")


@dataclass(frozen=True)
class FakeSize:
    text_encoder_input_size: int
    llm_size: int
    llm_heads: int
    llm_units: int
    text_encoder_blocks: int
    llm_blocks: int
    flow_size: int
    flow_heads: int
    flow_units: int
    flow_blocks: int
    estimator_channels: int
    estimator_head_dim: int
    estimator_heads: int
    estimator_blocks: int
    estimator_mid_blocks: int
    hift_channels: int
    f0_channels: int


SIZES = {
    "full": FakeSize(512, 1024, 16, 4096, 6, 14, 512, 8, 2048, 6, 256, 64, 8, 4, 12, 512, 512),
    "tiny": FakeSize(32, 64, 4, 128, 2, 2, 32, 2, 64, 2, 32, 16, 2, 1, 2, 16, 16),
}

# The layout of the released cosyvoice.yaml (v1, 2c1877a), with the sizes left open; its tail (the data
# processors, data_pipeline and train_conf) as released, so that what the exporter reads is held to it.
CONFIG_TEMPLATE = """\
# CosyVoice-300M configuration, random-weight stand-in ({size}) written by `python -m export fake`.
__set_seed1: !apply:random.seed [1986]
__set_seed2: !apply:numpy.random.seed [1986]
__set_seed3: !apply:torch.manual_seed [1986]
__set_seed4: !apply:torch.cuda.manual_seed_all [1986]

sample_rate: 22050
text_encoder_input_size: {s.text_encoder_input_size}
llm_input_size: {s.llm_size}
llm_output_size: {s.llm_size}
spk_embed_dim: 192

llm: !new:cosyvoice.llm.llm.TransformerLM
    text_encoder_input_size: !ref <text_encoder_input_size>
    llm_input_size: !ref <llm_input_size>
    llm_output_size: !ref <llm_output_size>
    text_token_size: 51866
    speech_token_size: 4096
    length_normalized_loss: True
    lsm_weight: 0
    spk_embed_dim: !ref <spk_embed_dim>
    text_encoder: !new:cosyvoice.transformer.encoder.ConformerEncoder
        input_size: !ref <text_encoder_input_size>
        output_size: {s.llm_size}
        attention_heads: {s.llm_heads}
        linear_units: {s.llm_units}
        num_blocks: {s.text_encoder_blocks}
        dropout_rate: 0.1
        positional_dropout_rate: 0.1
        attention_dropout_rate: 0.0
        normalize_before: True
        input_layer: 'linear'
        pos_enc_layer_type: 'rel_pos_espnet'
        selfattention_layer_type: 'rel_selfattn'
        use_cnn_module: False
        macaron_style: False
        use_dynamic_chunk: False
        use_dynamic_left_chunk: False
        static_chunk_size: 1
    llm: !new:cosyvoice.transformer.encoder.TransformerEncoder
        input_size: !ref <llm_input_size>
        output_size: !ref <llm_output_size>
        attention_heads: {s.llm_heads}
        linear_units: {s.llm_units}
        num_blocks: {s.llm_blocks}
        dropout_rate: 0.1
        positional_dropout_rate: 0.1
        attention_dropout_rate: 0.0
        input_layer: 'linear_legacy'
        pos_enc_layer_type: 'rel_pos_espnet'
        selfattention_layer_type: 'rel_selfattn'
        static_chunk_size: 1
    sampling: !name:cosyvoice.utils.common.ras_sampling
        top_p: 0.8
        top_k: 25
        win_size: 10
        tau_r: 0.1

flow: !new:cosyvoice.flow.flow.MaskedDiffWithXvec
    input_size: {s.flow_size}
    output_size: 80
    spk_embed_dim: !ref <spk_embed_dim>
    output_type: 'mel'
    vocab_size: 4096
    input_frame_rate: 50
    only_mask_loss: True
    encoder: !new:cosyvoice.transformer.encoder.ConformerEncoder
        output_size: {s.flow_size}
        attention_heads: {s.flow_heads}
        linear_units: {s.flow_units}
        num_blocks: {s.flow_blocks}
        dropout_rate: 0.1
        positional_dropout_rate: 0.1
        attention_dropout_rate: 0.1
        normalize_before: True
        input_layer: 'linear'
        pos_enc_layer_type: 'rel_pos_espnet'
        selfattention_layer_type: 'rel_selfattn'
        input_size: {s.flow_size}
        use_cnn_module: False
        macaron_style: False
    length_regulator: !new:cosyvoice.flow.length_regulator.InterpolateRegulator
        channels: 80
        sampling_ratios: [1, 1, 1, 1]
    decoder: !new:cosyvoice.flow.flow_matching.ConditionalCFM
        in_channels: 240
        n_spks: 1
        spk_emb_dim: 80
        cfm_params: !new:omegaconf.DictConfig
            content:
                sigma_min: 1e-06
                solver: 'euler'
                t_scheduler: 'cosine'
                training_cfg_rate: 0.2
                inference_cfg_rate: 0.7
                reg_loss_type: 'l1'
        estimator: !new:cosyvoice.flow.decoder.ConditionalDecoder
            in_channels: 320
            out_channels: 80
            channels: [{s.estimator_channels}, {s.estimator_channels}]
            dropout: 0.0
            attention_head_dim: {s.estimator_head_dim}
            n_blocks: {s.estimator_blocks}
            num_mid_blocks: {s.estimator_mid_blocks}
            num_heads: {s.estimator_heads}
            act_fn: 'gelu'

hift: !new:cosyvoice.hifigan.generator.HiFTGenerator
    in_channels: 80
    base_channels: {s.hift_channels}
    nb_harmonics: 8
    sampling_rate: !ref <sample_rate>
    nsf_alpha: 0.1
    nsf_sigma: 0.003
    nsf_voiced_threshold: 10
    upsample_rates: [8, 8]
    upsample_kernel_sizes: [16, 16]
    istft_params:
        n_fft: 16
        hop_len: 4
    resblock_kernel_sizes: [3, 7, 11]
    resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    source_resblock_kernel_sizes: [7, 11]
    source_resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5]]
    lrelu_slope: 0.1
    audio_limit: 0.99
    f0_predictor: !new:cosyvoice.hifigan.f0_predictor.ConvRNNF0Predictor
        num_class: 1
        in_channels: 80
        cond_channels: {s.f0_channels}

parquet_opener: !name:cosyvoice.dataset.processor.parquet_opener
get_tokenizer: !name:whisper.tokenizer.get_tokenizer
    multilingual: True
    num_languages: 100
    language: 'en'
    task: 'transcribe'
allowed_special: 'all'
tokenize: !name:cosyvoice.dataset.processor.tokenize
    get_tokenizer: !ref <get_tokenizer>
    allowed_special: !ref <allowed_special>
filter: !name:cosyvoice.dataset.processor.filter
    max_length: 40960
    min_length: 0
    token_max_length: 200
    token_min_length: 1
resample: !name:cosyvoice.dataset.processor.resample
    resample_rate: !ref <sample_rate>
feat_extractor: !name:matcha.utils.audio.mel_spectrogram
    n_fft: 1024
    num_mels: 80
    sampling_rate: !ref <sample_rate>
    hop_size: 256
    win_size: 1024
    fmin: 0
    fmax: 8000
    center: False
compute_fbank: !name:cosyvoice.dataset.processor.compute_fbank
    feat_extractor: !ref <feat_extractor>
parse_embedding: !name:cosyvoice.dataset.processor.parse_embedding
    normalize: True
shuffle: !name:cosyvoice.dataset.processor.shuffle
    shuffle_size: 1000
sort: !name:cosyvoice.dataset.processor.sort
    sort_size: 500  # sort_size should be less than shuffle_size
batch: !name:cosyvoice.dataset.processor.batch
    batch_type: 'dynamic'
    max_frames_in_batch: 2000
padding: !name:cosyvoice.dataset.processor.padding
    use_spk_embedding: False # change to True during sft

# dataset processor pipeline
data_pipeline: [
    !ref <parquet_opener>,
    !ref <tokenize>,
    !ref <filter>,
    !ref <resample>,
    !ref <compute_fbank>,
    !ref <parse_embedding>,
    !ref <shuffle>,
    !ref <sort>,
    !ref <batch>,
    !ref <padding>,
]

# train conf
train_conf:
    optim: adam
    optim_conf:
        lr: 0.001 # change to 1e-5 during sft
    scheduler: warmuplr # change to constantlr during sft
    scheduler_conf:
        warmup_steps: 2500
    max_epoch: 200
    grad_clip: 5
    accum_grad: 2
    log_interval: 100
    save_per_step: -1
"""


def make_fake_model(
    out_dir: Path, size: str = "tiny", seed: int = 0, legacy_weight_norm: bool = False
) -> Path:
    """Write a random-weight model directory. `legacy_weight_norm` stores hift's weight_g/weight_v."""
    from export.graphs import flow, llm, vocoder

    if size not in SIZES:
        raise OptionsError(f"unknown size {size!r}; choose from {sorted(SIZES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "cosyvoice.yaml").write_text(
        CONFIG_TEMPLATE.format(size=size, s=SIZES[size]), encoding="utf-8"
    )
    config = load_config(out_dir)
    torch.save(llm.random_state_dict(config.llm, seed), out_dir / "llm.pt")
    torch.save(flow.random_state_dict(config.flow, seed + 1), out_dir / "flow.pt")
    torch.save(vocoder.random_state_dict(config.hift, seed + 2, legacy_weight_norm), out_dir / "hift.pt")
    generator = torch.Generator().manual_seed(seed + 3)
    speakers = {name: {"embedding": torch.randn(1, 192, generator=generator)} for name in SFT_SPEAKERS}
    torch.save(speakers, out_dir / "spk2info.pt")
    from export.graphs import frontend_models

    frontend_models.write_stand_ins(out_dir, seed + 4)
    return out_dir


__all__ = ["SFT_SPEAKERS", "SIZES", "make_fake_model"]
