"""What every measurement says: fixed texts, tokenised once by our front end for both sides.

With random weights the LLM almost never samples EOS, so a segment of N text tokens yields its upper
bound of 30·N speech tokens (v1's max_token_text_ratio, which both sides run at), 50 per second of
audio: the audio length follows from the token count. The texts are chosen with that in mind (see
`expected_seconds`).
Upstream receives the same token ids per segment (its own normaliser is not installed), so both sides
synthesise exactly the same inputs with the same speaker.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import soundfile

from bench.procs import write_json
from function.cosyvoice.params import LLMParams

SPEAKER = "中文女"
SEED = 0
SPEECH_TOKENS_PER_TEXT_TOKEN = LLMParams().max_token_text_ratio  # where random weights end
SPEECH_TOKEN_RATE = 50  # speech tokens per second of audio (v1)

WARM_UP_TEXT = "Hello."  # function.cosyvoice.engine.Engine.warm_up's text: upstream gets the same warm-up
FIRST_TEXT = "Good morning."  # the first request after a cold start, and each worker's request
TEXTS = {
    "short": "Good morning, how are you?",
    # 16 text tokens → 480 speech tokens = 9.6 s with random weights
    "ten_seconds": "Every morning she walked along the quiet river to the old stone bridge to wait.",
    "paragraph": "The library opens at nine. It closes at six, and the reading room stays quiet.",
}


def recording(seconds: float = 2.0, rate: int = 16000, amplitude: float = 0.3) -> bytes:
    """A WAV of a modulated tone: a usable prompt recording (silent at amplitude 0), for the voice
    measurements and the tests that clone a voice."""
    t = np.arange(int(seconds * rate)) / rate
    tone = amplitude * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    buffer = io.BytesIO()
    soundfile.write(buffer, tone.astype(np.float32), rate, format="WAV")
    return buffer.getvalue()


def tokenized(text: str, tokenizer: Any, prepare_text: Any) -> dict[str, Any]:
    segments = [tokenizer.encode(segment) for segment in prepare_text(text, tokenizer)]
    return {"text": text, "segments": segments, "expected_seconds": expected_seconds(segments)}


def expected_seconds(segments: list[list[int]]) -> float:
    """Audio length with random weights: every segment runs to its maximum number of speech tokens."""
    return sum(len(s) for s in segments) * SPEECH_TOKENS_PER_TEXT_TOKEN / SPEECH_TOKEN_RATE


def build(artifact_dir: Path) -> dict[str, Any]:
    from function.cosyvoice.artifact import Artifact
    from function.cosyvoice.frontend import TextTokenizer, prepare_text

    artifact = Artifact.open(artifact_dir)
    tokenizer = TextTokenizer.from_buffer(artifact.file(artifact.manifest.tokenizer.file))
    return {
        "speaker": SPEAKER,
        "seed": SEED,
        "warm_up": tokenized(WARM_UP_TEXT, tokenizer, prepare_text),
        "first": tokenized(FIRST_TEXT, tokenizer, prepare_text),
        "texts": {name: tokenized(text, tokenizer, prepare_text) for name, text in TEXTS.items()},
    }


def write(artifact_dir: Path, path: Path) -> dict[str, Any]:
    workload = build(artifact_dir)
    write_json(path, workload)
    return workload


__all__ = [
    "FIRST_TEXT",
    "recording",
    "SEED",
    "SPEAKER",
    "TEXTS",
    "WARM_UP_TEXT",
    "build",
    "expected_seconds",
    "write",
]
