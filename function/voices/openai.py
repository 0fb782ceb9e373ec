"""Who speaks on OpenAI's route: OpenAI's voice names mapped onto this model's built-in speakers, and
whether the model takes style instructions.

Clients written for OpenAI send `voice="alloy"`; CosyVoice's SFT speakers are 中文女, 英文男 and so on.
`DEFAULT_VOICES` maps every voice OpenAI's SDK lists onto an English speaker of the voice's register
(alloy, coral, marin, nova, sage and shimmer are commonly heard as female-sounding, the others as
male-sounding; OpenAI itself does not say). COSYVOICE_VOICES ("alloy=中文女,onyx=中文男", see
function.instance.settings) changes or adds entries. A built-in speaker's own name always means that speaker.

Instructions: upstream CosyVoice v1 decides by the model directory's path as given (`-Instruct` in it);
the exporter applies that rule, or its `--instruct` / `--no-instruct` flag, and records the answer in the
manifest (`source.instruct`). (Speakers do not tell: the -Instruct release ships built-in speakers as the
-SFT one does.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from function.core.errors import UnknownSpeaker

if TYPE_CHECKING:
    from function.cosyvoice.artifact import Manifest

_FEMALE, _MALE = "英文女", "英文男"
DEFAULT_VOICES: Mapping[str, str] = {
    **dict.fromkeys(("alloy", "coral", "marin", "nova", "sage", "shimmer"), _FEMALE),
    **dict.fromkeys(("ash", "ballad", "cedar", "echo", "fable", "onyx", "verse"), _MALE),
}


class VoiceTableError(ValueError):
    """A voice table setting that cannot be read."""


def parse_voices(text: str, defaults: Mapping[str, str] = DEFAULT_VOICES) -> dict[str, str]:
    """'alloy=中文女, onyx=中文男' → `defaults` (OpenAI's names) with those entries changed or added; '' →
    the defaults."""
    table = dict(defaults)
    seen: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, speaker = (part.strip() for part in item.partition("="))
        if not sep or not name or not speaker:
            raise VoiceTableError(f"voice entry {item!r} is not NAME=SPEAKER")
        if name in seen:
            raise VoiceTableError(f"voice {name!r} is mapped twice")
        seen.add(name)
        table[name] = speaker
    return table


def usable_voices(table: Mapping[str, str], speakers: Sequence[str]) -> dict[str, str]:
    """The entries of `table` whose speaker this model has (what GET /v1/speakers shows)."""
    return {name: speaker for name, speaker in sorted(table.items()) if speaker in speakers}


def resolve_voice(voice: str, table: Mapping[str, str], speakers: Sequence[str]) -> str:
    """The built-in speaker `voice` names: itself, or its entry in the table; else UnknownSpeaker."""
    if voice in speakers:
        return voice
    speaker = table.get(voice)
    if speaker is not None and speaker in speakers:
        return speaker
    if not speakers:
        raise UnknownSpeaker(
            f"unknown voice {voice!r}: this model has no built-in speakers (clone a voice on /v1/tts)"
        )
    mapped = ", ".join(usable_voices(table, speakers)) or "none"
    detail = f" (mapped to {speaker!r}, which this model lacks)" if speaker is not None else ""
    raise UnknownSpeaker(
        f"unknown voice {voice!r}{detail}; built-in speakers: {', '.join(speakers)};"
        f" mapped voice names: {mapped} (see GET /v1/speakers)"
    )


def takes_instructions(manifest: Manifest) -> bool:
    """Whether the model is an -Instruct one, as the export recorded it. Artifacts exported before the
    kind was recorded say it by their source directory's name."""
    recorded = manifest.source.get("instruct")
    return recorded if isinstance(recorded, bool) else "-Instruct" in str(manifest.source.get("name", ""))


__all__ = [
    "DEFAULT_VOICES",
    "VoiceTableError",
    "parse_voices",
    "resolve_voice",
    "takes_instructions",
    "usable_voices",
]
