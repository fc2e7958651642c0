"""Grouped GEMMs (finegemm.api.grouped) against the float64 references (finegemm.reference.grouped).

CPU tests run the portable kernels through Triton's interpreter (~15 ms per 64x64x128 tile step), so
their shapes are tiny: 2-3 groups of 0-256 rows, N in {160, 192} (not multiples of 128, so N tiles
straddle scale blocks), K in {256, 384}. GPU tests (``-m gpu``) use DESIGN.md §7's shapes. Cases are
built by the ``generate_*`` helpers, apart from the checks.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch
from generators import contiguous_row_groups, flatten_k_major, k_grouped_cast

import finegemm  # noqa: F401  (turns the interpreter on without a GPU)
from finegemm.api import grouped as fg
from finegemm.jit.heuristics import PortableConfig
from finegemm.kernels.portable.m_grouped import launch_m_grouped_contiguous
from finegemm.layout import (
    get_mk_alignment_for_contiguous_layout,
    get_mn_major_tma_aligned_packed_ue8m0_tensor,
    transform_sf_into_required_layout,
)
from finegemm.quant import (
    ceil_to_ue8m0,
    pack_ue8m0,
    per_block_cast_to_fp8,
    per_token_cast_to_fp8,
)
from finegemm.reference import grouped as ref
from finegemm.reference.dense import calc_diff

ALIGN = get_mk_alignment_for_contiguous_layout()
POISON = 7.0  # an exact bf16/fp32 value no result equals by accident
FP8_BOUND = 1e-3
BF16_BOUND = 1e-5


def _align(x: int) -> int:
    return (x + ALIGN - 1) // ALIGN * ALIGN


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------

def _fp8_scales(sf: torch.Tensor, ue8m0: bool, mn_major: bool) -> torch.Tensor:
    """fp32 scales as given (path A), or packed UE8M0 int32 in the required layout."""
    if not ue8m0:
        return sf
    return get_mn_major_tma_aligned_packed_ue8m0_tensor(sf) if mn_major else pack_ue8m0(sf)


def _poison_fp8(x: torch.Tensor, mask: torch.Tensor) -> None:
    """Set the masked rows of an e4m3 tensor to NaN (0x7F; torch has no masked_fill for fp8)."""
    x.view(torch.uint8)[mask] = 0x7F


def _quant_rows(x: torch.Tensor, ue8m0: bool) -> tuple[torch.Tensor, torch.Tensor]:
    q, sf = per_token_cast_to_fp8(x, use_ue8m0=ue8m0)
    return q, sf


def _quant_weights(w: torch.Tensor, ue8m0: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``w [G, N, K]`` → (e4m3 ``[G, N, K]``, sf ``[G, ceil(N/128), ceil(K/128)]``)."""
    parts = [per_block_cast_to_fp8(w[g], use_ue8m0=ue8m0) for g in range(w.shape[0])]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def generate_m_grouped_contiguous(rows: list[int], n: int, k: int, *, use_psum_layout: bool = False,
                                  ue8m0: bool = False, bf16: bool = False, device: str = "cpu",
                                  extra_padding_blocks: int = 0):
    """Inputs for the contiguous ops: each group's ``rows[g]`` tokens, its segment padded to 128.

    Padding rows of ``a`` hold NaN (FP8: NaN in the fp8 data) so a kernel that read them would fail.
    Returns ``(a, b, grouped_layout, d, row_groups)`` with ``d`` poisoned.
    """
    num_groups = len(rows)
    row_groups, ends, m = contiguous_row_groups(rows, ALIGN, extra_padding_blocks)
    x = torch.randn(m, k, device=device)
    w = torch.randn(num_groups, n, k, device=device)
    pad = (row_groups < 0).to(device)
    layout = torch.tensor(ends, dtype=torch.int32) if use_psum_layout else row_groups.clone()
    layout = layout.to(device)
    d = torch.full((m, n), POISON, dtype=torch.bfloat16, device=device)
    if bf16:
        a = x.to(torch.bfloat16)
        a[pad] = float("nan")
        return a, w.to(torch.bfloat16), layout, d, row_groups
    a_fp8, sfa = _quant_rows(x, ue8m0)
    _poison_fp8(a_fp8, pad)
    b_fp8, sfb = _quant_weights(w, ue8m0)
    return (a_fp8, _fp8_scales(sfa, ue8m0, True)), (b_fp8, _fp8_scales(sfb, ue8m0, False)), layout, d, row_groups


