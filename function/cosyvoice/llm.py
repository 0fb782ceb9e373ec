"""The speech-token LLM at run time: prefill once, then one decode step per token, streamed out.

The decode graph reads per-layer cache buffers in place and writes each step's key and value rows into
them (see function/cosyvoice/contract.py). `DecoderCache` owns those buffers and binds them to the decode
graph once (`BoundRun`), so a step binds nothing and copies no cache: keys and values in one array
[layers, 2, rows, heads, capacity, head_dim], position rows in another, [layers, heads, head_dim, capacity]
(distance last, so a step's position scores are a plain matrix product per head). The capacity
grows by `CACHE_BLOCK` positions, so reallocation is rare; each block's position rows come from the
llm_positions graph when the block is added: one matrix product per block instead of a matrix-vector
product per layer in every step. The buffers come from the LLM's `CacheMemory` and go back to it, so a
warm process grows a cache into memory it has touched before (see `CacheMemory`).

Several independent segments can be decoded as one batch (`generate_segments`): a step reads the
decoder's weights once for all its rows, and that read is most of a step's cost. Each row samples from
its own segment's generator. In fp32 a row's log-probabilities are the ones it gets alone up to float32
rounding (the kernels block several rows otherwise than one). int8 MatMulNBits quantises every layer's
activations to int8, so such a rounding difference can move an activation by a quantisation step, and a
segment decoded in a batch then draws other tokens than alone after some steps (as valid a draw, and the
same again for the same request and row cap): the row cap is a setting, 1 by default.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from math import prod
from typing import Generic, TypeVar

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


Key = TypeVar("Key")
_POS = LLM_CACHE_KINDS.index("pos")
_STEP = len(LLM_STEP_KINDS)  # the kinds a step writes come first


class CacheMemory:
    """Flat float32 blocks that decoder caches are cut from, kept when a cache gives them back.

    In a virtual machine such as Lambda's the first touch of memory the process has not used before is slow:
    growing the cache into fresh arrays costs many decode steps, into reused ones far less. A growth takes a
    block before it gives the old one back, so `KEPT` blocks (the largest) serve one request at a time without
    new memory once it has been as long before; more than that is given back to the allocator.

    The lock is held only over index loops and list operations that create no Python object the garbage
    collector tracks (no comprehension, generator, lambda or slice), so no collection runs under it: one
    would finalise other requests' abandoned generators on this thread, and their cleanup must never
    meet this lock held."""

    KEPT = 4  # two kinds (keys and values, position rows) in the current and the previous size

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []  # largest first
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        """An array of `shape`, contents undefined: the smallest kept block that holds it, or a new one."""
        size = prod(shape)
        block = None
        with self._lock:
            for index in range(len(self._free) - 1, -1, -1):  # the first from the end: the smallest
                if self._free[index].size >= size:
                    block = self._free.pop(index)
                    break
        if block is None:
            block = np.empty(size, dtype=np.float32)
        return block[:size].reshape(shape)

    def give(self, array: np.ndarray) -> None:
        """Return an array `take` handed out; the largest `KEPT` blocks are kept for the next ones."""
        block = array.base if array.base is not None else array
        size = block.size
        with self._lock:
            place = len(self._free)
            for index in range(len(self._free)):
                if self._free[index].size < size:
                    place = index
                    break
            self._free.insert(place, block)
            while len(self._free) > self.KEPT:
                self._free.pop()

    @property
    def kept_bytes(self) -> int:
        total = 0
        with self._lock:
            for index in range(len(self._free)):
                total += self._free[index].nbytes
        return total


class DecoderCache:
    """The decode graph's past K / V / position rows for up to `rows` sequences decoded as one batch: K
    and V filled by each sequence's prefill (`add`) and then by each step (the graph writes its rows in
    place), position rows by the first prefill and then `positions` for each new block of distances,
    ahead of the steps.

    The sequences in the batch are cache rows 0..rows−1 (`rows` of the `slots` allocated); the graph is
    bound to those rows' part of the buffers, which is contiguous because the row axis comes before
    heads, positions and head_dim. A sequence leaves with `remove` (the last row takes its place) and
    another can join in its slot. Every row reads the same position rows: they depend on the distance
    alone, and a prefill's rows for its prefix are the llm_positions graph's for those distances.

    Invariant: capacity > every row's length, and position rows are there for every distance below
    capacity, so the step at position `lengths[b]` finds the rows for distances 0..lengths[b] it reads."""

    def __init__(
        self,
        positions: Callable[[np.ndarray], np.ndarray],
        vocab: int,
        slots: int = 1,
        memory: CacheMemory | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError(f"a decoder cache needs at least one slot, got {slots}")
        self._positions = positions
        self._memory = memory or CacheMemory()
        self._slots = slots
        self._rows = 0
        self._keys_values: np.ndarray | None = None  # [layers, 2, slots, heads, capacity, head_dim]
        self._position_rows: np.ndarray | None = None  # [layers, heads, head_dim, capacity]
        self._tokens = np.zeros((slots, 1), dtype=np.int64)  # each row's next input: write them in `token`
        self._logp = np.zeros((slots, vocab), dtype=np.float32)  # each row's output of the last step
        self._past_lens = np.zeros(slots, dtype=np.int64)
        self._bound: BoundRun | None = None

    @property
    def rows(self) -> int:
        """The sequences in the batch."""
        return self._rows

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def lengths(self) -> np.ndarray:
        """Each row's cached positions (the position its next token goes to), a copy."""
        return self._past_lens[: self._rows].copy()

    @property
    def capacity(self) -> int:
        return 0 if self._position_rows is None else self._position_rows.shape[3]

    @property
    def token(self) -> np.ndarray:
        """[rows, 1]: the next step's input tokens, one a row; write them here."""
        return self._tokens[: self._rows]

    @property
    def logp(self) -> np.ndarray:
        """[rows, vocab]: the last step's log-probabilities, one row a sequence (the next step
        overwrites them)."""
        return self._logp[: self._rows]

    def add(self, prefill_cache: np.ndarray) -> int:
        """A sequence's prefill cache [layers, kinds, heads, length, head_dim] as a new row; its index."""
        layers, kinds, heads, length, head_dim = prefill_cache.shape
        if kinds != len(LLM_CACHE_KINDS):
            raise ArtifactError(f"llm_prefill cache has {kinds} kinds, expected {len(LLM_CACHE_KINDS)}")
        if self._rows == self._slots:
            raise ValueError(f"the decoder cache's {self._slots} rows are all in use")
        if self._keys_values is None or self._position_rows is None:
            capacity = _round_up(length + 1)
            self._keys_values = self._memory.take((layers, _STEP, self._slots, heads, capacity, head_dim))
            self._position_rows = self._grown(
                prefill_cache[:, _POS].transpose(0, 1, 3, 2), axis=3, capacity=capacity
            )
            self._fill_positions(length)
        elif length >= self.capacity:
            self._grow(_round_up(length + 1))
        row = self._rows
        self._keys_values[:, :, row, :, :length] = prefill_cache[:, :_STEP]
        self._keys_values[:, :, row, :, length:] = 0.0
        self._past_lens[row] = length
        self._rows += 1
        self._bound = None  # bound to fewer rows
        return row

    def remove(self, row: int) -> None:
        """Row `row`'s sequence leaves the batch; the last row's sequence moves into its place."""
        if not 0 <= row < self._rows:
            raise IndexError(f"row {row} is not in the batch of {self._rows}")
        last = self._rows - 1
        if row != last:
            assert self._keys_values is not None
            self._keys_values[:, :, row] = self._keys_values[:, :, last]
            self._past_lens[row] = self._past_lens[last]
            self._tokens[row] = self._tokens[last]
            self._logp[row] = self._logp[last]
        self._rows = last
        self._bound = None  # bound to more rows

    def _fill_positions(self, start: int) -> None:
        """Position rows for distances start..capacity−1, from the graph's [layers, heads, n, head_dim]."""
        assert self._position_rows is not None
        rows = self._positions(np.arange(start, self.capacity, dtype=np.int64))
        self._position_rows[..., start:] = rows.transpose(0, 1, 3, 2)

    def feeds(self) -> dict[str, np.ndarray]:
        """The decode graph's inputs: views of the buffers' rows in the batch, and the arrays holding
        token and past_len."""
        assert self._keys_values is not None and self._position_rows is not None
        rows = self._rows
        feeds = {"token": self.token, "past_len": self._past_lens[:rows]}
        for layer in range(self._position_rows.shape[0]):
            for index, kind in enumerate(LLM_STEP_KINDS):
                feeds[llm_cache_input(kind, layer)] = self._keys_values[layer, index, :rows]
            feeds[llm_cache_input("pos", layer)] = self._position_rows[layer]
        return feeds

    def outputs(self) -> dict[str, np.ndarray]:
        """Where the decode graph writes: `logp`, and the step's key and value rows into their buffers."""
        assert self._keys_values is not None
        presents = {
            llm_cache_output(kind, layer): self._keys_values[layer, index, : self._rows]
            for layer in range(self._keys_values.shape[0])
            for index, kind in enumerate(LLM_STEP_KINDS)
        }
        return {"logp": self.logp, **presents}

    def bound_to(self, decode: Graph) -> BoundRun:
        """`decode` bound to this cache's arrays, until they are reallocated or the batch changes."""
        if self._rows == 0:
            raise ValueError("the decoder cache holds no sequence to decode")
        if self._bound is None:
            self._bound = decode.bind(self.outputs(), **self.feeds())
        return self._bound

    def advance(self) -> None:
        """A step has written every row's key and value at its position: they are now cached."""
        self._past_lens[: self._rows] += 1
        if self._rows and int(self._past_lens[: self._rows].max()) == self.capacity:
            self._grow(self.capacity + CACHE_BLOCK)

    def release(self) -> None:
        """Give the buffers back to the memory they came from; the cache is not used again."""
        for buffer in (self._keys_values, self._position_rows):
            if buffer is not None:
                self._memory.give(buffer)
        self._keys_values = self._position_rows = None
        self._rows = 0
        self._bound = None

    def _grow(self, capacity: int) -> None:
        """Room for `capacity` positions; the new position rows come from the graph."""
        assert self._keys_values is not None and self._position_rows is not None
        filled = self.capacity
        keys_values = self._grown(self._keys_values, axis=4, capacity=capacity)
        position_rows = self._grown(self._position_rows, axis=3, capacity=capacity)
        self._memory.give(self._keys_values)
        self._memory.give(self._position_rows)
        self._keys_values, self._position_rows = keys_values, position_rows
        self._bound = None  # bound to the old arrays
        self._fill_positions(filled)

    def _grown(self, prefix: np.ndarray, axis: int, capacity: int) -> np.ndarray:
        """An array from memory: `prefix` along its capacity `axis`, then zeros up to `capacity`."""
        shape = prefix.shape[:axis] + (capacity,) + prefix.shape[axis + 1 :]
        array = self._memory.take(shape)
        before = (slice(None),) * axis
        array[before + (slice(0, prefix.shape[axis]),)] = prefix
        array[before + (slice(prefix.shape[axis], None),)] = 0.0
        return array


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

    def _prefill(
        self, text_tokens: np.ndarray, speaker_embedding: np.ndarray, prompt_speech_tokens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Log-probabilities [vocab] of the first speech token and the prefix's cache."""
        out = self.prefill.run(
            text_tokens=np.asarray(text_tokens, dtype=np.int64).reshape(1, -1),
            speaker_embedding=np.asarray(speaker_embedding, dtype=np.float32).reshape(
                -1, _last(speaker_embedding)
            ),
            prompt_speech_tokens=np.asarray(prompt_speech_tokens, dtype=np.int64).reshape(1, -1),
        )
        return out["logp"][0], out["cache"]

    def _cache(self, slots: int) -> DecoderCache:
        return DecoderCache(self._position_rows, self.decode_vocab, slots, self.cache_memory)

    @property
    def decode_vocab(self) -> int:
        """Log-probabilities per step: the speech tokens and EOS."""
        return self.params.speech_token_size + 1

    def start(
        self, text_tokens: np.ndarray, speaker_embedding: np.ndarray, prompt_speech_tokens: np.ndarray
    ) -> tuple[np.ndarray, DecoderCache]:
        """Prefill: log-probabilities [vocab] of the first speech token and a one-row cache holding it."""
        logp, prefix = self._prefill(text_tokens, speaker_embedding, prompt_speech_tokens)
        cache = self._cache(slots=1)
        cache.add(prefix)
        return logp, cache

    def _position_rows(self, distances: np.ndarray) -> np.ndarray:
        return self.positions.run(distances=distances)["rows"]

    def step(self, token: int, cache: DecoderCache) -> np.ndarray:
        """Feed `token` to a one-row cache's sequence; returns the next log-probabilities [vocab]."""
        cache.token[0, 0] = token
        return self._step(cache)[0]

    def _step(self, cache: DecoderCache) -> np.ndarray:
        """One decode step of every row, its tokens written in cache.token → log-probabilities
        [rows, vocab] (a copy: the next step overwrites cache.logp)."""
        cache.bound_to(self.decode).run()
        cache.advance()
        return cache.logp.copy()

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
        segment = LLMInput(text_tokens, prompt_text_tokens, speaker_embedding, prompt_speech_tokens, rng)
        for token in self._decode_in_order([segment], rows=1):
            if token is None:
                return
            yield token

    def generate_segments(self, segments: Sequence[LLMInput], rows: int) -> Iterator[int | None]:
        """Each segment's speech tokens in segment order, each segment's closed by None; up to `rows`
        segments are decoded together, one step for all of them.

        Each segment samples from its own generator, and its row of a batched step is the step it gets
        alone up to the kernels' rounding: in fp32 it draws what `generate` draws for it, with an int8 LLM
        its draws part after some tokens (see the module's docstring). With one row, each segment goes
        through `generate`."""
        if rows < 1:
            raise ValueError(f"rows must be at least 1, got {rows}")
        if rows == 1 or len(segments) <= 1:
            for segment in segments:
                yield from self.generate(
                    segment.text_tokens,
                    segment.prompt_text_tokens,
                    segment.speaker_embedding,
                    segment.prompt_speech_tokens,
                    segment.rng,
                )
                yield None
            return
        yield from self._decode_in_order(segments, rows)

    def _decode_in_order(self, segments: Sequence[LLMInput], rows: int) -> Iterator[int | None]:
        """The decode loop behind `generate` and `generate_segments`.

        Up to `rows` segments are in the batch; when one ends (EOS, or its maximum) it leaves and the next
        segment joins (its prefill runs then). Tokens of segments after the earliest unfinished one wait
        in a buffer until it has ended: they come out in segment order, each segment closed by None."""
        batch: DecodeBatch[int] = DecodeBatch(self, slots=min(rows, len(segments)))
        waiting = iter(enumerate(segments))
        drawn: list[list[int]] = [[] for _ in segments]  # not yet handed out
        ended = [False] * len(segments)
        front = 0  # the earliest segment not yet closed
        try:
            while front < len(segments):
                while not batch.full and (joining := next(waiting, None)) is not None:
                    index, segment = joining
                    if not batch.join(index, segment):
                        ended[index] = True
                for index, token in batch.draw():
                    if token is None:
                        ended[index] = True
                    else:
                        drawn[index].append(token)
                while front < len(segments) and (drawn[front] or ended[front]):
                    yield from drawn[front]
                    drawn[front].clear()
                    if not ended[front]:
                        break
                    yield None
                    front += 1
                if len(batch):
                    batch.step()
        finally:  # also when the consumer stops early: the next request reuses the memory
            batch.release()


class DecodeBatch(Generic[Key]):
    """Segments decoded together, one decode step for all of them, each known by its caller's key.

    A segment joins with its prefill into a free row and leaves once it has ended (EOS, or its maximum)
    or when its caller drops it; another can take the row between steps. `draw` samples every row's next
    token, `step` feeds them to the decoder."""

    def __init__(self, llm: LLM, slots: int) -> None:
        self._llm = llm
        self._cache = llm._cache(slots)
        self._rows: list[_Row[Key]] = []  # _rows[b] is cache row b

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def full(self) -> bool:
        return len(self._rows) == self._cache.slots

    def members(self) -> list[Key]:
        """The keys of the segments in the batch, in row order."""
        return [row.key for row in self._rows]

    def join(self, key: Key, segment: LLMInput) -> bool:
        """Prefill `segment` into a free row; False, and no row, when it may draw no token at all.
        InvalidRequest when its prompt and text fill the context."""
        if self.full:
            raise ValueError(f"the batch's {self._cache.slots} rows are all in use")
        text = np.asarray(segment.text_tokens, dtype=np.int64).reshape(-1)
        prompt_text = np.asarray(segment.prompt_text_tokens, dtype=np.int64).reshape(-1)
        prompt = np.asarray(segment.prompt_speech_tokens, dtype=np.int64).reshape(-1)
        min_len, max_len = self._llm.length_limits(text.size, prompt_text.size, prompt.size)
        if max_len == 0:
            return False
        logp, prefix = self._llm._prefill(
            np.concatenate([prompt_text, text]), segment.speaker_embedding, prompt
        )
        self._cache.add(prefix)
        self._rows.append(_Row(key, segment.rng, min_len, max_len, logp))
        return True

    def draw(self) -> list[tuple[Key, int | None]]:
        """Every row's next token, in row order; a row that has ended gives None after its last token and
        leaves the batch."""
        drawn: list[tuple[Key, int | None]] = []
        for row in self._rows:
            token = row.draw(self._llm.params)
            if token is not None:
                drawn.append((row.key, token))
            if row.ended:
                drawn.append((row.key, None))
        for place in reversed(range(len(self._rows))):
            if self._rows[place].ended:
                self._remove(place)
        return drawn

    def leave(self, key: Key) -> None:
        """Drop `key`'s segment before its end (its caller has gone)."""
        self._remove(self.members().index(key))

    def step(self) -> None:
        """One decode step of every row, fed the token it drew last."""
        for place, row in enumerate(self._rows):
            self._cache.token[place, 0] = row.decoded[-1]
        for row, logp in zip(self._rows, self._llm._step(self._cache), strict=True):
            row.logp = logp

    def release(self) -> None:
        """Give the cache's memory back; the batch is not used again."""
        self._cache.release()
        self._rows.clear()

    def _remove(self, place: int) -> None:
        self._cache.remove(place)  # the last row moves into its place, as here
        self._rows[place] = self._rows[-1]
        self._rows.pop()


@dataclass(frozen=True)
class LLMInput:
    """One text segment's LLM input, as `LLM.generate` takes it, with the generator it samples from."""

    text_tokens: np.ndarray
    prompt_text_tokens: np.ndarray
    speaker_embedding: np.ndarray  # [1, dim], or [0, dim] for none
    prompt_speech_tokens: np.ndarray
    rng: np.random.Generator


class _Row(Generic[Key]):
    """A segment being decoded: what it has drawn, its limits and its next log-probabilities."""

    def __init__(self, key: Key, rng: np.random.Generator, min_len: int, max_len: int, logp: np.ndarray):
        self.key = key  # the segment's, as its batch's caller knows it
        self.rng = rng
        self.min_len, self.max_len = min_len, max_len
        self.logp = logp
        self.decoded: list[int] = []
        self.ended = False

    def draw(self, params: LLMParams) -> int | None:
        """The next token from `logp`, or None at EOS; `ended` once no further token may come."""
        token = sample_next(
            self.logp, self.decoded, self.rng, params, allow_eos=len(self.decoded) >= self.min_len
        )
        if token == params.speech_token_size:
            self.ended = True
            return None
        self.decoded.append(token)
        self.ended = len(self.decoded) == self.max_len
        return token


def _last(array: np.ndarray) -> int:
    shape = np.shape(array)
    if not shape or shape[-1] == 0:
        raise InvalidRequest("speaker embedding must be a vector (or [0, dim] for none)")
    return shape[-1]


__all__ = [
    "CACHE_BLOCK",
    "DECODE_SPIN_MICROSECONDS",
    "CacheMemory",
    "DecodeBatch",
    "DecoderCache",
    "LLM",
    "LLMInput",
]
