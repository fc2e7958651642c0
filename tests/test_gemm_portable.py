"""Dense FP8 and BF16 GEMMs on the portable kernels, through Triton's interpreter on the CPU."""

from __future__ import annotations

import pytest
import torch
from generators import LAYOUTS, Fp8Case, enumerate_portable_cpu, generate_fp8, run_fp8

import finegemm
from finegemm import reference

CASES = enumerate_portable_cpu()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.layout}-{c.recipe[1]}-{'ue8m0' if c.ue8m0 else 'fp32'}-"
                         f"{c.m}x{c.n}x{c.k}")
def test_fp8_gemm_matches_float64_reference(case: Fp8Case):
    a, b, d, c, ref = generate_fp8(case, seed=hash((case.layout, case.recipe, case.ue8m0)) % 1000)
    run_fp8(case, a, b, d, c)
    assert not torch.isnan(d).any(), "some output elements were never written"
    assert finegemm.calc_diff(d, ref) < 1e-3


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fp8_gemm_mn_major_operands(layout):
    case = Fp8Case(layout, (1, 128, 128), False, 70, 136, 256)
    a, b, d, c, ref = generate_fp8(case, seed=7, mn_major=True)
    run_fp8(case, a, b, d, c)
    assert finegemm.calc_diff(d, ref) < 1e-3


def test_fp8_1d2d_with_c_and_fp32_out():
    case = Fp8Case("nt", (1, 128, 128), False, 33, 160, 384)
    a, b, _, _, ref = generate_fp8(case, seed=3)
    c = torch.randn(33, 160)
    d = torch.full((33, 160), float("nan"))
    finegemm.fp8_gemm_nt(a, b, d, c=c)
    assert finegemm.calc_diff(d, ref + c.double()) < 1e-6


def test_fp8_1d1d_accumulates_in_place():
    case = Fp8Case("nt", (1, 1, 128), False, 20, 72, 256)
    a, b, _, c, ref = generate_fp8(case, seed=4)
    d = c.clone()
    finegemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
    assert finegemm.calc_diff(d, ref) < 1e-6


def test_fp8_m_zero_returns_without_touching_d():
    a = (torch.empty((0, 256), dtype=torch.float8_e4m3fn), torch.empty((0, 2)))
    b = finegemm.per_block_cast_to_fp8(torch.randn(64, 256))
    d = torch.empty((0, 64), dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt(a, b, d)
    assert d.shape == (0, 64)


def test_fp8_results_are_bitwise_repeatable():
    case = Fp8Case("nt", (1, 128, 128), False, 40, 130, 256)
    a, b, d, c, _ = generate_fp8(case, seed=5)
    run_fp8(case, a, b, d, c)
    first = d.clone()
    d.fill_(float("nan"))
    run_fp8(case, a, b, d, c)
    assert torch.equal(first, d)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_dtype,with_c", [(torch.bfloat16, False), (torch.float32, True)])
def test_bf16_gemm_matches_float64_reference(layout, out_dtype, with_c):
    m, n, k = 77, 130, 200
    a = torch.randn(m, k, dtype=torch.bfloat16)
    b = torch.randn(n, k, dtype=torch.bfloat16)
    c = torch.randn(m, n) if with_c else None
    ref = reference.bf16_gemm("nt", a, b, c)
    a_in = a.T.contiguous() if layout[0] == "t" else a
    b_in = b.T.contiguous() if layout[1] == "n" else b
    d = torch.full((m, n), float("nan"), dtype=out_dtype)
    getattr(finegemm, f"bf16_gemm_{layout}")(a_in, b_in, d, c=c)
    assert not torch.isnan(d).any()
    # bf16 output rounding (truncating in the interpreter) bounds the bf16 case at ~1e-5.
    assert finegemm.calc_diff(d, ref) < (1e-5 if out_dtype == torch.bfloat16 else 1e-10)
