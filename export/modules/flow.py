"""CosyVoice-300M's flow (`MaskedDiffWithXvec`) rebuilt from plain torch ops, ready for ONNX export.

Every parameter is named exactly as in upstream's flow.pt, so the checkpoint loads with strict=True.
Two graphs are cut from it:

- `FlowEncoderGraph`: speech tokens → `mu` (encoder, projection, length regulator) and `spks` (speaker
  affine). The encoder is export.modules.conformer's with full attention (static_chunk_size 0). It always
  sees one unpadded sequence, so upstream's padding masks (all ones there) are left out.
- `ConditionalDecoder` (the estimator): one velocity evaluation of the flow-matching ODE. The Euler loop
  and classifier-free guidance stay outside, in the runtime. The runtime's rows are never padded (a
  batch of two is the same frames with and without conditions), so upstream's frame mask, all ones
  there, is left out too, and with it the attention's all-zero score bias.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from export.config import EstimatorConfig, FlowConfig
from export.errors import UnsupportedModel
from export.modules.conformer import Encoder, check_encoder

# Long chunks (> 2 * EDGE_TOKENS new tokens) get their first and last EDGE_TOKENS tokens interpolated on
# their own, so a chunk's edges map to a fixed number of frames (upstream's token_overlap_len).
EDGE_TOKENS = 20


def check_config(config: FlowConfig) -> None:
    """Refuse configurations these modules do not reproduce (UnsupportedModel, one line)."""
    check_encoder(config.encoder, "flow.encoder", causal=False)
    est = config.estimator
    problems = [
        (est.act_fn != "gelu", f"estimator act_fn {est.act_fn!r} (expected 'gelu')"),
        (est.in_channels != 4 * config.output_size, "estimator in_channels != 4 * output_size"),
        (config.length_regulator_channels != config.output_size, "length regulator channels != output_size"),
    ]
    found = [text for bad, text in problems if bad]
    if found:
        raise UnsupportedModel(f"unsupported flow configuration: {'; '.join(found)}")


def mish(x: torch.Tensor) -> torch.Tensor:
    """x · tanh(softplus(x)), computed as x · n / (n + 2) with n = eˣ (eˣ + 2), the same function.

    onnxruntime's Softplus kernel is scalar: at the estimator's sizes this Exp/Mul/Div form is several times
    faster (and closer to float64). Past x = 20 the ratio is 1.0 in float32, as with torch's softplus
    threshold; the clamp keeps eˣ finite.
    """
    e = torch.exp(x.clamp(max=20.0))
    n = e * (e + 2.0)
    return x * (n / (n + 2.0))


class Mish(nn.Module):
    """`mish` where upstream's Sequentials hold an nn.Mish."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mish(x)


# --- length regulator ------------------------------------------------------------------------------------


