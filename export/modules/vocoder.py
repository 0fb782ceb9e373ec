"""HiFT, CosyVoice v1's vocoder, rebuilt as plain modules that export to ONNX.

Parameter names match upstream's `HiFTGenerator` (with its `ConvRNNF0Predictor` under `f0_predictor.`)
after weight norm is folded, so a folded checkpoint loads with `load_state_dict(strict=True)`.
What is not a module here, and why:
- the harmonic source (SineGen) runs in numpy at run time, so its phase can carry across stream chunks;
  the graph takes its output (`sine_waves`) and applies only the learned merge (Linear + tanh);
- the source's STFT is a fixed strided convolution (ONNX has no complex STFT);
- the inverse STFT runs in numpy at run time (ONNX has no iSTFT).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from export.config import HiFTConfig
from export.errors import CheckpointError, UnsupportedModel

# How upstream stores weight norm: torch.nn.utils.weight_norm (older releases) or its parametrization.
_LEGACY_G, _LEGACY_V = ".weight_g", ".weight_v"
_PARAM_G, _PARAM_V = ".parametrizations.weight.original0", ".parametrizations.weight.original1"
_LAYOUTS = ((_LEGACY_G, _LEGACY_V), (_PARAM_G, _PARAM_V))


class WeightNormed:
    """Marker: upstream wraps this layer in weight norm, so its checkpoint stores (g, v), not `weight`."""


class NormedConv1d(WeightNormed, nn.Conv1d):
    pass


class NormedConvTranspose1d(WeightNormed, nn.ConvTranspose1d):
    pass


def fold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each (g, v) pair, in either layout, by `weight = g * v / ||v||` (norm over all dims but 0)."""
    folded: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        layout = next(((g, v) for g, v in _LAYOUTS if key.endswith(g) or key.endswith(v)), None)
        if layout is None:
            folded[key] = value
            continue
        g_suffix, v_suffix = layout
        suffix = g_suffix if key.endswith(g_suffix) else v_suffix
        prefix = key[: -len(suffix)]
        g, v = state.get(prefix + g_suffix), state.get(prefix + v_suffix)
        if g is None or v is None:
            raise CheckpointError(f"hift.pt has {key} but not its weight-norm partner under {prefix}")
        if suffix == g_suffix:
            norm = v.flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))
            folded[prefix + ".weight"] = g * v / norm
    return folded


def split_weight_norm(weight: torch.Tensor, scale: torch.Tensor, legacy: bool) -> dict[str, torch.Tensor]:
    """The inverse of folding, as upstream stores it: v = weight * scale (> 0 per row), g = ||weight||."""
    shape = (-1, *([1] * (weight.dim() - 1)))
    g = weight.flatten(1).norm(dim=1).view(shape)
    v = weight * scale.view(shape)
    g_suffix, v_suffix = (_LEGACY_G, _LEGACY_V) if legacy else (_PARAM_G, _PARAM_V)
    return {g_suffix: g, v_suffix: v}


def _reflect_pad(x: torch.Tensor, left: int, right: int) -> torch.Tensor:
    """F.pad(x, (left, right), mode="reflect") built from slices.

    torch exports F.pad's reflect mode with pads computed at run time, which hides every output shape
    downstream from ONNX shape inference; constant slices keep the shapes (and the batch dim of 1) known.
    """
    parts = [x[..., 1 : left + 1].flip(-1)] if left else []
    parts.append(x)
    if right:
        parts.append(x[..., -right - 1 : -1].flip(-1))
    return torch.cat(parts, dim=-1)


def _padding(kernel_size: int, dilation: int) -> int:
    return (kernel_size * dilation - dilation) // 2