def generate_m_grouped_masked(num_groups: int, max_m: int, n: int, k: int, masked: list[int], *,
                              ue8m0: bool = False, bf16: bool = False, device: str = "cpu"):
    """Inputs for the masked ops; rows of ``a`` at or past ``masked[g]`` hold NaN. ``d`` is poisoned."""
    x = torch.randn(num_groups, max_m, k, device=device)
    w = torch.randn(num_groups, n, k, device=device)
    masked_m = torch.tensor(masked, dtype=torch.int32, device=device)
    invalid = torch.arange(max_m, device=device)[None, :] >= masked_m.clamp(0, max_m)[:, None].long()
    d = torch.full((num_groups, max_m, n), POISON, dtype=torch.bfloat16, device=device)
    if bf16:
        a = x.to(torch.bfloat16)
        a[invalid] = float("nan")
        return a, w.to(torch.bfloat16), masked_m, d
    parts = [_quant_rows(x[g], ue8m0) for g in range(num_groups)]
    a_fp8 = torch.stack([p[0] for p in parts])
    sfa = torch.stack([p[1] for p in parts])
    _poison_fp8(a_fp8, invalid)
    b_fp8, sfb = _quant_weights(w, ue8m0)
    return (a_fp8, _fp8_scales(sfa, ue8m0, True)), (b_fp8, _fp8_scales(sfb, ue8m0, False)), masked_m, d


def generate_k_grouped(ks: list[int], m: int, n: int, *, flat_k_major: bool = False, bf16: bool = False,
                       device: str = "cpu"):
    """Inputs for the k-grouped ops: returns ``(a, b, c, d, ks_tensor)`` with ``d`` poisoned fp32."""
    num_groups, sum_k = len(ks), sum(ks)
    x = torch.randn(sum_k, m, device=device)
    y = torch.randn(sum_k, n, device=device)
    c = torch.randn(num_groups, m, n, device=device)
    d = torch.full((num_groups, m, n), POISON, dtype=torch.float32, device=device)
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device=device)
    if bf16:
        return x.to(torch.bfloat16), y.to(torch.bfloat16), c, d, ks_tensor
    a = k_grouped_cast(x, ks)
    b = k_grouped_cast(y, ks)
    if flat_k_major:
        a = (flatten_k_major(a[0], ks), a[1].T)
        b = (flatten_k_major(b[0], ks), b[1].T)
    return a, b, c, d, ks_tensor


def _check_contiguous(d: torch.Tensor, expected: torch.Tensor, row_groups: torch.Tensor, bound: float) -> None:
    valid = (row_groups >= 0).to(d.device)
    assert not torch.isnan(d.float()).any()
    if bool(valid.any()):
        assert calc_diff(d[valid], expected[valid]) < bound
    # Padding rows are written as exact zeros.
    assert bool((d[~valid] == 0).all())


def _check_masked(d: torch.Tensor, expected: torch.Tensor, masked: list[int], bound: float) -> None:
    max_m = d.shape[1]
    for g, rows in enumerate(ref.masked_rows(torch.tensor(masked), max_m)):
        if rows:
            assert calc_diff(d[g, :rows], expected[g, :rows]) < bound, f"group {g}"
        # Rows at or past masked_m[g] are never written.
        assert bool((d[g, rows:] == POISON).all()), f"group {g} rows >= {rows} were written"


# ---------------------------------------------------------------------------------------------
# Runners: one body per op, called by the tiny CPU tests and the GPU tests alike
# ---------------------------------------------------------------------------------------------

def run_m_grouped_contiguous(rows: list[int], n: int, k: int, *, use_psum_layout: bool = False, ue8m0: bool = False,
                             nn: bool = False, bf16: bool = False, device: str = "cpu",
                             extra_padding_blocks: int = 0) -> torch.Tensor:
    """Run one contiguous op into a view of a larger poisoned buffer and check it; returns d."""
    a, b, layout, d, row_groups = generate_m_grouped_contiguous(rows, n, k, use_psum_layout=use_psum_layout,
                                                                ue8m0=ue8m0, bf16=bf16, device=device,
                                                                extra_padding_blocks=extra_padding_blocks)
    m = d.shape[0]
    big = torch.full((m + 2, n), POISON, dtype=torch.bfloat16, device=device)
    d = big[1:m + 1]  # the rows around d must stay untouched
    if bf16:
        if nn:
            b = b.transpose(1, 2).contiguous()  # [G, K, N]
        op = fg.m_grouped_bf16_gemm_nn_contiguous if nn else fg.m_grouped_bf16_gemm_nt_contiguous
        reference = ref.m_grouped_bf16_gemm_nn_contiguous if nn else ref.m_grouped_bf16_gemm_nt_contiguous
    else:
        if nn:
            # [G, K, N] data; scales [G, SFK, SFN] as transposed views, so packed ones keep the required layout.
            b = (b[0].transpose(1, 2).contiguous(), b[1].transpose(1, 2))
        op = fg.m_grouped_fp8_gemm_nn_contiguous if nn else fg.m_grouped_fp8_gemm_nt_contiguous
        reference = ref.m_grouped_fp8_gemm_nn_contiguous if nn else ref.m_grouped_fp8_gemm_nt_contiguous
    op(a, b, d, layout, use_psum_layout=use_psum_layout)
    if device == "cuda":
        torch.cuda.synchronize()
    _check_contiguous(d, reference(a, b, layout, use_psum_layout), row_groups, BF16_BOUND if bf16 else FP8_BOUND)
    assert bool((big[0] == POISON).all()) and bool((big[-1] == POISON).all())
    return d


