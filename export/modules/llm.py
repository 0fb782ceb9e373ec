"""CosyVoice v1 `TransformerLM` rebuilt for export: same parameter names, explicit prefill and decode step.

Parameter names equal upstream's state_dict keys, so a released llm.pt loads with strict=True. The
arithmetic follows upstream inference (`TransformerLM.inference` → `encode` + `forward_chunk`); both
encoders are export.modules.conformer's, causal (static_chunk_size 1), with its relative positions and its
decode step that caches projected position rows beside K and V.

Decode caches are per layer, head-major [batch, heads, capacity, head_dim] buffers of which row b's first
`past_len[b]` positions are valid; the step reads them in place and writes the new key and value rows
into them (export.modules.cached_attention). That keeps every step free of cache copies (a 14-layer cache
at 800 positions is ~140 MB).
"""

from __future__ import annotations

import torch
from torch import nn

from export.config import LLMConfig
from export.modules.conformer import Encoder, check_encoder
from function.cosyvoice.contract import LLM_CACHE_KINDS


class TransformerLM(nn.Module):
    """Same submodules and names as cosyvoice.llm.llm.TransformerLM; inference only."""

    SOS, TASK_ID = 0, 1  # rows of llm_embedding

    def __init__(self, config: LLMConfig) -> None:
        super().__init__()
        check_encoder(config.text_encoder, "llm.text_encoder", causal=True)
        check_encoder(config.llm, "llm.llm", causal=True)
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
        text = self.text_encoder(self.text_embedding(text_tokens))
        text = self.text_encoder_affine_layer(text)
        norm = speaker_embedding.norm(dim=1, keepdim=True).clamp(min=1e-12)  # F.normalize
        speaker = self.spk_embed_affine_layer((speaker_embedding / norm).unsqueeze(0))
        sos = self.llm_embedding.weight[self.SOS].reshape(1, 1, -1)
        task = self.llm_embedding.weight[self.TASK_ID].reshape(1, 1, -1)
        prompt = self.speech_embedding(prompt_speech_tokens)
        return torch.cat([sos, speaker, text, task, prompt], dim=1)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Each sequence's last position of hidden [batch, L, size] → log-probabilities
        [batch, speech_token_size + 1]."""
        return torch.log_softmax(self.llm_decoder(hidden[:, -1:]), dim=-1).squeeze(1)


class Prefill(nn.Module):
    """Graph llm_prefill: the prefix through the decoder → logp and the cache [layers, 3, h, L, d_k]."""

    def __init__(self, lm: TransformerLM) -> None:
        super().__init__()
        self.lm = lm

    def forward(
        self, text_tokens: torch.Tensor, speaker_embedding: torch.Tensor, prompt_speech_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden, caches = self.lm.llm.prefill(
            self.lm.prefix(text_tokens, speaker_embedding, prompt_speech_tokens)
        )
        return self.lm.log_probs(hidden), torch.stack(caches)


class DecodeStep(nn.Module):
    """Graph llm_decode: for each row b of a batch of independent sequences, one speech token token[b] at
    position past_len[b] → logp [batch, vocab] and every layer's key and value caches with those positions
    written (present_key_0, present_value_0, present_key_1, ...).

    Inputs after (token, past_len) are past_key_0, past_value_0, past_pos_0, past_key_1, ... . The runtime
    binds each present output to its past input's memory, so the graph updates the caches in place. Rows
    share nothing but the weights (and the position rows, a function of the distance alone): each row's
    logp is the one it gets decoded alone.
    """

    def __init__(self, lm: TransformerLM) -> None:
        super().__init__()
        self.lm = lm

    def forward(
        self, token: torch.Tensor, past_len: torch.Tensor, *past: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        kinds = len(LLM_CACHE_KINDS)
        layers = [tuple(past[i : i + kinds]) for i in range(0, len(past), kinds)]
        hidden, presents = self.lm.llm.step(self.lm.speech_embedding(token), past_len, layers)  # type: ignore[arg-type]
        return (self.lm.log_probs(hidden), *(cache for present in presents for cache in present))


class Positions(nn.Module):
    """Graph llm_positions: distances [n] → every decoder layer's position rows [layers, h, n, d_k]."""

    def __init__(self, lm: TransformerLM) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, distances: torch.Tensor) -> torch.Tensor:
        return self.lm.llm.positions(distances)


__all__ = ["DecodeStep", "Positions", "Prefill", "TransformerLM"]
