"""Zero-shot prompt encoding on the stand-in front-end models (real signatures, random weights). No torch."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile

from export.graphs.frontend_models import write_stand_ins
from function.core.errors import InvalidPromptAudio
from function.cosyvoice.artifact import Artifact, FileEntry, GraphEntry, Manifest
from function.cosyvoice.contract import CAMPPLUS, FORMAT_VERSION, SPEECH_TOKENIZER
from function.cosyvoice.params import ModelParams
from function.cosyvoice.prompt import PromptEncoder, decode_prompt


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Artifact:
    """An in-memory artifact holding only the two optional front-end graphs."""
    model_dir = tmp_path_factory.mktemp("model")
    write_stand_ins(model_dir, seed=7)
    files: dict[str, bytes] = {}
    graphs = {}
    for spec in (CAMPPLUS, SPEECH_TOKENIZER):
        data = (model_dir / spec.file).read_bytes()
        files[spec.file] = data
        graphs[spec.name] = GraphEntry(
            spec.name,
            spec.file,
            spec.role,
            spec.inputs,
            spec.outputs,
            len(data),
            sha256="",
        )
    manifest = Manifest(
        FORMAT_VERSION,
        {},
        ModelParams(),
        graphs,
        FileEntry("weights.bin", 0, ""),
        FileEntry("multilingual.tiktoken", 0, ""),
        {},
        {},
        {},
    )
    return Artifact(manifest, files)


@pytest.fixture(scope="module")
def encoder(artifact: Artifact) -> PromptEncoder:
    assert PromptEncoder.available(artifact)
    return PromptEncoder.load(artifact, threads=1)


def wav(audio: np.ndarray, rate: int, fmt: str = "WAV") -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, audio, rate, format=fmt)
    return buffer.getvalue()


def speech_like(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    voiced = 0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return (voiced + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


def test_encode_gives_the_models_inputs(encoder: PromptEncoder) -> None:
    seconds = 3.0
    prompt = encoder.encode(wav(speech_like(seconds, 16000), 16000), "hello there")
    assert prompt.speech_tokens.shape == (1, 150) and prompt.speech_tokens.dtype == np.int64  # 50 Hz
    assert prompt.speech_tokens.min() >= 0 and prompt.speech_tokens.max() < 4096
    assert prompt.embedding.shape == (1, 192) and prompt.embedding.dtype == np.float32
    mel_frames = (int(seconds * 22050) + 2 * 384 - 1024) // 256 + 1
    assert prompt.mel.shape == (1, mel_frames, 80) and prompt.mel.dtype == np.float32


def test_rate_and_channels_do_not_change_the_voice(encoder: PromptEncoder) -> None:
    mono = encoder.encode(wav(speech_like(2.0, 48000), 48000), None)
    stereo_audio = np.stack([speech_like(2.0, 48000)] * 2, axis=1)
    stereo = encoder.encode(wav(stereo_audio, 48000, "FLAC"), None)
    assert np.allclose(mono.embedding, stereo.embedding, atol=1e-3)
    at_16k = encoder.encode(wav(speech_like(2.0, 16000), 16000), None)
    assert at_16k.speech_tokens.shape == mono.speech_tokens.shape
    assert at_16k.mel.shape == mono.mel.shape


def test_different_voices_give_different_embeddings(encoder: PromptEncoder) -> None:
    low = encoder.encode(wav(speech_like(2.0, 16000), 16000), None).embedding
    high_audio = 0.3 * np.sin(2 * np.pi * 2000 * np.arange(32000) / 16000).astype(np.float32)
    high = encoder.encode(wav(high_audio, 16000), None).embedding
    assert not np.allclose(low, high, atol=1e-2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not audio at all", "could not be decoded"),
        (wav(speech_like(0.5, 16000), 16000), "between 1 and 30 s"),
        (wav(speech_like(31.0, 8000), 8000), "at most 30 s"),
        (wav(np.zeros(32000, dtype=np.float32), 16000), "silent"),
        (wav(speech_like(2.0, 4000), 4000), "at least 8000 Hz"),
    ],
)
def test_bad_audio_is_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(InvalidPromptAudio, match=message):
        decode_prompt(data)


def test_a_transcript_that_cannot_fit_the_audio_is_refused(encoder: PromptEncoder) -> None:
    audio = wav(speech_like(1.5, 16000), 16000)
    with pytest.raises(InvalidPromptAudio, match="transcript"):
        encoder.encode(audio, "这是一段很长的文字" * 10)