def run_m_grouped_masked(num_groups: int, max_m: int, n: int, k: int, masked: list[int], expected_m: int, *,
                         ue8m0: bool = False, bf16: bool = False, device: str = "cpu") -> None:
    """Run one masked op into a view of a larger poisoned buffer and check it."""
    a, b, masked_m, d = generate_m_grouped_masked(num_groups, max_m, n, k, masked, ue8m0=ue8m0, bf16=bf16,
                                                  device=device)
    big = torch.full((num_groups, max_m + 1, n), POISON, dtype=torch.bfloat16, device=device)
    d = big[:, :max_m]
    if bf16:
        fg.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m)
        expected, bound = ref.m_grouped_bf16_gemm_nt_masked(a, b, masked_m), BF16_BOUND
    else:
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)
        expected, bound = ref.m_grouped_fp8_gemm_nt_masked(a, b, masked_m), FP8_BOUND
    if device == "cuda":
        torch.cuda.synchronize()
    _check_masked(d, expected, masked, bound)
    assert bool((big[:, max_m] == POISON).all())


def run_k_grouped(ks: list[int], m: int, n: int, *, flat_k_major: bool = False, bf16: bool = False,
                  device: str = "cpu") -> None:
    """Run one k-grouped op with c apart from d, then in place (c is d), and check both."""
    a, b, c, d, ks_tensor = generate_k_grouped(ks, m, n, flat_k_major=flat_k_major, bf16=bf16, device=device)
    if bf16:
        op, reference, bound = fg.k_grouped_bf16_gemm_tn_contiguous, ref.k_grouped_bf16_gemm_tn_contiguous, BF16_BOUND
    elif flat_k_major:
        op, reference, bound = fg.k_grouped_fp8_gemm_nt_contiguous, ref.k_grouped_fp8_gemm_nt_contiguous, FP8_BOUND
    else:
        op, reference, bound = fg.k_grouped_fp8_gemm_tn_contiguous, ref.k_grouped_fp8_gemm_tn_contiguous, FP8_BOUND
    expected = reference(a, b, ks, c)
    op(a, b, d, ks, ks_tensor, c=c)
    in_place = c.clone()
    op(a, b, in_place, ks, ks_tensor, c=in_place)
    if device == "cuda":
        torch.cuda.synchronize()
    for out in (d, in_place):
        assert calc_diff(out, expected) < bound
        for g, kk in enumerate(ks):
            if kk == 0:
                assert torch.equal(out[g], c[g])  # empty group: d[g] = c[g] exactly


# ---------------------------------------------------------------------------------------------
# CPU: m-grouped contiguous
# ---------------------------------------------------------------------------------------------

# (rows per group, N, K, ue8m0): empty groups, partial segments, one full segment, both scale formats.
CONTIGUOUS_CASES = [
    ([100, 0, 200], 160, 256, False),
    ([128, 37], 192, 384, True),
]


@pytest.mark.parametrize("use_psum_layout", [False, True], ids=["per_row", "psum"])
@pytest.mark.parametrize("rows,n,k,ue8m0", CONTIGUOUS_CASES)
def test_m_grouped_fp8_nt_contiguous(rows, n, k, ue8m0, use_psum_layout):
    torch.manual_seed(0)
    run_m_grouped_contiguous(rows, n, k, use_psum_layout=use_psum_layout, ue8m0=ue8m0)


@pytest.mark.parametrize("ue8m0", [False, True], ids=["fp32_sf", "ue8m0"])
def test_m_grouped_fp8_nn_contiguous_and_repeat(ue8m0):
    rows, n, k = [60, 130], 160, 256
    torch.manual_seed(1)
    d_nn = run_m_grouped_contiguous(rows, n, k, nn=True, ue8m0=ue8m0, extra_padding_blocks=1)
    # Same data through the nt path (same seed): bitwise the same result.
    torch.manual_seed(1)
    d_nt = run_m_grouped_contiguous(rows, n, k, ue8m0=ue8m0, extra_padding_blocks=1)
    assert torch.equal(d_nn, d_nt)


