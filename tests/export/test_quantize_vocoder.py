"""`--vocoder-weights int8`: the generator's convolutions statically quantised, calibrated on the model's own
mels, recorded in the manifest, judged at export and run by the runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from export.config import load_config
from export.graphs import vocoder
from export.passes.optimize import optimize_graph
from export.passes.quantize import STATIC_INT8, quantize_static_int8
from export.passes.tabulate import tabulate_uint8_regions
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.contract import HIFT_GENERATOR
from function.cosyvoice.flow import Flow
from function.cosyvoice.vocoder import Vocoder
from tests.conftest import run_cli, run_graph


def _conv_then_product(weight: np.ndarray) -> onnx.ModelProto:
    """y = conv(x, W) * x: one Conv with a constant weight, one product of activations."""
    channels, _, kernel = weight.shape
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["h"], pads=[kernel // 2, kernel // 2]),
            helper.make_node("Mul", ["h", "x"], ["y"]),
        ],
        "conv_then_product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, "t"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, "t"])],
        [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_static_quantisation_fuses_into_qlinearconv_within_calibrated_error() -> None:
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((16, 16, 5), dtype=np.float32) / 8
    model = _conv_then_product(weight)
    before = model.SerializeToString()
    calibration = [{"x": rng.standard_normal((1, 16, 200), dtype=np.float32)} for _ in range(3)]
    quantised = optimize_graph(quantize_static_int8(model, calibration))
    assert model.SerializeToString() == before  # the input is left untouched
    ops = [node.op_type for node in quantised.graph.node]
    assert "QLinearConv" in ops and "Conv" not in ops
    assert "Mul" in ops  # only the op types asked for are quantised
    x = rng.standard_normal((1, 16, 300), dtype=np.float32)  # held out, same statistics
    expected = run_graph(model, x)
    # 8-bit weights per channel and 8-bit activations over their calibrated range: ~1 % per element.
    error = np.linalg.norm(run_graph(quantised, x) - expected) / np.linalg.norm(expected)
    assert 0 < error < 0.03, error


def test_calibration_ranges_decide_the_scale() -> None:
    """Activation ranges come from the calibration feeds, not from the input at run time: calibrated on
    inputs 100x smaller, a normal input saturates and the error is of order one."""
    rng = np.random.default_rng(1)
    model = _conv_then_product(rng.standard_normal((8, 8, 3), dtype=np.float32) / 4)
    tiny = [{"x": rng.standard_normal((1, 8, 100), dtype=np.float32) / 100}]
    quantised = optimize_graph(quantize_static_int8(model, tiny))
    x = rng.standard_normal((1, 8, 100), dtype=np.float32)
    expected = run_graph(model, x)
    error = np.linalg.norm(run_graph(quantised, x) - expected) / np.linalg.norm(expected)
    assert error > 0.5, error


@pytest.fixture(scope="module")
def tiny_int8_vocoder_artifact(quantised_artifacts: dict[str, Path]) -> Path:
    return quantised_artifacts["vocoder-int8"]  # --vocoder-weights int8


def test_manifest_records_vocoder_quantisation(tiny_int8_vocoder_artifact: Path) -> None:
    manifest = json.loads((tiny_int8_vocoder_artifact / "manifest.json").read_text())
    quantisation = {name: entry["quantization"] for name, entry in manifest["graphs"].items()}
    assert quantisation.pop("hift_generator") == STATIC_INT8
    assert set(quantisation.values()) == {"fp32"}  # hift_f0 included: it decides what is voiced
    assert manifest["export_options"]["vocoder_weights"] == "int8"


def test_the_export_measures_what_vocoder_quantisation_costs(tiny_int8_vocoder_artifact: Path) -> None:
    quality = json.loads((tiny_int8_vocoder_artifact / "manifest.json").read_text())["export_options"][
        "quality"
    ]
    assert set(quality) == {"vocoder"}
    vocoder = quality["vocoder"]
    # ~30 dB on the full-size model; below ~15 dB would be audible damage, far above 60 dB nothing quantised.
    assert 15 < vocoder["wave_snr_db"] < 60
    assert 0 < vocoder["wave_relative_l2"] < 0.2
    assert vocoder["frames"] > 0


def test_no_convolution_with_a_constant_weight_left_in_fp32(tiny_int8_vocoder_artifact: Path) -> None:
    model = onnx.load(str(tiny_int8_vocoder_artifact / "hift_generator.onnx"), load_external_data=False)
    initializers = {tensor.name for tensor in model.graph.initializer}
    ops = [node.op_type for node in model.graph.node]
    assert "QLinearConv" in ops
    fp32_convs = [
        node.name for node in model.graph.node if node.op_type == "Conv" and node.input[1] in initializers
    ]
    assert fp32_convs == []


def test_int8_vocoder_runs_in_the_runtime_close_to_fp32(
    tiny_artifact: Path, tiny_int8_vocoder_artifact: Path
) -> None:
    reference, quantised = (
        Vocoder.load(Artifact.open(path), threads=1) for path in (tiny_artifact, tiny_int8_vocoder_artifact)
    )
    mel = _flow_mel(tiny_artifact)  # from the distribution the export calibrated on: the fp32 flow's
    expected, got = (vocoder(mel, np.random.default_rng(5)) for vocoder in (reference, quantised))
    assert got.shape == expected.shape
    # The export's own held-out measure on this model is ~28 dB (relative L2 ~0.04); a wrong scale or
    # layout gives errors of order one.
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert 0 < error < 0.15, error


def test_every_snake_before_an_int8_convolution_reads_a_table_and_the_waveform_stays(
    tiny_model_dir: Path,
) -> None:
    """The tiny generator quantised and optimised as the export does, with and without its tables."""
    config = load_config(tiny_model_dir).hift
    module = vocoder.load_module(vocoder.random_state_dict(config, seed=0), config)
    with torch.no_grad():
        generator = vocoder.export_graphs(module, config)[HIFT_GENERATOR.name]
    rng = np.random.default_rng(4)
    samples_per_frame = int(np.prod(config.upsample_rates)) * config.istft_hop_len

    def feed(frames: int) -> dict[str, np.ndarray]:
        return {
            "mel": rng.standard_normal((1, config.in_channels, frames), dtype=np.float32) - 4,
            "sine_waves": 0.1
            * rng.standard_normal((1, frames * samples_per_frame, config.nb_harmonics + 1), dtype=np.float32),
        }

    plain = optimize_graph(quantize_static_int8(generator, [feed(frames) for frames in (20, 40)]))
    tabulated = optimize_graph(tabulate_uint8_regions(plain))
    before, after = ([node.op_type for node in model.graph.node] for model in (plain, tabulated))
    # Each residual block's Snakes, two per dilation: one reads the first convolution's codes, the other
    # the residual stream, fp32 in most blocks (a grid table, behind a Clip). The one Sin left is the
    # iSTFT's phase.
    stages = len(config.upsample_rates)
    dilations = stages * sum(map(len, config.resblock_dilation_sizes)) + sum(
        map(len, config.source_resblock_dilation_sizes)
    )
    assert after.count("GatherElements") == 2 * dilations
    assert after.count("Clip") > before.count("Clip")
    assert after.count("Sin") == before.count("Sin") - 2 * dilations == 1
    assert after.count("QLinearConv") == before.count("QLinearConv")
    held_out = feed(30)
    reference, expected, got = (
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, held_out
        )
        for model in (generator, plain, tabulated)
    )
    for fp32, want, have in zip(reference, expected, got, strict=True):
        # A grid table moves a few codes by one, which this random model amplifies to ~2 % of the output,
        # as far as int8 is from fp32 here, yet the distance to fp32 grows by at most 4 %.
        assert np.linalg.norm(have - want) <= 0.03 * np.linalg.norm(want)
        assert np.linalg.norm(have - fp32) <= 1.1 * np.linalg.norm(want - fp32)


def _flow_mel(artifact: Path) -> np.ndarray:
    flow = Flow.load(Artifact.open(artifact), threads=1)
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 100, (1, 40))
    inputs = {value.name: value.shape for value in flow.encoder.session.get_inputs()}
    speaker = rng.standard_normal((1, inputs["speaker_embedding"][-1]), dtype=np.float32)
    no_prompt = (np.zeros((1, 0), np.int64), np.zeros((1, 0, 80), np.float32))
    return flow(tokens, *no_prompt, speaker, flow.sample_noise(rng, flow.mel_frames(40)))


@pytest.mark.parametrize(
    "option",
    [("--vocoder-weights", "int4"), ("--vocoder-weights", "fp16"), ("--also", "{other}:vocoder=int4")],
)
def test_unsupported_vocoder_modes_are_refused(
    tiny_model_dir: Path, tmp_path: Path, option: tuple[str, str]
) -> None:
    out, other = tmp_path / "artifact", tmp_path / "other"
    flag, value = option
    result = run_cli("-m", "export", str(tiny_model_dir), str(out), flag, value.format(other=other))
    assert result.returncode != 0
    assert "vocoder" in result.stderr and len(result.stderr.strip().splitlines()) <= 3
    assert not out.exists() and not other.exists()
