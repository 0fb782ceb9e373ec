"""Speech tokens → mel with the flow: the encoder graph once, then an Euler ODE solve over the estimator.

Mirrors upstream `MaskedDiffWithXvec.inference` + `ConditionalCFM`: the prompt's mel conditions the first
frames, every Euler step evaluates the estimator on a batch of two (conditioned, and unconditioned with mu,
spks and cond zeroed) and mixes them with classifier-free guidance. Randomness is the caller's: the
starting noise comes in as an argument.

The number of Euler steps is a choice per call on v1's grid: `time_grid(n)` warps linspace(0, 1, n + 1)
by the cosine as v1 does for its 10 (the manifest's n_timesteps, the default). The estimator's calls are
nearly all of the flow's time, so the time falls about linearly with the steps; what fewer steps cost in
sound is the model's to say, and random weights cannot tell it.

With two or more threads the two rows of that batch run side by side, one per thread, each on half the
threads: the rows are independent, and the estimator's thousand-odd small nodes then never wait for each
other's threads, so the estimator call is faster than one call on the batch with all the threads
(`python -m bench speed` times the flow). fp32 gives the same velocity to ~1e-5; int8
quantises each row's activations on their own range instead of both rows' (as accurate against fp32).
"""

from __future__ import annotations

import threading
from functools import cache

import numpy as np

from function.core.progress import beat
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import FLOW_ENCODER, FLOW_ESTIMATOR
from function.cosyvoice.graphs import Graph, available_cpus
from function.cosyvoice.params import FlowParams
from function.cosyvoice.threads import ThreadSplit


