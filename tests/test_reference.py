"""The float64 reference and the FP8 accumulation emulator."""

from __future__ import annotations

import math

import torch

from finegemm import quant, reference


def test_calc_diff_basics():
    x = torch.randn(100, dtype=torch.float64)
    assert reference.calc_diff(x, x) == 0.0
    assert abs(reference.calc_diff(x, -x) - 2.0) < 1e-12
    assert 0 < reference.calc_diff(x, x * 1.01) < 1e-4
    assert math.isnan(reference.calc_diff(x, torch.full_like(x, float("nan"))))


def test_promotion_every_128_keeps_long_k_accurate_and_no_promotion_does_not():
    """K = 16384, 16x16 outputs, inputs N(0.5, 1) (activations with a DC offset, as after SwiGLU),
    tensor-core accumulator keeping 13 explicit mantissa bits, WGMMA k = 32.

    Measured when written (seed 0): promotion every 128 of K gives calc_diff 4.0e-9 against the
    float64 reference; accumulating all of K in the tensor cores gives 4.9e-3, five times the
    1e-3 bound. That is why every FP8 kernel here promotes into FP32 every 128 of K.
    """
    gen = torch.Generator().manual_seed(0)
    a = quant.per_token_cast_to_fp8(torch.randn(16, 16384, generator=gen) + 0.5)
    b = quant.per_block_cast_to_fp8(torch.randn(16, 16384, generator=gen) + 0.5)
    exact = reference.fp8_gemm_nt(a, b)
    promoted = reference.emulate_fp8_accumulation(a, b, mantissa_bits=13, promote_every=128)
    unpromoted = reference.emulate_fp8_accumulation(a, b, mantissa_bits=13, promote_every=None)
    assert reference.calc_diff(promoted, exact) < 1e-6
    assert reference.calc_diff(unpromoted, exact) > 1e-3


def test_emulator_with_many_bits_is_exact():
    gen = torch.Generator().manual_seed(1)
    a = quant.per_token_cast_to_fp8(torch.randn(8, 384, generator=gen))
    b = quant.per_token_cast_to_fp8(torch.randn(8, 384, generator=gen))
    exact = reference.fp8_gemm_nt(a, b, recipe=(1, 1, 128))
    emulated = reference.emulate_fp8_accumulation(a, b, mantissa_bits=50, recipe=(1, 1, 128))
    assert reference.calc_diff(emulated, exact) < 1e-14


def test_reference_layouts_agree():
    gen = torch.Generator().manual_seed(2)
    a = quant.per_token_cast_to_fp8(torch.randn(20, 256, generator=gen))
    b = quant.per_block_cast_to_fp8(torch.randn(30, 256, generator=gen))
    nt = reference.fp8_gemm("nt", a, b)
    tn = reference.fp8_gemm("tn", (a[0].T, a[1].T), (b[0].T, b[1].T))
    assert torch.equal(nt, tn)


def test_packed_scales_dequantize_like_fp32():
    gen = torch.Generator().manual_seed(3)
    q, sf = quant.per_token_cast_to_fp8(torch.randn(5, 700, generator=gen), use_ue8m0=True)
    assert torch.equal(reference.dequantize_rows(q, sf, 1), reference.dequantize_rows(q, quant.pack_ue8m0(sf), 1))
