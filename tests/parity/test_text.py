"""The text front end against upstream: whisper's tokenizer, CosyVoice's split_paragraph and
is_only_punctuation, and inflect's number words (which upstream's spell_out_number uses)."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import pytest

from function.cosyvoice.frontend.language import is_only_punctuation
from function.cosyvoice.frontend.numbers import en_cardinal
from function.cosyvoice.frontend.split import split_paragraph
from function.cosyvoice.frontend.tokenizer import TextTokenizer
from tests.parity.whisper_reference import load_whisper_module

TEXTS = [
    "Hello world! How are you today? I'm fine; thanks: really.",
    "你好，世界！今天天气很好。我们去公园散步吧？",
    "Mixed 中英文 text with numbers 12345 and symbols #@$%^&*().",
    "<|zh|>你好<|en|>hello<|endofprompt|> <|0.00|><|30.00|>",
    "  leading and trailing spaces \n\t newlines  ",
    "Ünïcödé, emoji 🎉, Кириллица, العربية, 日本語のテキスト, 한국어 텍스트.",
]


@pytest.fixture(scope="module")
def whisper_encoding(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    pytest.importorskip("tiktoken")
    module = load_whisper_module("tokenizer", tmp_path_factory.mktemp("whisper"))
    return module.get_tokenizer(multilingual=True, num_languages=100).encoding


@pytest.fixture(scope="module")
def ours(whisper_encoding) -> TextTokenizer:  # type: ignore[no-untyped-def]
    import whisper.tokenizer

    assets = Path(whisper.tokenizer.__file__).parent / "assets"
    return TextTokenizer.from_file(assets / "multilingual.tiktoken")


def test_same_ids_as_whisper(whisper_encoding, ours: TextTokenizer) -> None:  # type: ignore[no-untyped-def]
    assert ours.vocab_size == whisper_encoding.n_vocab == 51866
    assert ours.encoding._special_tokens == whisper_encoding._special_tokens
    for text in TEXTS:
        assert ours.encode(text) == whisper_encoding.encode(text, allowed_special="all"), text


@pytest.fixture(scope="module")
def upstream_utils():  # type: ignore[no-untyped-def]
    pytest.importorskip("regex")
    from cosyvoice.utils import frontend_utils

    return frontend_utils


@pytest.mark.parametrize("seed", range(20))
def test_split_matches_upstream(upstream_utils, ours: TextTokenizer, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    zh_pieces = ["今天天气很好", "我们去公园散步吧", "他说“你好。”", "真的吗", "一二三四五六七八九" * 3]
    en_pieces = ["The quick brown fox jumps over the lazy dog", 'He said "hi."', "Really", "OK", "Wait" * 5]
    for language, pieces, marks in (("zh", zh_pieces, "。？！；：、，"), ("en", en_pieces, ".?!;:,")):
        count = rng.randint(1, 25)
        text = "".join(rng.choice(pieces) + rng.choice(marks) * rng.choice([1, 1, 2]) for _ in range(count))
        if rng.random() < 0.3:
            text = text[:-1]  # no final stop
        units = len if language == "zh" else (lambda s: len(ours.encode(s)))
        expected = upstream_utils.split_paragraph(
            text,
            partial(ours.encode),
            language,
            token_max_n=80,
            token_min_n=60,
            merge_len=20,
            comma_split=False,
        )
        assert split_paragraph(text, language, units) == expected, text


def test_punctuation_rule_matches_upstream(upstream_utils) -> None:  # type: ignore[no-untyped-def]
    for text in ["", "。", "...!?", "$%^", "a.", " .", "……——", "《》", "1", "。a", "\u3000", "~+="]:
        assert is_only_punctuation(text) == upstream_utils.is_only_punctuation(text), repr(text)


def test_english_cardinals_match_inflect() -> None:
    inflect = pytest.importorskip("inflect")
    engine = inflect.engine()
    rng = random.Random(0)
    numbers = [str(rng.randrange(10 ** rng.randint(1, 15))) for _ in range(3000)]
    numbers += [str(10**k) for k in range(16)]
    for digits in numbers:
        assert en_cardinal(digits) == engine.number_to_words(digits), digits
