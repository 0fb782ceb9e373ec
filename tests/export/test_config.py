"""cosyvoice.yaml is read as numbers; what is not CosyVoice-300M is refused with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from export.config import CLASS_KEY, load_config, read_yaml
from export.errors import ConfigError
from export.fake import CONFIG_TEMPLATE, SIZES


def write_config(directory: Path, text: str) -> Path:
    (directory / "cosyvoice.yaml").write_text(text, encoding="utf-8")
    return directory


def test_full_template_has_released_numbers(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, CONFIG_TEMPLATE.format(size="full", s=SIZES["full"])))
    assert config.llm.llm.num_blocks == 14 and config.llm.llm.output_size == 1024
    assert config.llm.text_encoder.kind == "conformer" and config.llm.text_encoder.static_chunk_size == 1
    assert config.llm.text_token_size == 51866 and config.llm.speech_token_size == 4096
    assert config.flow.estimator.num_mid_blocks == 12 and config.flow.estimator.channels == (256, 256)
    assert config.hift.upsample_rates == (8, 8) and config.hift.nb_harmonics == 8
    params = config.params()
    assert params.vocoder.upsample_factor == 256
    assert params.llm.top_k == 25 and params.flow.inference_cfg_rate == pytest.approx(0.7)


def test_refs_are_resolved(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, CONFIG_TEMPLATE.format(size="tiny", s=SIZES["tiny"])))
    assert config.llm.llm_input_size == SIZES["tiny"].llm_size
    assert config.hift.sampling_rate == 22050


def test_cosyvoice2_is_refused(tmp_path: Path) -> None:
    text = CONFIG_TEMPLATE.format(size="tiny", s=SIZES["tiny"]).replace(
        "cosyvoice.llm.llm.TransformerLM", "cosyvoice.llm.llm.Qwen2LM"
    )
    with pytest.raises(ConfigError, match="CosyVoice2"):
        load_config(write_config(tmp_path, text))


def test_cosyvoice2_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "cosyvoice2.yaml").write_text("{}")
    with pytest.raises(ConfigError, match="CosyVoice2/3"):
        load_config(tmp_path)


def test_broken_yaml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write_config(tmp_path, "llm: [unclosed"))


def test_fake_yaml_has_the_released_tail(tiny_model_dir: Path) -> None:
    # The released cosyvoice.yaml goes on past the models: the frontend's tokenizer and feature settings,
    # the data processors, their pipeline and the training settings. The reader must keep parsing all of it.
    raw = read_yaml(tiny_model_dir / "cosyvoice.yaml")
    assert raw["get_tokenizer"] == {
        CLASS_KEY: "whisper.tokenizer.get_tokenizer",
        "multilingual": True,
        "num_languages": 100,
        "language": "en",
        "task": "transcribe",
    }
    assert raw["allowed_special"] == "all"
    assert raw["feat_extractor"][CLASS_KEY] == "matcha.utils.audio.mel_spectrogram"
    processors = [step[CLASS_KEY].rsplit(".", 1)[1] for step in raw["data_pipeline"]]
    assert processors == [
        "parquet_opener", "tokenize", "filter", "resample", "compute_fbank",
        "parse_embedding", "shuffle", "sort", "batch", "padding",
    ]  # fmt: skip
    assert raw["data_pipeline"][1]["get_tokenizer"] == raw["get_tokenizer"]  # a !ref inside a list
    assert raw["train_conf"]["optim"] == "adam" and raw["train_conf"]["max_epoch"] == 200
    load_config(tiny_model_dir)
