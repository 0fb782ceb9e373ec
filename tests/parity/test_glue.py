"""The glue between the stages, held against upstream: what each segment of a request feeds the model.

Upstream's own CosyVoiceFrontEnd (tests/parity/upstream_frontend.py) normalises and splits the text and
returns a `model_input` per segment (frontend_sft / frontend_instruct / frontend_zero_shot /
frontend_cross_lingual, called as v1's cosyvoice/cli/cosyvoice.py calls them); the engine's
`model_inputs` is the seam its own synthesis runs on. Tokens must be equal, embeddings and features
within 1e-4, and the LLM's min/max lengths those of v1's CosyVoiceModel (3 and 30 per text token).
Where the project differs on purpose, a test below says so by name.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from function.core.errors import InvalidRequest  # noqa: E402
from function.core.options import SynthesisOptions  # noqa: E402
from function.cosyvoice.artifact import Artifact  # noqa: E402
from function.cosyvoice.engine import Engine, ModelInput  # noqa: E402
from tests.parity.upstream_frontend import build  # noqa: E402

TOLERANCE = 1e-4
V1_MIN_RATIO, V1_MAX_RATIO = 3, 30  # cosyvoice/cli/model.py llm_job at 2c1877a
SPEAKER = "中文女"
PROMPT_TEXT = "希望你以后能够做的比我还好呦。"
INSTRUCTION = "A calm, gentle voice, speaking slowly."
TEXTS = [
    "Hello there, how are you today?",
    "The quick brown fox jumps over the lazy dog. It was not amused!",
    "CosyVoice speaks English and Chinese; it clones voices too.",
    "Is this the real life? Is this just fantasy?",
    "We met at noon: the sky was grey, and the wind was cold.",
    "I have three apples and two pears.",
    "Good morning",
    "Read this slowly, please, and then read it again, a little faster, until it sounds natural.",
    "A long story begins here. " * 8,
    "收到好友从远方寄来的生日礼物，那份意外的惊喜与深深的祝福让我心中充满了甜蜜的快乐。",
    "今天天气很好，我们去公园散步吧！",
    "你好。我是通义实验室语音团队全新推出的生成式语音大模型，提供舒适自然的语音合成能力。",
    "他说：“我们明天见。”然后就走了。",
    "这是第一句。这是第二句？这是第三句！",
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "我们说话，这兒有點冷。",
    "没有句号的一段话也要读完",
    "在面对挑战时，他展现了非凡的勇气与智慧。" * 6,
    "我今天学了English和数学。",
    "这个model的效果很好，we should try it。",
    "用Python写代码，真的很方便。",
    "北京是中国的首都，Beijing is the capital of China.",
    "欢迎使用CosyVoice，祝你玩得开心！",
    "这是第一句。后面是没有句号的尾巴",  # v1 at 2c1877a dropped the tail; the wheel and we keep it
    "哪儿好玩儿？嗯，我知道了。",
    "<|en|>Hello there. This text is tagged as English.",
    "<|en|>" + "A tagged sentence that goes on for a while. " * 8,
]


@pytest.fixture(scope="module")
def frontend(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build(tiny_model_dir, tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="module")
def engine(tiny_artifact: Path) -> Engine:
    return Engine.load(Artifact.open(tiny_artifact))


@pytest.fixture(scope="module")
def prompt() -> np.ndarray:
    """3 s of a voiced-sounding signal at 16 kHz (upstream's load_wav rate: no resampling on either side)."""
    t = np.arange(3 * 16000) / 16000
    signal = sum(0.2 / k * np.sin(2 * np.pi * 140 * k * t) for k in range(1, 10))
    noise = 0.01 * np.random.default_rng(0).standard_normal(len(t))
    return (signal * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)) + noise).astype(np.float32)


def wav(audio: np.ndarray) -> bytes:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, audio, 16000, format="WAV", subtype="FLOAT")
    return buffer.getvalue()


def upstream_inputs(frontend: Any, mode: str, text: str, prompt: np.ndarray) -> list[dict[str, Any]]:
    """model_input per segment, as CosyVoice.inference_<mode> builds them (cosyvoice/cli/cosyvoice.py)."""
    speech = torch.from_numpy(prompt)[None]
    segments = frontend.text_normalize(text, split=True)
    if mode == "sft":
        return [frontend.frontend_sft(segment, SPEAKER) for segment in segments]
    if mode == "instruct":
        instruction = frontend.text_normalize(INSTRUCTION, split=False)
        return [frontend.frontend_instruct(segment, SPEAKER, instruction) for segment in segments]
    if mode == "zero_shot":
        prompt_text = frontend.text_normalize(PROMPT_TEXT, split=False)
        return [frontend.frontend_zero_shot(s, prompt_text, speech, 22050, "") for s in segments]
    return [frontend.frontend_cross_lingual(segment, speech, 22050, "") for segment in segments]


def options(mode: str, text: str, prompt: np.ndarray) -> SynthesisOptions:
    voice: dict[str, Any] = {
        "sft": {"speaker": SPEAKER},
        "instruct": {"speaker": SPEAKER, "instruct": INSTRUCTION},
        "zero_shot": {"prompt_audio": wav(prompt), "prompt_text": PROMPT_TEXT},
        "cross_lingual": {"prompt_audio": wav(prompt)},
    }[mode]
    return SynthesisOptions(text=text, **voice)


