"""CosyVoice v1's encoder (wenet Conformer/Transformer, espnet relative positions), shared by LLM and flow.

Parameter names equal upstream's state_dict keys, so released llm.pt and flow.pt load with strict=True. Only
what v1 configures is rebuilt (checked by `check_encoder`): pre-LN blocks of relative-position attention and
a feed-forward, no macaron half-step, no convolution module.

- espnet relative positions (`rel_pos_espnet`): x·√d after the input layer; the score of query i on key j
  adds (q_i + pos_bias_v)·linear_pos(pe(i − j)), with pe the sinusoid of the signed distance.
- A full-sequence pass computes that term over all 2T−1 distances and applies espnet's rel_shift, as
  upstream does. The LLM's encoders are causal (static_chunk_size 1, a masked softmax); the flow's attends
  everywhere (static_chunk_size 0), so its graph holds no mask at all.
- A decode step never recomputes linear_pos over the whole context (upstream does, every step): the
  projected rows P[r] = linear_pos(pe(r)) depend only on the distance r ≥ 0, so they are cached (divided
  by √d_k) beside K and V (prefill emits r = 0..T−1, `positions` any further block of distances in one
  matrix product)
  and a step only reads them. The step then costs O(context) like plain attention, and its weights are
  the ones it cannot do without.
- Folding linear_pos into the query instead (score r = (W_posᵀ q_v)·pe(r), one sinusoid table for every
  layer) would drop those rows but costs more: each step then reads every layer's W_pos (14 × 4 MiB in
  fp32, at any context) and its per-head products with pe are h = 16 times the rows' arithmetic. Timed
  on one full-size step, the 14 layers' position scores are several times faster with cached rows than
  folded, at short and long contexts alike.

The whole-sequence paths take one sequence, [1, T, size]; a decode step takes a batch of independent
sequences, [batch, 1, size], each at its own position. Linear layers always see 3-D inputs so the exporter
emits MatMul with the same folded (transposed) weight in the LLM's prefill and decode graphs: identical
bytes, stored once in weights.bin.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple, cast

import torch
from torch import nn

from export.config import EncoderConfig
from export.errors import UnsupportedModel
from export.modules.cached_attention import CachedAttention


def sinusoid(distance: torch.Tensor, div_term: torch.Tensor) -> torch.Tensor:
    """pe(r) for float distances r [n] → [n, d], sin/cos interleaved exactly like upstream's table."""
    angles = distance.unsqueeze(1) * div_term.unsqueeze(0)  # [n, d/2]
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(1)


def inverse_frequencies(size: int) -> torch.Tensor:
    """upstream's div_term; built in forward (the exporter folds it) so meta-device construction works."""
    return torch.exp(torch.arange(0, size, 2, dtype=torch.float32) * -(math.log(10000.0) / size))


def _rel_shift(x: torch.Tensor, time: int | torch.Tensor) -> torch.Tensor:
    """espnet rel_shift for [h, T, 2T−1] → [h, T, T]: entry (i, j) becomes distance i − j."""
    heads, rows, cols = x.shape
    padded = torch.cat([torch.zeros(heads, rows, 1, dtype=x.dtype), x], dim=-1)
    shifted = padded.reshape(heads, cols + 1, rows)[:, 1:].reshape(heads, rows, cols)
    return shifted[:, :, :time]


class StepKeys(NamedTuple):
    """Where a decode step's rows stand, the same for every layer (computed once per step).

    `past_len` [batch]: t_b, row b's new position (its keys 0..t_b−1 are cached); `distances`
    [batch, heads, 1, T], T = max t_b + 1: entry (b, ·, 0, j) is t_b − j, the distance of row b's key j
    from its new position, which indexes its position row (rows hold distances 0, 1, ...). Keys past a
    row's own t_b are not read: their entries are clamped to distance 0 so the index stays in range."""

    past_len: torch.Tensor
    distances: torch.Tensor

    @classmethod
    def at(cls, past_len: torch.Tensor, heads: int) -> StepKeys:
        # A tensor end keeps the range dynamic in the exported graph.
        keys = torch.arange(past_len.max() + 1, dtype=torch.int64)  # type: ignore[call-overload]
        distances = (past_len.unsqueeze(1) - keys.unsqueeze(0)).clamp(min=0)  # [batch, T]
        # The heads axis by broadcasting (not `expand`), so the exported graph keeps every size dynamic.
        return cls(past_len, distances.reshape(-1, 1, 1, keys.shape[0]) + torch.zeros(1, heads, 1, 1).long())


