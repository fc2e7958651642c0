"""Portable m-grouped GEMMs (MoE forward): contiguous and masked layouts, FP8 (1d2d) and BF16.

Every group (expert) shares N and K; only the rows differ.

Contiguous: A is ``[M_total, K]`` with the experts' rows concatenated, each expert segment starting
on a multiple of ``ALIGN`` (= ``get_mk_alignment_for_contiguous_layout()``, 128 by default) rows. A program
owns one ``BLOCK_M x BLOCK_N`` tile of D; since ``BLOCK_M`` divides ``ALIGN`` a tile never straddles
two segments, so the tile's expert is looked up once:

- per-row layout: ``grouped_layout[row0]`` of the tile's first row (``-1``: the tile is padding);
  a row whose own id differs from the tile's (``-1`` padding rows) is excluded;
- psum layout (``USE_PSUM``): ``grouped_layout[g]`` is the end row of expert ``g``'s valid rows,
  and expert ``g`` starts at ``align(grouped_layout[g - 1], ALIGN)``; the tile's expert is the
  number of experts whose aligned end is ``<= row0``, and its valid rows are those ``< end``.

Excluded rows (padding, or ids outside ``[0, G)``) read nothing and are written as 0; a tile with no
valid expert skips the K loop. Every index is bounded by M and G whatever the layout holds, so a
malformed ``grouped_layout`` gives wrong rows, never an out-of-bounds access.

Masked: A is ``[G, MAX_M, K]``; program ``(tile, g)`` computes rows ``< clamp(masked_m[g], 0, MAX_M)``
of D[g] and writes nothing else; a tile at or past that row count skips the K loop and stores
nothing. ``masked_m`` is read in the kernel only (CUDA-graph capturable).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...jit.heuristics import PortableConfig
from .gemm_fp8 import swizzled_tile
from .grouped_tile import tile_product

INT32_MAX = tl.constexpr(2**31 - 1)  # "no group ends here" for the padded lanes of the PSUM vector


@triton.jit
def _tile_coords(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's tile of an ``M x N`` output (grouped swizzle): first row, rows, columns, column mask."""
    pid_m, pid_n = swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    row0 = pid_m * BLOCK_M
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return row0, row0 + tl.arange(0, BLOCK_M), rn, rn < N


