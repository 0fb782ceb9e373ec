"""The exported vocoder against upstream's HiFTGenerator + ConvRNNF0Predictor (tiny config, random weights).

Upstream draws its source randomness inside SineGen (Uniform initial phases, then randn noise); the
tests replay the same torch seed to get those draws and hand them to our runtime explicitly.
"""

from __future__ import annotations  # noqa: I001  (bench.reference must be imported before cosyvoice)

import itertools
from pathlib import Path

from bench import reference  # stubs heavy imports
import numpy as np
import onnxruntime as ort
import pytest
import torch
from cosyvoice.hifigan.generator import HiFTGenerator

from export.config import HiFTConfig, ModelConfig, load_config
from export.fake import CONFIG_TEMPLATE, SIZES
from export.graphs import vocoder as part
from function.cosyvoice.contract import HIFT_F0, HIFT_GENERATOR
from function.cosyvoice.graphs import Graph, session_options
from function.cosyvoice.vocoder import SourceState, Vocoder

pytestmark = pytest.mark.reference

FRAMES = 24
SEED = 7
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def model_config(tmp_path_factory: pytest.TempPathFactory) -> ModelConfig:
    root: Path = tmp_path_factory.mktemp("hift")
    (root / "cosyvoice.yaml").write_text(
        CONFIG_TEMPLATE.format(size="tiny", s=SIZES["tiny"]), encoding="utf-8"
    )
    return load_config(root)


@pytest.fixture(scope="module")
def config(model_config: ModelConfig) -> HiFTConfig:
    return model_config.hift


def build_vocoder(model_config: ModelConfig, state: dict[str, torch.Tensor]) -> Vocoder:
    with torch.no_grad():
        graphs = part.export_graphs(part.load_module(state, model_config.hift), model_config.hift)
    for model in graphs.values():
        assert not {node.op_type for node in model.graph.node} & {"STFT", "DFT"}  # a fixed conv instead

    def graph(spec):  # type: ignore[no-untyped-def]
        session = ort.InferenceSession(
            graphs[spec.name].SerializeToString(),
            session_options(1, prepack=False),
            providers=["CPUExecutionProvider"],
        )
        return Graph(session, spec)

    return Vocoder(graph(HIFT_F0), graph(HIFT_GENERATOR), model_config.params().vocoder)


def louder(state: dict[str, torch.Tensor], shift: float, n_bins: int) -> dict[str, torch.Tensor]:
    """Raise the log-magnitude head so the magnitude clip (1e2) and the audio clamp are exercised too."""
    state = dict(state)
    bias = state["conv_post.bias"].clone()
    bias[:n_bins] += shift
    state["conv_post.bias"] = bias
    return state


@pytest.fixture(scope="module", params=[0.0, 5.0], ids=["plain", "loud"])
def pair(request: pytest.FixtureRequest, model_config: ModelConfig) -> tuple[HiFTGenerator, Vocoder, float]:
    """Upstream gets the parametrization layout it saves; ours is built from the legacy weight_g/v layout."""
    config = model_config.hift
    n_bins = config.istft_n_fft // 2 + 1
    state = louder(part.random_state_dict(config, SEED), request.param, n_bins)
    legacy = louder(part.random_state_dict(config, SEED, legacy_weight_norm=True), request.param, n_bins)
    return reference.build_hift(config, state), build_vocoder(model_config, legacy), request.param


def random_mel(seed: int, frames: int = FRAMES) -> torch.Tensor:
    return torch.randn(1, 80, frames, generator=torch.Generator().manual_seed(seed))


def test_both_weight_norm_layouts_fold_to_the_same_weights(config: HiFTConfig) -> None:
    modern = part.load_module(part.random_state_dict(config, SEED), config).state_dict()
    legacy = part.load_module(
        part.random_state_dict(config, SEED, legacy_weight_norm=True), config
    ).state_dict()
    assert modern.keys() == legacy.keys()
    for key in modern:
        torch.testing.assert_close(modern[key], legacy[key], rtol=1e-6, atol=1e-7, msg=key)


def test_upstream_folds_weight_norm_as_we_do(config: HiFTConfig) -> None:
    upstream = reference.build_hift(config, part.random_state_dict(config, SEED))
    ours = part.load_module(part.random_state_dict(config, SEED, legacy_weight_norm=True), config)
    torch.testing.assert_close(ours.conv_pre.weight, upstream.conv_pre.weight)
    torch.testing.assert_close(ours.ups[1].weight, upstream.ups[1].weight)  # ConvTranspose: norm over dim 0
    torch.testing.assert_close(ours.f0_predictor.condnet[4].weight, upstream.f0_predictor.condnet[4].weight)


