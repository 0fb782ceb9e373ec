"""Small random stand-ins for the released front-end models (campplus.onnx, speech_tokenizer_v1.onnx).

They have the released graphs' signatures (names, dtypes, symbolic frames, the 50 Hz token rate and the
4096-token vocabulary) so the runtime's prompt path runs end to end on fake model directories. The same
seed gives the same bytes. Built with onnx.helper: no torch needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from function.cosyvoice.contract import CAMPPLUS, OPSET, SPEECH_TOKENIZER

SPEAKER_DIM = 192
FBANK_BINS = 80
WHISPER_MELS = 128
SPEECH_VOCAB = 4096
HIDDEN = 32  # width of the stand-ins' single convolution
CODE_DIM = 16


def write_stand_ins(model_dir: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    _save(speaker_encoder(rng), model_dir / CAMPPLUS.file)
    _save(speech_tokenizer(rng), model_dir / SPEECH_TOKENIZER.file)


def _weight(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)


def speaker_encoder(rng: np.random.Generator) -> onnx.ModelProto:
    """fbank [1, T, 80] → conv k3 → ReLU → mean over time → linear → embedding [1, 192]."""
    (fbank,), (embedding,) = CAMPPLUS.inputs, CAMPPLUS.outputs
    nodes = [
        helper.make_node("Transpose", [fbank.name], ["channels_first"], perm=[0, 2, 1]),  # [1, 80, T]
        helper.make_node("Conv", ["channels_first", "conv_w", "conv_b"], ["conv"], pads=[1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("ReduceMean", ["relu"], ["pooled"], axes=[2], keepdims=0),  # [1, HIDDEN]
        helper.make_node("Gemm", ["pooled", "proj_w", "proj_b"], [embedding.name], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "campplus_stand_in",
        [helper.make_tensor_value_info(fbank.name, TensorProto.FLOAT, [1, "frames", FBANK_BINS])],
        [helper.make_tensor_value_info(embedding.name, TensorProto.FLOAT, [1, SPEAKER_DIM])],
        [
            _weight(rng, "conv_w", HIDDEN, FBANK_BINS, 3),
            _weight(rng, "conv_b", HIDDEN),
            _weight(rng, "proj_w", SPEAKER_DIM, HIDDEN),
            _weight(rng, "proj_b", SPEAKER_DIM),
        ],
    )
    return _model(graph)


def speech_tokenizer(rng: np.random.Generator) -> onnx.ModelProto:
    """log-mel [1, 128, T] masked to feats_length → conv k3 stride 2 (100 → 50 Hz: ceil(T / 2) tokens, as
    the real encoder's second conv) → best of 4096 codes by dot product → int32 indices [1, ceil(T / 2)]."""
    (feats, length), (indices,) = SPEECH_TOKENIZER.inputs, SPEECH_TOKENIZER.outputs
    nodes = [
        # mask[t] = t < feats_length: frames past the length do not count, as in the real model.
        helper.make_node("Shape", [feats.name], ["feats_shape"], start=2, end=3),
        helper.make_node("Squeeze", ["feats_shape"], ["frame_count"]),
        helper.make_node("Range", ["zero", "frame_count", "one"], ["positions"]),
        helper.make_node("Cast", [length.name], ["length64"], to=TensorProto.INT64),
        helper.make_node("Less", ["positions", "length64"], ["valid"]),
        helper.make_node("Cast", ["valid"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [feats.name, "mask"], ["masked"]),
        helper.make_node("Conv", ["masked", "conv_w", "conv_b"], ["conv"], pads=[1, 1], strides=[2]),
        helper.make_node("Transpose", ["conv"], ["frames_last"], perm=[0, 2, 1]),  # [1, T', CODE_DIM]
        helper.make_node("MatMul", ["frames_last", "codebook"], ["scores"]),  # [1, T', 4096]
        helper.make_node("ArgMax", ["scores"], ["best"], axis=2, keepdims=0),
        helper.make_node("Cast", ["best"], [indices.name], to=TensorProto.INT32),
    ]
    graph = helper.make_graph(
        nodes,
        "speech_tokenizer_v1_stand_in",
        [
            helper.make_tensor_value_info(feats.name, TensorProto.FLOAT, [1, WHISPER_MELS, "frames"]),
            helper.make_tensor_value_info(length.name, TensorProto.INT32, [1]),
        ],
        [helper.make_tensor_value_info(indices.name, TensorProto.INT32, [1, "tokens"])],
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
            numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
            _weight(rng, "conv_w", CODE_DIM, WHISPER_MELS, 3),
            _weight(rng, "conv_b", CODE_DIM),
            _weight(rng, "codebook", CODE_DIM, SPEECH_VOCAB),
        ],
    )
    return _model(graph)


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="export.fake")
    onnx.checker.check_model(model, full_check=True)
    return model


def _save(model: onnx.ModelProto, path: Path) -> None:
    path.write_bytes(model.SerializeToString())


__all__ = ["write_stand_ins"]
