"""Weight-only quantisation of in-memory ONNX graphs (onnxruntime's MatMulNBits).

Every MatMul whose second input is a constant 2-D weight becomes MatMulNBits: symmetric blocks of
`block_size` along the input dimension, one fp32 scale per block, `accuracy_level` 4 (the kernel
quantises activations to int8 on the fly, the fast path on x86 and arm64). MatMuls between activations
(attention scores) and everything else stay fp32. Quantisation is deterministic, so a weight shared by two
graphs quantises to the same bytes and the writer still stores it once.
"""

from __future__ import annotations

import logging

import onnx

BITS = {"int8": 8, "int4": 4}
BLOCK_SIZE = 32
ACCURACY_LEVEL = 4


def quantize_matmuls(model: onnx.ModelProto, mode: str, block_size: int = BLOCK_SIZE) -> onnx.ModelProto:
    """A quantised copy of `model`; the input is left untouched."""
    # Imported here: it pulls in onnx_ir, which only the quantising export needs.
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    if mode not in BITS:
        raise ValueError(f"unknown weight quantisation {mode!r}; choose from {', '.join(BITS)}")
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(
        logging.WARNING
    )  # a line per node
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    quantizer = MatMulNBitsQuantizer(
        copy,
        bits=BITS[mode],
        block_size=block_size,
        is_symmetric=True,
        accuracy_level=ACCURACY_LEVEL,
        op_types_to_quantize=("MatMul",),
    )
    quantizer.process()
    return quantizer.model.model


__all__ = ["ACCURACY_LEVEL", "BITS", "BLOCK_SIZE", "quantize_matmuls"]
