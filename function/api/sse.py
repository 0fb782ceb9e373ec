"""OpenAI's speech event stream (`stream_format="sse"`): the encoded audio as base64 `speech.audio.delta`
events, then one `speech.audio.done` carrying usage, each a `data: {json}` line pair (text/event-stream).

The deltas join into the file the same request would get without events (a streamed wav's header says
"unknown length"). Usage: input tokens are the text's tokens (the model's BPE); output tokens are the
speech tokens the audio spans, at the model's token rate (50 per second of audio for CosyVoice v1).
An SSML `input` adds this API's own `speech.mark` events (`{"type": "speech.mark", "mark": {"time",
"type", "start", "end", "value"}}`, function.markup.marks), each sent before the audio it describes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import Any

from function.service.synthesis import Synthesis

MEDIA_TYPE = "text/event-stream"


class SpeechEvents:
    """One request's event stream over its synthesis's encoded pieces."""

    def __init__(self, synthesis: Synthesis, input_tokens: int, token_rate: float) -> None:
        self.synthesis = synthesis
        self.input_tokens = input_tokens
        self._samples_per_token = synthesis.engine.sample_rate / token_rate

    def usage(self) -> dict[str, int]:
        inputs = self.input_tokens
        outputs = round(self.synthesis.samples / self._samples_per_token)
        return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}

    def events(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            yield from self._marks()
            if piece:
                yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode("ascii")})
        yield from self._marks()
        yield _event({"type": "speech.audio.done", "usage": self.usage()})

    def _marks(self) -> Iterator[bytes]:
        for mark in self.synthesis.take_marks():
            yield _event({"type": "speech.mark", "mark": mark.to_dict()})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode("ascii") + b"\n\n"


__all__ = ["MEDIA_TYPE", "SpeechEvents"]