def as_model_input(item: ModelInput) -> dict[str, np.ndarray]:
    """Ours in upstream's names, with CosyVoiceModel.tts's defaults for what a mode leaves out."""
    voice = item.conditioning
    return {
        "text": item.text_tokens,
        "prompt_text": voice.prompt_text_tokens,
        "llm_embedding": voice.llm_embedding,
        "llm_prompt_speech_token": voice.llm_prompt_tokens,
        "flow_prompt_speech_token": voice.flow_prompt_tokens,
        "prompt_speech_feat": voice.prompt_mel,
        "flow_embedding": voice.flow_embedding,
    }


def upstream_with_defaults(model_input: dict[str, Any]) -> dict[str, np.ndarray]:
    defaults = {
        "prompt_text": torch.zeros(1, 0, dtype=torch.int32),
        "llm_embedding": torch.zeros(0, 192),
        "llm_prompt_speech_token": torch.zeros(1, 0, dtype=torch.int32),
        "flow_prompt_speech_token": torch.zeros(1, 0, dtype=torch.int32),
        "prompt_speech_feat": torch.zeros(1, 0, 80),
    }
    merged = {**defaults, **model_input}
    return {key: merged[key].cpu().numpy() for key in (*defaults, "text", "flow_embedding")}


def assert_same_inputs(theirs: list[dict[str, Any]], ours: list[ModelInput]) -> None:
    assert len(ours) == len(theirs)
    for upstream, item in zip(theirs, ours, strict=True):
        expected, actual = upstream_with_defaults(upstream), as_model_input(item)
        for key in ("text", "prompt_text", "llm_prompt_speech_token", "flow_prompt_speech_token"):
            assert actual[key].tolist() == expected[key].tolist(), key
        for key in ("llm_embedding", "flow_embedding", "prompt_speech_feat"):
            assert actual[key].shape == expected[key].shape, key
            np.testing.assert_allclose(actual[key], expected[key], atol=TOLERANCE, rtol=0, err_msg=key)
        n = expected["text"].shape[1]
        assert (item.min_tokens, item.max_tokens) == (n * V1_MIN_RATIO, n * V1_MAX_RATIO)


@pytest.mark.parametrize("mode", ["sft", "instruct", "zero_shot", "cross_lingual"])
@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_model_inputs_match_upstreams_frontend(
    frontend: Any, engine: Engine, prompt: np.ndarray, mode: str, text: str
) -> None:
    assert_same_inputs(
        upstream_inputs(frontend, mode, text, prompt),
        engine.model_inputs(engine.prepare(options(mode, text, prompt))),
    )


# --- where the project differs on purpose (docs/fidelity.md) ---------------------------------------------


def test_a_quote_is_spoken_as_written_where_wetexts_english_graphs_escape_it(
    frontend: Any, engine: Engine
) -> None:
    text = 'She said, "Come here." Then she left.'
    assert frontend.text_normalize(text, split=False) == 'She said, \\"Come here.\\" Then she left.'
    assert engine.segments(text) == [text]


def test_punctuation_only_text_is_refused_where_v1_would_speak_it(frontend: Any, engine: Engine) -> None:
    # v1 at 2c1877a speaks "……" (as "……."); the wheel drops punctuation-only segments, and so do we.
    assert frontend.text_normalize("……", split=True) == []
    with pytest.raises(InvalidRequest, match="nothing to speak"):
        engine.prepare(SynthesisOptions(text="……", speaker=SPEAKER))


def test_erhua_and_interjections_are_kept_where_v1s_shipped_graphs_drop_them(engine: Engine) -> None:
    from wetext import Normalizer

    text = "嗯，哪儿好玩儿？"
    # v1's WeTextProcessing graphs were built with their defaults, whatever its frontend asked for.
    v1_graphs = Normalizer(lang="zh", operator="tn", remove_erhua=True, remove_interjections=True)
    assert v1_graphs.normalize(text) != text
    assert engine.segments(text) == [text]


def test_an_overlong_sentence_is_cut_where_v1_keeps_it_whole(frontend: Any, engine: Engine) -> None:
    # An unpunctuated 400-token transcript: v1 feeds it whole, allowing 30 × 400 speech tokens, far past
    # the 5000 positions its relative positions cover; here it is cut between words into segments that fit.
    text = "and then we walked on " * 80
    assert len(frontend.text_normalize(text, split=True)) == 1
    inputs = engine.model_inputs(engine.prepare(SynthesisOptions(text=text, speaker=SPEAKER)))
    assert len(inputs) > 1 and "".join(item.text for item in inputs) == text.strip() + "."
    for item in inputs:
        n = item.text_tokens.shape[1]
        assert (item.min_tokens, item.max_tokens) == (n * V1_MIN_RATIO, n * V1_MAX_RATIO)


def test_text_after_the_last_stop_mark_is_spoken_where_v1_at_2c1877a_dropped_it(
    frontend: Any, engine: Engine
) -> None:
    # v1's split_paragraph at 2c1877a kept only text that ends at a stop mark; upstream fixed that a day
    # later, and the wheel and we speak the tail.
    text = "这是第一句。后面是没有句号的尾巴"
    assert frontend.text_normalize(text, split=True) == engine.segments(text) == [text + "。"]