def test_f0_matches_upstream(pair: tuple[HiFTGenerator, Vocoder, float]) -> None:
    upstream, vocoder, _ = pair
    mel = random_mel(1)
    with torch.no_grad():
        expected = upstream.f0_predictor(mel).numpy()
    got = vocoder.f0(mel.numpy())
    assert got.shape == (1, FRAMES)
    np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_sine_waves_match_upstream_sinegen(pair: tuple[HiFTGenerator, Vocoder, float]) -> None:
    upstream, vocoder, _ = pair
    # Unvoiced, barely voiced and high frames, so both noise levels and many harmonics show up.
    f0 = torch.tensor([[0.0, 5.0, 10.0, 10.5, 80.0, 120.0, 0.0, 240.0, 310.0, 95.0]])
    samples = f0.shape[1] * vocoder.params.upsample_factor
    torch.manual_seed(3)
    with torch.no_grad():
        expected, _, _ = upstream.m_source.l_sin_gen(upstream.f0_upsamp(f0[:, None]))  # [1, n_sines, samples]
    phase, noise = reference.sine_draws(3, vocoder.n_sines, samples)
    got = vocoder.sine_waves(f0.numpy(), noise, SourceState.initial(vocoder.params.nb_harmonics, phase=phase))
    assert got.shape == (1, samples, vocoder.n_sines)
    np.testing.assert_allclose(got, expected.transpose(1, 2).numpy(), atol=1e-5, rtol=0)


def test_waveform_matches_upstream(pair: tuple[HiFTGenerator, Vocoder, float]) -> None:
    upstream, vocoder, shift = pair
    mel = random_mel(2)
    torch.manual_seed(SEED)
    expected, _ = upstream.inference(mel)
    expected = expected.reshape(-1).numpy()
    phase, noise = reference.sine_draws(SEED, vocoder.n_sines, FRAMES * vocoder.params.upsample_factor)
    got = vocoder(mel.numpy(), phase=phase, noise=noise)
    assert got.dtype == np.float32 and got.shape == expected.shape == (
        FRAMES * vocoder.params.upsample_factor,
    )
    assert expected.std() > 1e-2  # not silence
    clipped = np.mean(np.abs(expected) >= vocoder.params.audio_limit)
    assert (clipped > 0.01) if shift else (clipped == 0)
    np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


def test_istft_matches_torch(pair: tuple[HiFTGenerator, Vocoder, float]) -> None:
    upstream, vocoder, _ = pair
    generator = torch.Generator().manual_seed(4)
    magnitude = torch.exp(torch.randn(1, 9, 65, generator=generator))
    phase = torch.sin(3 * torch.randn(1, 9, 65, generator=generator))
    expected = upstream._istft(magnitude, phase)[0].numpy()
    got = vocoder.istft(magnitude[0].numpy(), phase[0].numpy())
    assert got.shape == expected.shape == (64 * 4,)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_source_phase_carries_across_chunks(pair: tuple[HiFTGenerator, Vocoder, float]) -> None:
    _, vocoder, _ = pair
    rng = np.random.default_rng(5)
    f0 = rng.uniform(0.0, 300.0, (1, 20))
    noise = vocoder.draw_noise(rng, 20)
    first = SourceState.initial(vocoder.params.nb_harmonics, rng)
    whole = vocoder.sine_waves(f0, noise, first.copy())
    state = first.copy()
    cut = 7 * vocoder.params.upsample_factor
    head = vocoder.sine_waves(f0[:, :7], noise[:, :cut], state)
    empty = vocoder.sine_waves(f0[:, :0], noise[:, :0], state)  # a chunk without look-ahead frames
    assert empty.shape == (1, 0, vocoder.n_sines)
    tail = vocoder.sine_waves(f0[:, 7:], noise[:, cut:], state)
    np.testing.assert_allclose(np.concatenate([head, tail], axis=1), whole, atol=1e-6, rtol=0)
    restarted = vocoder.sine_waves(f0[:, 7:], noise[:, cut:], first.copy())
    assert np.abs(restarted - tail).max() > 1e-2  # without the carried phase the seam would jump


def test_rng_drawn_source_is_the_same_whole_or_chunked(pair: tuple[HiFTGenerator, Vocoder, float]) -> None:
    _, vocoder, _ = pair
    f0 = np.random.default_rng(6).uniform(0.0, 300.0, (1, 5))

    def source(cuts: list[int]) -> np.ndarray:
        rng = np.random.default_rng(7)
        state = SourceState.initial(vocoder.params.nb_harmonics, rng)
        parts = [vocoder.sine_waves(f0[:, a:b], rng, state) for a, b in itertools.pairwise(cuts)]
        return np.concatenate(parts, axis=1)

    np.testing.assert_allclose(source([0, 2, 5]), source([0, 5]), atol=1e-6, rtol=0)


def test_mismatched_checkpoint_is_refused_clearly(config: HiFTConfig) -> None:
    state = part.random_state_dict(config, SEED)
    del state["conv_post.bias"]
    with pytest.raises(ValueError, match=r"missing \['conv_post.bias'\]"):
        part.load_module(state, config)
    state = part.random_state_dict(config, SEED)
    state["m_source.l_linear.weight"] = torch.zeros(1, 4)
    with pytest.raises(ValueError, match=r"m_source.l_linear.weight has shape \(1, 4\)"):
        part.load_module(state, config)
    state = part.random_state_dict(config, SEED, legacy_weight_norm=True)
    del state["conv_pre.weight_v"]
    with pytest.raises(ValueError, match="conv_pre.weight_g"):
        part.load_module(state, config)
