"""Portable k-grouped GEMMs (MoE weight gradients): ``D[g] = C[g] + A_g^T-ish @ B_g`` per group, FP32 out.

M and N are fixed; group ``g`` owns K range ``[k_start(g), k_start(g) + ks[g])`` of the
concatenated operands, ``k_start(g) = sum(ks[:g])``. Program ``(tile, g)`` reads ``ks`` from the
device tensor (``ks_tensor``), so the host never has to build offsets. Two storage forms:

- ``FLAT_K_MAJOR`` (DeepGEMM's SM90 ``k_grouped_fp8_gemm_nt_contiguous``): A is a flat buffer of
  ``sum(ks) * M`` elements where group ``g`` is a row-major ``[M, ks[g]]`` block starting at element
  ``k_start(g) * M`` (B alike with N); scales ``[M, sum(ks)/128]`` and ``[N, sum(ks)/128]``;
- strided (``k_grouped_*_tn_contiguous``): A ``[sum(ks), M]`` and B ``[sum(ks), N]`` with any
  strides (MN-major as DeepGEMM passes them); scales ``[sum(ks)/128, M]`` and ``[sum(ks)/128, N]``.

FP8 uses the 1d1d recipe: per-channel scales on both sides, one per 128 of K, promoted per K block.
``k_start`` and ``ks[g]`` are clamped to ``[0, SUM_K]`` so a ``ks_tensor`` that disagrees with the
host ``ks`` gives wrong numbers but never an out-of-bounds access. An empty group (``ks[g] == 0``)
gives ``D[g] = C[g]`` (0 without C).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...jit.heuristics import PortableConfig
from .gemm_fp8 import swizzled_tile
from .grouped_tile import tile_product


@triton.jit
def _k_grouped_kernel(
    a_ptr, b_ptr, c_ptr, d_ptr, sfa_ptr, sfb_ptr, ks_ptr,
    M, N, SUM_K, NUM_GROUPS,
    stride_am, stride_ak, stride_bn, stride_bk,
    stride_cg, stride_cm, stride_cn, stride_dg, stride_dm, stride_dn,
    stride_sfa_m, stride_sfa_k, stride_sfb_n, stride_sfb_k,
    FLAT_K_MAJOR: tl.constexpr, IS_FP8: tl.constexpr, UPCAST: tl.constexpr, HAS_C: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    g = tl.program_id(1)
    # This group's K range, from the device copy of ks (clamped: never outside [0, SUM_K)).
    offs_g = tl.arange(0, BLOCK_G)
    ks = tl.load(ks_ptr + offs_g, mask=offs_g < NUM_GROUPS, other=0)
    k_start = tl.minimum(tl.maximum(tl.sum(tl.where(offs_g < g, ks, 0), axis=0), 0), SUM_K)
    k_len = tl.minimum(tl.maximum(tl.load(ks_ptr + g), 0), SUM_K - k_start)
    k_start64 = k_start.to(tl.int64)

    pid_m, pid_n = swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    if FLAT_K_MAJOR:
        # Group g's A is a row-major [M, k_len] block at element k_start * M (B alike).
        a_rows = a_ptr + k_start64 * M + rm.to(tl.int64)[:, None] * k_len
        b_cols = b_ptr + k_start64 * N + rn.to(tl.int64)[None, :] * k_len
        acc = tile_product(
            a_rows, b_cols, 1, 1, k_len, m_mask, n_mask,
            sfa_ptr, rm, stride_sfa_m, stride_sfa_k, k_start // 128,
            sfb_ptr, rn, stride_sfb_n, stride_sfb_k, k_start // 128,
            IS_FP8, False, UPCAST, BLOCK_M, BLOCK_N, BLOCK_K,
        )
    else:
        a_rows = a_ptr + k_start64 * stride_ak + rm.to(tl.int64)[:, None] * stride_am
        b_cols = b_ptr + k_start64 * stride_bk + rn.to(tl.int64)[None, :] * stride_bn
        acc = tile_product(
            a_rows, b_cols, stride_ak, stride_bk, k_len, m_mask, n_mask,
            sfa_ptr, rm, stride_sfa_m, stride_sfa_k, k_start // 128,
            sfb_ptr, rn, stride_sfb_n, stride_sfb_k, k_start // 128,
            IS_FP8, False, UPCAST, BLOCK_M, BLOCK_N, BLOCK_K,
        )

    g64 = g.to(tl.int64)
    out_mask = m_mask[:, None] & n_mask[None, :]
    if HAS_C:
        c = tl.load(c_ptr + g64 * stride_cg + rm.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn,
                    mask=out_mask, other=0.0)
        acc += c.to(tl.float32)
    d_ptrs = d_ptr + g64 * stride_dg + rm.to(tl.int64)[:, None] * stride_dm + rn[None, :] * stride_dn
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=out_mask)


def launch_k_grouped(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor | None,
    d: torch.Tensor,
    ks_tensor: torch.Tensor,
    sum_k: int,
    sfa: torch.Tensor | None,
    sfb: torch.Tensor | None,
    flat_k_major: bool,
    config: PortableConfig,
) -> None:
    """Launch on validated tensors.

    flat_k_major: a / b are flat ``[sum_k * M]`` / ``[sum_k * N]`` buffers (see the module doc),
    sfa fp32 ``[M, sum_k/128]``, sfb fp32 ``[N, sum_k/128]``. Otherwise a ``[sum_k, M]``,
    b ``[sum_k, N]`` (any strides), sfa ``[sum_k/128, M]``, sfb ``[sum_k/128, N]``; ``sfa=None`` for
    bf16. c, d: fp32 ``[G, M, N]`` (c may be d; None: ``D[g] = A_g B_g`` with nothing read, an empty group 0);
    ks_tensor: int32 ``[G]``.
    """
    num_groups, m, n = d.shape
    is_fp8 = sfa is not None
    if flat_k_major:
        a_strides = (0, 0)
        b_strides = (0, 0)
        sfa_strides = (sfa.stride(0), sfa.stride(1))
        sfb_strides = (sfb.stride(0), sfb.stride(1))
    else:
        a_strides = (a.stride(1), a.stride(0))
        b_strides = (b.stride(1), b.stride(0))
        sfa_strides = (sfa.stride(1), sfa.stride(0)) if is_fp8 else (0, 0)
        sfb_strides = (sfb.stride(1), sfb.stride(0)) if is_fp8 else (0, 0)
    has_c = c is not None
    c = c if has_c else d
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), num_groups)
    _k_grouped_kernel[grid](
        a, b, c, d, sfa if is_fp8 else d, sfb if is_fp8 else d, ks_tensor,
        m, n, sum_k, num_groups,
        *a_strides, *b_strides,
        c.stride(0), c.stride(1), c.stride(2), d.stride(0), d.stride(1), d.stride(2),
        *sfa_strides, *sfb_strides,
        FLAT_K_MAJOR=flat_k_major, IS_FP8=is_fp8, UPCAST=not is_fp8 and a.device.type == "cpu", HAS_C=has_c,
        BLOCK_G=triton.next_power_of_2(max(num_groups, 1)),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
