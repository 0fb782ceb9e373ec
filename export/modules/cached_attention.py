"""One decode step's attention over a key/value cache that the graph updates in place.

`CachedAttention` computes, for a single new position t of each row of a batch, softmax(scale · q·Kᵀ +
bias)·V over the row's t cached keys and values plus the new ones, and returns the caches with position t
written. In torch it is plain arithmetic (what the export's own tests check against upstream); in the ONNX
graph it is one node, onnxruntime's `com.microsoft.GroupQueryAttention` (as many key/value heads as query
heads). That node writes the new row into the cache buffer itself when the caller binds each present cache
output to the memory of its past input (function.cosyvoice.llm does), and it reads only the first t + 1
positions of a row's buffer whatever its capacity, each row up to its own t (its seqlens_k): no per-layer
score, mask, softmax and concatenation nodes, no stacking of new rows into an output for the runtime to
copy back.

The bias carries what GroupQueryAttention itself does not know: the relative-position scores (see
export.modules.conformer), one per cached position and the new one, already scaled.
"""

from __future__ import annotations

from typing import Any

import torch

CONTRIB_DOMAIN = "com.microsoft"  # onnxruntime's contrib operators


class CachedAttention(torch.autograd.Function):
    """`CachedAttention.apply(query, key, value, past_key, past_value, past_len, bias, heads, scale)` for a
    batch of independent rows, row b at its own new position t_b = past_len[b]: query/key/value
    [batch, 1, heads·d]; past_key/past_value [batch, heads, capacity, d] with rows < t_b valid
    (capacity > every t_b); bias [batch, heads, 1, T] with T = max t_b + 1, of which row b's entries
    0..t_b are added to the scaled scores of its keys 0..t_b (the rest is unread) → (output
    [batch, 1, heads·d], present_key, present_value: the caches with row b's position t_b set to its new
    key and value)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        past_key: torch.Tensor,
        past_value: torch.Tensor,
        past_len: torch.Tensor,
        bias: torch.Tensor,
        heads: int,
        scale: float,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch, _, capacity, head_dim = past_key.shape
        rows = torch.arange(batch)
        present_key, present_value = past_key.clone(), past_value.clone()
        present_key[rows, :, past_len] = key.reshape(batch, heads, head_dim)
        present_value[rows, :, past_len] = value.reshape(batch, heads, head_dim)
        used = (torch.arange(capacity).unsqueeze(0) <= past_len.unsqueeze(1)).reshape(batch, 1, 1, capacity)
        q = query.reshape(batch, heads, 1, head_dim)
        padded = torch.nn.functional.pad(bias, (0, capacity - bias.shape[3]))  # zeros past the longest row
        scores = torch.matmul(q, present_key.transpose(2, 3)) * scale + padded  # [batch, heads, 1, capacity]
        weights = torch.softmax(scores.masked_fill(~used, float("-inf")), dim=-1)
        out = torch.matmul(weights, present_value).reshape(batch, 1, heads * head_dim)
        return out, present_key, present_value

    @staticmethod
    def symbolic(  # type: ignore[no-untyped-def]
        g, query, key, value, past_key, past_value, past_len, bias, heads: int, scale: float
    ):
        int32 = 6  # onnx TensorProto.INT32
        # Per row: the keys cached before the new one (GroupQueryAttention's seqlens_k is the row's total
        # length minus one); and the longest row's total length, a scalar.
        seqlens = g.op("Cast", past_len, to_i=int32)
        longest = g.op("ReduceMax", past_len, keepdims_i=0)
        total = g.op("Cast", g.op("Add", longest, g.op("Constant", value_t=torch.tensor(1))), to_i=int32)
        absent = g.op("prim::Constant")  # an omitted optional input (rotary caches, position ids)
        absent.setType(torch._C.OptionalType.ofTensor())
        out, present_key, present_value = g.op(
            f"{CONTRIB_DOMAIN}::GroupQueryAttention",
            query,
            key,
            value,
            past_key,
            past_value,
            seqlens,
            total,
            absent,
            absent,
            absent,
            bias,
            num_heads_i=heads,
            kv_num_heads_i=heads,
            scale_f=scale,
            outputs=3,
        )
        out.setType(query.type())
        present_key.setType(past_key.type())
        present_value.setType(past_value.type())
        return out, present_key, present_value


__all__ = ["CONTRIB_DOMAIN", "CachedAttention"]
