"""whisper's multilingual BPE (v1's text tokenizer), built with tiktoken from the vocabulary file alone.

Importing `whisper` would import torch, so the encoding is assembled here from the same facts whisper's
`get_encoding("multilingual", num_languages=100)` uses: the 50257 ranks of `multilingual.tiktoken`,
then the special tokens in whisper's order, so every id matches whisper's and `text_token_size` (51866).
"""

from __future__ import annotations

import binascii
from pathlib import Path

import tiktoken

from function.core.errors import ArtifactError
from function.cosyvoice.artifact import Buffer

# whisper's LANGUAGES keys, in its order (the order fixes the ids of the language tags).
LANGUAGE_CODES = (
    "en",
    "zh",
    "de",
    "es",
    "ru",
    "ko",
    "fr",
    "ja",
    "pt",
    "tr",
    "pl",
    "ca",
    "nl",
    "ar",
    "sv",
    "it",
    "id",
    "hi",
    "fi",
    "vi",
    "he",
    "uk",
    "el",
    "ms",
    "cs",
    "ro",
    "da",
    "hu",
    "ta",
    "no",
    "th",
    "ur",
    "hr",
    "bg",
    "lt",
    "la",
    "mi",
    "ml",
    "cy",
    "sk",
    "te",
    "fa",
    "lv",
    "bn",
    "sr",
    "az",
    "sl",
    "kn",
    "et",
    "mk",
    "br",
    "eu",
    "is",
    "hy",
    "ne",
    "mn",
    "bs",
    "kk",
    "sq",
    "sw",
    "gl",
    "mr",
    "pa",
    "si",
    "km",
    "sn",
    "yo",
    "so",
    "af",
    "oc",
    "ka",
    "be",
    "tg",
    "sd",
    "gu",
    "am",
    "yi",
    "lo",
    "uz",
    "fo",
    "ht",
    "ps",
    "tk",
    "nn",
    "mt",
    "sa",
    "lb",
    "my",
    "bo",
    "tl",
    "mg",
    "as",
    "tt",
    "haw",
    "ln",
    "ha",
    "ba",
    "jw",
    "su",
    "yue",
)
TIMESTAMPS = 1501  # <|0.00|> ... <|30.00|> in steps of 0.02 s
# whisper's pre-tokenisation pattern (GPT-2's).
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
RANKS = 50257
VOCAB_SIZE = 51866  # RANKS + the specials below; the LLM's text_token_size


def special_tokens() -> list[str]:
    """whisper's specials for num_languages=100, in id order after the ranks."""
    return [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{code}|>" for code in LANGUAGE_CODES),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *(f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMPS)),
    ]


class TextTokenizer:
    """Text → v1 text token ids. Special-token text (e.g. `<|zh|>`) encodes as the special, like upstream."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding

    @classmethod
    def from_file(cls, path: str | Path) -> TextTokenizer:
        return cls.from_buffer(Path(path).read_bytes())

    @classmethod
    def from_buffer(cls, data: Buffer) -> TextTokenizer:
        """From the vocabulary file's bytes (an artifact file, possibly memory-mapped)."""
        ranks = _parse_ranks(bytes(data))
        specials = {token: len(ranks) + i for i, token in enumerate(special_tokens())}
        encoding = tiktoken.Encoding(
            name="multilingual",
            pat_str=PATTERN,
            mergeable_ranks=ranks,
            special_tokens=specials,
            explicit_n_vocab=VOCAB_SIZE,
        )
        return cls(encoding)

    @property
    def vocab_size(self) -> int:
        return self.encoding.n_vocab

    def encode(self, text: str) -> list[int]:
        # Upstream encodes with allowed_special="all": "<|en|>" in the text is the language tag.
        return self.encoding.encode(text, allowed_special="all")

    def decode(self, tokens: list[int]) -> str:
        return self.encoding.decode(tokens)


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    # One "base64-token rank" pair per line; split() + a2b_base64 is faster than a per-line loop.
    fields = data.split()
    try:
        ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
    except (ValueError, binascii.Error) as exc:
        raise ArtifactError(f"tokenizer vocabulary is malformed: {exc}") from exc
    if len(ranks) != RANKS or sorted(ranks.values()) != list(range(RANKS)):
        raise ArtifactError(
            f"tokenizer vocabulary has {len(ranks)} ranks, expected whisper's multilingual {RANKS}"
        )
    return ranks


__all__ = ["LANGUAGE_CODES", "TextTokenizer", "VOCAB_SIZE", "special_tokens"]
