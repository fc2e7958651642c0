"""Portable batched GEMM over strided views: ``D[g] = C[g] + sum_r A[g + r] @ B[g + r]^T`` (the einsum kernels).

Every operand is a 3-D view ``[batch, rows, K]`` (A, B) or ``[batch, M, N]`` (D, C) with free strides, so
each of DeepGEMM's hard-coded einsum expressions is a permutation of its tensors' dims (api/einsum.py).
``SUM_BATCHES`` > 1 (``bmk,bnk->mn``): one output summed over that many consecutive batches (D's batch
stride 0, a one-batch grid).

BF16 operands accumulate in FP32 (``tl.dot``); FP8 ones take DeepGEMM's promotion: each 128-wide K block
into a fresh FP32 partial scaled by the per-token LHS scale ``sfa[g, m, kb]`` and the per-block RHS scale
``sfb[g, n // 128, kb]`` (FP32 scales).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...jit.heuristics import PortableConfig
from .gemm_fp8 import swizzled_tile
from .grouped_tile import tile_product


@triton.jit
def _batched_gemm_kernel(
    a_ptr, b_ptr, d_ptr, c_ptr, sfa_ptr, sfb_ptr,
    M, N, K, SUM_BATCHES,
    s_ag, s_am, s_ak, s_bg, s_bn, s_bk,
    s_dg, s_dm, s_dn, s_cg, s_cm, s_cn,
    s_sag, s_sam, s_sak, s_sbg, s_sbn, s_sbk,
    FP8: tl.constexpr, HAS_C: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    g0 = tl.program_id(1).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(0, SUM_BATCHES):
        g = g0 + r
        acc += tile_product(
            a_ptr + g * s_ag + rm.to(tl.int64)[:, None] * s_am, b_ptr + g * s_bg + rn.to(tl.int64)[None, :] * s_bn,
            s_ak, s_bk, K, m_mask, n_mask,
            sfa_ptr + g * s_sag, rm, s_sam, s_sak, 0, sfb_ptr + g * s_sbg, rn // 128, s_sbn, s_sbk, 0,
            FP8, False, UPCAST, BLOCK_M, BLOCK_N, BLOCK_K)
    out_mask = m_mask[:, None] & n_mask[None, :]
    if HAS_C:
        c = tl.load(c_ptr + g0 * s_cg + rm.to(tl.int64)[:, None] * s_cm + rn[None, :] * s_cn, mask=out_mask,
                    other=0.0)
        acc += c.to(tl.float32)
    d_ptrs = d_ptr + g0 * s_dg + rm.to(tl.int64)[:, None] * s_dm + rn[None, :] * s_dn
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=out_mask)


def batched_launch(
    a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None, config: PortableConfig,
    sfa: torch.Tensor | None = None, sfb: torch.Tensor | None = None, sum_batches: bool = False,
) -> tuple:
    """The launch ``(kernel, grid, args, kwargs)`` (kernels/sm90/launcher.py's form, so that it can be recorded) on
    validated views: a ``[G, M, K]``, b ``[G, N, K]`` (bf16, or e4m3 with fp32 ``sfa`` ``[G, M, ceil(K/128)]`` and
    ``sfb`` ``[G, ceil(N/128), ceil(K/128)]``), d ``[G, M, N]`` bf16/fp32 (with ``sum_batches``: ``[1, M, N]``, the
    sum over all G), c optional like d, read before d is written."""
    g, m, k = a.shape
    n = b.shape[1]
    c_arg = c if c is not None else d
    fp8 = sfa is not None
    sfa_arg = sfa if fp8 else a
    sfb_arg = sfb if fp8 else b
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), 1 if sum_batches else g)
    args = (a, b, d, c_arg, sfa_arg, sfb_arg, m, n, k, g if sum_batches else 1,
            *a.stride(), *b.stride(), *d.stride(), *c_arg.stride(), *sfa_arg.stride(), *sfb_arg.stride())
    kwargs = dict(FP8=fp8, HAS_C=c is not None, UPCAST=a.device.type == "cpu",
                  BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
                  num_warps=config.num_warps, num_stages=config.num_stages)
    return _batched_gemm_kernel, grid, args, kwargs


def launch_batched_gemm(*args, **kwargs) -> None:
    """Launch :func:`batched_launch`'s launch now (same arguments)."""
    kernel, grid, launch_args, launch_kwargs = batched_launch(*args, **kwargs)
    kernel[grid](*launch_args, **launch_kwargs)
