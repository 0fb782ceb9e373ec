"""The exported LLM graphs against upstream's own TransformerLM (tiny config, same random weights).

Upstream's `inference` runs unmodified; only its `sampling_ids` is replaced by a recorder that returns
teacher tokens, so its prefill and its incremental forward_chunk loop produce the reference logp.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

# isort: off
from bench import reference  # stubs heavy imports before any cosyvoice module
from cosyvoice.utils import common as upstream_common

# isort: on
from export.config import LLMConfig, load_config
from export.fake import CONFIG_TEMPLATE, SIZES
from export.graphs import llm as part
from function.cosyvoice.contract import LLM_POSITIONS, LLM_PREFILL, llm_decode_spec
from function.cosyvoice.graphs import Graph, session_options
from function.cosyvoice.llm import CACHE_BLOCK, LLM, LLMInput
from function.cosyvoice.params import LLMParams
from function.cosyvoice.sampling import draw, nucleus, ras_sample

pytestmark = pytest.mark.reference
TOLERANCE = 1e-3
STEPS = 20


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    directory: Path = tmp_path_factory.mktemp("llm")
    (directory / "cosyvoice.yaml").write_text(
        CONFIG_TEMPLATE.format(size="tiny", s=SIZES["tiny"]), encoding="utf-8"
    )
    config = load_config(directory).llm
    state = part.random_state_dict(config, seed=7)
    graphs = part.export_graphs(part.load_module(state, config), config)
    return config, reference.build_llm(config, state), graphs


def test_random_checkpoint_keys_come_in_upstreams_order(setup) -> None:
    config, upstream, _ = setup
    assert list(part.random_state_dict(config, seed=7)) == list(upstream.state_dict())


def _ours(graphs: dict, config: LLMConfig) -> LLM:
    options = session_options(threads=1, prepack=False)

    def graph(name: str, spec) -> Graph:  # type: ignore[no-untyped-def]
        return Graph(ort.InferenceSession(graphs[name].SerializeToString(), options), spec)

    return LLM(
        graph("llm_prefill", LLM_PREFILL),
        graph("llm_decode", llm_decode_spec(config.llm.num_blocks)),
        graph("llm_positions", LLM_POSITIONS),
        LLMParams(speech_token_size=config.speech_token_size),
    )


CASES = {
    "speaker+prompt": dict(speaker=True, prompt_len=5, prompt_text_len=3),
    "no speaker, no prompt": dict(speaker=False, prompt_len=0, prompt_text_len=0),
}


@pytest.mark.parametrize("case", CASES)
def test_prefill_and_decode_match_upstream(setup, case: str) -> None:
    config, model, graphs = setup
    spec = CASES[case]
    rng = np.random.default_rng(3)
    text = rng.integers(0, config.text_token_size, 6)
    prompt_text = rng.integers(0, config.text_token_size, spec["prompt_text_len"])
    speaker = rng.standard_normal((1 if spec["speaker"] else 0, config.spk_embed_dim)).astype(np.float32)
    prompt_speech = rng.integers(0, config.speech_token_size, spec["prompt_len"])
    teacher = [int(t) for t in rng.integers(0, config.speech_token_size, STEPS)]
    expected = reference.llm_teacher_forced(model, text, prompt_text, speaker, prompt_speech, teacher)

    ours = _ours(graphs, config)
    full_text = np.concatenate([prompt_text, text])
    logp, cache = ours.start(full_text, speaker, prompt_speech)
    # Upstream sets EOS to -inf on the first step before sampling; compare the rest.
    assert np.abs(logp[:-1] - expected[0][:-1]).max() <= TOLERANCE
    eos = config.speech_token_size
    for step, token in enumerate(teacher[: STEPS - 1], start=1):
        logp = ours.step(token, cache)
        assert np.abs(logp - expected[step]).max() <= TOLERANCE, f"decode step {step}"
        if step in (1, 7, STEPS - 1):  # full recompute: the whole sequence through prefill
            recomputed, _ = ours.start(full_text, speaker, np.concatenate([prompt_speech, teacher[:step]]))
            assert np.abs(recomputed - logp).max() <= TOLERANCE, f"recompute at step {step}"
    assert np.isfinite(logp[:eos]).all()


def test_decode_cache_grows_past_one_block(setup) -> None:
    """Crossing a buffer reallocation changes nothing: decode stays equal to a full recompute."""
    config, _, graphs = setup
    ours = _ours(graphs, config)
    text = np.arange(3, 3 + CACHE_BLOCK - 10)
    speaker = np.ones((1, config.spk_embed_dim), dtype=np.float32)
    logp, cache = ours.start(text, speaker, np.zeros(0, dtype=np.int64))
    tokens = list(range(1, 13))
    for token in tokens:
        logp = ours.step(token, cache)
    assert cache.capacity > CACHE_BLOCK
    recomputed, _ = ours.start(text, speaker, np.array(tokens))
    assert np.abs(recomputed - logp).max() <= TOLERANCE


# A batched step's rows against the same sequences decoded alone, in log-probability. Rows share nothing
# but the weights, yet they are not bit-equal: onnxruntime's CPU kernels block and accumulate a matrix of
# several rows otherwise than a single row (a row left over from a block of rows goes the single row's
# way). One step moves a logit by a few float32 ulps. In fp32 that is all, and
# a draw differs only where its uniform falls that close to a boundary of the inverse CDF. In int8 every
# layer re-quantises its activations, so over many steps such a difference can move an activation by a
# quantisation step and grow: on this tiny model the draws below still agree, at full size a segment's
# draws part after some tokens (function.cosyvoice.llm; `python -m bench decode-batch` says where).
ROW_TOLERANCE = {"fp32": 1e-4, "int8": 1e-4}


def _precision(graphs: dict, precision: str) -> dict:
    return graphs if precision == "fp32" else part.quantize_graphs(graphs, precision)


@pytest.fixture(scope="module", params=list(ROW_TOLERANCE))
def precision_graphs(setup, request: pytest.FixtureRequest) -> tuple[str, dict]:
    return request.param, _precision(setup[2], request.param)


def test_a_batched_step_gives_each_row_the_logits_it_gets_alone(setup, precision_graphs) -> None:
    """Rows of their own lengths (one crossing a cache block mid-batch), a row leaving and another joining
    in its slot: every step's rows stay each sequence's own."""
    config = setup[0]
    precision, graphs = precision_graphs
    ours = _ours(graphs, config)
    rng = np.random.default_rng(11)
    speaker = rng.standard_normal((1, config.spk_embed_dim)).astype(np.float32)
    texts = [rng.integers(0, config.text_token_size, n) for n in (4, 17, CACHE_BLOCK - 6, 9)]
    teacher = rng.integers(0, config.speech_token_size, (len(texts), 16))
    empty = np.zeros(0, dtype=np.int64)

    alone = []  # each sequence's logp after its prefill and after each teacher token, decoded alone
    for text, tokens in zip(texts, teacher, strict=True):
        logp, cache = ours.start(text, speaker, empty)
        alone.append([logp, *(ours.step(int(token), cache) for token in tokens)])

    batch = ours._cache(slots=3)
    rows: list[int] = []  # rows[b]: the sequence in cache row b
    steps = [0] * len(texts)  # teacher tokens each sequence has been fed
    worst = 0.0
    for sequence in range(3):
        logp, prefix = ours._prefill(texts[sequence], speaker, empty)
        assert np.array_equal(logp, alone[sequence][0])
        rows.append(sequence)
        batch.add(prefix)
    for step in range(12):
        if step == 5:  # sequence 0 leaves; the last row moves into its place and sequence 3 joins
            batch.remove(0)
            rows[0] = rows.pop()
            batch.add(ours._prefill(texts[3], speaker, empty)[1])
            rows.append(3)
        for b, sequence in enumerate(rows):
            batch.token[b, 0] = teacher[sequence, steps[sequence]]
            steps[sequence] += 1
        logps = ours._step(batch)
        for b, sequence in enumerate(rows):
            worst = max(worst, float(np.abs(logps[b] - alone[sequence][steps[sequence]]).max()))
    assert batch.capacity > CACHE_BLOCK  # the long row grew the batch's cache
    assert worst <= ROW_TOLERANCE[precision]


def test_a_seed_draws_the_same_tokens_one_row_or_three(setup, precision_graphs) -> None:
    config = setup[0]
    precision, graphs = precision_graphs
    ours = _ours(graphs, config)
    rng = np.random.default_rng(5)
    speaker = rng.standard_normal((1, config.spk_embed_dim)).astype(np.float32)
    texts = [rng.integers(0, config.text_token_size, n) for n in (6, 2, 9, 4, 3)]
    empty = np.zeros(0, dtype=np.int64)

    def tokens(rows: int) -> list[int | None]:
        seeds = np.random.SeedSequence(42).spawn(len(texts))
        segments = [
            LLMInput(text, empty, speaker, empty, np.random.default_rng(seed))
            for text, seed in zip(texts, seeds, strict=True)
        ]
        return list(ours.generate_segments(segments, rows))

    one_row = tokens(1)
    assert one_row.count(None) == len(texts) and len(one_row) > 3 * len(texts)
    assert tokens(3) == one_row


def test_state_dict_mismatch_is_named(setup) -> None:
    config, model, _ = setup
    state = dict(model.state_dict())
    state.pop("llm_decoder.bias")
    state["llm.after_norm.weight"] = torch.ones(3)
    with pytest.raises(ValueError, match=r"missing: llm_decoder.bias.*shape mismatch: llm.after_norm.weight"):
        part.load_module(state, config)


def test_int8_graphs_run_and_report_quality(setup) -> None:
    config, _, graphs = setup
    quantized = part.quantize_graphs(graphs, "int8")
    ops = {node.op_type for node in quantized["llm_decode"].graph.node}
    assert "MatMulNBits" in ops
    report = part.quality_report(graphs, quantized, config, steps=6)
    assert report["positions"] == 7
    assert 0.0 <= report["top1_agreement"] <= 1.0
    assert 0.0 <= report["mean_kl"] < 0.5


class _Draws:
    """Stands in for np.random.Generator: hands out fixed uniforms."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


