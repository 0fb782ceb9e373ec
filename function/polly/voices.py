"""Who speaks on Polly's API (/polly): Amazon Polly voice names mapped onto this model's built-in
speakers, with the language code and gender DescribeVoices reports for each.

`DEFAULT_POLLY_VOICES` maps one Polly voice of each built-in speaker's language and register onto it
(Joanna onto 英文女, Zhiyu onto 中文女, ...). COSYVOICE_POLLY_VOICES ("Joanna=中文女,Brian=英文男", see
function.instance.settings) changes or adds entries, as COSYVOICE_VOICES does for OpenAI's names. A
built-in speaker's own name is a voice id too. A speaker's language and gender come from its name, as
CosyVoice's SFT speakers are named (语言 + 女/男); a speaker named otherwise is listed without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from function.core.errors import InvalidRequest

DEFAULT_POLLY_VOICES: Mapping[str, str] = {
    "Joanna": "英文女",
    "Matthew": "英文男",
    "Zhiyu": "中文女",
    "Takumi": "日语男",
    "Hiujin": "粤语女",
    "Seoyeon": "韩语女",
}
# A built-in speaker's language, by the start of its name: Polly's code and name for it.
SPEAKER_LANGUAGES: Mapping[str, tuple[str, str]] = {
    "中文": ("cmn-CN", "Chinese Mandarin"),
    "英文": ("en-US", "US English"),
    "日语": ("ja-JP", "Japanese"),
    "粤语": ("yue-CN", "Chinese Cantonese"),
    "韩语": ("ko-KR", "Korean"),
}
GENDERS: Mapping[str, str] = {"女": "Female", "男": "Male"}
# Polly's language codes → the model's language tags (function.core.script.LANGUAGE_TAGS).
LANGUAGE_TAGS: Mapping[str, str] = {
    "cmn-CN": "zh",
    "yue-CN": "yue",
    "ja-JP": "ja",
    "ko-KR": "ko",
    **dict.fromkeys(
        ("en-US", "en-GB", "en-AU", "en-IN", "en-NZ", "en-ZA", "en-IE", "en-GB-WLS", "en-SG"), "en"
    ),
}
# Polly's engines: every one speaks through this model; they differ in the flow's steps and default rate.
ENGINES = ("standard", "neural", "long-form", "generative")
# Every language code Polly's service model knows: one outside it is a ValidationException, one inside it
# that this model does not speak (not in LANGUAGE_TAGS) a LanguageNotSupportedException, as in Polly.
LANGUAGE_CODES = frozenset(
    {
        *("arb", "ar-AE", "ca-ES", "cmn-CN", "cs-CZ", "cy-GB", "da-DK", "de-AT", "de-CH", "de-DE"),
        *("en-AU", "en-GB", "en-GB-WLS", "en-IE", "en-IN", "en-NZ", "en-SG", "en-US", "en-ZA", "es-ES"),
        *("es-MX", "es-US", "fi-FI", "fr-BE", "fr-CA", "fr-FR", "hi-IN", "is-IS", "it-IT", "ja-JP"),
        *("ko-KR", "nb-NO", "nl-BE", "nl-NL", "pl-PL", "pt-BR", "pt-PT", "ro-RO", "ru-RU", "sv-SE"),
        *("tr-TR", "yue-CN"),
    }
)


class UnknownPollyVoice(InvalidRequest):
    """A VoiceId that names no voice of this deployment."""

    code = "unknown_voice"


@dataclass(frozen=True)
class PollyVoice:
    """One built-in voice as DescribeVoices lists it."""

    id: str
    speaker: str

    @property
    def language(self) -> tuple[str, str] | None:
        """(Polly language code, language name), when the speaker's name says it."""
        return next(
            (found for prefix, found in SPEAKER_LANGUAGES.items() if self.speaker.startswith(prefix)), None
        )

    @property
    def gender(self) -> str | None:
        return GENDERS.get(self.speaker[-1:])

    def describe(self) -> dict[str, Any]:
        """Polly's Voice. The model speaks each of its languages with any voice (cross-lingually): the
        others are the voice's AdditionalLanguageCodes."""
        described: dict[str, Any] = {"Id": self.id, "Name": self.id, "SupportedEngines": list(ENGINES)}
        if self.language is not None:
            code, described["LanguageName"] = self.language
            described["LanguageCode"] = code
            described["AdditionalLanguageCodes"] = [
                other for other, _ in SPEAKER_LANGUAGES.values() if other != code
            ]
        if self.gender is not None:
            described["Gender"] = self.gender
        return described


def polly_voices(entries: Mapping[str, str], speakers: Sequence[str]) -> list[PollyVoice]:
    """The voices DescribeVoices lists: DEFAULT_POLLY_VOICES with the deployment's `entries`
    (COSYVOICE_POLLY_VOICES) changed or added, those whose speaker this model has; then each speaker by
    its own name."""
    table = {**DEFAULT_POLLY_VOICES, **entries}
    mapped = [PollyVoice(name, speaker) for name, speaker in sorted(table.items()) if speaker in speakers]
    return [*mapped, *(PollyVoice(speaker, speaker) for speaker in speakers)]


def polly_speaker(voice_id: str, entries: Mapping[str, str], speakers: Sequence[str]) -> str:
    """The built-in speaker a VoiceId names; UnknownPollyVoice otherwise."""
    voices = polly_voices(entries, speakers)
    for voice in voices:
        if voice.id == voice_id:
            return voice.speaker
    listed = ", ".join(voice.id for voice in voices if voice.id != voice.speaker)
    raise UnknownPollyVoice(
        f"VoiceId {voice_id!r} is not a voice of this deployment: use one of {listed or 'none'}, a built-in"
        " speaker's name, or a custom voice's id (CreateVoice); DescribeVoices lists them"
    )


def language_tag(code: str) -> str | None:
    """The model's language tag for a Polly language code; None when the model does not speak it."""
    return LANGUAGE_TAGS.get(code)


__all__ = [
    "DEFAULT_POLLY_VOICES",
    "ENGINES",
    "LANGUAGE_CODES",
    "LANGUAGE_TAGS",
    "PollyVoice",
    "UnknownPollyVoice",
    "language_tag",
    "polly_speaker",
    "polly_voices",
]
