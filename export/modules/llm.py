"""CosyVoice v1 `TransformerLM` rebuilt for export: same parameter names, explicit prefill and decode step.

Parameter names equal upstream's state_dict keys, so a released llm.pt loads with strict=True. The
arithmetic follows upstream inference (`TransformerLM.inference` → `encode` + `forward_chunk`):

- espnet relative positions (`rel_pos_espnet`): x·√d after the input layer; the score of query i on key j
  adds (q_i + pos_bias_v)·linear_pos(pe(i − j)), with pe the sinusoid of the signed distance.
- Prefill computes that term over all 2T−1 distances and applies espnet's rel_shift, as upstream does.
- A decode step never recomputes linear_pos over the whole context (upstream does, every step): the
  projected rows P[r] = linear_pos(pe(r)) depend only on the distance r ≥ 0, so they are cached beside
  K and V (prefill emits r = 0..T−1, each step adds the one new distance r = t). The step then costs
  O(context) like plain attention.

Decode caches are per layer, head-major [heads, capacity, head_dim] buffers of which the first `past_len`
rows are valid; the step reads them in place and returns only the new rows, which the runtime writes in.
That keeps every step free of cache copies (a 14-layer cache at 800 positions is ~140 MB).

Linear layers always see 3-D inputs so the exporter emits MatMul with the same folded (transposed)
weight in both graphs: identical bytes, stored once in weights.bin.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import cast

import torch
from torch import nn

from export.config import EncoderConfig, LLMConfig

CACHE_KINDS = 3  # key, value, projected position rows


def sinusoid(distance: torch.Tensor, div_term: torch.Tensor) -> torch.Tensor:
    """pe(r) for float distances r [n] → [n, d], sin/cos interleaved exactly like upstream's table."""
    angles = distance.unsqueeze(1) * div_term.unsqueeze(0)  # [n, d/2]
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(1)


def inverse_frequencies(size: int) -> torch.Tensor:
    """upstream's div_term; built in forward (the exporter folds it) so meta-device construction works."""
    return torch.exp(torch.arange(0, size, 2, dtype=torch.float32) * -(math.log(10000.0) / size))


