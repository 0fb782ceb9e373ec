"""Repetition-aware sampling (VALL-E 2), as CosyVoice's `ras_sampling` + `nucleus_sampling`, in numpy.

Every random draw comes from the caller's `np.random.Generator` as one uniform number turned into a token
by the inverse CDF, so a seed fixes the output and a test can hand in its own draws.

The rule (upstream `cosyvoice/utils/common.py`):
1. nucleus: softmax, stable sort descending (only the top_k places matter: see `nucleus`), keep tokens
   while the probability mass *before* a token is < top_p and fewer than top_k are kept (float32
   accumulation, like upstream's tensor sum); draw among them in proportion to their probabilities.
2. if the drawn token occurs ≥ win_size·tau_r times in the last win_size decoded tokens, draw again from
   the full distribution instead.
3. `TransformerLM.sampling_ids`: while EOS is not allowed yet, repeat 1-2 until a non-EOS token comes up.
   HEAD checks `top_ids < speech_token_size`, the PyPI wheel `speech_token_size not in top_ids`; with v1's
   single stop token (EOS = speech_token_size, the last logit) both are the same test. Upstream raises
   after 100 rejected trials; we then draw from the distribution without EOS instead (a request should
   not fail because the model is sure it is done early).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from function.cosyvoice.params import LLMParams

MAX_TRIALS = 100


def softmax(logp: np.ndarray) -> np.ndarray:
    """float32 probabilities of a [vocab] score vector (-inf → 0)."""
    shifted = np.exp(logp.astype(np.float32) - np.max(logp))
    return shifted / shifted.sum(dtype=np.float32)


def nucleus(probs: np.ndarray, top_p: float, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate ids and their probabilities, in upstream's order (most probable first).

    Upstream sorts the whole vocabulary; only the first top_k places can be kept, so we select them
    (ties at the k-th value going to the lower index, as the stable sort would) and sort those alone.
    The mass before each kept place sums the same float32 values in the same order, so the result is
    identical, and cheaper than sorting the whole 4097-token vocabulary for every token.
    """
    negated = -probs.astype(np.float32)
    k = min(top_k, negated.size)
    kth = negated[np.argpartition(negated, k - 1)[:k]].max()
    above = np.flatnonzero(negated < kth)
    tied = np.flatnonzero(negated == kth)[: k - above.size]
    chosen = np.concatenate([above, tied])
    order = chosen[np.argsort(negated[chosen], kind="stable")]
    kept_probs = -negated[order]
    mass_before = np.concatenate([[np.float32(0.0)], np.cumsum(kept_probs, dtype=np.float32)[:-1]])
    count = int(np.count_nonzero(mass_before < np.float32(top_p)))
    return order[:count], kept_probs[:count]


def draw(probs: np.ndarray, uniform: float) -> int:
    """Index whose cumulative (normalised) probability first exceeds `uniform` in [0, 1)."""
    cumulative = np.cumsum(probs, dtype=np.float64)
    index = int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))
    return min(index, len(probs) - 1)


def ras_sample(logp: np.ndarray, decoded: Sequence[int], rng: np.random.Generator, params: LLMParams) -> int:
    probs = softmax(logp)
    ids, weights = nucleus(probs, params.top_p, params.top_k)
    token = int(ids[draw(weights, rng.random())])
    repeats = sum(1 for previous in decoded[-params.win_size :] if previous == token)
    if repeats >= params.win_size * params.tau_r:
        token = draw(probs, rng.random())
    return token


def sample_next(
    logp: np.ndarray,
    decoded: Sequence[int],
    rng: np.random.Generator,
    params: LLMParams,
    allow_eos: bool,
) -> int:
    """The next speech token; EOS (= params.speech_token_size) only when `allow_eos`."""
    eos = params.speech_token_size
    for _ in range(MAX_TRIALS):
        token = ras_sample(logp, decoded, rng, params)
        if allow_eos or token != eos:
            return token
    without_eos = logp.astype(np.float32).copy()
    without_eos[eos] = -np.inf
    return draw(softmax(without_eos), rng.random())


__all__ = ["MAX_TRIALS", "draw", "nucleus", "ras_sample", "sample_next", "softmax"]