class Flow:
    def __init__(
        self, encoder: Graph, estimator: Graph, params: FlowParams, rows_side_by_side: bool = False
    ) -> None:
        time_grid(params.n_timesteps, params.t_scheduler)  # refuses a bad grid at load, not at a request
        self.encoder = encoder
        self.estimator = estimator
        self.params = params
        self.rows_side_by_side = rows_side_by_side

    @classmethod
    def load(cls, artifact: Artifact, threads: int | None = None) -> Flow:
        """The flow's sessions for an engine on `threads` CPUs (None: every one available), with the
        flow's share of them (function.cosyvoice.threads)."""
        split = ThreadSplit.for_cpus(threads or available_cpus())
        return cls(
            Graph.load(artifact, FLOW_ENCODER.name, split.cpus),
            Graph.load(artifact, FLOW_ESTIMATOR.name, split.estimator),
            artifact.manifest.params.flow,
            rows_side_by_side=split.estimator_rows_side_by_side,
        )

    def time_grid(self, steps: int | None = None) -> np.ndarray:
        """The ODE's times t_0 = 0 < ... < t_steps = 1 for `steps` Euler steps (None: n_timesteps, v1's)."""
        return time_grid(self.params.n_timesteps if steps is None else steps, self.params.t_scheduler)

    def mel_frames(self, n_tokens: int) -> int:
        """Frames for `n_tokens` speech tokens (FlowParams.mel_frames: the one rule)."""
        return self.params.mel_frames(n_tokens)

    def sample_noise(self, rng: np.random.Generator, n_frames: int) -> np.ndarray:
        """Standard-normal starting point for `n_frames` frames: [1, n_mels, n_frames] float32."""
        return rng.standard_normal((1, self.params.n_mels, n_frames), dtype=np.float32)

    def encode(
        self,
        tokens: np.ndarray,
        prompt_tokens: np.ndarray,
        prompt_frames: int,
        speaker_embedding: np.ndarray,
        frames: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """mu [1, n_mels, prompt_frames + frames] and spks [1, n_mels]; frames defaults to mel_frames(N)."""
        out = self.encoder.run(
            speech_tokens=np.concatenate([prompt_tokens, tokens], axis=1).astype(np.int64),
            prompt_token_len=np.array(prompt_tokens.shape[1], dtype=np.int64),
            prompt_mel_len=np.array(prompt_frames, dtype=np.int64),
            mel_len=np.array(self.mel_frames(tokens.shape[1]) if frames is None else frames, dtype=np.int64),
            speaker_embedding=np.ascontiguousarray(speaker_embedding, dtype=np.float32),
        )
        return out["mu"], out["spks"]

    def __call__(
        self,
        tokens: np.ndarray,  # [1, N] int64 new speech tokens
        prompt_tokens: np.ndarray,  # [1, P] int64, P may be 0
        prompt_mel: np.ndarray,  # [1, Tm, n_mels], Tm = 0 without a prompt
        speaker_embedding: np.ndarray,  # [1, spk_dim]
        noise: np.ndarray,  # [1, n_mels, Tm + frames]
        frames: int | None = None,  # mel frames for the new tokens; None: mel_frames(N)
        steps: int | None = None,  # Euler steps; None: the manifest's n_timesteps (v1: 10)
    ) -> np.ndarray:
        """Mel for the new tokens only: [1, n_mels, frames].

        A stream window passes its exact share of the utterance's frames, which can be one more than
        mel_frames(N) of its own tokens (both round down)."""
        n_mels = self.params.n_mels
        prompt_frames = prompt_mel.shape[1]
        if tokens.ndim != 2 or tokens.shape[0] != 1 or tokens.shape[1] == 0:
            raise ValueError(f"flow: tokens must be [1, N>0], got {tokens.shape}")
        if (prompt_tokens.shape[1] == 0) != (prompt_frames == 0):
            raise ValueError("flow: prompt tokens and prompt mel must both be given or both be empty")
        if prompt_mel.ndim != 3 or prompt_mel.shape[2] != n_mels:
            raise ValueError(f"flow: prompt_mel must be [1, frames, {n_mels}], got {prompt_mel.shape}")
        t_span = self.time_grid(steps)  # refuses a step count below 1 before any work
        frames = self.mel_frames(tokens.shape[1]) if frames is None else frames
        total = prompt_frames + frames
        if noise.shape != (1, n_mels, total):
            raise ValueError(f"flow: noise must be {(1, n_mels, total)}, got {noise.shape}")

        mu, spks = self.encode(tokens, prompt_tokens, prompt_frames, speaker_embedding, frames)
        cond = np.zeros((1, n_mels, total), dtype=np.float32)
        cond[:, :, :prompt_frames] = prompt_mel.transpose(0, 2, 1)
        mel = self._solve(noise.astype(np.float32), mu, spks, cond, t_span)
        return mel[:, :, prompt_frames:]

    def _solve(
        self, x: np.ndarray, mu: np.ndarray, spks: np.ndarray, cond: np.ndarray, t_span: np.ndarray
    ) -> np.ndarray:
        """Euler steps over `t_span` with classifier-free guidance; x [1, n_mels, T] is the noise."""
        # (1 + r) * v_cond - r * v_uncond, with both factors rounded to float32 as torch does.
        cond_weight = np.float32(1.0 + self.params.inference_cfg_rate)
        uncond_weight = np.float32(self.params.inference_cfg_rate)
        # Row 0 is conditioned; row 1 is the unconditioned pass (mu, spks, cond all zero).
        mu2 = np.concatenate([mu, np.zeros_like(mu)])
        spks2 = np.concatenate([spks, np.zeros_like(spks)])
        cond2 = np.concatenate([cond, np.zeros_like(cond)])
        t, dt = t_span[0], t_span[1] - t_span[0]
        for step in range(1, len(t_span)):
            velocity = self._velocity(
                step < len(t_span) - 1,
                x=np.concatenate([x, x]),
                mu=mu2,
                t=np.full(2, t, dtype=np.float32),
                spks=spks2,
                cond=cond2,
            )
            guided = cond_weight * velocity[:1] - uncond_weight * velocity[1:]
            x = x + dt * guided
            # Upstream advances t by dt and re-derives dt from the grid; keep its float32 rounding.
            t = t + dt
            if step < len(t_span) - 1:
                dt = t_span[step + 1] - t
            beat()  # a long segment's flow is the longest a request goes without a token or a chunk
        return x

    def _velocity(self, more_steps: bool, **batch: np.ndarray) -> np.ndarray:
        """The estimator on the batch of two: in one call, or its rows side by side (row 1 on a thread of
        its own, started per call: a kept thread would not survive a fork after INIT). `more_steps`: another
        step follows, so the estimator's arena keeps its regions."""
        run = self.estimator.run_again_soon if more_steps else self.estimator.run
        if not self.rows_side_by_side:
            return run(**batch)["velocity"]
        second: list[np.ndarray] = []
        failed: list[BaseException] = []

        def run_second() -> None:
            try:
                second.append(run(**{k: v[1:] for k, v in batch.items()})["velocity"])
            except BaseException as exc:  # raised on the calling thread below
                failed.append(exc)

        worker = threading.Thread(target=run_second, name="flow-row", daemon=True)
        worker.start()
        try:
            first = run(**{k: v[:1] for k, v in batch.items()})["velocity"]
        finally:
            worker.join()
        if failed:
            raise failed[0]
        return np.concatenate([first, second[0]])


def time_grid(steps: int, scheduler: str = "cosine") -> np.ndarray:
    """[steps + 1] float32 times from 0 to 1: linspace, then (cosine) 1 - cos(t * pi / 2), in float32
    throughout as upstream computes it. Read-only: one array serves every call with that count."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"flow: steps must be a positive integer, got {steps!r}")
    if scheduler not in ("cosine", "linear"):
        raise ValueError(f"unknown flow t_scheduler {scheduler!r}")
    return _grid(steps, scheduler)


@cache
def _grid(steps: int, scheduler: str) -> np.ndarray:
    t = np.linspace(0, 1, steps + 1, dtype=np.float32)
    if scheduler == "cosine":
        t = (1 - np.cos(t * np.float32(0.5) * np.float32(np.pi))).astype(np.float32)
    t.flags.writeable = False
    return t


__all__ = ["Flow", "time_grid"]