class RelPositionAttention(nn.Module):
    """upstream RelPositionMultiHeadedAttention (espnet flavour): a whole sequence, or one cached step."""

    def __init__(self, size: int, heads: int) -> None:
        super().__init__()
        self.h = heads
        self.d_k = size // heads
        self.linear_q = nn.Linear(size, size)
        self.linear_k = nn.Linear(size, size)
        self.linear_v = nn.Linear(size, size)
        self.linear_out = nn.Linear(size, size)
        self.linear_pos = nn.Linear(size, size, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.empty(heads, self.d_k))
        nn.init.xavier_uniform_(self.pos_bias_u)
        nn.init.xavier_uniform_(self.pos_bias_v)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[1, T, size] → [heads, T, d_k]"""
        return x.reshape(-1, self.h, self.d_k).transpose(0, 1)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """linear_q, linear_k, linear_v of x [1, T, size] as one matrix product (one weight read, one
        kernel call instead of three): each output is the same dot product as its own layer's."""
        weight = torch.cat([self.linear_q.weight, self.linear_k.weight, self.linear_v.weight])
        bias = torch.cat([self.linear_q.bias, self.linear_k.bias, self.linear_v.bias])
        return torch.nn.functional.linear(x, weight, bias).split(self.h * self.d_k, dim=-1)

    def _attend(
        self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The whole-sequence pass: output [1, T, size] and its heads k, v [h, T, d_k], p [h, 2T−1, d_k]."""
        q, k, v = self._qkv(x)
        q = q.reshape(-1, self.h, self.d_k)  # [T, h, d_k]
        k, v = self._heads(k), self._heads(v)
        p = self.positions(pos)  # [h, 2T-1, d_k]; index m is distance T-1-m
        q_u = (q + self.pos_bias_u).transpose(0, 1)
        q_v = (q + self.pos_bias_v).transpose(0, 1)
        matrix_ac = torch.matmul(q_u, k.transpose(1, 2))  # [h, T, T]
        matrix_bd = _rel_shift(torch.matmul(q_v, p.transpose(1, 2)), x.shape[1])
        scores = (matrix_ac + matrix_bd) / math.sqrt(self.d_k)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)  # [h, T, d_k]
        out = self.linear_out(context.transpose(0, 1).reshape(1, -1, self.h * self.d_k))
        return out, k, v, p

    def forward(self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        """x [1, T, size], pos = pe over distances T−1 … −(T−1) [1, 2T−1, size], allowed [T, T] bool
        (None: every key) → [1, T, size]."""
        return self._attend(x, pos, allowed)[0]

    def prefill(
        self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward`, plus the layer's cache [3, heads, T, d_k] (`cached_positions` rows for r = 0..T−1)
        for `step`."""
        out, k, v, p = self._attend(x, pos, allowed)
        rows = torch.flip(p[:, : x.shape[1]], dims=[1]) / math.sqrt(self.d_k)  # distances 0..T-1
        return out, torch.stack([k, v, rows])

    def positions(self, pe: torch.Tensor) -> torch.Tensor:
        """The layer's position rows linear_pos(pe(r)) [h, n, d_k] for pe [1, n, size]."""
        return self._heads(self.linear_pos(pe))

    def cached_positions(self, pe: torch.Tensor) -> torch.Tensor:
        """The rows a decode step reads: `positions` already divided by √d_k, the scores' scale. A step's
        position scores are then a plain matrix product (onnxruntime's scaled FusedMatMul is slower on a
        decode step's shapes), and for d_k = 64 the division by 8 is exact."""
        return self.positions(pe) / math.sqrt(self.d_k)

    def step(
        self,
        x: torch.Tensor,
        keys: StepKeys,
        past_key: torch.Tensor,
        past_value: torch.Tensor,
        past_pos: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One new position per row, t_b = past_len[b], attending to that row's t_b cached ones and itself.

        x [batch, 1, size]; keys: where the step stands (`StepKeys`); past_key/past_value
        [batch, h, capacity, d_k], row b's positions ≥ t_b unused; past_pos [h, d_k, capacity], the
        `cached_positions` rows for distances 0..capacity−1 (distance last), shared by every row, of which
        0..t_b are read. Returns the output [batch, 1, size] and the caches with each row's position t_b
        set to its new key and value (export.modules.cached_attention).
        """
        q, k, v = self._qkv(x)
        size = self.h * self.d_k
        scale = 1.0 / math.sqrt(self.d_k)
        q_u = q + self.pos_bias_u.reshape(1, 1, size)
        q_v = (q + self.pos_bias_v.reshape(1, 1, size)).reshape(-1, self.h, 1, self.d_k)
        # Position scores by distance r (entry r), then in key order: key j is at distance t_b − j.
        by_distance = torch.matmul(q_v, past_pos)  # [batch, h, 1, capacity], scaled with the rows
        bias = torch.gather(by_distance, 3, keys.distances)  # [batch, h, 1, T]
        out, present_key, present_value = CachedAttention.apply(
            q_u, k, v, past_key, past_value, keys.past_len, bias, self.h, scale
        )
        return self.linear_out(out), present_key, present_value


class FeedForward(nn.Module):
    def __init__(self, size: int, units: int, activation: nn.Module) -> None:
        super().__init__()
        self.w_1 = nn.Linear(size, units)
        self.activation = activation
        self.w_2 = nn.Linear(units, size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.activation(self.w_1(x)))


class Block(nn.Module):
    """Pre-LN attention + feed-forward block. Upstream names its norms by encoder kind."""

    NORM_NAMES = {"conformer": ("norm_mha", "norm_ff"), "transformer": ("norm1", "norm2")}  # attn, ff
    # Created in upstream's order, so state_dict keys (and the fake models saved from them) come out in
    # a released checkpoint's order.
    CREATION_ORDER = {"conformer": ("norm_ff", "norm_mha"), "transformer": ("norm1", "norm2")}
    ACTIVATIONS = {"conformer": nn.SiLU, "transformer": nn.ReLU}  # upstream defaults: swish / relu

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        size = config.output_size
        self.self_attn = RelPositionAttention(size, config.attention_heads)
        self.feed_forward = FeedForward(size, config.linear_units, self.ACTIVATIONS[config.kind]())
        self._norm_names = self.NORM_NAMES[config.kind]
        for name in self.CREATION_ORDER[config.kind]:
            setattr(self, name, nn.LayerNorm(size, eps=1e-12))

    def _norm_attn(self) -> nn.Module:
        return getattr(self, self._norm_names[0])

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The second residual half, after attention."""
        return x + self.feed_forward(getattr(self, self._norm_names[1])(x))

    def forward(self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        return self._feed_forward(x + self.self_attn(self._norm_attn()(x), pos, allowed))

    def prefill(
        self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        attended, cache = self.self_attn.prefill(self._norm_attn()(x), pos, allowed)
        return self._feed_forward(x + attended), cache

    def step(
        self, x: torch.Tensor, keys: StepKeys, *past: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        attended, present_key, present_value = self.self_attn.step(self._norm_attn()(x), keys, *past)
        return self._feed_forward(x + attended), present_key, present_value


class Embed(nn.Module):
    """Input layer `linear` (Linear, LayerNorm) or `linear_legacy` (+ ReLU); keys embed.out.0/1."""

    def __init__(self, input_size: int, size: int, legacy: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(input_size, size), nn.LayerNorm(size, eps=1e-5), nn.Dropout(0.0)]
        if legacy:
            layers.append(nn.ReLU())
        self.out = nn.Sequential(*layers)
        self.xscale = math.sqrt(size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x) * self.xscale


class Encoder(nn.Module):
    """upstream Conformer/TransformerEncoder restricted to what v1 configures (checked by `check_encoder`)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        size = config.output_size
        self.embed = Embed(config.input_size, size, legacy=config.input_layer == "linear_legacy")
        self.after_norm = nn.LayerNorm(size, eps=1e-5)  # before the blocks, as upstream registers it
        self.encoders = nn.ModuleList(Block(config) for _ in range(config.num_blocks))
        self.size = size
        self.heads = config.attention_heads
        self.causal = config.static_chunk_size == 1  # check_encoder admits 1 (causal) and 0 (full) only

    @property
    def blocks(self) -> Iterable[Block]:
        # nn.ModuleList iterates as plain nn.Module; every item here is a Block (built just above).
        return cast("Iterable[Block]", self.encoders)

    def _input(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [1, T, input] → embedded [1, T, size] and pe over distances T−1 … −(T−1) [1, 2T−1, size]."""
        x = self.embed(x)
        time = x.shape[1]
        distance = (time - 1 - torch.arange(2 * time - 1, dtype=torch.int64)).to(torch.float32)
        return x, sinusoid(distance, inverse_frequencies(self.size)).unsqueeze(0)

    @staticmethod
    def _causal_mask(time: int) -> torch.Tensor:
        """[T, T] bool, query i may see keys j ≤ i (static_chunk_size 1)."""
        steps = torch.arange(time, dtype=torch.int64)
        return steps.unsqueeze(0) <= steps.unsqueeze(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [1, T, input] → [1, T, size], causal or not as configured."""
        x, pos = self._input(x)
        allowed = self._causal_mask(x.shape[1]) if self.causal else None
        for block in self.blocks:
            x = block(x, pos, allowed)
        return self.after_norm(x)

    def prefill(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Causal pass over x [1, T, input] → output [1, T, size] and per-layer caches [3, h, T, d_k]."""
        x, pos = self._input(x)
        allowed = self._causal_mask(x.shape[1])
        caches = []
        for block in self.blocks:
            x, cache = block.prefill(x, pos, allowed)
            caches.append(cache)
        return self.after_norm(x), caches

    def step(
        self,
        x: torch.Tensor,
        past_len: torch.Tensor,
        past: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """One position after `prefill` for each row of a batch: x [batch, 1, input], row b at
        past_len[b] → [batch, 1, size] and per layer the (key, value) caches with those positions written."""
        x = self.embed(x)
        keys = StepKeys.at(past_len, self.heads)
        presents = []
        for block, layer_past in zip(self.blocks, past, strict=True):
            x, present_key, present_value = block.step(x, keys, *layer_past)
            presents.append((present_key, present_value))
        return self.after_norm(x), presents

    def positions(self, distances: torch.Tensor) -> torch.Tensor:
        """Every layer's cached position rows for distances [n] ≥ 0 → [layers, h, n, d_k] (what prefill
        caches for its prefix, for the distances a decode step will reach)."""
        pe = sinusoid(distances.to(torch.float32), inverse_frequencies(self.size)).unsqueeze(0)
        return torch.stack([block.self_attn.cached_positions(pe) for block in self.blocks])


def check_encoder(config: EncoderConfig, where: str, causal: bool) -> None:
    """Refuse configurations whose arithmetic this module does not reproduce; `causal` is what the caller
    needs (static_chunk_size 1) rather than full attention (0)."""
    problems = []
    if config.pos_enc_layer_type != "rel_pos_espnet":
        problems.append(f"pos_enc_layer_type {config.pos_enc_layer_type!r} (need 'rel_pos_espnet')")
    if config.input_layer not in ("linear", "linear_legacy"):
        problems.append(f"input_layer {config.input_layer!r}")
    if not config.normalize_before:
        problems.append("normalize_before False")
    if config.macaron_style or config.use_cnn_module:
        problems.append("macaron/cnn modules")
    chunk, attention = (1, "causal") if causal else (0, "full")
    if config.static_chunk_size != chunk:
        problems.append(f"static_chunk_size {config.static_chunk_size} (need {chunk}: {attention} attention)")
    if problems:
        raise UnsupportedModel(f"{where}: unsupported encoder settings: {', '.join(problems)}")


__all__ = ["Encoder", "check_encoder"]
