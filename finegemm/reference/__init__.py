"""Float64 references for every op (one module per op family) and the FP8 accumulation emulator."""

from . import einsum, grouped, hyperconnection, mqa
from .dense import (
    bf16_gemm,
    calc_diff,
    dequantize_rows,
    emulate_fp8_accumulation,
    fp8_gemm,
    fp8_gemm_nt,
    scales_fp64,
)

__all__ = [
    "einsum",
    "grouped",
    "hyperconnection",
    "mqa",
    "bf16_gemm", "calc_diff", "dequantize_rows", "emulate_fp8_accumulation", "fp8_gemm", "fp8_gemm_nt", "scales_fp64",
]
