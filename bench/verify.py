"""`python -m bench verify`: full-size parity of our artifact against upstream's own v1 classes.

The parity tests (tests/parity) prove each graph at tiny size; this command repeats the three end-to-end
comparisons on the full-size model directory and the artifact exported from it, where fp32 error
accumulates over 14-layer transformers and 10 ODE steps. The reference is built exactly as those tests
build it (both import bench.reference) and loads the model directory's .pt files
strictly; ours runs in onnxruntime through the runtime classes, opened from the artifact on disk.
Components run one at a time and are dropped afterwards, so the peak is one torch model plus its graphs.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from bench import reference as upstream
from bench.procs import write_json
from bench.tables import Table
from export.checkpoints import load_state_dict
from export.config import ModelConfig, load_config
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.flow import Flow
from function.cosyvoice.llm import LLM
from function.cosyvoice.vocoder import Vocoder

TOLERANCE = 1e-3
SEED = 11
DECODE_STEPS = 10
LLM_TEXT, LLM_PROMPT_TEXT, LLM_PROMPT_SPEECH = 24, 8, 25  # tokens: a short sentence after a prompt
FLOW_TOKENS, FLOW_PROMPT_TOKENS = 60, 20
VOCODER_FRAMES = 100


@dataclass(frozen=True)
class Check:
    name: str
    max_abs_error: float
    reference_peak: float  # max |upstream output|: shows the error is measured on a live signal
    seconds: float

    @property
    def ok(self) -> bool:
        return math.isfinite(self.max_abs_error) and self.max_abs_error <= TOLERANCE


def _max_abs(got: np.ndarray, expected: np.ndarray) -> float:
    if got.shape != expected.shape:
        raise ValueError(f"shape {got.shape} differs from upstream's {expected.shape}")
    return float(np.abs(got.astype(np.float64) - expected.astype(np.float64)).max())


def _peak(expected: np.ndarray) -> float:
    return float(np.abs(expected).max())


def check_llm(config: ModelConfig, model_dir: Path, artifact: Artifact, threads: int) -> list[Check]:
    """Teacher-forced logp: prefill, then DECODE_STEPS cached decode steps, with and without a prompt."""
    reference = upstream.build_llm(config.llm, load_state_dict(model_dir / "llm.pt"))
    ours = LLM.load(artifact, threads)
    checks = []
    for name, speaker, prompt_text_len, prompt_len in (
        ("speaker + prompt", True, LLM_PROMPT_TEXT, LLM_PROMPT_SPEECH),
        ("no speaker, no prompt", False, 0, 0),
    ):
        start = time.perf_counter()
        rng = np.random.default_rng(SEED)
        text = rng.integers(0, config.llm.text_token_size, LLM_TEXT)
        prompt_text = rng.integers(0, config.llm.text_token_size, prompt_text_len)
        speaker_embedding = rng.standard_normal((int(speaker), config.llm.spk_embed_dim), dtype=np.float32)
        prompt_speech = rng.integers(0, config.llm.speech_token_size, prompt_len)
        teacher = [int(t) for t in rng.integers(0, config.llm.speech_token_size, DECODE_STEPS)]
        with torch.inference_mode():
            expected = upstream.llm_teacher_forced(
                reference, text, prompt_text, speaker_embedding, prompt_speech, teacher
            )
        logp, cache = ours.start(np.concatenate([prompt_text, text]), speaker_embedding, prompt_speech)
        # Upstream masks EOS (the last entry) to -inf before its first sample: compare the rest.
        errors = [_max_abs(logp[:-1], expected[0][:-1])]
        for step, token in enumerate(teacher, start=1):
            errors.append(_max_abs(ours.step(token, cache), expected[step]))
        checks.append(
            Check(
                f"llm logp, prefill + {DECODE_STEPS} decode steps ({name})",
                max(errors),
                _peak(np.stack(expected[1:])),
                time.perf_counter() - start,
            )
        )
    return checks


def check_flow(config: ModelConfig, model_dir: Path, artifact: Artifact, threads: int) -> list[Check]:
    """Mel for FLOW_TOKENS tokens from the same starting noise, with and without a prompt."""
    reference = upstream.build_flow(config.flow)
    reference.load_state_dict(load_state_dict(model_dir / "flow.pt"), strict=True)
    reference.eval()
    ours = Flow.load(artifact, threads)
    checks = []
    for n_prompt in (0, FLOW_PROMPT_TOKENS):
        start = time.perf_counter()
        rng = np.random.default_rng(SEED + n_prompt)
        tokens = rng.integers(0, config.flow.vocab_size, (1, FLOW_TOKENS), dtype=np.int64)
        prompt_tokens = rng.integers(0, config.flow.vocab_size, (1, n_prompt), dtype=np.int64)
        prompt_frames = ours.mel_frames(n_prompt)
        prompt_mel = rng.standard_normal((1, prompt_frames, config.flow.output_size), dtype=np.float32)
        embedding = rng.standard_normal((1, config.flow.spk_embed_dim), dtype=np.float32)
        noise = ours.sample_noise(rng, prompt_frames + ours.mel_frames(FLOW_TOKENS))
        expected = upstream.flow_mel(reference, tokens, prompt_tokens, prompt_mel, embedding, noise)
        got = ours(tokens, prompt_tokens, prompt_mel, embedding, noise)
        label = f"prompt {n_prompt} tokens + {prompt_frames} frames" if n_prompt else "no prompt"
        checks.append(
            Check(
                f"flow mel, {FLOW_TOKENS} tokens ({label})",
                _max_abs(got, expected),
                _peak(expected),
                time.perf_counter() - start,
            )
        )
    return checks


def check_vocoder(config: ModelConfig, model_dir: Path, artifact: Artifact, threads: int) -> list[Check]:
    """Waveform for VOCODER_FRAMES mel frames; upstream's SineGen draws are replayed into ours."""
    reference = upstream.build_hift(config.hift, load_state_dict(model_dir / "hift.pt"))
    ours = Vocoder.load(artifact, threads)
    start = time.perf_counter()
    mel = torch.randn(
        1, config.hift.in_channels, VOCODER_FRAMES, generator=torch.Generator().manual_seed(SEED)
    )
    torch.manual_seed(SEED)
    with torch.inference_mode():
        expected, _ = reference.inference(mel)
    phase, noise = upstream.sine_draws(SEED, ours.n_sines, VOCODER_FRAMES * ours.params.upsample_factor)
    got = ours(mel.numpy(), phase=phase, noise=noise)
    expected = expected.reshape(-1).numpy()
    error = _max_abs(got, expected)
    name = f"vocoder waveform, {VOCODER_FRAMES} mel frames"
    return [Check(name, error, _peak(expected), time.perf_counter() - start)]


