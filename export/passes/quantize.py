"""Quantisation of in-memory ONNX graphs, three onnxruntime schemes for three workloads.

LLM (`quantize_matmuls`, onnxruntime's MatMulNBits): symmetric blocks along the input dimension, one fp32
scale per block, `accuracy_level` 4 (the kernel quantises activations to int8 on the fly). Decode is a
matrix-vector product bound by weight bandwidth, which 8/4-bit blocks cut. Blocks are 128 wide for int8
(8 bits leave ample resolution; 32-wide blocks' scales are 12.5 % more bytes to read, and the kernel is
slower with them) and 32 wide for int4, whose 16 levels need them.

Flow (`quantize_dynamic_int8`, onnxruntime's dynamic quantisation): int8 weights with one scale per tensor,
activations quantised to uint8 per call, u8s8 integer GEMM. The flow's MatMuls have hundreds of rows and are
compute-bound; even on AVX2 (no VNNI) they run much faster than fp32 (the estimator call gains less:
attention stays fp32), while MatMulNBits 8-bit is slower than fp32 there. Per-channel and reduced-range
weights are less accurate on the flow (`python -m export`'s quality report says how far the mel moves),
and quantising the Conv layers too (ConvInteger) is slower. `python -m bench speed` times the stages.

Vocoder (`quantize_static_int8`, onnxruntime's static quantisation): the generator's convolutions as
QLinearConv, int8 weights per output channel and uint8 activations whose ranges are fixed at export from
calibration inputs (min/max). Its convolutions run at the cores' fp32 peak over hundreds of thousands of
frames, so only integer arithmetic makes them faster: u8s8 QLinearConv runs them several times faster
than fp32, while with int8 activations onnxruntime has no fast kernel (slower than fp32). The kernels use
VNNI where the CPU has it and run everywhere else too; the weights keep 7 bits (reduce_range) because
AVX2 without VNNI sums u8*s8 pairs in saturating int16, where full 8-bit weights move a convolution's
output several times further from fp32 than 7-bit ones. The Snake
activations, each ending in one of those convolutions' uint8 input, then become lookup tables
(export.passes.tabulate).

MatMuls between activations (attention) and everything else stay fp32. Quantisation is deterministic, so a
weight shared by two graphs quantises to the same bytes and the writer still stores it once.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx

BITS = {"int8": 8, "int4": 4}
BLOCK_SIZES = {"int8": 128, "int4": 32}
ACCURACY_LEVEL = 4
DYNAMIC_INT8 = "int8-dynamic"  # the manifest's name for quantize_dynamic_int8's scheme
STATIC_INT8 = "int8-static"  # ... and for quantize_static_int8's


@contextmanager
def _quiet() -> Iterator[None]:
    """Mute onnxruntime.quantization's per-node log lines (it configures the root logger at INFO)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def quantize_matmuls(model: onnx.ModelProto, mode: str) -> onnx.ModelProto:
    """A MatMulNBits copy of `model`; the input is left untouched."""
    # Imported here: it pulls in onnx_ir, which only the quantising export needs.
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    if mode not in BITS:
        raise ValueError(f"unknown weight quantisation {mode!r}; choose from {', '.join(BITS)}")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    with _quiet():
        quantizer = MatMulNBitsQuantizer(
            copy,
            bits=BITS[mode],
            block_size=BLOCK_SIZES[mode],
            is_symmetric=True,
            accuracy_level=ACCURACY_LEVEL,
            op_types_to_quantize=("MatMul",),
        )
        quantizer.process()
    return quantizer.model.model


def quantize_dynamic_int8(model: onnx.ModelProto) -> onnx.ModelProto:
    """A dynamically quantised copy of `model` (MatMulInteger with a constant int8 B); input untouched.

    The result is in onnxruntime's unfused form (DynamicQuantizeLinear, MatMulInteger, Cast, Mul);
    export.passes.optimize fuses it into DynamicQuantizeMatMul / MatMulIntegerToFloat."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="cosyvoice-quantize-") as tmp, _quiet():
        target = Path(tmp) / "quantized.onnx"  # quantize_dynamic only writes files
        quantize_dynamic(
            model,
            target,
            op_types_to_quantize=["MatMul"],
            per_channel=False,
            reduce_range=False,
            weight_type=QuantType.QInt8,
        )
        return onnx.load(str(target))


def quantize_static_int8(
    model: onnx.ModelProto, calibration: Sequence[dict[str, np.ndarray]], op_types: Sequence[str] = ("Conv",)
) -> onnx.ModelProto:
    """A statically quantised copy of `model` (QuantizeLinear/DequantizeLinear around each of `op_types`),
    its activation ranges the min/max over running `calibration` (one feed per run); input untouched.

    export.passes.optimize fuses each DequantizeLinear → Conv → QuantizeLinear into one QLinearConv."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Feeds(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._feeds, None)

    with tempfile.TemporaryDirectory(prefix="cosyvoice-quantize-") as tmp, _quiet():
        source, target = Path(tmp) / "model.onnx", Path(tmp) / "quantized.onnx"  # it works on files
        onnx.save_model(model, str(source))
        quantize_static(
            str(source),
            str(target),
            Feeds(),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=list(op_types),
            per_channel=True,
            reduce_range=True,  # 7-bit weights: AVX2's u8s8 pair sums (no VNNI) then cannot saturate int16
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )
        return onnx.load(str(target))


__all__ = [
    "ACCURACY_LEVEL",
    "BITS",
    "BLOCK_SIZES",
    "DYNAMIC_INT8",
    "STATIC_INT8",
    "quantize_dynamic_int8",
    "quantize_matmuls",
    "quantize_static_int8",
]
