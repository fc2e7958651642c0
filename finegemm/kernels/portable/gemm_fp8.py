"""Portable FP8 GEMM with fine-grained scales, both recipes, any operand majors.

``D[m, n] = C[m, n] + sum_kb (A_kb @ B_kb^T)[m, n] * sfa[m, kb] * sfb[., kb]`` where every
128-wide K block ``kb`` is multiplied into a fresh FP32 accumulator (``tl.dot``) and then
*promoted*: scaled by the per-token LHS scale and the RHS scale and added to the running FP32
result (DESIGN.md §1). The RHS scale is per 128x128 block (recipe ``(1, 128, 128)``, read per
column as ``sfb[n // 128, kb]`` so a tile straddling two scale blocks is right) or per channel
(recipe ``(1, 1, 128)``, ``sfb[n, kb]``).

Any M, N, K >= 1 (masked tails); strides are free, so K-major and MN-major operands run through the
same kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...jit.heuristics import PortableConfig
from .scales import load_scale


@triton.jit
def swizzled_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile (pid_m, pid_n) of program ``pid``: GROUP_M M tiles walk N together so B stays in L2."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    group = pid // per_group
    first_m = group * GROUP_M
    rows_in_group = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group
    return pid_m, pid_n


@triton.jit
def _fp8_gemm_kernel(
    a_ptr, b_ptr, d_ptr, c_ptr, sfa_ptr, sfb_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk,
    stride_dm, stride_dn, stride_cm, stride_cn,
    stride_sfa_m, stride_sfa_k, stride_sfb_n, stride_sfb_k,
    SF_PACKED: tl.constexpr, SFB_PER_BLOCK: tl.constexpr, HAS_C: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    HEAD_LEFT: tl.constexpr = 0, HEAD_MID: tl.constexpr = 0, HEAD_RIGHT: tl.constexpr = 0,
):
    pid_m, pid_n = swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    a_rows = a_ptr + rm.to(tl.int64)[:, None] * stride_am
    b_cols = b_ptr + rn.to(tl.int64)[None, :] * stride_bn
    sfb_rows = rn // 128 if SFB_PER_BLOCK else rn

    result = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        rk = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        k_mask = rk < K
        a = tl.load(a_rows + rk.to(tl.int64)[None, :] * stride_ak, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_cols + rk.to(tl.int64)[:, None] * stride_bk, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        partial = tl.dot(a, b, out_dtype=tl.float32)
        sa = load_scale(sfa_ptr, rm, kb, stride_sfa_m, stride_sfa_k, m_mask, SF_PACKED)
        sb = load_scale(sfb_ptr, sfb_rows, kb, stride_sfb_n, stride_sfb_k, n_mask, SF_PACKED)
        result += partial * (sa[:, None] * sb[None, :])

    out_mask = m_mask[:, None] & n_mask[None, :]
    if HAS_C:
        c = tl.load(c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn, mask=out_mask, other=0.0)
        result += c.to(tl.float32)
    if HEAD_MID > 0:  # fp8_gemm_nt_skip_head_mid: each head's columns skip HEAD_MID after its first HEAD_LEFT
        dn = rn + (rn + HEAD_RIGHT) // (HEAD_LEFT + HEAD_RIGHT) * HEAD_MID
    else:
        dn = rn
    d_ptrs = d_ptr + rm.to(tl.int64)[:, None] * stride_dm + dn[None, :] * stride_dn
    tl.store(d_ptrs, result.to(d_ptr.dtype.element_ty), mask=out_mask)


def launch_fp8_gemm(
    a: torch.Tensor,
    sfa: torch.Tensor,
    b: torch.Tensor,
    sfb: torch.Tensor,
    d: torch.Tensor,
    c: torch.Tensor | None,
    sfb_per_block: bool,
    config: PortableConfig,
    head_splits: tuple[int, int, int] | None = None,
) -> None:
    """Launch on validated tensors.

    a: e4m3 ``[M, K]`` any strides; b: e4m3 ``[N, K]`` any strides; sfa: ``[M, SFK]`` fp32 or int32
    packed ``[M, ceil(SFK/4)]``; sfb: ``[ceil(N/128) or N, SFK]`` (same dtype as sfa); d: bf16 or fp32
    ``[M, N]``; c: optional ``[M, N]`` added in fp32. ``head_splits`` ``(left, mid, right)``: d is
    ``[M, N + N / (left + right) * mid]`` and GEMM column ``n`` of head ``n // (left + right)`` lands past a
    gap of ``mid`` columns when it is not among the head's first ``left`` (no ``c`` then).
    """
    left, mid, right = head_splits or (0, 0, 0)
    m, k = a.shape
    n = b.shape[0]
    packed = sfa.dtype == torch.int32
    c_arg = c if c is not None else d
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
    _fp8_gemm_kernel[grid](
        a, b, d, c_arg, sfa, sfb,
        m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        d.stride(0), d.stride(1), c_arg.stride(0), c_arg.stride(1),
        sfa.stride(0), sfa.stride(1), sfb.stride(0), sfb.stride(1),
        SF_PACKED=packed, SFB_PER_BLOCK=sfb_per_block, HAS_C=c is not None,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        HEAD_LEFT=left, HEAD_MID=mid, HEAD_RIGHT=right,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
