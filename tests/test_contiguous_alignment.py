"""``set_mk_alignment_for_contiguous_layout`` and friends: contiguous segments aligned to fewer (or more) rows than 128.

CPU: the portable kernels through Triton's interpreter against the float64 reference, both layout forms; the sm90
rules and a CPU compile of the 64-row tiles they pick; the plans made under another alignment are dropped.
"""

from __future__ import annotations

import pytest
import torch
from generators import contiguous_row_groups

import finegemm
from finegemm import reference
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

POISON = 7.0


@pytest.fixture
def alignment():
    """Set an alignment for one test; 128 (the default) again afterwards."""
    yield finegemm.set_mk_alignment_for_contiguous_layout
    finegemm.set_mk_alignment_for_contiguous_layout(128)


def test_default_get_and_set(alignment):
    assert finegemm.get_mk_alignment_for_contiguous_layout() == 128
    alignment(64)
    assert finegemm.get_mk_alignment_for_contiguous_layout() == 64
    assert finegemm.get_k_alignment_for_k_grouped() == 128  # the scale block
    alignment(256)
    assert finegemm.get_k_alignment_for_k_grouped() == 256


@pytest.mark.parametrize("bad", [0, 48, 100, 1024])
def test_set_rejects_what_no_kernel_tiles(bad, alignment):
    with pytest.raises(ValueError, match=r"alignment must be one of \(16, 32, 64, 128, 256, 512\)"):
        alignment(bad)
    assert finegemm.get_mk_alignment_for_contiguous_layout() == 128


@pytest.mark.parametrize("bad", [64.0, True, "64", None])
def test_set_rejects_what_is_not_an_int(bad, alignment):
    with pytest.raises(TypeError, match=r"alignment must be an int; got"):
        alignment(bad)
    assert finegemm.get_mk_alignment_for_contiguous_layout() == 128


@pytest.mark.parametrize("args,want", [
    ((), 128), ((None, None), 128), ((32,), 64), ((95,), 64), ((96,), 128), ((4096,), 128),
    ((257, 128), 64),   # vLLM's form: expected tokens over the experts, 3 a group
    ((8192, 8), 128),
])
def test_theoretical_alignment(args, want):
    assert finegemm.get_theoretical_mk_alignment_for_contiguous_layout(*args) == want


def test_theoretical_alignment_rejects_bad_hints():
    with pytest.raises(ValueError, match="expected_m must be an int >= 0; got -1"):
        finegemm.get_theoretical_mk_alignment_for_contiguous_layout(-1)
    with pytest.raises(TypeError, match="num_groups must be an int; got float 2.0"):
        finegemm.get_theoretical_mk_alignment_for_contiguous_layout(64, 2.0)


def _fp8_case(rows, align, n=96, k=256, seed=0):
    row_groups, ends, m = contiguous_row_groups(rows, align)
    g = torch.Generator().manual_seed(seed)
    a = per_token_cast_to_fp8(torch.randn(m, k, generator=g))
    w = torch.randn(len(rows), n, k, generator=g)
    casts = [per_block_cast_to_fp8(w[i]) for i in range(len(rows))]
    b = (torch.stack([q for q, _ in casts]), torch.stack([s for _, s in casts]))
    return a, b, row_groups, torch.tensor(ends, dtype=torch.int32), m


@pytest.mark.parametrize("align", [16, 32, 64, 256])
@pytest.mark.parametrize("psum", [False, True])
def test_fp8_contiguous_at_other_alignments(align, psum, alignment):
    alignment(align)
    rows = [40, 64, 0, 100, 3]
    a, b, row_groups, ends, m = _fp8_case(rows, align, seed=align)
    layout = ends if psum else row_groups
    d = torch.full((m, b[0].shape[1]), POISON, dtype=torch.bfloat16)
    finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=psum)
    ref = reference.grouped.m_grouped_fp8_gemm_nt_contiguous(a, b, layout, psum)
    assert reference.calc_diff(d, ref) < 1e-3
    assert bool((d[row_groups < 0] == 0).all()), "padding rows are written as 0"


def test_bf16_contiguous_at_alignment_32(alignment):
    alignment(32)
    rows = [5, 32, 70]
    row_groups, _, m = contiguous_row_groups(rows, 32)
    g = torch.Generator().manual_seed(3)
    a = torch.randn(m, 64, generator=g).bfloat16()
    b = torch.randn(3, 48, 64, generator=g).bfloat16()
    d = torch.full((m, 48), POISON, dtype=torch.bfloat16)
    finegemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, row_groups)
    ref = torch.zeros(m, 48, dtype=torch.float64)
    for e in range(3):
        sel = row_groups == e
        ref[sel] = a[sel].double() @ b[e].double().T
    assert reference.calc_diff(d, ref) < 1e-5


def test_plans_follow_the_alignment(alignment):
    """A layout aligned to 64 but not 128 passes once 64 is set and fails again at 128: the plan validated under
    one alignment is never replayed under another."""
    a, b, row_groups, _, m = _fp8_case([40, 64], 64)
    d = torch.empty(m, b[0].shape[1], dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="not a multiple of get_mk_alignment_for_contiguous_layout"):
        finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, row_groups)
    alignment(64)
    finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, row_groups)
    alignment(128)
    with pytest.raises(ValueError, match=r"= 128; pad every group's segment"):
        finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, row_groups)


