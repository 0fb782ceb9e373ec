"""The speech-token LLM at run time: prefill once, then one decode step per token, streamed out.

The decode graph reads per-layer cache buffers in place and writes each step's key and value rows into
them (see function/cosyvoice/contract.py). `DecoderCache` owns those buffers and binds them to the decode
graph once (`BoundRun`), so a step binds nothing and copies no cache: keys and values in one array
[layers, 2, 1, heads, capacity, head_dim], position rows in another, [layers, heads, head_dim, capacity]
(distance last, so a step's position scores are a plain matrix-vector product per head). The capacity
grows by `CACHE_BLOCK` positions, so reallocation is rare; each block's position rows come from the
llm_positions graph when the block is added: one matrix product per block instead of a matrix-vector
product per layer in every step. The buffers come from the LLM's `CacheMemory` and go back to it, so a
warm process grows a cache into memory it has touched before (see `CacheMemory`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from math import prod

import numpy as np

from function.core.errors import ArtifactError, InvalidRequest
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import (
    LLM_CACHE_KINDS,
    LLM_DECODE,
    LLM_POSITIONS,
    LLM_PREFILL,
    LLM_STEP_KINDS,
    llm_cache_input,
    llm_cache_output,
    llm_decode_spec,
)
from function.cosyvoice.graphs import BoundRun, Graph, available_cpus
from function.cosyvoice.params import LLMParams
from function.cosyvoice.sampling import sample_next
from function.cosyvoice.threads import ThreadSplit

CACHE_BLOCK = 128
# How long the decode's worker waits for the next node's work before it sleeps. A step is ~250 small nodes:
# woken for each one, the worker comes late, and a wait this short takes nothing the flow could use (the
# flow and vocoder sessions gain nothing from spinning). `python -m bench speed` times the step.
DECODE_SPIN_MICROSECONDS = 20


_POS = LLM_CACHE_KINDS.index("pos")
_STEP = len(LLM_STEP_KINDS)  # the kinds a step writes come first


class CacheMemory:
    """Flat float32 blocks that decoder caches are cut from, kept when a cache gives them back.

    In a virtual machine such as Lambda's the first touch of memory the process has not used before is slow:
    growing the cache into fresh arrays costs many decode steps, into reused ones far less. A growth takes a
    block before it gives the old one back, so `KEPT` blocks (the largest) serve one request at a time without
    new memory once it has been as long before; more than that is given back to the allocator."""

    KEPT = 4  # two kinds (keys and values, position rows) in the current and the previous size

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        """An array of `shape`, contents undefined: the smallest kept block that holds it, or a new one."""
        size = prod(shape)
        with self._lock:
            # kept largest first: the last one that holds `size` is the smallest that does
            index = next((i for i in reversed(range(len(self._free))) if self._free[i].size >= size), None)
            block = self._free.pop(index) if index is not None else np.empty(size, dtype=np.float32)
        return block[:size].reshape(shape)

    def give(self, array: np.ndarray) -> None:
        """Return an array `take` handed out; the largest `KEPT` blocks are kept for the next ones."""
        block = array.base if array.base is not None else array
        with self._lock:
            self._free.append(block)
            self._free.sort(key=lambda kept: kept.size, reverse=True)
            del self._free[self.KEPT :]

    @property
    def kept_bytes(self) -> int:
        with self._lock:
            return sum(block.nbytes for block in self._free)


class DecoderCache:
    """The decode graph's past K / V / position rows: K and V filled by prefill and then by each step (the
    graph writes its row in place), position rows by prefill and then `positions` for each new block of
    distances, ahead of the steps.

    Invariant: capacity > length, and position rows are there for every distance below capacity, so the
    step at position `length` finds the rows for distances 0..length it reads."""

    def __init__(
        self,
        prefill_cache: np.ndarray,
        positions: Callable[[np.ndarray], np.ndarray],
        vocab: int,
        memory: CacheMemory | None = None,
    ) -> None:
        layers, kinds, heads, length, head_dim = prefill_cache.shape
        if kinds != len(LLM_CACHE_KINDS):
            raise ArtifactError(f"llm_prefill cache has {kinds} kinds, expected {len(LLM_CACHE_KINDS)}")
        self._positions = positions
        self._memory = memory or CacheMemory()
        capacity = _round_up(length + 1)
        self._keys_values = self._grown(prefill_cache[:, :_STEP, None], axis=4, capacity=capacity)
        self._position_rows = self._grown(
            prefill_cache[:, _POS].transpose(0, 1, 3, 2), axis=3, capacity=capacity
        )
        self._fill_positions(length)
        self.token = np.zeros((1, 1), dtype=np.int64)  # the next step's input: write it here
        self.logp = np.zeros((1, vocab), dtype=np.float32)  # the last step's output
        self._past_len = np.array(length, dtype=np.int64)
        self._bound: BoundRun | None = None

    @property
    def length(self) -> int:
        return int(self._past_len)

    @property
    def capacity(self) -> int:
        return self._position_rows.shape[3]

    def _fill_positions(self, start: int) -> None:
        """Position rows for distances start..capacity−1, from the graph's [layers, heads, n, head_dim]."""
        rows = self._positions(np.arange(start, self.capacity, dtype=np.int64))
        self._position_rows[..., start:] = rows.transpose(0, 1, 3, 2)

    def feeds(self) -> dict[str, np.ndarray]:
        """The decode graph's inputs: views of the buffers, and the arrays holding token and past_len."""
        feeds = {"token": self.token, "past_len": self._past_len}
        for layer in range(self._position_rows.shape[0]):
            for index, kind in enumerate(LLM_STEP_KINDS):
                feeds[llm_cache_input(kind, layer)] = self._keys_values[layer, index]
            feeds[llm_cache_input("pos", layer)] = self._position_rows[layer]
        return feeds

    def outputs(self) -> dict[str, np.ndarray]:
        """Where the decode graph writes: `logp`, and the step's key and value rows into their buffers."""
        presents = {
            llm_cache_output(kind, layer): self._keys_values[layer, index]
            for layer in range(self._keys_values.shape[0])
            for index, kind in enumerate(LLM_STEP_KINDS)
        }
        return {"logp": self.logp, **presents}

    def bound_to(self, decode: Graph) -> BoundRun:
        """`decode` bound to this cache's arrays, until they are reallocated."""
        if self._bound is None:
            self._bound = decode.bind(self.outputs(), **self.feeds())
        return self._bound

    def advance(self) -> None:
        """A step has written its key and value rows at position `length`: they are now cached."""
        self._past_len[...] = self.length + 1
        if self.length == self.capacity:
            filled = self.capacity
            self._keys_values = self._extended(self._keys_values, axis=4)
            self._position_rows = self._extended(self._position_rows, axis=3)
            self._bound = None  # bound to the old arrays
            self._fill_positions(filled)

    def release(self) -> None:
        """Give the buffers back to the memory they came from; the cache is not used again."""
        self._memory.give(self._keys_values)
        self._memory.give(self._position_rows)
        self._bound = None

    def _grown(self, prefix: np.ndarray, axis: int, capacity: int) -> np.ndarray:
        """An array from memory: `prefix` along its capacity `axis`, then zeros up to `capacity`."""
        shape = prefix.shape[:axis] + (capacity,) + prefix.shape[axis + 1 :]
        array = self._memory.take(shape)
        before = (slice(None),) * axis
        array[before + (slice(0, prefix.shape[axis]),)] = prefix
        array[before + (slice(prefix.shape[axis], None),)] = 0.0
        return array

    def _extended(self, buffer: np.ndarray, axis: int) -> np.ndarray:
        """`buffer` with CACHE_BLOCK more zero positions along `axis`; the old buffer goes back to memory."""
        grown = self._grown(buffer, axis, buffer.shape[axis] + CACHE_BLOCK)
        self._memory.give(buffer)
        return grown


