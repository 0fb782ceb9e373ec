"""Text front end: tokenizer ids, number words, normalisation, splitting, prepare_text. No torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from function.core.errors import ArtifactError
from function.cosyvoice.frontend import TextTokenizer, fst, normalize_text, prepare_text
from function.cosyvoice.frontend.language import is_only_punctuation, language_of
from function.cosyvoice.frontend.normalize import normalize
from function.cosyvoice.frontend.numbers import (
    en_cardinal,
    en_year,
    read_integer,
    times_ten_to,
    zh_amount,
    zh_cardinal,
)
from function.cosyvoice.frontend.split import MAX_UNITS, MERGE_UNITS, split_paragraph
from function.cosyvoice.frontend.tokenizer import VOCAB_SIZE

ROOT = Path(__file__).resolve().parents[4]
ASSETS = Path(os.environ.get("COSYVOICE_WHISPER_ASSETS", ROOT / ".cache" / "whisper-assets"))
VOCAB = ASSETS / "multilingual.tiktoken"


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    if not VOCAB.is_file():
        pytest.skip(f"{VOCAB} missing: run `make setup`")
    return TextTokenizer.from_file(VOCAB)


# --- tokenizer -----------------------------------------------------------------------------------------


def test_vocabulary_has_whisper_ids(tokenizer: TextTokenizer) -> None:
    assert tokenizer.vocab_size == VOCAB_SIZE == 51866
    expected = {
        "<|endoftext|>": 50257,
        "<|startoftranscript|>": 50258,
        "<|en|>": 50259,
        "<|zh|>": 50260,
        "<|ja|>": 50266,
        "<|ko|>": 50264,
        "<|yue|>": 50358,
        "<|translate|>": 50359,
        "<|transcribe|>": 50360,
        "<|startoflm|>": 50361,
        "<|startofprev|>": 50362,
        "<|nospeech|>": 50363,
        "<|notimestamps|>": 50364,
        "<|0.00|>": 50365,
        "<|0.02|>": 50366,
        "<|30.00|>": 51865,
    }
    for text, token in expected.items():
        assert tokenizer.encode(text) == [token], text


def test_encodes_text_like_whisper(tokenizer: TextTokenizer) -> None:
    assert tokenizer.encode("Hello world") == [15947, 1002]
    text = "你好，世界！ Mixed text 123."
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize("marker", ["<endofprompt>", "<|endofprompt|>"])
def test_endofprompt_is_ordinary_text(tokenizer: TextTokenizer, marker: str) -> None:
    tokens = tokenizer.encode(marker)
    assert len(tokens) > 1 and all(t < 50257 for t in tokens)


def test_from_buffer_matches_from_file(tokenizer: TextTokenizer) -> None:
    again = TextTokenizer.from_buffer(memoryview(VOCAB.read_bytes()))
    assert again.encode("<|zh|>今天天气很好 today") == tokenizer.encode("<|zh|>今天天气很好 today")


def test_rejects_a_foreign_vocabulary() -> None:
    with pytest.raises(ArtifactError, match="ranks"):
        TextTokenizer.from_buffer(b"YQ== 0\nYg== 1\n")
    with pytest.raises(ArtifactError, match="malformed"):
        TextTokenizer.from_buffer(b"YQ== zero\n")


# --- number words --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("digits", "words"),
    [
        ("0", "zero"),
        ("13", "thirteen"),
        ("40", "forty"),
        ("101", "one hundred and one"),
        ("1001", "one thousand and one"),
        ("1100", "one thousand, one hundred"),
        ("2000000003", "two billion and three"),
        ("1234567", "one million, two hundred and thirty-four thousand, five hundred and sixty-seven"),
    ],
)
def test_english_cardinals_read_like_inflect(digits: str, words: str) -> None:
    assert en_cardinal(digits) == words


def test_english_years() -> None:
    assert [en_year(y) for y in ("1999", "2005", "2024", "1900", "1905")] == [
        "nineteen ninety-nine",
        "two thousand and five",
        "twenty twenty-four",
        "nineteen hundred",
        "nineteen oh five",
    ]


@pytest.mark.parametrize(
    ("digits", "words"),
    [
        ("0", "零"),
        ("10", "十"),
        ("15", "十五"),
        ("20", "二十"),
        ("101", "一百零一"),
        ("110", "一百一十"),
        ("1001", "一千零一"),
        ("10010", "一万零一十"),
        ("100001", "十万零一"),
        ("1002003", "一百万二千零三"),
        ("100000000", "一亿"),
        ("1000010000", "十亿零一万"),
        ("120000000", "一亿二千万"),
    ],
)
def test_chinese_cardinals(digits: str, words: str) -> None:
    assert zh_cardinal(digits) == words


def test_chinese_amounts_before_a_measure_word_say_liang() -> None:
    assert [zh_amount(n) for n in ("2", "2000", "200", "22", "12", "2.5", "20000")] == [
        "两",
        "两千",
        "两百",
        "二十二",
        "十二",
        "二点五",
        "两万",
    ]


def test_a_scale_moves_the_point_exactly() -> None:
    """No float on the way: 2.3 million is 2300000, not 2299999.9999999995."""
    assert [
        times_ten_to(n, p) for n, p in (("3.4", 6), ("2.3", 6), ("1.2345", 3), ("50", 3), ("2.50", 9))
    ] == [
        "3400000",
        "2300000",
        "1234.5",
        "50000",
        "2500000000",
    ]


def test_integers_are_read_digit_by_digit_when_zero_led_or_long() -> None:
    assert read_integer("07", "zh") == "零七" and read_integer("12", "zh") == "十二"
    assert read_integer("07", "en") == "zero seven" and read_integer("12345678901", "en").count(" ") == 10


# --- normalisation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("今天是2024年3月5日。", "今天是二零二四年三月五日。"),
        ("过去20年", "过去二十年"),
        ("会议2024-03-05 14:30开始", "会议二零二四年三月五日十四点三十分开始"),
        ("气温-3.5℃，涨了50%", "气温负三点五摄氏度，涨了百分之五十"),
        ("门票¥120，约合$16.5", "门票一百二十元，约合十六点五美元"),
        ("共1,234,567元，占3/4", "共一百二十三万四千五百六十七元，占四分之三"),
        ("电话13800138000，房间007", "电话幺三八零零幺三八零零零，房间零零七"),
        ("第3-5章", "第三到五章"),
        ("价格：１２３元！", "价格：一百二十三元！"),  # full-width digits; CJK punctuation stays
        ("我（今天）很好,", "我今天很好。"),  # upstream: brackets removed, trailing comma → 。
        ("他说 你好 world wide", "他说你好world wide"),  # blanks kept only between ASCII
        ("x² + y³ = 2", "x平方加y立方等于二"),
        ("10:05到场. 再见", "十点零五分到场。再见"),
        # The period word a 12-hour clock's hour is heard with.
        (
            "12:10 AM、4 AM、5 AM、8:59 AM、9 AM",
            "凌晨十二点十分、凌晨四点、早上五点、早上八点五十九分、上午九点",
        ),
        ("12:30 PM、5:59 PM、6 PM、11 p.m.", "中午十二点三十分、下午五点五十九分、晚上六点、晚上十一点"),
        ("晚上8 PM，13:00 PM", "晚上八点，十三点"),  # a 24-hour clock needs no period word
        ("地址192.168.1.1，版本10.0.19041", "地址一九二点一六八点一点一，版本十点零点一九零四一"),
    ],
)
def test_chinese_normalisation(text: str, expected: str) -> None:
    assert normalize(text, "zh") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I have 2 cats & 1 dog.", "I have two cats and one dog."),
        (
            "It costs $3.50, or €1,200.",
            "It costs three dollars and fifty cents, or one thousand, two hundred euros.",
        ),
        ("$1 and $0.99 and £2.01", "one dollar and ninety-nine cents and two pounds and one penny"),
        ("$1.5 million", "one point five million dollars"),
        ("It rose 12.5% to -3 degrees.", "It rose twelve point five percent to negative three degrees."),
        ("Pages 3-5, the 21st time.", "Pages three to five, the twenty first time."),
        ("On 2024-03-05 at 9:05 pm.", "On the fifth of march twenty twenty four at nine o five PM."),
        ("Meet at 10:00, ok? I am 7pm-ready", "Meet at ten o'clock, ok? I am seven pm-ready"),
        (
            "Born in 1999, 1999 people.",
            "Born in nineteen ninety-nine, one thousand, nine hundred and ninety-nine people.",
        ),
        ("Call 0800 now", "Call zero eight zero zero now"),
        # An IP address is the graphs' (a version's dots are "point"); a build number digit by digit.
        (
            "Connect to 10.0.0.1 on 10.0.19041",
            "Connect to one zero dot zero dot zero dot one on ten point zero point one nine zero four one",
        ),
        ("Up +5 today; C++11 is old", "Up plus five today; C plus plus eleven is old"),
        # A number before a unit symbol is no year, whatever stands before it.
        (
            "In 1999 it used 1234 kWh.",
            "In nineteen ninety-nine it used one thousand, two hundred and thirty-four kilowatt hours.",
        ),
        # A code's four digits in pairs, as a year is said, but not as "two thousand and five".
        (
            "FY2024 and B2005 and X0123",
            "FY twenty twenty-four and B two zero zero five and X zero one two three",
        ),
        ("Hello，world。Really？", "Hello, world. Really?"),  # CJK punctuation in English text
    ],
)
def test_english_normalisation(text: str, expected: str) -> None:
    assert normalize(text, "en") == expected


def test_a_sentence_the_tagger_cannot_read_goes_on_as_written() -> None:
    # The English tagger gives nothing for "+5 points"; the sentence must not vanish.
    assert fst.graphs("en").normalize("+5 points") == "+5 points"


def test_language_and_punctuation_rules() -> None:
    assert language_of("Hello 世界") == "zh" and language_of("Hello, world 123") == "en"
    assert is_only_punctuation("") and is_only_punctuation("。！？…—") and is_only_punctuation("$%+")
    assert not is_only_punctuation("a.") and not is_only_punctuation(" .")


# --- splitting -----------------------------------------------------------------------------------------


def test_chinese_segments_are_packed_by_characters() -> None:
    sentence = "这是一个用来测试分段逻辑的句子，长度是二十五个字。"
    segments = split_paragraph(sentence * 9, "zh", len)
    assert "".join(segments) == sentence * 9
    assert all(len(s) <= MAX_UNITS + len(sentence) for s in segments)
    assert len(segments) > 1 and all(len(s) >= MERGE_UNITS for s in segments)


def test_short_tail_merges_and_stop_is_added() -> None:
    long = "一" * 70 + "。"
    assert split_paragraph(long + "短句", "zh", len) == [long + "短句。"]
    assert split_paragraph("no stop here", "en", len) == ["no stop here."]


def test_quotes_stay_and_repeated_stops_collapse() -> None:
    assert split_paragraph('He said "hi." Then left!! Bye', "en", len) == ['He said "hi." Then left! Bye.']


def test_english_is_measured_in_tokens(tokenizer: TextTokenizer) -> None:
    sentence = "The quick brown fox jumps over the lazy dog near the river bank. "
    segments = split_paragraph(sentence * 12, "en", lambda s: len(tokenizer.encode(s)))
    assert len(segments) > 1
    assert all(len(tokenizer.encode(s)) <= MAX_UNITS + len(tokenizer.encode(sentence)) for s in segments)


# --- prepare_text --------------------------------------------------------------------------------------


def test_prepare_text_normalises_splits_and_drops_punctuation(tokenizer: TextTokenizer) -> None:
    assert prepare_text("I paid $5!", tokenizer) == ["I paid five dollars!"]
    assert prepare_text("……", tokenizer) == [] and prepare_text("   ", tokenizer) == []
    assert prepare_text("你好。。。", tokenizer) == ["你好。"]


def test_a_versions_dots_do_not_end_its_sentence(tokenizer: TextTokenizer) -> None:
    assert prepare_text("请升级到3.2.1版", tokenizer) == ["请升级到三点二点一版。"]
    assert prepare_text("Please install version 3.2.1 now", tokenizer) == [
        "Please install version three point two point one now."
    ]


def test_leading_tags_stay_on_the_first_segment_only(tokenizer: TextTokenizer) -> None:
    # v1 splits the text with the tag in it: the tag opens the first segment and no other.
    text = "<|en|> " + "This sentence is long enough to count for something real. " * 12
    segments = prepare_text(text, tokenizer)
    assert len(segments) > 1 and segments[0].startswith("<|en|>This")
    assert all("<|" not in segment for segment in segments[1:])
    assert prepare_text("<|en|>", tokenizer) == []
    assert normalize_text("<|zh|> 我有3个苹果,") == "<|zh|>我有三个苹果。"


def test_frontend_import_stays_light() -> None:
    heavy = "{'torch', 'inflect', 'onnxruntime', 'kaldifst', 'wetext'}"
    code = f"import sys, function.cosyvoice.frontend; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我們說話，這兒有點兒冷。", "我们说话，这儿有点儿冷。"),  # traditional → simplified (v1)
        ("哪儿好玩儿？", "哪儿好玩儿？"),  # erhua stays: v1's frontend asks for it kept
        ("嗯，我知道了。", "嗯，我知道了。"),  # interjections stay: they are what the writer wrote
        ("你好，世界！", "你好，世界！"),  # CJK punctuation stays full width (v1 asks full_to_half=False)
    ],
)
def test_chinese_normalisation_options(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


def test_an_overlong_sentence_is_cut_at_commas_then_between_words(tokenizer: TextTokenizer) -> None:
    def units(piece: str) -> int:
        return len(tokenizer.encode(piece))

    clause = "在面对挑战的时候他展现了非凡的勇气与智慧"  # 20 characters, then a comma
    paragraph = "，".join([clause] * 20)  # 419 characters and not one stop mark
    segments = split_paragraph(paragraph, "zh", len)
    assert "".join(segments) == paragraph + "。" and len(segments) > 1
    assert all(len(segment) <= MAX_UNITS for segment in segments)
    assert all(segment.endswith(("，", "。")) for segment in segments)  # cut at the commas
    transcript = "so we went down to the river and sat there for a while " * 40  # ~560 tokens, no marks
    segments = split_paragraph(transcript.strip(), "en", units)
    assert "".join(segments) == transcript.strip() + "." and len(segments) > 1
    assert all(units(segment) <= MAX_UNITS + 1 for segment in segments)  # + the closing stop
    short = "，".join([clause] * 5)  # 104 characters: kept whole, as upstream does
    assert split_paragraph(short, "zh", len) == [short + "。"]
