"""The voice table: it covers every voice OpenAI's SDK names, the setting is parsed strictly, and a voice
resolves to a built-in speaker or fails with a message that lists what would work."""

from __future__ import annotations

import typing
from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.audio import speech_create_params

from function.core.errors import UnknownSpeaker
from function.instance.settings import Settings, SettingsError
from function.voices.openai import (
    DEFAULT_VOICES,
    parse_voices,
    resolve_voice,
    takes_instructions,
    usable_voices,
)

SFT_SPEAKERS = ["中文女", "中文男", "日语男", "粤语女", "英文女", "英文男", "韩语女"]


def sdk_voice_names() -> set[str]:
    """Every literal voice name in the SDK's `Voice` type (a Union of str, a Literal and VoiceID)."""
    names: set[str] = set()
    for arm in typing.get_args(speech_create_params.Voice):
        if typing.get_origin(arm) is typing.Literal:
            names.update(typing.get_args(arm))
    return names


def test_every_voice_the_sdk_names_is_mapped_onto_an_sft_speaker() -> None:
    names = sdk_voice_names()
    assert {"alloy", "nova", "onyx"} <= names  # the type was read
    assert names <= set(DEFAULT_VOICES)
    assert set(DEFAULT_VOICES.values()) <= set(SFT_SPEAKERS)


def test_the_setting_changes_and_adds_entries() -> None:
    table = parse_voices(" alloy = 中文女 , robot=粤语女,")
    assert table["alloy"] == "中文女" and table["robot"] == "粤语女"
    assert table["onyx"] == DEFAULT_VOICES["onyx"]
    assert parse_voices("") == dict(DEFAULT_VOICES)


@pytest.mark.parametrize("raw", ["alloy", "alloy=", "=中文女", "alloy=中文女,alloy=中文男"])
def test_a_bad_setting_stops_the_deployment_with_its_name(raw: str) -> None:
    with pytest.raises(SettingsError, match="COSYVOICE_VOICES"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "a", "COSYVOICE_VOICES": raw})


def test_settings_read_the_table() -> None:
    settings = Settings.from_env({"COSYVOICE_ARTIFACT": "a", "COSYVOICE_VOICES": "alloy=中文男"})
    assert settings.voices["alloy"] == "中文男"
    assert Settings.from_env({"COSYVOICE_ARTIFACT": "a"}).voices == dict(DEFAULT_VOICES)


def test_voices_resolve_to_speakers_and_speakers_to_themselves() -> None:
    assert resolve_voice("nova", DEFAULT_VOICES, SFT_SPEAKERS) == DEFAULT_VOICES["nova"]
    assert resolve_voice("中文男", DEFAULT_VOICES, SFT_SPEAKERS) == "中文男"
    # a built-in speaker's name always means that speaker
    assert resolve_voice("中文男", {"中文男": "英文女"}, SFT_SPEAKERS) == "中文男"


def test_an_unknown_voice_lists_the_speakers_and_the_voice_names() -> None:
    with pytest.raises(UnknownSpeaker) as raised:
        resolve_voice("nobody", DEFAULT_VOICES, SFT_SPEAKERS)
    assert all(name in raised.value.message for name in [*SFT_SPEAKERS, *DEFAULT_VOICES])


def test_a_voice_mapped_to_a_missing_speaker_says_so() -> None:
    with pytest.raises(UnknownSpeaker, match="mapped to '韩语女', which this model lacks"):
        resolve_voice("alloy", {"alloy": "韩语女"}, ["英文女"])
    assert usable_voices({"alloy": "韩语女", "nova": "英文女"}, ["英文女"]) == {"nova": "英文女"}
    with pytest.raises(UnknownSpeaker, match="no built-in speakers"):
        resolve_voice("alloy", DEFAULT_VOICES, [])


@pytest.mark.parametrize(
    ("source", "instruct"),
    [
        ({"name": "CosyVoice-300M-Instruct"}, True),  # exported before the kind was recorded
        ({"name": "CosyVoice-300M-SFT"}, False),
        ({"name": "CosyVoice-300M"}, False),
        ({}, False),
        ({"name": "0f1e2d3c", "instruct": True}, True),  # an HF snapshot's directory name
        ({"name": "cv-Instruct-copy", "instruct": False}, False),  # --no-instruct wins
    ],
)
def test_instructions_follow_the_recorded_kind(source: dict[str, Any], instruct: bool) -> None:
    manifest: Any = SimpleNamespace(source=source)
    assert takes_instructions(manifest) is instruct