@triton.jit
def _m_grouped_contiguous_kernel(
    a_ptr, b_ptr, d_ptr, sfa_ptr, sfb_ptr, layout_ptr,
    M, N, K, NUM_GROUPS,
    stride_am, stride_ak, stride_bg, stride_bn, stride_bk, stride_dm, stride_dn,
    stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n, stride_sfb_k,
    USE_PSUM: tl.constexpr, IS_FP8: tl.constexpr, SF_PACKED: tl.constexpr, UPCAST: tl.constexpr,
    ALIGN: tl.constexpr, BLOCK_G: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    tl.static_assert(ALIGN % BLOCK_M == 0, "BLOCK_M must divide the contiguous-layout alignment")
    row0, rm, rn, n_mask = _tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    m_mask = rm < M

    # Group lookup: one expert per tile (segments are ALIGN-aligned and BLOCK_M divides ALIGN).
    if USE_PSUM:
        offs_g = tl.arange(0, BLOCK_G)
        g_mask = offs_g < NUM_GROUPS
        ends = tl.load(layout_ptr + offs_g, mask=g_mask, other=0)
        aligned_ends = tl.where(g_mask, (tl.maximum(ends, 0) + (ALIGN - 1)) // ALIGN * ALIGN, INT32_MAX)
        group = tl.sum((aligned_ends <= row0).to(tl.int32), axis=0)
        in_range = group < NUM_GROUPS
        safe_group = tl.where(in_range, group, 0)
        # the tile's scalar in_range folded into the row bound, not &-ed onto the row mask: Triton 3.9's
        # interpreter turns a block mask & a 0-d boolean into int32, which its loads refuse ("mask has
        # unsupported dtype")
        end = tl.where(in_range, tl.load(layout_ptr + safe_group), 0)
        row_valid = m_mask & (rm < end)
    else:
        group = tl.load(layout_ptr + row0)
        in_range = (group >= 0) & (group < NUM_GROUPS)
        safe_group = tl.where(in_range, group, 0)
        ids = tl.load(layout_ptr + rm, mask=m_mask, other=-1)
        # a row of this tile's group is valid when that group is an expert (ids == group: the same test per row)
        row_valid = m_mask & (ids == group) & (ids >= 0) & (ids < NUM_GROUPS)
    k_len = tl.where(in_range, K, 0)

    g64 = safe_group.to(tl.int64)
    a_rows = a_ptr + rm.to(tl.int64)[:, None] * stride_am
    b_cols = b_ptr + g64 * stride_bg + rn.to(tl.int64)[None, :] * stride_bn
    acc = tile_product(
        a_rows, b_cols, stride_ak, stride_bk, k_len, row_valid, n_mask,
        sfa_ptr, rm, stride_sfa_m, stride_sfa_k, 0,
        sfb_ptr + g64 * stride_sfb_g, rn // 128, stride_sfb_n, stride_sfb_k, 0,
        IS_FP8, SF_PACKED, UPCAST, BLOCK_M, BLOCK_N, BLOCK_K,
    )
    # Padding rows are written as zeros (documented in api/grouped.py).
    acc = tl.where(row_valid[:, None], acc, 0.0)
    d_ptrs = d_ptr + rm.to(tl.int64)[:, None] * stride_dm + rn[None, :] * stride_dn
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _m_grouped_masked_kernel(
    a_ptr, b_ptr, d_ptr, sfa_ptr, sfb_ptr, masked_m_ptr,
    MAX_M, N, K,
    stride_ag, stride_am, stride_ak, stride_bg, stride_bn, stride_bk, stride_dg, stride_dm, stride_dn,
    stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n, stride_sfb_k,
    IS_FP8: tl.constexpr, SF_PACKED: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    g = tl.program_id(1)
    # Valid rows of this group, clamped so that no index leaves [0, MAX_M).
    valid_m = tl.minimum(tl.maximum(tl.load(masked_m_ptr + g), 0), MAX_M)
    row0, rm, rn, n_mask = _tile_coords(MAX_M, N, BLOCK_M, BLOCK_N, GROUP_M)
    m_mask = rm < valid_m
    # Tiles at or past masked_m[g] run no K iteration and store nothing.
    k_len = tl.where(row0 < valid_m, K, 0)

    g64 = g.to(tl.int64)
    a_rows = a_ptr + g64 * stride_ag + rm.to(tl.int64)[:, None] * stride_am
    b_cols = b_ptr + g64 * stride_bg + rn.to(tl.int64)[None, :] * stride_bn
    acc = tile_product(
        a_rows, b_cols, stride_ak, stride_bk, k_len, m_mask, n_mask,
        sfa_ptr + g64 * stride_sfa_g, rm, stride_sfa_m, stride_sfa_k, 0,
        sfb_ptr + g64 * stride_sfb_g, rn // 128, stride_sfb_n, stride_sfb_k, 0,
        IS_FP8, SF_PACKED, UPCAST, BLOCK_M, BLOCK_N, BLOCK_K,
    )
    d_ptrs = d_ptr + g64 * stride_dg + rm.to(tl.int64)[:, None] * stride_dm + rn[None, :] * stride_dn
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def _scale_args(a: torch.Tensor, d: torch.Tensor, sfa: torch.Tensor | None, sfb: torch.Tensor | None,
                sfa_dims: int) -> tuple[tuple, tuple, dict]:
    """What both m-grouped kernels take for the scales: (sfa, sfb) pointers, their strides, the dtype
    constexprs. BF16 (``sfa=None``) passes ``d`` as a never-read stand-in pointer and zero strides."""
    is_fp8 = sfa is not None
    ptrs = (sfa, sfb) if is_fp8 else (d, d)
    strides = (*sfa.stride(), *sfb.stride()) if is_fp8 else (0,) * (sfa_dims + 3)
    flags = dict(IS_FP8=is_fp8, SF_PACKED=is_fp8 and sfa.dtype == torch.int32,
                 UPCAST=not is_fp8 and a.device.type == "cpu")
    return ptrs, strides, flags


def contiguous_config(config: PortableConfig, alignment: int) -> PortableConfig:
    """``config`` with BLOCK_M dividing ``alignment`` (a tile must not straddle two expert segments)."""
    if alignment % config.block_m == 0:
        return config
    block_m = max(bm for bm in (16, 32, 64, 128) if alignment % bm == 0 and bm <= config.block_m)
    return PortableConfig(block_m, config.block_n, config.block_k, config.num_warps, config.num_stages, config.group_m)


def launch_m_grouped_contiguous(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, grouped_layout: torch.Tensor,
                                sfa: torch.Tensor | None, sfb: torch.Tensor | None, use_psum_layout: bool,
                                alignment: int, config: PortableConfig) -> None:
    """Launch on validated tensors.

    a: ``[M, K]`` (e4m3/e5m2 with ``sfa``, or bf16 with ``sfa=None``), any strides; b: ``[G, N, K]``
    any strides; d: bf16 ``[M, N]``; grouped_layout: int32 ``[M]`` (expert per row, -1 padding) or,
    with ``use_psum_layout``, int32 ``[G]`` (cumulative end rows); sfa: fp32 ``[M, SFK]`` / int32
    ``[M, ceil(SFK/4)]``; sfb: ``[G, ceil(N/128), SFK]`` (same dtype). ``config.block_m`` must divide
    ``alignment``.
    """
    m, k = a.shape
    num_groups, n, _ = b.shape
    if alignment % config.block_m:
        raise ValueError(f"internal: BLOCK_M={config.block_m} does not divide the contiguous alignment {alignment}")
    sf_ptrs, sf_strides, flags = _scale_args(a, d, sfa, sfb, 2)
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
    _m_grouped_contiguous_kernel[grid](
        a, b, d, *sf_ptrs, grouped_layout,
        m, n, k, num_groups,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), d.stride(0), d.stride(1), *sf_strides,
        USE_PSUM=use_psum_layout, **flags, ALIGN=alignment, BLOCK_G=triton.next_power_of_2(max(num_groups, 1)),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )


def launch_m_grouped_masked(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, masked_m: torch.Tensor,
                            sfa: torch.Tensor | None, sfb: torch.Tensor | None, config: PortableConfig) -> None:
    """Launch on validated tensors.

    a: ``[G, MAX_M, K]`` (FP8 with ``sfa`` or bf16 with ``sfa=None``), any strides; b: ``[G, N, K]``;
    d: bf16 ``[G, MAX_M, N]``; masked_m: int32 ``[G]`` on the device; sfa: ``[G, MAX_M, SFK]`` fp32
    or int32 packed; sfb: ``[G, ceil(N/128), SFK]``.
    """
    num_groups, max_m, k = a.shape
    n = b.shape[1]
    sf_ptrs, sf_strides, flags = _scale_args(a, d, sfa, sfb, 3)
    grid = (triton.cdiv(max_m, config.block_m) * triton.cdiv(n, config.block_n), num_groups)
    _m_grouped_masked_kernel[grid](
        a, b, d, *sf_ptrs, masked_m,
        max_m, n, k,
        a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
        d.stride(0), d.stride(1), d.stride(2), *sf_strides, **flags,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