class InterpolateRegulator(nn.Module):
    """Upstream's regulator minus the interpolation (done by `segment_sources`): conv stack on frames."""

    def __init__(self, channels: int, n_convs: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(n_convs):
            layers += [nn.Conv1d(channels, channels, 3, 1, 1), nn.GroupNorm(1, channels), Mish()]
        layers.append(nn.Conv1d(channels, channels, 1, 1))
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def segment_sources(
    n_tokens: torch.Tensor,
    prompt_tokens: torch.Tensor,
    prompt_frames: torch.Tensor,
    new_frames: torch.Tensor,
    edge_frames: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Linear interpolation (torch's, align_corners=False) of tokens to frames, piece by piece.

    Upstream interpolates the prompt and the new tokens separately and, for more than 2*EDGE_TOKENS new
    tokens, their head / middle / tail separately too. Each output frame gets its piece's (start, count)
    in tokens and frames; returns the two source token indices per frame and the weight of the second.
    """
    zero = torch.zeros_like(n_tokens)
    new_tokens = n_tokens - prompt_tokens
    is_long = new_tokens > 2 * EDGE_TOKENS
    edge_t = torch.where(is_long, EDGE_TOKENS, 0)
    edge_f = torch.where(is_long, edge_frames, 0)
    # Pieces: prompt, head, middle, tail (head and tail are empty for short chunks).
    token_start = torch.stack([zero, prompt_tokens, prompt_tokens + edge_t, n_tokens - edge_t])
    token_count = torch.stack([prompt_tokens, edge_t, new_tokens - 2 * edge_t, edge_t])
    frame_start = torch.stack(
        [zero, prompt_frames, prompt_frames + edge_f, prompt_frames + new_frames - edge_f]
    )
    frame_count = torch.stack([prompt_frames, edge_f, new_frames - 2 * edge_f, edge_f])

    # A 0-d tensor end keeps the frame count dynamic in the traced graph.
    frame = torch.arange(prompt_frames + new_frames)  # type: ignore[call-overload]
    piece = (
        (frame >= frame_start[1]).long() + (frame >= frame_start[2]).long() + (frame >= frame_start[3]).long()
    )
    count = token_count[piece]
    scale = count.to(torch.float32) / frame_count[piece].to(torch.float32)
    source = ((frame - frame_start[piece]).to(torch.float32) + 0.5) * scale - 0.5
    source = source.clamp(min=0.0)
    lower = torch.minimum(source.floor().long(), count - 1)
    weight = (source - lower.to(torch.float32)).clamp(0.0, 1.0)
    upper = torch.minimum(lower + 1, count - 1)
    start = token_start[piece]
    return start + lower, start + upper, weight


# --- estimator: ConditionalDecoder (1-D U-Net with transformer blocks) ------------------------------------
#
# A streamed chunk runs the estimator ten times, so its graph keeps upstream's math in fewer and cheaper
# nodes: attention is one onnxruntime contrib op (onnxruntime does not fuse the exported form itself), q/k/v
# are one product, what all stages share (the time projections) is computed once, and Mish
# avoids onnxruntime's slow Softplus. Weight products stay plain MatMul/Gemm nodes on constant weights, so
# int8 quantisation still applies to them.

CONTRIB_DOMAIN = "com.microsoft"


class MultiHeadAttentionOp(torch.autograd.Function):
    """softmax(q kᵀ / √d) v per head on [B, T, heads * d] → one com.microsoft::MultiHeadAttention.

    Without a score bias: onnxruntime's kernel then skips adding a [B, 1, T, T] tensor to every head's
    scores, a sizeable part of the op's time."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int
    ) -> torch.Tensor:
        batch, length, inner = q.shape

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, -1, heads, inner // heads).transpose(1, 2)  # [B, H, T, d]

        context = F.scaled_dot_product_attention(split(q), split(k), split(v))
        return context.transpose(1, 2).reshape(batch, length, inner)

    @staticmethod
    def symbolic(g, q, k, v, heads: int):  # type: ignore[no-untyped-def]  # torch.onnx's graph API
        # query, key, value; the optional inputs after them (biases, masks, past state) are left out
        out = g.op(f"{CONTRIB_DOMAIN}::MultiHeadAttention", q, k, v, num_heads_i=heads)
        return out.setType(q.type())


def timestep_embedding(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """[B] flow times → [B, dim] sinusoids (sin half, then cos half)."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000) / (half - 1)))
    angles = scale * t.unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class TimestepMLP(nn.Module):
    def __init__(self, in_channels: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class Block1D(nn.Module):
    """Conv k3 → GroupNorm(8) → Mish."""

    def __init__(self, dim: int, dim_out: int, groups: int = 8) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv1d(dim, dim_out, 3, padding=1), nn.GroupNorm(groups, dim_out), Mish()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.block(x))


class ResnetBlock1D(nn.Module):
    def __init__(self, dim: int, dim_out: int, time_dim: int) -> None:
        super().__init__()
        # Upstream adds mlp(time); `time_projections` computes every block's mlp in one product.
        self.mlp = nn.Sequential(Mish(), nn.Linear(time_dim, dim_out))
        self.block1 = Block1D(dim, dim_out)
        self.block2 = Block1D(dim_out, dim_out)
        self.res_conv = nn.Conv1d(dim, dim_out, 1)

    def forward(self, x: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
        """`time` is this block's mlp(time embedding), [B, dim_out, 1]."""
        return self.block2(self.block1(x) + time) + self.res_conv(x)


class Resample1D(nn.Module):
    """A strided (down) or transposed (up) convolution, kept under `.conv` where upstream names it."""

    def __init__(self, conv: nn.Module) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Attention(nn.Module):
    """diffusers' Attention as the estimator configures it: no q/k/v bias, biased output projection."""

    def __init__(self, dim: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.heads = heads
        inner = heads * head_dim
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_k = nn.Linear(dim, inner, bias=False)
        self.to_v = nn.Linear(dim, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Self-attention over [B, T, dim], every frame attending to every frame."""
        # One product for q, k and v (the exporter folds the concatenated weights into one constant), so
        # int8 quantises them with one scale; export.passes.split_products cuts it into three again.
        qkv = F.linear(x, torch.cat([self.to_q.weight, self.to_k.weight, self.to_v.weight]))
        q, k, v = qkv.split([self.to_q.out_features] * 3, dim=-1)
        return self.to_out[0](MultiHeadAttentionOp.apply(q, k, v, self.heads))


class GELUProjection(nn.Module):
    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x))


class TransformerFeedForward(nn.Module):
    def __init__(self, dim: int, mult: int = 4) -> None:
        super().__init__()
        # Index 1 is upstream's dropout: kept as a placeholder so the Linear stays at `net.2`.
        self.net = nn.ModuleList([GELUProjection(dim, dim * mult), nn.Identity(), nn.Linear(dim * mult, dim)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.net:
            x = layer(x)
        return x


class TransformerBlock(nn.Module):
    """matcha's BasicTransformerBlock as used here: pre-LN self-attention and GELU feed-forward."""

    def __init__(self, dim: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads, head_dim)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = TransformerFeedForward(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn1(self.norm1(x))
        return x + self.ff(self.norm3(x))


class Stage(nn.ModuleList):
    """One U-Net level [resnet, transformer blocks, resample?]; a ModuleList keeps upstream's key indices."""

    def __init__(
        self, resnet: ResnetBlock1D, blocks: list[TransformerBlock], resample: nn.Module | None
    ) -> None:
        super().__init__([resnet, nn.ModuleList(blocks), *([resample] if resample is not None else [])])

    @property
    def resnet(self) -> ResnetBlock1D:
        return cast(ResnetBlock1D, self[0])

    def forward(self, x: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
        """Resnet, then the transformer blocks over frames; the resample (if any) is `resample`."""
        x = self.resnet(x, time).transpose(1, 2)
        for block in cast(nn.ModuleList, self[1]):
            x = block(x)
        return x.transpose(1, 2)

    def resample(self, x: torch.Tensor) -> torch.Tensor:
        return self[2](x)


def time_projections(stages: list[Stage], time: torch.Tensor) -> list[torch.Tensor]:
    """Every stage's resnet mlp(time) as [B, dim_out, 1], from one Mish and one Gemm.

    The exporter folds the concatenated weights into one constant."""
    layers = [cast(nn.Linear, stage.resnet.mlp[1]) for stage in stages]
    weight = torch.cat([layer.weight for layer in layers])
    bias = torch.cat([layer.bias for layer in layers])
    projected = F.linear(mish(time), weight, bias).unsqueeze(2)
    return list(projected.split([layer.out_features for layer in layers], dim=1))


class ConditionalDecoder(nn.Module):
    """The flow-matching estimator: (x, mu, t, spks, cond) → velocity, all [B, 80, T] but t / spks.

    Upstream's also takes a frame mask; the runtime's is always all ones, where it changes nothing."""

    def __init__(self, config: EstimatorConfig) -> None:
        super().__init__()
        channels = tuple(config.channels)
        time_dim = channels[0] * 4
        self.in_channels = config.in_channels
        self.time_mlp = TimestepMLP(config.in_channels, time_dim)

        def stage(dim_in: int, dim_out: int, resample: nn.Module | None = None) -> Stage:
            blocks = [
                TransformerBlock(dim_out, config.num_heads, config.attention_head_dim)
                for _ in range(config.n_blocks)
            ]
            return Stage(ResnetBlock1D(dim_in, dim_out, time_dim), blocks, resample)

        def conv3(dim: int) -> nn.Conv1d:
            return nn.Conv1d(dim, dim, 3, padding=1)

        # Down: stride-2 convs halve the length except at the last level; up mirrors it with skips.
        self.down_blocks = nn.ModuleList()
        dim = config.in_channels
        for i, dim_out in enumerate(channels):
            last = i == len(channels) - 1
            down = conv3(dim_out) if last else Resample1D(nn.Conv1d(dim_out, dim_out, 3, 2, 1))
            self.down_blocks.append(stage(dim, dim_out, down))
            dim = dim_out
        self.mid_blocks = nn.ModuleList(stage(dim, dim) for _ in range(config.num_mid_blocks))
        ups = channels[::-1] + (channels[0],)
        self.up_blocks = nn.ModuleList()
        for i in range(len(ups) - 1):
            last = i == len(ups) - 2
            up = (
                conv3(ups[i + 1]) if last else Resample1D(nn.ConvTranspose1d(ups[i + 1], ups[i + 1], 4, 2, 1))
            )
            self.up_blocks.append(stage(ups[i] * 2, ups[i + 1], up))
        self.final_block = Block1D(ups[-1], ups[-1])
        self.final_proj = nn.Conv1d(ups[-1], config.out_channels, 1)

    def forward(
        self,
        x: torch.Tensor,  # [B, 80, T]
        mu: torch.Tensor,  # [B, 80, T]
        t: torch.Tensor,  # [B]
        spks: torch.Tensor,  # [B, 80]
        cond: torch.Tensor,  # [B, 80, T]
    ) -> torch.Tensor:
        downs, mids, ups = (
            cast(list[Stage], list(blocks)) for blocks in (self.down_blocks, self.mid_blocks, self.up_blocks)
        )
        times = iter(
            time_projections(downs + mids + ups, self.time_mlp(timestep_embedding(t, self.in_channels)))
        )
        x = torch.cat([x, mu, spks.unsqueeze(2).expand_as(x), cond], dim=1)
        skips = []
        for down in downs:
            x = down(x, next(times))
            skips.append(x)
            x = down.resample(x)
        for mid in mids:
            x = mid(x, next(times))
        for up, skip in zip(ups, reversed(skips), strict=True):
            # An odd level length comes back one frame longer from the transposed conv: trim to the skip.
            x = up(torch.cat([x[:, :, : skip.shape[2]], skip], dim=1), next(times))
            x = up.resample(x)
        return cast(torch.Tensor, self.final_proj(self.final_block(x)))


class CFMHolder(nn.Module):
    """Upstream's ConditionalCFM holds only the estimator as parameters (the ODE solver lives in runtime)."""

    def __init__(self, estimator: ConditionalDecoder) -> None:
        super().__init__()
        self.estimator = estimator


# --- the whole flow and its encoder graph -------------------------------------------------------------------


class FlowModel(nn.Module):
    """Parameter-for-parameter `MaskedDiffWithXvec` (v1)."""

    def __init__(self, config: FlowConfig) -> None:
        super().__init__()
        check_config(config)
        self.config = config
        self.input_embedding = nn.Embedding(config.vocab_size, config.input_size)
        self.spk_embed_affine_layer = nn.Linear(config.spk_embed_dim, config.output_size)
        self.encoder = Encoder(config.encoder)
        self.encoder_proj = nn.Linear(config.encoder.output_size, config.output_size)
        self.decoder = CFMHolder(ConditionalDecoder(config.estimator))  # upstream's order of creation
        self.length_regulator = InterpolateRegulator(
            config.length_regulator_channels, len(config.sampling_ratios)
        )


class FlowEncoderGraph(nn.Module):
    """(prompt + new speech tokens, lengths, speaker embedding) → mu [1, 80, frames], spks [1, 80]."""

    def __init__(self, flow: FlowModel) -> None:
        super().__init__()
        self.flow = flow
        self.edge_frames = flow.config.params().mel_frames(EDGE_TOKENS)

    def forward(
        self,
        speech_tokens: torch.Tensor,  # [1, T] int64, prompt tokens first
        prompt_token_len: torch.Tensor,  # [] int64
        prompt_mel_len: torch.Tensor,  # [] int64
        mel_len: torch.Tensor,  # [] int64, frames for the new tokens
        speaker_embedding: torch.Tensor,  # [1, spk_dim]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        flow = self.flow
        h = flow.encoder_proj(flow.encoder(flow.input_embedding(speech_tokens.clamp(min=0))))[0]  # [T, 80]
        n_tokens = torch.ones_like(prompt_token_len) * speech_tokens.shape[1]
        lower, upper, weight = segment_sources(
            n_tokens, prompt_token_len, prompt_mel_len, mel_len, self.edge_frames
        )
        weight = weight.unsqueeze(1)
        frames = h[lower] * (1.0 - weight) + h[upper] * weight  # [F, 80]
        mu = flow.length_regulator(frames.transpose(0, 1).unsqueeze(0))
        spks = flow.spk_embed_affine_layer(F.normalize(speaker_embedding, dim=1))
        return mu, spks


__all__ = [
    "EDGE_TOKENS",
    "ConditionalDecoder",
    "FlowEncoderGraph",
    "FlowModel",
    "check_config",
    "segment_sources",
]
