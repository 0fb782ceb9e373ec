"""One text segment's speech tokens → audio chunks, through the flow and the vocoder.

The engine hands a `SegmentStream` the tokens of one segment, whole or a chunk at a time. Each chunk's
tokens go through the flow together with at least `TOKEN_CONTEXT` tokens before it and `TOKEN_LOOKAHEAD`
after it. Each window covers exactly its share of the utterance's mel frames and starts on an even frame
near a token boundary, so the estimator's stride-2 U-Net sees the frame grid of a whole-utterance run;
the flow noise comes from a segment-wide noise field by absolute frame, so overlapping frames of
neighbouring chunks start from the same noise. The vocoder runs on the chunk's mel plus a few frames of
left context (whose harmonic source is reused exactly) and right look-ahead covering its receptive field;
its harmonic phase carries across chunks and its source noise is indexed by absolute sample like the
flow's. Each stage computes a little past the chunk end and cross-fades the start of that provisional
tail into the next chunk's head, so seams neither click nor repeat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from function.cosyvoice.flow import Flow
from function.cosyvoice.vocoder import SourceState, Vocoder

TOKEN_CONTEXT = 20  # tokens before a chunk the flow also sees (at least)
TOKEN_LOOKAHEAD = 10  # tokens after a chunk the flow waits for (and computes provisionally)
MEL_FADE = 8  # provisional mel frames of a window cross-faded into the next window's head
AUDIO_FADE = 4  # provisional audio frames cross-faded; the rest of the look-ahead is only context
ALIGN_SEARCH = 8  # extra context tokens a window may take to start on a well-aligned frame
VOCODER_CONTEXT = 8  # mel frames of left context for the vocoder
VOCODER_LOOKAHEAD = 14  # provisional mel frames past the chunk end the vocoder sees (its receptive field)
NOISE_BLOCK = 256  # noise is drawn in blocks of rows (frames, samples), so chunking does not change it


@dataclass(frozen=True)
class Conditioning:
    """Everything that says who speaks and how: the resolved inputs of the LLM and the flow."""

    llm_embedding: np.ndarray  # [n, 192], n = 0 (instruct) or 1
    flow_embedding: np.ndarray  # [1, 192]
    prompt_text_tokens: np.ndarray  # [1, Tp] int64 (instruction or prompt transcript)
    llm_prompt_tokens: np.ndarray  # [1, P] int64 speech tokens of the prompt, for the LLM
    flow_prompt_tokens: np.ndarray  # [1, P] int64, for the flow
    prompt_mel: np.ndarray  # [1, Tm, 80]


class NoiseField:
    """Standard-normal noise rows [position, width] indexed by absolute position, drawn in fixed blocks:
    the values at a position do not depend on how the positions were asked for."""

    def __init__(self, rng: np.random.Generator, width: int, block: int) -> None:
        self._rng = rng
        self._width = width
        self._block = block
        self._noise = np.zeros((0, width), dtype=np.float32)

    def rows(self, start: int, stop: int) -> np.ndarray:
        while self._noise.shape[0] < stop:
            block = self._rng.standard_normal((self._block, self._width), dtype=np.float32)
            self._noise = np.concatenate([self._noise, block])
        return self._noise[start:stop]


def fade(previous_tail: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Cross-fade the start of `head` with the provisional `previous_tail` along the last axis."""
    n = min(previous_tail.shape[-1], head.shape[-1])
    if n == 0:
        return head
    ramp = np.linspace(0.0, 1.0, n + 2, dtype=np.float32)[1:-1]
    out = head.copy()
    out[..., :n] = previous_tail[..., :n] * (1.0 - ramp) + head[..., :n] * ramp
    return out


