"""OpenAI's speech event stream (`stream_format="sse"`): the encoded audio as base64 `speech.audio.delta`
events, then one `speech.audio.done` carrying usage, each a `data: {json}` line pair (text/event-stream).

The deltas join into the file the same request would get without events (a streamed wav's header says
"unknown length"). Usage: input tokens are the text's tokens (the model's BPE); output tokens are the
speech tokens the audio spans, at the model's token rate (50 per second of audio for CosyVoice v1).

An SSML `input` adds this API's own `speech.mark` events (`{"type": "speech.mark", "mark": {"time",
"type", "start", "end", "value"}}`, function.shared.marks), each sent before the audio it describes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from function.core.script import SpeechMark

MEDIA_TYPE = "text/event-stream"


class SpeechEvents:
    """One request's event stream: `measure` the engine's chunks on their way to the encoder, then
    `events` turns the encoded pieces into the stream."""

    def __init__(self, input_tokens: int, sample_rate: int, token_rate: float) -> None:
        self.input_tokens = input_tokens
        self._samples_per_token = sample_rate / token_rate
        self._samples = 0
        self._marks: list[SpeechMark] = []  # measured, not yet sent

    def measure(self, chunks: Iterable[np.ndarray | SpeechMark]) -> Iterator[np.ndarray]:
        """The chunks (at the model's rate) unchanged, counted for the usage; marks kept for `events`."""
        for chunk in chunks:
            if isinstance(chunk, SpeechMark):
                self._marks.append(chunk)
                continue
            self._samples += len(chunk)
            yield chunk

    def usage(self) -> dict[str, int]:
        inputs, outputs = self.input_tokens, round(self._samples / self._samples_per_token)
        return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}

    def events(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            yield from self._sent_marks()
            if piece:
                yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode("ascii")})
        yield from self._sent_marks()
        yield _event({"type": "speech.audio.done", "usage": self.usage()})

    def _sent_marks(self) -> Iterator[bytes]:
        marks, self._marks = self._marks, []
        for mark in marks:
            yield _event({"type": "speech.mark", "mark": mark.to_dict()})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode("ascii") + b"\n\n"


__all__ = ["MEDIA_TYPE", "SpeechEvents"]