def test_m_grouped_contiguous_all_padding_and_empty():
    torch.manual_seed(2)
    a, b, layout, d, row_groups = generate_m_grouped_contiguous([0, 0], 160, 256, extra_padding_blocks=1)
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    assert bool((d == 0).all())
    # M_total = 0 returns at once.
    empty = (a[0][:0], a[1][:0])
    fg.m_grouped_fp8_gemm_nt_contiguous(empty, b, d[:0], layout[:0])


def test_m_grouped_contiguous_kernel_bounds_bad_ids():
    # Ids outside [0, G) that the host checks would reject (and skip on CUDA without FINEGEMM_DEBUG)
    # are padding in the kernel: zero rows, no out-of-bounds read of b.
    torch.manual_seed(3)
    a, b, layout, d, row_groups = generate_m_grouped_contiguous([128, 64], 160, 256)
    bad = layout.clone()
    bad[:128] = 5
    bad[128:192] = -7
    config = PortableConfig(64, 64, 128, 4, 1, 1)
    sfa = transform_sf_into_required_layout(a[1], a[0].shape[0], 256, (1, 128, 128), is_sfa=True)
    launch_m_grouped_contiguous(a[0], b[0], d, bad, sfa, b[1], False, ALIGN, config)
    assert bool((d == 0).all())


# ---------------------------------------------------------------------------------------------
# CPU: m-grouped masked
# ---------------------------------------------------------------------------------------------

# masked_m per group: partial, empty, above max_m (clamped), negative (none).
MASKED_CASES = [
    (3, 128, 160, 256, [50, 0, 300], False),
    (2, 64, 192, 384, [64, -3], True),
]


@pytest.mark.parametrize("num_groups,max_m,n,k,masked,ue8m0", MASKED_CASES)
def test_m_grouped_fp8_nt_masked(num_groups, max_m, n, k, masked, ue8m0):
    torch.manual_seed(4)
    run_m_grouped_masked(num_groups, max_m, n, k, masked, 64, ue8m0=ue8m0)


def test_fp8_m_grouped_gemm_nt_masked_alias():
    assert fg.fp8_m_grouped_gemm_nt_masked is fg.m_grouped_fp8_gemm_nt_masked


# ---------------------------------------------------------------------------------------------
# CPU: k-grouped
# ---------------------------------------------------------------------------------------------

def test_k_grouped_fp8_tn_contiguous():
    torch.manual_seed(5)
    run_k_grouped([128, 0, 256], 96, 160)


def test_k_grouped_fp8_nt_contiguous():
    torch.manual_seed(6)
    run_k_grouped([256, 0, 128], 64, 192, flat_k_major=True)


def test_k_grouped_all_empty_copies_c():
    ks, m, n = [0, 0], 32, 160
    a, b, c, d, ks_tensor = generate_k_grouped(ks, m, n)
    fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=c)
    assert torch.equal(d, c)


# ---------------------------------------------------------------------------------------------
# CPU: BF16 twins
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("use_psum_layout", [False, True], ids=["per_row", "psum"])
def test_m_grouped_bf16_contiguous(use_psum_layout):
    torch.manual_seed(7)
    d_nt = run_m_grouped_contiguous([70, 0, 128], 160, 128, bf16=True, use_psum_layout=use_psum_layout)
    torch.manual_seed(7)
    d_nn = run_m_grouped_contiguous([70, 0, 128], 160, 128, bf16=True, nn=True, use_psum_layout=use_psum_layout)
    assert torch.equal(d_nt, d_nn)


def test_m_grouped_bf16_nt_masked():
    torch.manual_seed(8)
    run_m_grouped_masked(2, 64, 160, 128, [40, 200], 48, bf16=True)


def test_k_grouped_bf16_tn_contiguous():
    torch.manual_seed(9)
    run_k_grouped([128, 0, 128], 64, 160, bf16=True)

# ---------------------------------------------------------------------------------------------
# CPU: bad input (each raises before launch, naming the argument)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def contiguous_inputs():
    torch.manual_seed(10)
    return generate_m_grouped_contiguous([100, 128], 160, 256)


@pytest.fixture(scope="module")
def masked_inputs():
    torch.manual_seed(11)
    return generate_m_grouped_masked(2, 64, 160, 256, [10, 20])


@pytest.fixture(scope="module")
def k_grouped_inputs():
    torch.manual_seed(12)
    return generate_k_grouped([128, 128], 32, 160)


