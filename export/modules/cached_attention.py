"""One decode step's attention over a key/value cache that the graph updates in place.

`CachedAttention` computes, for a single new position t, softmax(scale · q·Kᵀ + bias)·V over the t cached
keys and values plus the new ones, and returns the caches with row t written. In torch it is plain
arithmetic (what the export's own tests check against upstream); in the ONNX graph it is one node,
onnxruntime's `com.microsoft.GroupQueryAttention` (as many key/value heads as query heads). That node
writes the new row into the cache buffer itself when the caller binds each present cache output to the
memory of its past input (function.cosyvoice.llm does), and it reads only the first t + 1 rows of a
buffer whatever its capacity: no per-layer score, mask, softmax and concatenation nodes, no stacking of
new rows into an output for the runtime to copy back.

The bias carries what GroupQueryAttention itself does not know: the relative-position scores (see
export.modules.conformer), one per cached position and the new one, already scaled.
"""

from __future__ import annotations

from typing import Any

import torch

CONTRIB_DOMAIN = "com.microsoft"  # onnxruntime's contrib operators


class CachedAttention(torch.autograd.Function):
    """`CachedAttention.apply(query, key, value, past_key, past_value, past_len, bias, heads, scale)`:
    query/key/value [1, 1, heads·d] of the new position t = past_len; past_key/past_value
    [1, heads, capacity, d] with rows < t valid (capacity > t); bias [1, heads, 1, t + 1], added to the
    scaled scores of keys 0..t → (output [1, 1, heads·d], present_key, present_value: the caches with row t
    set to the new key and value)."""

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
        _, _, capacity, head_dim = past_key.shape
        row = past_len.reshape(1)
        present_key = past_key.index_copy(2, row, key.reshape(1, heads, 1, head_dim))
        present_value = past_value.index_copy(2, row, value.reshape(1, heads, 1, head_dim))
        used = torch.arange(capacity) <= past_len  # rows 0..t
        q = query.reshape(heads, 1, head_dim)
        padded = torch.nn.functional.pad(bias[0], (0, capacity - bias.shape[3]))  # zeros past row t
        scores = torch.matmul(q, present_key[0].transpose(1, 2)) * scale + padded
        weights = torch.softmax(scores.masked_fill(~used, float("-inf")), dim=-1)
        out = torch.matmul(weights, present_value[0]).reshape(1, 1, heads * head_dim)
        return out, present_key, present_value

    @staticmethod
    def symbolic(  # type: ignore[no-untyped-def]
        g, query, key, value, past_key, past_value, past_len, bias, heads: int, scale: float
    ):
        int32 = 6  # onnx TensorProto.INT32
        seqlens = g.op(
            "Cast", g.op("Reshape", past_len, g.op("Constant", value_t=torch.tensor([1]))), to_i=int32
        )
        total = g.op("Cast", g.op("Add", past_len, g.op("Constant", value_t=torch.tensor(1))), to_i=int32)
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