def test_k_grouped_keeps_whole_scale_blocks(alignment):
    alignment(64)
    m, n, ks = 16, 32, [64, 192]
    a = per_token_cast_to_fp8(torch.randn(m, sum(ks)))
    b = per_token_cast_to_fp8(torch.randn(n, sum(ks)))
    d = torch.zeros(len(ks), m, n)
    ks_tensor = torch.tensor(ks, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"ks_cpu\[0\] = 64: every group's K must be a non-negative multiple of "
                                         r"get_k_alignment_for_k_grouped\(\) = 128"):
        finegemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=d)


def test_grouped_linear_pads_to_the_weight_gradients_blocks(alignment):
    """At alignment 64 the training layer still pads every expert to 128 rows (its weight gradient's groups of K)."""
    alignment(64)
    sizes = [30, 0, 70]
    x = torch.randn(256, 128, requires_grad=True)
    w = torch.randn(3, 64, 128, requires_grad=True)
    y = finegemm.fp8_grouped_linear(x, w, sizes)
    assert y.shape == (256, 64)
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape
    with pytest.raises(ValueError, match=r"x must have 256 rows"):
        finegemm.fp8_grouped_linear(torch.randn(192, 128), w, sizes)


# ------------------------------------------------------------------------------------------- sm90 rules
def _desc(kind, align, m=8192, n=4096, k=7168, groups=8):
    return GemmDesc(kind, m, n, k, layout="m_grouped_contiguous", num_groups=groups, alignment=align)


def test_sm90_rules_tile_64_row_segments_with_64_rows():
    from finegemm.kernels.sm90 import dispatch_bf16_grouped, dispatch_grouped

    assert dispatch_grouped.get_config(_desc("fp8_1d2d", 128), H200).block_m in (128, 256)
    assert dispatch_grouped.get_config(_desc("fp8_1d2d", 64), H200).block_m == 64
    assert dispatch_bf16_grouped.get_config(_desc("bf16", 64), H200).block_m == 64
    for module, kind in ((dispatch_grouped, "fp8_1d2d"), (dispatch_bf16_grouped, "bf16")):
        assert module.unsupported_reason(_desc(kind, 64), H200) is None
        assert "straddle" in module.unsupported_reason(_desc(kind, 32), H200)


def test_sm90_64_row_contiguous_tiles_compile_with_the_alignment():
    from finegemm.kernels.sm90 import compile_check, dispatch_bf16_grouped, dispatch_grouped

    for psum in (False, True):
        desc = _desc("fp8_1d2d", 64)
        kernel = compile_check.compile_grouped_variant(desc, dispatch_grouped.get_config(desc, H200), use_psum=psum)
        usage = compile_check.resource_usage(kernel)
        assert usage["STACK"] == 0 and usage["LOCAL"] == 0, usage
    desc = _desc("bf16", 64)
    kernel = compile_check.compile_bf16_grouped_variant(desc, dispatch_bf16_grouped.get_config(desc, H200))
    assert compile_check.resource_usage(kernel)["LOCAL"] == 0


# --------------------------------------------------------------------------------------------- H200
@pytest.mark.gpu
@pytest.mark.parametrize("align", [64, 32])
@pytest.mark.parametrize("psum", [False, True])
def test_gpu_fp8_and_bf16_contiguous_at_small_alignments(align, psum, alignment):
    """64: the sm90 kernels with 64-row tiles; 32: the portable kernels (sm90 declines)."""
    from generators import sm90_device

    dev = sm90_device()
    alignment(align)
    rows = [int(v) for v in torch.randint(0, 200, (16,), generator=torch.Generator().manual_seed(align))]
    a, b, row_groups, ends, m = _fp8_case(rows, align, n=4096, k=7168, seed=align)
    layout = (ends if psum else row_groups).to(dev)
    a, b = tuple(t.to(dev) for t in a), tuple(t.to(dev) for t in b)
    d = torch.full((m, 4096), POISON, dtype=torch.bfloat16, device=dev)
    finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=psum)
    torch.cuda.synchronize()
    ref = reference.grouped.m_grouped_fp8_gemm_nt_contiguous(a, b, layout, psum)
    assert reference.calc_diff(d, ref) < 1e-3
    assert bool((d[row_groups.to(dev) < 0] == 0).all())
    a16 = torch.randn(m, 2048, device=dev).bfloat16()
    b16 = torch.randn(16, 1024, 2048, device=dev).bfloat16()
    d16 = torch.full((m, 1024), POISON, dtype=torch.bfloat16, device=dev)
    finegemm.m_grouped_bf16_gemm_nt_contiguous(a16, b16, d16, layout, use_psum_layout=psum)
    torch.cuda.synchronize()
    groups = reference.grouped.contiguous_row_groups(layout, m, psum).to(dev)
    ref16 = torch.zeros(m, 1024, dtype=torch.float64, device=dev)
    for e in range(16):
        sel = groups == e
        ref16[sel] = a16[sel].double() @ b16[e].double().T
    assert reference.calc_diff(d16, ref16) < 1e-5