def test_bad_group_id_out_of_range(contiguous_inputs):
    a, b, layout, d, _ = contiguous_inputs
    bad = layout.clone()
    bad[3] = 2
    with pytest.raises(ValueError, match=r"grouped_layout\[3\] = 2 is not a group id.*\[0, 2\)"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), bad)
    bad[3] = -2
    with pytest.raises(ValueError, match=r"grouped_layout\[3\] = -2"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), bad)


def test_bad_unaligned_segment(contiguous_inputs):
    a, b, layout, d, _ = contiguous_inputs
    bad = layout.clone()
    bad[100:228] = 1  # group 1 starts right after group 0's 100 rows
    bad[228:] = -1
    with pytest.raises(ValueError, match=r"group 1 start at row 100.*multiple of.*128"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), bad)


def test_bad_psum_layout(contiguous_inputs):
    a, b, _, d, _ = contiguous_inputs
    with pytest.raises(ValueError, match=r"grouped_layout \(psum\) \[1\] = 120.*>= 128"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), torch.tensor([100, 120], dtype=torch.int32),
                                            use_psum_layout=True)
    with pytest.raises(ValueError, match=r"ends at row 300 but a has only M_total=256"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), torch.tensor([100, 300], dtype=torch.int32),
                                            use_psum_layout=True)
    with pytest.raises(ValueError, match=r"grouped_layout must be int32 \[2\]"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), torch.zeros(256, dtype=torch.int32),
                                            use_psum_layout=True)


def test_bad_grouped_layout_dtype_and_length(contiguous_inputs):
    a, b, layout, d, _ = contiguous_inputs
    with pytest.raises(TypeError, match=r"grouped_layout must have dtype torch.int32; got torch.int64"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), layout.long())
    with pytest.raises(ValueError, match=r"grouped_layout must be int32 \[256\].*got shape \(255,\)"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), layout[:-1])


def test_bad_contiguous_group_counts_and_dtypes(contiguous_inputs):
    a, b, layout, d, _ = contiguous_inputs
    with pytest.raises(ValueError, match=r"b\[1\]: expected float32 scales of shape \(2, 2, 2\)"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, (b[0], b[1][:1]), d.clone(), layout)
    with pytest.raises(TypeError, match=r"a\[0\] must have dtype"):
        fg.m_grouped_fp8_gemm_nt_contiguous((a[0].to(torch.bfloat16), a[1]), b, d.clone(), layout)
    with pytest.raises(TypeError, match=r"d must have dtype torch.bfloat16; got torch.float32"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.float(), layout)
    with pytest.raises(ValueError, match=r"b\[0\] must be 3-D \[G, N, K\]"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, (b[0][0], b[1]), d.clone(), layout)
    with pytest.raises(ValueError, match=r"b\[0\] must be \[G, N, K\] with a's K=256"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, (b[0][:, :, :128], b[1]), d.clone(), layout)
    with pytest.raises(ValueError, match=r"supports recipe \(1, 128, 128\) only"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.clone(), layout, recipe=(1, 1, 128))
    with pytest.raises(TypeError, match=r"a\[1\] and b\[1\] must both be float32"):
        packed = get_mn_major_tma_aligned_packed_ue8m0_tensor(ceil_to_ue8m0(a[1]))
        fg.m_grouped_fp8_gemm_nt_contiguous((a[0], packed), b, d.clone(), layout)
    with pytest.raises(ValueError, match=r"d must have shape \(256, 160\)"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d[:, :128].clone(), layout)


def test_bad_masked_inputs(masked_inputs):
    a, b, masked_m, d = masked_inputs
    with pytest.raises(ValueError, match=r"b\[0\] has 1 groups but a\[0\] has 2"):
        fg.m_grouped_fp8_gemm_nt_masked(a, (b[0][:1], b[1][:1]), d.clone(), masked_m, 16)
    with pytest.raises(ValueError, match=r"masked_m must be int32 \[2\].*got shape \(3,\)"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d.clone(), torch.zeros(3, dtype=torch.int32), 16)
    with pytest.raises(TypeError, match=r"masked_m must have dtype torch.int32; got torch.int64"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d.clone(), masked_m.long(), 16)
    with pytest.raises(ValueError, match=r"expected_m must be an int >= 1; got 0"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d.clone(), masked_m, 0)
    with pytest.raises(ValueError, match=r"d must have shape \(2, 64, 160\)"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d[:, :32].clone(), masked_m, 16)
    with pytest.raises(ValueError, match=r"a\[1\]: expected float32 scales of shape \(2, 64, 2\)"):
        fg.m_grouped_fp8_gemm_nt_masked((a[0], a[1][:, :32]), b, d.clone(), masked_m, 16)
    with pytest.raises(TypeError, match=r"a must have dtype torch.bfloat16"):
        fg.m_grouped_bf16_gemm_nt_masked(a[0], b[0], d.clone(), masked_m, 16)