def _round_up(length: int) -> int:
    return -(-length // CACHE_BLOCK) * CACHE_BLOCK


class LLM:
    """Text tokens (+ speaker / prompt) → speech tokens, yielded one by one."""

    def __init__(self, prefill: Graph, decode: Graph, positions: Graph, params: LLMParams) -> None:
        self.prefill = prefill
        self.decode = decode
        self.positions = positions
        self.params = params
        self.cache_memory = CacheMemory()  # shared by this LLM's caches, one request after another

    @classmethod
    def load(cls, artifact: Artifact, threads: int | None = None) -> LLM:
        names = {spec.name for spec in artifact.graph(LLM_DECODE.name).inputs}
        layers = sum(1 for layer in range(len(names)) if llm_cache_input("key", layer) in names)
        split = ThreadSplit.for_cpus(threads or available_cpus())
        decode = Graph.load(
            artifact,
            LLM_DECODE.name,
            split.decode,
            llm_decode_spec(layers),
            spin_microseconds=DECODE_SPIN_MICROSECONDS,
        )
        prefill = Graph.load(artifact, LLM_PREFILL.name, split.cpus)
        positions = Graph.load(artifact, LLM_POSITIONS.name, split.cpus)
        return cls(prefill, decode, positions, artifact.manifest.params.llm)

    def start(
        self, text_tokens: np.ndarray, speaker_embedding: np.ndarray, prompt_speech_tokens: np.ndarray
    ) -> tuple[np.ndarray, DecoderCache]:
        """Prefill: log-probabilities [vocab] of the first speech token and the filled cache."""
        out = self.prefill.run(
            text_tokens=np.asarray(text_tokens, dtype=np.int64).reshape(1, -1),
            speaker_embedding=np.asarray(speaker_embedding, dtype=np.float32).reshape(
                -1, _last(speaker_embedding)
            ),
            prompt_speech_tokens=np.asarray(prompt_speech_tokens, dtype=np.int64).reshape(1, -1),
        )
        logp = out["logp"]
        return logp[0], DecoderCache(out["cache"], self._position_rows, logp.shape[1], self.cache_memory)

    def _position_rows(self, distances: np.ndarray) -> np.ndarray:
        return self.positions.run(distances=distances)["rows"]

    def step(self, token: int, cache: DecoderCache) -> np.ndarray:
        """Feed `token` at position cache.length; returns the next log-probabilities [vocab]."""
        cache.token[0, 0] = token
        cache.bound_to(self.decode).run()
        cache.advance()
        return cache.logp[0].copy()  # the next step overwrites cache.logp

    def length_limits(self, text_len: int, prompt_text_len: int, prompt_speech_len: int) -> tuple[int, int]:
        """(min, max) speech tokens for `text_len` text tokens after a prompt, as v1's CosyVoiceModel runs
        the LLM: 3 to 30 per text token (prompt text not counted).

        The maximum is cut where the context ends (sos, embedding, texts, task id, prompt speech, then
        the drawn tokens): upstream has no such guard, and a long unpunctuated segment is then spoken up
        to the context instead of refused. Only a prompt and text that fill the context alone are refused.
        """
        prefix = prompt_text_len + text_len + prompt_speech_len + 2
        room = self.params.max_context - prefix
        if room <= 0:
            raise InvalidRequest(
                f"prompt and text take {prefix} LLM positions, more than the {self.params.max_context}"
                " the model supports; use a shorter prompt or text"
            )
        max_len = min(int(text_len * self.params.max_token_text_ratio), room)
        return min(int(text_len * self.params.min_token_text_ratio), max_len), max_len

    def generate(
        self,
        text_tokens: np.ndarray,
        prompt_text_tokens: np.ndarray,
        speaker_embedding: np.ndarray,
        prompt_speech_tokens: np.ndarray,
        rng: np.random.Generator,
    ) -> Iterator[int]:
        """Speech token ids until EOS or `length_limits`' maximum; EOS is redrawn before its minimum."""
        text = np.asarray(text_tokens, dtype=np.int64).reshape(-1)
        prompt_text = np.asarray(prompt_text_tokens, dtype=np.int64).reshape(-1)
        prompt = np.asarray(prompt_speech_tokens, dtype=np.int64).reshape(-1)
        min_len, max_len = self.length_limits(text.size, prompt_text.size, prompt.size)
        if max_len == 0:
            return
        logp, cache = self.start(np.concatenate([prompt_text, text]), speaker_embedding, prompt)
        decoded: list[int] = []
        try:
            for index in range(max_len):
                if index:
                    logp = self.step(decoded[-1], cache)
                token = sample_next(logp, decoded, rng, self.params, allow_eos=index >= min_len)
                if token == self.params.speech_token_size:
                    return
                yield token
                decoded.append(token)
        finally:  # also when the consumer stops early: the next request reuses the memory
            cache.release()


def _last(array: np.ndarray) -> int:
    shape = np.shape(array)
    if not shape or shape[-1] == 0:
        raise InvalidRequest("speaker embedding must be a vector (or [0, dim] for none)")
    return shape[-1]


__all__ = ["CACHE_BLOCK", "DECODE_SPIN_MICROSECONDS", "CacheMemory", "DecoderCache", "LLM"]
