"""Our flow graphs + numpy runtime against upstream's MaskedDiffWithXvec (tiny config, random weights).

GIVEN one seeded flow.pt-shaped state dict loaded strictly into both our module and upstream's classes
WHEN the estimator runs alone, and the whole flow runs from tokens with the same starting noise
THEN our ONNX graphs (run by function.cosyvoice.flow.Flow in onnxruntime) match upstream within 1e-3.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from bench import reference as upstream  # noqa: E402  (stubs heavy imports before any cosyvoice module)
from export.config import load_config  # noqa: E402
from export.fake import CONFIG_TEMPLATE, SIZES  # noqa: E402
from export.graphs import flow as flow_part  # noqa: E402
from export.modules.flow import mish  # noqa: E402
from function.cosyvoice.contract import FLOW_ENCODER, FLOW_ESTIMATOR  # noqa: E402
from function.cosyvoice.flow import Flow  # noqa: E402
from function.cosyvoice.graphs import Graph, session_options  # noqa: E402

pytestmark = pytest.mark.reference
TOLERANCE = 1e-3


def _graph(proto, spec) -> Graph:
    session = ort.InferenceSession(proto.SerializeToString(), session_options(1, prepack=False))
    return Graph(session, spec)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    model_dir: Path = tmp_path_factory.mktemp("flow")
    (model_dir / "cosyvoice.yaml").write_text(
        CONFIG_TEMPLATE.format(size="tiny", s=SIZES["tiny"]), encoding="utf-8"
    )
    model_config = load_config(model_dir)
    config = model_config.flow
    state = flow_part.random_state_dict(config, seed=7)
    ours = flow_part.load_module(state, config)
    graphs = flow_part.export_graphs(ours, config)
    reference = upstream.build_flow(config)
    reference.load_state_dict(state, strict=True)
    reference.eval()
    flow = Flow(
        _graph(graphs[FLOW_ENCODER.name], FLOW_ENCODER),
        _graph(graphs[FLOW_ESTIMATOR.name], FLOW_ESTIMATOR),
        model_config.params().flow,
    )
    return config, state, reference, flow


@pytest.mark.parametrize("frames", [1, 38, 123])
def test_estimator_matches_upstream(setup, frames: int) -> None:
    config, _, reference, flow = setup
    x, mu, t, spks, cond = flow_part.example_estimator_inputs(config, batch=2, frames=frames)
    # Upstream's estimator takes a frame mask; the runtime's rows are never padded, so it is all ones.
    mask = torch.ones(2, 1, frames)
    with torch.no_grad():
        expected = reference.decoder.estimator(x, mask, mu, t, spks, cond).numpy()
    got = flow.estimator.run(x=x.numpy(), mu=mu.numpy(), t=t.numpy(), spks=spks.numpy(), cond=cond.numpy())[
        "velocity"
    ]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE)


def test_estimator_graph_is_laid_out_fused(setup) -> None:
    """One MultiHeadAttention per transformer block, one shared time projection, no Softplus."""
    config, state, _, _ = setup
    est = config.estimator
    module = flow_part.load_module(state, config)
    graph = flow_part.export_graphs(module, config)[FLOW_ESTIMATOR.name].graph
    ops = Counter(node.op_type for node in graph.node)
    stages = 2 * len(est.channels) + est.num_mid_blocks
    assert ops["MultiHeadAttention"] == stages * est.n_blocks
    assert ops["Gemm"] == 3  # time_mlp's two layers + every resnet's projection in one
    assert ops["Softplus"] == 0


def test_mish_matches_torch() -> None:
    x = torch.cat([torch.linspace(-120, 120, 20001), torch.tensor([-3e38, -1e4, 19.99, 20.01, 1e4, 3e38])])
    np.testing.assert_allclose(mish(x).numpy(), torch.nn.functional.mish(x).numpy(), rtol=2e-6, atol=1e-7)


def test_random_checkpoint_keys_come_in_upstreams_order(setup) -> None:
    _, state, reference, _ = setup
    assert list(state) == list(reference.state_dict())


@pytest.mark.parametrize(
    ("n_prompt", "n_new"),
    [(0, 17), (0, 61), (14, 33), (23, 58)],  # with/without a prompt; short and long (> 40 token) chunks
)
def test_flow_matches_upstream(setup, n_prompt: int, n_new: int) -> None:
    config, _, reference, flow = setup
    rng = np.random.default_rng(n_prompt * 100 + n_new)
    tokens = rng.integers(0, config.vocab_size, (1, n_new), dtype=np.int64)
    prompt_tokens = rng.integers(0, config.vocab_size, (1, n_prompt), dtype=np.int64)
    prompt_frames = flow.mel_frames(n_prompt)
    prompt_mel = rng.standard_normal((1, prompt_frames, config.output_size), dtype=np.float32)
    embedding = rng.standard_normal((1, config.spk_embed_dim), dtype=np.float32)
    noise = flow.sample_noise(rng, prompt_frames + flow.mel_frames(n_new))

    expected = upstream.flow_mel(reference, tokens, prompt_tokens, prompt_mel, embedding, noise)
    got = flow(tokens, prompt_tokens, prompt_mel, embedding, noise)
    assert got.shape == (1, config.output_size, flow.mel_frames(n_new)) == tuple(expected.shape)
    assert np.abs(got).max() > 0.1  # a real mel, not a degenerate zero output
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE)


def test_encoder_mu_matches_upstream_regulator(setup) -> None:
    """mu itself (before the ODE), including the prompt frames the runtime later drops."""
    config, _, reference, flow = setup
    rng = np.random.default_rng(5)
    prompt = rng.integers(0, config.vocab_size, (1, 9), dtype=np.int64)
    tokens = rng.integers(0, config.vocab_size, (1, 47), dtype=np.int64)
    embedding = rng.standard_normal((1, config.spk_embed_dim), dtype=np.float32)
    mu, spks = flow.encode(tokens, prompt, flow.mel_frames(9), embedding)
    with torch.inference_mode():
        all_tokens = torch.from_numpy(np.concatenate([prompt, tokens], axis=1))
        h, _ = reference.encoder(reference.input_embedding(all_tokens), torch.tensor([all_tokens.shape[1]]))
        h = reference.encoder_proj(h)
        expected, _ = reference.length_regulator.inference(
            h[:, :9], h[:, 9:], flow.mel_frames(9), flow.mel_frames(47), config.input_frame_rate
        )
        expected_spks = reference.spk_embed_affine_layer(
            torch.nn.functional.normalize(torch.from_numpy(embedding), dim=1)
        )
    np.testing.assert_allclose(mu, expected.transpose(1, 2).numpy(), rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(spks, expected_spks.numpy(), rtol=0, atol=TOLERANCE)


def test_load_module_rejects_a_mismatched_checkpoint(setup) -> None:
    config, state, _, _ = setup
    broken = dict(state)
    broken.pop("encoder_proj.bias")
    broken["decoder.estimator.final_proj.bias"] = torch.zeros(3)
    with pytest.raises(ValueError, match="1 missing.*1 shape mismatches"):
        flow_part.load_module(broken, config)