def test_bad_k_grouped_ks(k_grouped_inputs):
    a, b, c, d, ks_tensor = k_grouped_inputs
    with pytest.raises(ValueError, match=r"ks_cpu\[0\] = 100: every group's K must be a non-negative multiple of.*128"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), [100, 156], ks_tensor, c=c)
    with pytest.raises(ValueError, match=r"sum\(ks_cpu\) = 128 but a\[0\] holds K = 256"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), [128, 0], ks_tensor, c=c)
    with pytest.raises(ValueError, match=r"ks_cpu has 3 groups but d has 2"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), [128, 128, 0], ks_tensor, c=c)
    with pytest.raises(TypeError, match=r"ks_cpu must be a list of ints"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), ks_tensor, ks_tensor, c=c)
    with pytest.raises(ValueError, match=r"grouped_layout holds \[256, 0\] but ks_cpu is \[128, 128\]"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), [128, 128], torch.tensor([256, 0], dtype=torch.int32),
                                            c=c)
    with pytest.raises(ValueError, match=r"grouped_layout must be int32 \[2\]"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), [128, 128], ks_tensor[:1], c=c)


def test_bad_k_grouped_operands(k_grouped_inputs):
    a, b, c, d, ks_tensor = k_grouped_inputs
    ks = [128, 128]
    with pytest.raises(ValueError, match=r"c is required by k-grouped GEMMs"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), ks, ks_tensor)
    with pytest.raises(TypeError, match=r"d must have dtype torch.float32; got torch.bfloat16"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.to(torch.bfloat16), ks, ks_tensor, c=c)
    with pytest.raises(TypeError, match=r"a\[1\]: k-grouped FP8 GEMMs take float32 scales"):
        fg.k_grouped_fp8_gemm_tn_contiguous((a[0], a[1].to(torch.int32)), b, d.clone(), ks, ks_tensor, c=c)
    with pytest.raises(ValueError, match=r"b\[1\] must be float32 \[sum\(ks\)/128, N\] = \(2, 160\)"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, (b[0], b[1][:1]), d.clone(), ks, ks_tensor, c=c)
    with pytest.raises(ValueError, match=r"supports recipe \(1, 1, 128\) only"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), ks, ks_tensor, c=c, recipe=(1, 128, 128))
    with pytest.raises(ValueError, match=r"c must have d's shape"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d.clone(), ks, ks_tensor, c=c[:1])
    with pytest.raises(ValueError, match=r"a\[0\] must hold sum\(ks\) \* M = 256 \* 32 = 8192 elements"):
        fg.k_grouped_fp8_gemm_nt_contiguous((a[0].reshape(-1)[:100], a[1].T), (b[0].reshape(-1), b[1].T),
                                            d.clone(), ks, ks_tensor, c=c)


def test_contiguous_config_block_m_divides_alignment():
    from finegemm.kernels.portable.m_grouped import contiguous_config

    assert contiguous_config(PortableConfig(256, 128, 128, 8, 3, 8), 128).block_m == 128
    assert contiguous_config(PortableConfig(128, 128, 128, 8, 3, 8), 32).block_m == 32
    kept = PortableConfig(64, 64, 128, 4, 1, 1)
    assert contiguous_config(kept, 128) is kept


# ---------------------------------------------------------------------------------------------
# GPU (DESIGN.md §7 shapes; run with `pytest -m gpu` on the H200)
# ---------------------------------------------------------------------------------------------

GPU_NK = [(4096, 7168), (7168, 2048)]


def _random_rows(num_groups: int, expected_m: int, rng: random.Random) -> list[int]:
    return [int(expected_m * rng.uniform(0.7, 1.3)) for _ in range(num_groups)]


def _gpu_contiguous_row_cases():
    rng = random.Random(0)
    for num_groups, expected_m in [(4, 8192), (8, 4096)]:
        yield pytest.param(_random_rows(num_groups, expected_m, rng), id=f"{num_groups}x{expected_m}")
    with_empty = _random_rows(8, 4096, rng)
    with_empty[0] = with_empty[5] = 0
    yield pytest.param(with_empty, id="8x4096_empty")
    yield pytest.param([0, 0, 16384 + 77, 0], id="one_giant")


@pytest.mark.gpu
@pytest.mark.parametrize("use_psum_layout", [False, True], ids=["per_row", "psum"])
@pytest.mark.parametrize("n,k", GPU_NK)
@pytest.mark.parametrize("rows", list(_gpu_contiguous_row_cases()))
def test_gpu_m_grouped_fp8_contiguous(rows, n, k, use_psum_layout):
    torch.manual_seed(0)
    run_m_grouped_contiguous(rows, n, k, use_psum_layout=use_psum_layout, device="cuda")