class RelPositionAttention(nn.Module):
    """upstream RelPositionMultiHeadedAttention (espnet flavour), as prefill and as one cached step."""

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

    def full(
        self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x [1, T, size], pos = pe over distances T−1 … −(T−1) [1, 2T−1, size], allowed [T, T] bool.

        Returns the output [1, T, size] and the layer's cache [3, heads, T, d_k] (P rows for r = 0..T−1).
        """
        q = self.linear_q(x).reshape(-1, self.h, self.d_k)  # [T, h, d_k]
        k = self._heads(self.linear_k(x))
        v = self._heads(self.linear_v(x))
        p = self._heads(self.linear_pos(pos))  # [h, 2T-1, d_k]; index m is distance T-1-m
        q_u = (q + self.pos_bias_u).transpose(0, 1)
        q_v = (q + self.pos_bias_v).transpose(0, 1)
        matrix_ac = torch.matmul(q_u, k.transpose(1, 2))  # [h, T, T]
        matrix_bd = _rel_shift(torch.matmul(q_v, p.transpose(1, 2)), q.shape[0])
        scores = (matrix_ac + matrix_bd) / math.sqrt(self.d_k)
        scores = scores.masked_fill(~allowed, float("-inf"))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)  # [h, T, d_k]
        out = self.linear_out(context.transpose(0, 1).reshape(1, -1, self.h * self.d_k))
        rows = torch.flip(p[:, : q.shape[0]], dims=[1])  # distances 0..T-1
        return out, torch.stack([k, v, rows])

    def step(
        self,
        x: torch.Tensor,
        pos: torch.Tensor,
        past_len: torch.Tensor,
        past_key: torch.Tensor,
        past_value: torch.Tensor,
        past_pos: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One new position t = past_len attending to the t cached ones and itself.

        x [1, 1, size]; pos = pe(t) [1, 1, size]; past_* [h, capacity, d_k], rows ≥ t unused (finite).
        Returns the output [1, 1, size] and the new rows [3, h, 1, d_k] (key, value, P for distance t).
        """
        capacity = past_key.shape[1]
        q = self.linear_q(x).reshape(self.h, 1, self.d_k)
        k = self.linear_k(x).reshape(self.h, 1, self.d_k)
        v = self.linear_v(x).reshape(self.h, 1, self.d_k)
        p = self.linear_pos(pos).reshape(self.h, 1, self.d_k)
        q_u = q + self.pos_bias_u.unsqueeze(1)
        q_v = q + self.pos_bias_v.unsqueeze(1)
        # Content scores: cached keys, then the new key.
        ac_past = torch.matmul(q_u, past_key.transpose(1, 2))  # [h, 1, capacity]
        ac_new = torch.matmul(q_u, k.transpose(1, 2))  # [h, 1, 1]
        # Position scores by distance: cached rows hold r = 0..t-1, the new row is r = t. Cached key j is
        # at distance t - j (so key 0 uses the new row), the new key at distance 0.
        bd_by_distance = torch.cat(
            [torch.matmul(q_v, past_pos.transpose(1, 2)), torch.matmul(q_v, p.transpose(1, 2))], 2
        )
        keys = torch.arange(capacity, dtype=torch.int64)
        distance = torch.where(keys == 0, capacity, (past_len - keys).clamp(min=0))
        bd_past = torch.index_select(bd_by_distance, 2, distance)
        bd_new = bd_by_distance[:, :, :1]
        past_scores = (ac_past + bd_past) / math.sqrt(self.d_k)
        past_scores = past_scores.masked_fill(keys >= past_len, float("-inf"))
        scores = torch.cat([past_scores, (ac_new + bd_new) / math.sqrt(self.d_k)], 2)
        weights = torch.softmax(scores, dim=-1)
        context = torch.matmul(weights[:, :, :-1], past_value) + weights[:, :, -1:] * v  # [h, 1, d_k]
        out = self.linear_out(context.reshape(1, 1, self.h * self.d_k))
        return out, torch.stack([k, v, p])


def _rel_shift(x: torch.Tensor, time: int | torch.Tensor) -> torch.Tensor:
    """espnet rel_shift for [h, T, 2T−1] → [h, T, T]: entry (i, j) becomes distance i − j."""
    heads, rows, cols = x.shape
    padded = torch.cat([torch.zeros(heads, rows, 1, dtype=x.dtype), x], dim=-1)
    shifted = padded.reshape(heads, cols + 1, rows)[:, 1:].reshape(heads, rows, cols)
    return shifted[:, :, :time]


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

    NORM_NAMES = {"conformer": ("norm_mha", "norm_ff"), "transformer": ("norm1", "norm2")}
    ACTIVATIONS = {"conformer": nn.SiLU, "transformer": nn.ReLU}  # upstream defaults: swish / relu

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        size = config.output_size
        self.self_attn = RelPositionAttention(size, config.attention_heads)
        self.feed_forward = FeedForward(size, config.linear_units, self.ACTIVATIONS[config.kind]())
        self._norm_names = self.NORM_NAMES[config.kind]
        for name in self._norm_names:
            setattr(self, name, nn.LayerNorm(size, eps=1e-12))

    def _norms(self) -> tuple[nn.Module, nn.Module]:
        return getattr(self, self._norm_names[0]), getattr(self, self._norm_names[1])

    def full(
        self, x: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        norm_attn, norm_ff = self._norms()
        attended, cache = self.self_attn.full(norm_attn(x), pos, allowed)
        x = x + attended
        return x + self.feed_forward(norm_ff(x)), cache

    def step(
        self, x: torch.Tensor, pos: torch.Tensor, past_len: torch.Tensor, *past: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        norm_attn, norm_ff = self._norms()
        attended, rows = self.self_attn.step(norm_attn(x), pos, past_len, *past)
        x = x + attended
        return x + self.feed_forward(norm_ff(x)), rows


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
        self.encoders = nn.ModuleList(Block(config) for _ in range(config.num_blocks))
        self.after_norm = nn.LayerNorm(size, eps=1e-5)
        self.size = size

    @property
    def blocks(self) -> Iterable[Block]:
        # nn.ModuleList iterates as plain nn.Module; every item here is a Block (built just above).
        return cast("Iterable[Block]", self.encoders)

    def full(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Causal pass over x [1, T, input] → output [1, T, size] and per-layer caches [3, h, T, d_k]."""
        x = self.embed(x)
        time = x.shape[1]
        steps = torch.arange(time, dtype=torch.int64)
        distance = (time - 1 - torch.arange(2 * time - 1, dtype=torch.int64)).to(torch.float32)
        pos = sinusoid(distance, inverse_frequencies(self.size)).unsqueeze(0)
        allowed = steps.unsqueeze(0) <= steps.unsqueeze(1)  # causal: static_chunk_size 1
        caches = []
        for block in self.blocks:
            x, cache = block.full(x, pos, allowed)
            caches.append(cache)
        return self.after_norm(x), caches

    def step(
        self,
        x: torch.Tensor,
        past_len: torch.Tensor,
        past: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.embed(x)
        pos = sinusoid(past_len.to(torch.float32).reshape(1), inverse_frequencies(self.size)).unsqueeze(0)
        rows = []
        for block, layer_past in zip(self.blocks, past, strict=True):
            x, new = block.step(x, pos, past_len, *layer_past)
            rows.append(new)
        return self.after_norm(x), rows


def check_encoder(config: EncoderConfig, where: str) -> None:
    """Refuse configurations whose arithmetic this module does not reproduce."""
    problems = []
    if config.pos_enc_layer_type != "rel_pos_espnet":
        problems.append(f"pos_enc_layer_type {config.pos_enc_layer_type!r} (need 'rel_pos_espnet')")
    if config.input_layer not in ("linear", "linear_legacy"):
        problems.append(f"input_layer {config.input_layer!r}")
    if not config.normalize_before:
        problems.append("normalize_before False")
    if config.macaron_style or config.use_cnn_module:
        problems.append("macaron/cnn modules")
    if config.static_chunk_size != 1:
        problems.append(f"static_chunk_size {config.static_chunk_size} (need 1: causal attention)")
    if problems:
        raise ValueError(f"{where}: unsupported encoder settings: {', '.join(problems)}")


class TransformerLM(nn.Module):
    """Same submodules and names as cosyvoice.llm.llm.TransformerLM; inference only."""

    SOS, TASK_ID = 0, 1  # rows of llm_embedding

    def __init__(self, config: LLMConfig) -> None:
        super().__init__()
        check_encoder(config.text_encoder, "llm.text_encoder")
        check_encoder(config.llm, "llm.llm")
        size = config.llm_input_size
        self.text_embedding = nn.Embedding(config.text_token_size, config.text_encoder_input_size)
        self.text_encoder = Encoder(config.text_encoder)
        self.text_encoder_affine_layer = nn.Linear(config.text_encoder.output_size, size)
        self.llm_embedding = nn.Embedding(2, size)
        self.llm = Encoder(config.llm)
        self.llm_decoder = nn.Linear(config.llm_output_size, config.speech_token_size + 1)
        self.speech_embedding = nn.Embedding(config.speech_token_size, size)
        self.spk_embed_affine_layer = nn.Linear(config.spk_embed_dim, size)

    def prefix(
        self, text_tokens: torch.Tensor, speaker_embedding: torch.Tensor, prompt_speech_tokens: torch.Tensor
    ) -> torch.Tensor:
        """[sos, affine(normalize(emb)) (0 or 1 rows), text_encoder(text), task_id, prompt speech]

        → [1, L, size], the sequence upstream's inference feeds the decoder."""
        text, _ = self.text_encoder.full(self.text_embedding(text_tokens))
        text = self.text_encoder_affine_layer(text)
        norm = speaker_embedding.norm(dim=1, keepdim=True).clamp(min=1e-12)  # F.normalize
        speaker = self.spk_embed_affine_layer((speaker_embedding / norm).unsqueeze(0))
        sos = self.llm_embedding.weight[self.SOS].reshape(1, 1, -1)
        task = self.llm_embedding.weight[self.TASK_ID].reshape(1, 1, -1)
        prompt = self.speech_embedding(prompt_speech_tokens)
        return torch.cat([sos, speaker, text, task, prompt], dim=1)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Last position's hidden [1, L, size] → log-probabilities [1, speech_token_size + 1]."""
        return torch.log_softmax(self.llm_decoder(hidden[:, -1:]), dim=-1).reshape(1, -1)


class Prefill(nn.Module):
    """Graph llm_prefill: the prefix through the decoder → logp and the cache [layers, 3, h, L, d_k]."""

    def __init__(self, lm: TransformerLM) -> None:
        super().__init__()
        self.lm = lm

    def forward(
        self, text_tokens: torch.Tensor, speaker_embedding: torch.Tensor, prompt_speech_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden, caches = self.lm.llm.full(
            self.lm.prefix(text_tokens, speaker_embedding, prompt_speech_tokens)
        )
        return self.lm.log_probs(hidden), torch.stack(caches)


class DecodeStep(nn.Module):
    """Graph llm_decode: one speech token at position past_len → logp and new rows [layers, 3, h, 1, d_k].

    Inputs after (token, past_len) are past_key_0, past_value_0, past_pos_0, past_key_1, ... .
    """

    def __init__(self, lm: TransformerLM) -> None:
        super().__init__()
        self.lm = lm

    def forward(
        self, token: torch.Tensor, past_len: torch.Tensor, *past: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        layers = [tuple(past[i : i + CACHE_KINDS]) for i in range(0, len(past), CACHE_KINDS)]
        hidden, rows = self.lm.llm.step(self.lm.speech_embedding(token), past_len, layers)  # type: ignore[arg-type]
        return self.lm.log_probs(hidden), torch.stack(rows)


__all__ = ["CACHE_KINDS", "DecodeStep", "Prefill", "TransformerLM", "check_encoder"]
