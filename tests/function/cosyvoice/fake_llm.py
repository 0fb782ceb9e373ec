"""Fake graphs that stand in for onnxruntime's LLM sessions, for the decode loop's tests (no torch, no
artifact): every step gives each row the same log-probabilities, so a row draws from its own generator
alone what it draws in any batch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from function.cosyvoice.llm import LLM, LLMInput
from function.cosyvoice.params import LLMParams

PARAMS = LLMParams(speech_token_size=8, top_p=0.8, top_k=3, win_size=4, tau_r=0.25)
EOS = PARAMS.speech_token_size
LAYERS, HEADS, HEAD_DIM = 2, 2, 4


class FakePrefill:
    def __init__(self, logp: np.ndarray) -> None:
        self.logp = logp
        self.calls: list[dict] = []

    def run(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        self.calls.append(inputs)
        length = inputs["text_tokens"].shape[1] + inputs["speaker_embedding"].shape[0] + 2
        length += inputs["prompt_speech_tokens"].shape[1]
        return {"logp": self.logp[None], "cache": np.zeros((LAYERS, 3, HEADS, length, HEAD_DIM), np.float32)}


class FakeDecode:
    """EOS is the most likely token from the start; other tokens share the rest. Bound like onnxruntime's
    decode: each run reads the bound inputs as they are and writes into the bound outputs."""

    def __init__(self, logp: np.ndarray) -> None:
        self.logp = logp
        self.past_lens: list[int] = []  # row 0's position at each step
        self.rows: list[int] = []  # the rows of each step
        self.before_step: Callable[[int], None] = lambda rows: None  # called with a step's rows

    def bind(self, into: dict[str, np.ndarray], **inputs: np.ndarray) -> FakeDecode.Run:
        assert all(array.flags.c_contiguous for array in (*inputs.values(), *into.values()))
        return FakeDecode.Run(self, inputs, into)

    class Run:
        def __init__(self, decode: FakeDecode, inputs: dict[str, np.ndarray], into: dict[str, np.ndarray]):
            self.decode, self.inputs, self.into = decode, inputs, into

        def run(self) -> None:
            positions, tokens = self.inputs["past_len"], self.inputs["token"]
            self.decode.before_step(positions.size)
            self.decode.past_lens.append(int(positions[0]))
            self.decode.rows.append(positions.size)
            self.into["logp"][...] = self.decode.logp
            for name, cache in self.into.items():
                if name.startswith("present_"):
                    for row, position in enumerate(positions):
                        cache[row, :, position] = tokens[row, 0]


class FakePositions:
    def run(self, distances: np.ndarray) -> dict[str, np.ndarray]:
        return {"rows": np.zeros((LAYERS, HEADS, distances.size, HEAD_DIM), np.float32)}


def fake_llm(eos_prob: float) -> tuple[LLM, FakePrefill, FakeDecode]:
    probs = np.full(EOS + 1, (1 - eos_prob) / EOS, dtype=np.float32)
    probs[EOS] = eos_prob
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    prefill, decode = FakePrefill(logp), FakeDecode(logp)
    return LLM(prefill, decode, FakePositions(), PARAMS), prefill, decode  # type: ignore[arg-type]


def generate(llm: LLM, text_len: int, prompt_text_len: int = 0, seed: int = 0) -> list[int]:
    return list(
        llm.generate(
            np.arange(text_len),
            np.arange(prompt_text_len),
            np.ones((1, 192), np.float32),
            np.zeros((1, 0), np.int64),
            np.random.default_rng(seed),
        )
    )


def segment(text_len: int, seed: int) -> LLMInput:
    return LLMInput(
        np.arange(text_len),
        np.zeros(0, np.int64),
        np.ones((1, 192), np.float32),
        np.zeros(0, np.int64),
        np.random.default_rng(seed),
    )


def split_at_none(stream: list[int | None]) -> list[list[int]]:
    assert stream and stream[-1] is None
    segments: list[list[int]] = [[]]
    for token in stream[:-1]:
        if token is None:
            segments.append([])
        else:
            segments[-1].append(token)
    return segments