@pytest.mark.gpu
def test_gpu_m_grouped_fp8_nn_contiguous_ue8m0():
    torch.manual_seed(1)
    run_m_grouped_contiguous(_random_rows(4, 4096, random.Random(1)), 4096, 7168, nn=True, ue8m0=True,
                             device="cuda")


@pytest.mark.gpu
def test_gpu_contiguous_content_checks_need_debug(monkeypatch):
    torch.manual_seed(2)
    a, b, layout, d, row_groups = generate_m_grouped_contiguous([300, 200], 4096, 2048, device="cuda")
    bad = layout.clone()
    bad[:128] = 9  # out of range: only FINEGEMM_DEBUG=1 reads grouped_layout on the host
    monkeypatch.setenv("FINEGEMM_DEBUG", "1")
    with pytest.raises(ValueError, match=r"grouped_layout\[0\] = 9 is not a group id"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, bad)
    monkeypatch.setenv("FINEGEMM_DEBUG", "0")
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, bad)  # no check, no sync: the kernel treats the rows as padding
    torch.cuda.synchronize()
    assert bool((d[:128] == 0).all())
    row_groups[:128] = -1
    _check_contiguous(d, ref.m_grouped_fp8_gemm_nt_contiguous(a, b, layout), row_groups, FP8_BOUND)


def _gpu_masked_cases():
    # (num_groups, max_m, expected_m): decode shapes, 1-32 experts x 64-1024 rows.
    yield 1, 64, 64
    yield 6, 1024, 768
    yield 32, 256, 192
    yield 32, 1024, 64


@pytest.mark.gpu
@pytest.mark.parametrize("n,k", GPU_NK)
@pytest.mark.parametrize("num_groups,max_m,expected_m", list(_gpu_masked_cases()))
def test_gpu_m_grouped_fp8_masked(num_groups, max_m, expected_m, n, k):
    torch.manual_seed(3)
    rng = random.Random(num_groups * max_m)
    masked = [min(int(expected_m * rng.uniform(0.7, 1.3)), max_m) for _ in range(num_groups)]
    if num_groups > 2:
        masked[1] = 0
        masked[2] = max_m + 50  # clamped to max_m in the kernel
    run_m_grouped_masked(num_groups, max_m, n, k, masked, expected_m, device="cuda")


@pytest.mark.gpu
def test_gpu_m_grouped_fp8_masked_cuda_graph():
    torch.manual_seed(4)
    num_groups, max_m, n, k, expected_m = 8, 256, 4096, 7168, 128
    a, b, masked_m, d = generate_m_grouped_masked(num_groups, max_m, n, k, [max_m] * num_groups, device="cuda")
    # Path B: scales already in the required layout, so the captured call allocates and copies nothing.
    sfa = transform_sf_into_required_layout(a[1], max_m, k, (1, 128, 128), num_groups=num_groups, is_sfa=True)
    a = (a[0], sfa)
    fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)
    rng = random.Random(5)
    for _ in range(3):
        masked = [rng.randint(0, max_m + 20) for _ in range(num_groups)]
        masked[0] = 0
        masked_m.copy_(torch.tensor(masked, dtype=torch.int32))  # new contents, same buffer
        d.fill_(POISON)
        graph.replay()
        torch.cuda.synchronize()
        _check_masked(d, ref.m_grouped_fp8_gemm_nt_masked(a, b, masked_m), masked, FP8_BOUND)


def _gpu_k_grouped_cases():
    rng = random.Random(6)
    for num_groups, m, n, expected_k in [(8, 768, 2048, 128), (4, 4096, 7168, 8192), (8, 7168, 2048, 4096)]:
        ks = [_align(max(1, int(expected_k * rng.uniform(0.7, 1.3)))) for _ in range(num_groups)]
        ks[rng.randrange(num_groups)] = 0
        yield pytest.param(ks, m, n, id=f"{num_groups}x{m}x{n}x{expected_k}")


@pytest.mark.gpu
@pytest.mark.parametrize("flat_k_major", [False, True], ids=["tn", "nt"])
@pytest.mark.parametrize("ks,m,n", list(_gpu_k_grouped_cases()))
def test_gpu_k_grouped_fp8(ks, m, n, flat_k_major):
    torch.manual_seed(7)
    run_k_grouped(ks, m, n, flat_k_major=flat_k_major, device="cuda")