class _InverseCdfMultinomial:
    """Replaces torch.Tensor.multinomial: records the candidate probabilities, draws with fixed uniforms."""

    def __init__(self, uniforms: list[float]) -> None:
        self.uniforms = list(uniforms)
        self.candidates: list[np.ndarray] = []

    def __call__(self, probs: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        self.candidates.append(probs.numpy().copy())
        return torch.tensor([draw(probs.numpy(), self.uniforms.pop(0))])

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch.Tensor, "multinomial", lambda probs, *args, **kwargs: self(probs))


def test_sampling_matches_upstream_rule_on_fixed_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's ras_sampling, its multinomial replaced by the same inverse-CDF draw as ours."""
    params = LLMParams()
    rng = np.random.default_rng(0)
    generator = torch.Generator().manual_seed(0)
    redrawn = 0
    for trial in range(60):
        logits = torch.randn(params.speech_token_size + 1, generator=generator) * (1 + trial % 4)
        logp = torch.log_softmax(logits, dim=0)
        likely = torch.topk(logp, 5).indices.numpy()
        decoded = [int(t) for t in rng.choice(likely, rng.integers(0, 4))]  # repeats happen
        uniforms = [float(u) for u in rng.random(2)]
        upstream = _InverseCdfMultinomial(uniforms)
        upstream.install(monkeypatch)
        expected = int(upstream_common.ras_sampling(logp.clone(), decoded, 25))
        monkeypatch.undo()
        redrawn += len(upstream.candidates) == 2
        _, weights = nucleus(torch.softmax(logp, 0).numpy(), params.top_p, params.top_k)
        np.testing.assert_allclose(weights, upstream.candidates[0], rtol=1e-6)
        assert ras_sample(logp.numpy(), decoded, _Draws(uniforms), params) == expected  # type: ignore[arg-type]
    assert redrawn > 5  # the repetition branch was exercised