class Snake(nn.Module):
    """x + sin²(αx)/α per channel (linear-scale α, upstream's 1e-9 guard against α = 0)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.view(1, -1, 1)
        return x + (1.0 / (alpha + 1e-9)) * torch.sin(x * alpha).pow(2)


class ResBlock(nn.Module):
    """HiFi-GAN residual block with Snake activations: per dilation, x += conv2(snake(conv1(snake(x))))."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(
            NormedConv1d(channels, channels, kernel_size, dilation=d, padding=_padding(kernel_size, d))
            for d in dilations
        )
        self.convs2 = nn.ModuleList(
            NormedConv1d(channels, channels, kernel_size, padding=_padding(kernel_size, 1)) for _ in dilations
        )
        self.activations1 = nn.ModuleList(Snake(channels) for _ in dilations)
        self.activations2 = nn.ModuleList(Snake(channels) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv1, conv2, act1, act2 in zip(
            self.convs1, self.convs2, self.activations1, self.activations2, strict=True
        ):
            x = x + conv2(act2(conv1(act1(x))))
        return x


class F0Predictor(nn.Module):
    """ConvRNNF0Predictor: 5 × (conv k3, ELU), a linear head, |·|. mel [B, n_mels, T] → f0 [B, T] in Hz."""

    def __init__(self, in_channels: int, cond_channels: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(5):
            layers += [
                NormedConv1d(in_channels if i == 0 else cond_channels, cond_channels, 3, padding=1),
                nn.ELU(),
            ]
        self.condnet = nn.Sequential(*layers)  # indices 0, 2, ... are the convs, as upstream
        self.classifier = nn.Linear(cond_channels, 1)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        hidden = self.condnet(mel).transpose(1, 2)
        return self.classifier(hidden).squeeze(-1).abs()


class SourceMerge(nn.Module):
    """The learned part of upstream's SourceModuleHnNSF: Linear(n_sines → 1) + tanh."""

    def __init__(self, n_sines: int) -> None:
        super().__init__()
        self.l_linear = nn.Linear(n_sines, 1)

    def forward(self, sine_waves: torch.Tensor) -> torch.Tensor:  # [B, samples, n_sines] → [B, samples]
        return torch.tanh(self.l_linear(sine_waves)).squeeze(-1)


class FixedStft(nn.Module):
    """torch.stft(center=True, reflect pad, periodic Hann, onesided) as a strided convolution.

    Output channels are [real bins..., imaginary bins...], as upstream concatenates them.
    """

    def __init__(self, n_fft: int, hop: int) -> None:
        super().__init__()
        n = torch.arange(n_fft, dtype=torch.float64)
        window = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
        angle = 2 * math.pi * torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None] * n / n_fft
        basis = torch.cat([window * torch.cos(angle), -window * torch.sin(angle)])  # [2 * bins, n_fft]
        self.basis: torch.Tensor
        self.register_buffer("basis", basis.float().unsqueeze(1), persistent=False)
        self.n_fft = n_fft
        self.hop = hop

    def forward(self, signal: torch.Tensor) -> torch.Tensor:  # [B, samples] → [B, 2 * bins, samples/hop + 1]
        half = self.n_fft // 2
        padded = _reflect_pad(signal.unsqueeze(1), half, half)
        return F.conv1d(padded, self.basis, stride=self.hop)


class HiFT(nn.Module):
    """mel [1, n_mels, T] + sine_waves [1, T·256, n_sines] → iSTFT magnitude and phase [1, bins, T·64 + 1].

    `f0_predictor` is the other graph (mel → f0); it lives here so one state dict loads both.
    """

    def __init__(self, config: HiFTConfig) -> None:
        super().__init__()
        if config.sampling_rate != 22050:
            # Upstream switches to SineGen2 (CosyVoice2's source) at other rates; the runtime implements v1's.
            raise UnsupportedModel(f"hift: sampling_rate {config.sampling_rate} is not v1's 22050")
        if config.f0_num_class != 1:
            raise UnsupportedModel(f"hift: f0_predictor num_class {config.f0_num_class} is not 1")
        if len(config.upsample_rates) != len(config.source_resblock_kernel_sizes):
            raise UnsupportedModel("hift: one source resblock is needed per upsampling stage")
        base = config.base_channels
        n_fft = config.istft_n_fft
        self.n_bins = n_fft // 2 + 1
        self.lrelu_slope = config.lrelu_slope
        self.num_kernels = len(config.resblock_kernel_sizes)
        self.f0_predictor = F0Predictor(config.f0_in_channels, config.f0_cond_channels)
        self.m_source = SourceMerge(config.nb_harmonics + 1)
        self.stft = FixedStft(n_fft, config.istft_hop_len)
        self.conv_pre = NormedConv1d(config.in_channels, base, 7, padding=3)
        self.ups = nn.ModuleList(
            NormedConvTranspose1d(base // 2**i, base // 2 ** (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes, strict=True))
        )
        # Stage i meets the source at the rate left after the remaining upsamplings.
        rates = list(config.upsample_rates)
        self.source_downs = nn.ModuleList()
        self.source_resblocks = nn.ModuleList()
        for i, (k, d) in enumerate(
            zip(config.source_resblock_kernel_sizes, config.source_resblock_dilation_sizes, strict=True)
        ):
            rate = math.prod(rates[i + 1 :])
            channels = base // 2 ** (i + 1)
            if rate == 1:
                self.source_downs.append(nn.Conv1d(n_fft + 2, channels, 1))
            else:
                self.source_downs.append(nn.Conv1d(n_fft + 2, channels, rate * 2, rate, padding=rate // 2))
            self.source_resblocks.append(ResBlock(channels, k, d))
        self.resblocks = nn.ModuleList(
            ResBlock(base // 2 ** (i + 1), k, d)
            for i in range(len(self.ups))
            for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes, strict=True)
        )
        self.conv_post = NormedConv1d(base // 2 ** len(self.ups), n_fft + 2, 7, padding=3)

    def forward(self, mel: torch.Tensor, sine_waves: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        source = self.stft(self.m_source(sine_waves))
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, self.lrelu_slope))
            if i == len(self.ups) - 1:
                x = _reflect_pad(x, 1, 0)  # one more frame: the iSTFT needs samples/hop + 1
            x = x + self.source_resblocks[i](self.source_downs[i](source))
            blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / self.num_kernels
        x = self.conv_post(F.leaky_relu(x, 0.01))  # upstream's default slope here, not lrelu_slope
        magnitude = torch.exp(x[:, : self.n_bins]).clamp(max=1e2)
        phase = torch.sin(x[:, self.n_bins :])  # upstream feeds sin(x) to the iSTFT as the phase
        return magnitude, phase


__all__ = [
    "HiFT",
    "NormedConv1d",
    "NormedConvTranspose1d",
    "WeightNormed",
    "fold_weight_norm",
    "split_weight_norm",
]