CHECKS: tuple[Callable[[ModelConfig, Path, Artifact, int], list[Check]], ...] = (
    check_llm,
    check_flow,
    check_vocoder,
)


def run(model_dir: Path, artifact_dir: Path, results: Path, threads: int) -> int:
    """Every check, a table, results/verify.json; exit status 0 when all are within TOLERANCE."""
    torch.set_num_threads(threads)
    config = load_config(model_dir)
    artifact = Artifact.open(artifact_dir)
    checks: list[Check] = []
    for component in CHECKS:
        checks += component(config, model_dir, artifact, threads)
        gc.collect()  # drop this component's torch model and sessions before the next one loads
    table = Table(
        f"Full-size parity: {artifact_dir.name} vs upstream (fp32)",
        ("check", "max abs error", f"tolerance {TOLERANCE:g}", "ok"),
    )
    table.notes.append(
        "max |ours − upstream| over every output value; upstream's peak |value| is in verify.json"
    )
    for check in checks:
        table.add(check.name, f"{check.max_abs_error:.3g}", f"{TOLERANCE:g}", "yes" if check.ok else "NO")
    print(table.render())
    path = results / "verify.json"
    write_json(
        path,
        {
            "model": str(model_dir),
            "artifact": str(artifact_dir),
            "tolerance": TOLERANCE,
            "threads": threads,
            "checks": [asdict(check) | {"ok": check.ok} for check in checks],
            "table": table.to_dict(),
        },
    )
    print(f"wrote {path}")
    return 0 if all(check.ok for check in checks) else 1