class SegmentStream:
    """Turns one text segment's speech tokens into audio chunks (see the module docstring).

    `flow_rng` draws the flow's noise, `source_rng` the vocoder's harmonic phases and source noise;
    `flow_steps` is the flow's Euler steps for every window (None: the manifest's, v1's 10)."""

    def __init__(
        self,
        flow: Flow,
        vocoder: Vocoder,
        conditioning: Conditioning,
        flow_rng: np.random.Generator,
        source_rng: np.random.Generator,
        flow_steps: int | None = None,
    ) -> None:
        self.flow = flow
        self.vocoder = vocoder
        self.conditioning = conditioning
        self.flow_steps = flow_steps
        n_mels = flow.params.n_mels
        self.prompt_noise = flow_rng.standard_normal(
            (1, n_mels, conditioning.prompt_mel.shape[1]), dtype=np.float32
        )
        self.flow_noise = NoiseField(flow_rng, n_mels, NOISE_BLOCK)
        self.hop = vocoder.params.upsample_factor
        self.source_noise = NoiseField(source_rng, vocoder.n_sines, NOISE_BLOCK * self.hop)
        self.frames_per_token = flow.params.mel_rate / flow.params.input_frame_rate
        self.mel_tail = np.zeros((1, n_mels, 0), dtype=np.float32)
        self.mel_history = np.zeros((1, n_mels, 0), dtype=np.float32)
        self.source_history = np.zeros((1, 0, vocoder.n_sines), dtype=np.float32)
        self.source_state = SourceState.initial(vocoder.params.nb_harmonics, source_rng)
        self.audio_tail = np.zeros(0, dtype=np.float32)
        self.emitted_frames = 0  # final mel frames turned into audio so far

    def frame(self, token_index: int) -> int:
        """First mel frame of a token: the frames of the tokens before it, by the flow's one rule."""
        return self.flow.params.mel_frames(token_index)

    def window_start(self, start: int) -> int:
        """First token the flow sees for a chunk starting at `start`: at least TOKEN_CONTEXT earlier, on an
        even frame (the estimator's stride-2 U-Net then samples the frames a whole-utterance run samples;
        an odd start changes every output frame), and as close as possible to a token boundary."""
        latest = max(0, start - TOKEN_CONTEXT)
        candidates = [a for a in range(max(0, latest - ALIGN_SEARCH), latest + 1) if self.frame(a) % 2 == 0]
        return min(candidates, key=lambda a: (a * self.frames_per_token - self.frame(a), -a))

    def mel(self, tokens: np.ndarray, start: int, end: int, final: bool) -> np.ndarray:
        """Final mel frames for tokens [start, end); keeps the provisional frames after them."""
        n = tokens.shape[1]
        a = self.window_start(start)
        b = n if final else min(n, end + TOKEN_LOOKAHEAD)
        fa, fb = self.frame(a), self.frame(b)
        noise = np.concatenate([self.prompt_noise, self.flow_noise.rows(fa, fb).T[None]], axis=2)
        mel = self.flow(
            tokens[:, a:b],
            self.conditioning.flow_prompt_tokens,
            self.conditioning.prompt_mel,
            self.conditioning.flow_embedding,
            noise,
            frames=fb - fa,
            steps=self.flow_steps,
        )
        first = min(self.frame(start) - fa, mel.shape[2])
        last = mel.shape[2] if final else min(self.frame(end) - fa, mel.shape[2])
        chunk = fade(self.mel_tail[:, :, :MEL_FADE], mel[:, :, first:last])
        self.mel_tail = mel[:, :, last:]
        return chunk

    def audio(self, mel: np.ndarray, final: bool) -> np.ndarray:
        """Waveform for `mel` (the chunk's final frames), continuous with what came before."""
        vocoder, hop = self.vocoder, self.hop
        context = self.mel_history[:, :, -VOCODER_CONTEXT:] if self.mel_history.shape[2] else self.mel_history
        lookahead = np.zeros_like(mel[:, :, :0]) if final else self.mel_tail[:, :, :VOCODER_LOOKAHEAD]
        window = np.concatenate([context, mel, lookahead], axis=2)
        f0 = vocoder.f0(window)
        n_context, n_new = context.shape[2], mel.shape[2]
        source_context = self.source_history[:, self.source_history.shape[1] - n_context * hop :, :]
        n_ahead = window.shape[2] - n_context - n_new
        first, ahead = self.emitted_frames * hop, (self.emitted_frames + n_new) * hop
        noise_new = self.source_noise.rows(first, ahead)[None]
        noise_ahead = self.source_noise.rows(ahead, ahead + n_ahead * hop)[None]
        source_new = vocoder.sine_waves(f0[:, n_context : n_context + n_new], noise_new, self.source_state)
        source_ahead = vocoder.sine_waves(f0[:, n_context + n_new :], noise_ahead, self.source_state.copy())
        source = np.concatenate([source_context, source_new, source_ahead], axis=1)
        wave = vocoder.generate(window, source)
        emitted = fade(self.audio_tail[: AUDIO_FADE * hop], wave[n_context * hop : (n_context + n_new) * hop])
        self.audio_tail = wave[(n_context + n_new) * hop :]
        self.mel_history = np.concatenate([self.mel_history, mel], axis=2)[:, :, -VOCODER_CONTEXT:]
        self.source_history = np.concatenate([self.source_history, source_new], axis=1)[
            :, -VOCODER_CONTEXT * hop :, :
        ]
        self.emitted_frames += n_new
        return emitted

    def chunk(self, tokens: np.ndarray, start: int, end: int, final: bool) -> np.ndarray:
        """Audio for tokens [start, end) of the `tokens` drawn so far; `final`: no more will come."""
        return self.audio(self.mel(tokens, start, end, final), final)


__all__ = ["TOKEN_CONTEXT", "TOKEN_LOOKAHEAD", "Conditioning", "NoiseField", "SegmentStream", "fade"]
