"""Zero-shot prompts: a reference recording → speech tokens, speaker embedding and mel, as upstream's
`frontend_zero_shot` computes them for v1.

    speech tokens  whisper log-mel (128) of the 16 kHz audio → speech_tokenizer_v1 (50 Hz, ≤ 30 s)
    embedding      Kaldi fbank (80) of the 16 kHz audio, mean-normalised over time → CAM++ (192)
    mel            the flow's mel spectrogram of the audio at the vocoder's rate (22050 Hz)

v1 uses the mel and the tokens at their own lengths (the flow interpolates the prompt tokens to the prompt
mel); upstream trims both to mel = 2 × tokens only for CosyVoice2's 24 kHz model, so neither is trimmed here.
Unlike upstream, both rates are resampled from the recording's own rate (HEAD's `load_wav` does the same)
rather than 22050 from 16000.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import soundfile

from function.core.errors import InvalidPromptAudio
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import CAMPPLUS, SPEECH_TOKENIZER
from function.cosyvoice.features import kaldi_fbank, mel_spectrogram, resample, whisper_log_mel
from function.cosyvoice.graphs import Graph
from function.cosyvoice.params import MelParams

TOKENIZER_RATE = 16000  # both front-end models take 16 kHz features
MIN_SECONDS = 1.0
MAX_SECONDS = 30.0  # the speech tokenizer's limit (whisper's 30 s window)
MIN_SAMPLE_RATE = 8000
SILENCE_PEAK = 1e-3  # −60 dBFS: quieter than this everywhere is silence
# A transcript cannot plausibly be spoken faster than this; more means it belongs to other audio.
MAX_UNITS_PER_SECOND = 30  # letters and digits; a CJK character counts as three


@dataclass(frozen=True)
class PromptFeatures:
    speech_tokens: np.ndarray  # [1, P] int64, 50 Hz
    embedding: np.ndarray  # [1, 192] float32, CAM++ speaker embedding
    mel: np.ndarray  # [1, Tm, 80] float32, at sample_rate / hop_size frames per second


class PromptEncoder:
    """Runs the artifact's campplus and speech_tokenizer_v1 graphs on prompt audio."""

    def __init__(self, speaker_encoder: Graph, speech_tokenizer: Graph, mel_params: MelParams) -> None:
        self.speaker_encoder = speaker_encoder
        self.speech_tokenizer = speech_tokenizer
        self.mel_params = mel_params

    @staticmethod
    def available(artifact: Artifact) -> bool:
        return artifact.has_graph(CAMPPLUS.name) and artifact.has_graph(SPEECH_TOKENIZER.name)

    @classmethod
    def load(cls, artifact: Artifact, threads: int | None = None) -> PromptEncoder:
        return cls(
            Graph.load(artifact, CAMPPLUS.name, threads),
            Graph.load(artifact, SPEECH_TOKENIZER.name, threads),
            artifact.manifest.params.mel,
        )

    def encode(self, audio_bytes: bytes, transcript: str | None) -> PromptFeatures:
        audio, rate = decode_prompt(audio_bytes)
        if transcript:
            _check_transcript(transcript, len(audio) / rate)
        audio_16k = resample(audio, rate, TOKENIZER_RATE)
        return PromptFeatures(
            speech_tokens=self.speech_tokens(audio_16k),
            embedding=self.embedding(audio_16k),
            mel=mel_spectrogram(resample(audio, rate, self.mel_params.sample_rate), self.mel_params).T[None],
        )

    def speech_tokens(self, audio_16k: np.ndarray) -> np.ndarray:
        feats = whisper_log_mel(audio_16k)[None]  # [1, 128, T]
        out = self.speech_tokenizer.run(feats=feats, feats_length=np.array([feats.shape[2]], dtype=np.int32))
        return out[SPEECH_TOKENIZER.output_names[0]].astype(np.int64).reshape(1, -1)

    def embedding(self, audio_16k: np.ndarray) -> np.ndarray:
        fbank = kaldi_fbank(audio_16k)
        fbank -= fbank.mean(axis=0, keepdims=True)  # CAM++ takes mean-normalised features
        out = self.speaker_encoder.run(**{CAMPPLUS.input_names[0]: fbank[None]})
        return out[CAMPPLUS.output_names[0]].astype(np.float32).reshape(1, -1)


def decode_prompt(audio_bytes: bytes) -> tuple[np.ndarray, int]:
    """Decode any soundfile format to mono float32, checking what the models can use."""
    try:
        with soundfile.SoundFile(io.BytesIO(audio_bytes)) as sound:
            rate = sound.samplerate
            if sound.frames > MAX_SECONDS * rate:  # refuse before decoding an hour of audio
                raise InvalidPromptAudio(
                    f"prompt audio lasts {sound.frames / rate:.1f} s; at most {MAX_SECONDS:.0f} s can be used"
                )
            audio = sound.read(dtype="float32", always_2d=True).mean(axis=1)  # mono mix, like upstream
    except (RuntimeError, TypeError, ValueError) as exc:  # soundfile.LibsndfileError is a RuntimeError
        raise InvalidPromptAudio(
            f"prompt audio could not be decoded ({exc}); send WAV, FLAC, OGG or MP3"
        ) from exc
    seconds = len(audio) / rate
    if rate < MIN_SAMPLE_RATE:
        raise InvalidPromptAudio(
            f"prompt audio is sampled at {rate} Hz; at least {MIN_SAMPLE_RATE} Hz is needed"
        )
    if seconds < MIN_SECONDS or seconds > MAX_SECONDS:
        raise InvalidPromptAudio(
            f"prompt audio lasts {seconds:.2f} s;"
            f" it must be between {MIN_SECONDS:.0f} and {MAX_SECONDS:.0f} s"
        )
    if not np.all(np.isfinite(audio)):
        raise InvalidPromptAudio("prompt audio contains invalid (NaN or infinite) samples")
    if np.max(np.abs(audio)) < SILENCE_PEAK:
        raise InvalidPromptAudio("prompt audio is silent: record the speaker whose voice should be used")
    return audio, rate


def _check_transcript(transcript: str, seconds: float) -> None:
    units = sum(3 if "\u4e00" <= c <= "\u9fff" else 1 for c in transcript if c.isalnum())
    if units > MAX_UNITS_PER_SECOND * seconds:
        raise InvalidPromptAudio(
            f"the prompt transcript is too long for {seconds:.1f} s of audio:"
            " prompt_text must be what is said in prompt_audio"
        )


__all__ = ["PromptEncoder", "PromptFeatures", "decode_prompt"]