@pytest.mark.gpu
def test_gpu_bf16_grouped():
    torch.manual_seed(8)
    rows = _random_rows(4, 4096, random.Random(8))
    rows[1] = 0
    run_m_grouped_contiguous(rows, 4096, 2048, bf16=True, device="cuda")
    run_m_grouped_contiguous(rows, 4096, 2048, bf16=True, nn=True, use_psum_layout=True, device="cuda")
    run_m_grouped_masked(4, 1024, 7168, 2048, [100, 0, 1024, 1500], 512, bf16=True, device="cuda")
    run_k_grouped([1024, 0, 2048, 512], 4096, 2048, bf16=True, device="cuda")


# ---------------------------------------------------------------------------------------------
# CPU: the grouped kernels compile for sm_90 (the interpreter alone misses compile-only errors)
# ---------------------------------------------------------------------------------------------

COMPILE_SCRIPT = textwrap.dedent('''
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from finegemm.kernels.portable.m_grouped import _m_grouped_contiguous_kernel, _m_grouped_masked_kernel
    from finegemm.kernels.portable.k_grouped import _k_grouped_kernel

    def compile_one(kernel, types, constexprs):
        names = kernel.arg_names
        sig = {n: ("constexpr" if n in constexprs else types.get(n, "i32")) for n in names}
        src = ASTSource(fn=kernel, signature=sig, constexprs={(names.index(k),): v for k, v in constexprs.items()})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=8, num_stages=3))
        assert "mma" in k.asm["ptx"], f"no tensor-core instruction in {kernel.__name__}"

    tiles = dict(BLOCK_M=128, BLOCK_N=128, GROUP_M=8)
    fp8 = dict(a_ptr="*fp8e4nv", b_ptr="*fp8e4nv", d_ptr="*bf16")
    bf16 = dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*bf16", sfa_ptr="*bf16", sfb_ptr="*bf16")
    for psum, packed in ((False, False), (True, True)):
        sf = "*i32" if packed else "*fp32"
        compile_one(_m_grouped_contiguous_kernel, dict(fp8, sfa_ptr=sf, sfb_ptr=sf, layout_ptr="*i32"),
                    dict(USE_PSUM=psum, IS_FP8=True, SF_PACKED=packed, UPCAST=False, ALIGN=128, BLOCK_G=8,
                         BLOCK_K=128, **tiles))
    compile_one(_m_grouped_contiguous_kernel, dict(bf16, layout_ptr="*i32"),
                dict(USE_PSUM=False, IS_FP8=False, SF_PACKED=False, UPCAST=False, ALIGN=128, BLOCK_G=8,
                     BLOCK_K=64, **tiles))
    compile_one(_m_grouped_masked_kernel, dict(fp8, sfa_ptr="*fp32", sfb_ptr="*fp32", masked_m_ptr="*i32"),
                dict(IS_FP8=True, SF_PACKED=False, UPCAST=False, BLOCK_K=128, **tiles))
    compile_one(_m_grouped_masked_kernel, dict(bf16, masked_m_ptr="*i32"),
                dict(IS_FP8=False, SF_PACKED=False, UPCAST=False, BLOCK_K=64, **tiles))
    for flat in (False, True):
        compile_one(_k_grouped_kernel, dict(fp8, d_ptr="*fp32", c_ptr="*fp32", sfa_ptr="*fp32", sfb_ptr="*fp32",
                                            ks_ptr="*i32"),
                    dict(FLAT_K_MAJOR=flat, IS_FP8=True, UPCAST=False, BLOCK_G=8, BLOCK_K=128, **tiles))
    compile_one(_k_grouped_kernel, dict(bf16, d_ptr="*fp32", c_ptr="*fp32", sfa_ptr="*fp32", sfb_ptr="*fp32",
                                        ks_ptr="*i32"),
                dict(FLAT_K_MAJOR=False, IS_FP8=False, UPCAST=False, BLOCK_G=8, BLOCK_K=64, **tiles))
    print("compiled")
''')


def test_grouped_kernels_compile_for_sm90():
    # A subprocess with TRITON_INTERPRET=0: this process defined the kernels as interpreted functions.
    out = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]


def test_sm90_masked_declines_unpacked_views():
    """A masked call with a padded d (or a) view is valid; the sm90 kernel needs packed views, so such a
    call plans the portable kernel (H200 run 2026-12-03: it raised inside the sm90 launch before)."""
    from finegemm.kernels.sm90.dispatch_grouped import masked_layout_reason as _sm90_masked_layout_reason

    a = torch.empty(2, 64, 256)
    d = torch.empty(2, 65, 128)[:, :64]
    assert _sm90_masked_layout_reason(a, torch.empty(2, 64, 128)) is None
    assert "d strides (8320, 128, 1)" in _sm90_masked_layout_reason(a, d)
    assert "a[0] strides" in _sm90_masked_layout_reason(torch.empty(2, 65, 256)[:, :64], torch.empty(2, 64, 128))
