"""The producer partition of the sm90 FP8 GEMM: per K block it waits for a free ring slot, arms its full barrier and
issues the TMA loads of A and B (and the ring scales), for the dense and the m-grouped walks.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
)

from .. import gluon_compat
from ..l2_prefetch import prefetch_tile_l2, tensor_map_param
from .schedule import (
    BLOCK_K,
    _contiguous_group,
    _first_local_unit,
    _halves_of_tile,
    _masked_group_tiles,
    _num_k_blocks,
    _tile_coords,
    _unit_plan,
    _unit_tile,
    head_tile,
)

# B's tensor map as fp8_gemm_kernel's lowered parameter (a_desc takes 0-4): for the L2 prefetch's inline PTX
B_TENSOR_MAP: gl.constexpr = gl.constexpr(tensor_map_param("fp8_gemm_kernel", 5))


@gluon.jit
def _load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                    N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    sfa_desc=None, sfa_bufs=None, SFA_TMA: gl.constexpr = False, SF_PACKED: gl.constexpr = False,
                    layout_ptr=None, GROUPING: gl.constexpr = 0, NUM_GROUPS: gl.constexpr = 1,
                    GROUP_ROWS: gl.constexpr = 0, SFK_ROWS: gl.constexpr = 0, USE_PSUM: gl.constexpr = False,
                    ALIGN: gl.constexpr = 128, sfb_bufs=None, SFB_TMA: gl.constexpr = False,
                    K_DYN: gl.constexpr = False, SPLIT_TAIL: gl.constexpr = False, B_PREFETCH: gl.constexpr = 0,
                    b1_desc=None, b1_bufs=None, BLOCK_N1: gl.constexpr = 0, sfb_ptr=None, stride_sfb=0, sfa_ptr=None,
                    stride_sfa_k=0):
    if GROUPING != 0:
        _grouped_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K, BLOCK_M, BLOCK_N,
                                STAGES, GROUP_M, sfa_desc, sfa_bufs, SFA_TMA, SF_PACKED, layout_ptr, GROUPING,
                                NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM, ALIGN, B_PREFETCH)
    else:
        _dense_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K, BLOCK_M, BLOCK_N,
                              STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA, SF_PACKED, sfb_bufs, SFB_TMA,
                              K_DYN, SPLIT_TAIL, B_PREFETCH, b1_desc, b1_bufs, BLOCK_N1, sfb_ptr, stride_sfb, sfa_ptr,
                              stride_sfa_k)


@gluon.jit
def _ring_row(bufs, s):
    """Ring slot ``s`` of a ``[STAGES, 1, SIZE]`` scale ring as the flat ``[SIZE]`` view that
    :func:`_ring_scale` reads (which spells it out: routing it through here reorders that kernel's code enough for
    ptxas to spill 272 bytes in the 1d1d split-tail pick, tests/test_sm90_compile.py)."""
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    return gluon_compat.reinterpret(bufs.index(s), bufs.dtype, [bufs.shape[2]], flat)


@gluon.jit
def _copy_scale_row(bufs, s, ptr, stride_k, krow, off, LIMIT):
    """``cp.async`` by the producer warp of one K block's scales of a tile into ring slot ``s``:
    words ``off + [0, SIZE)`` of row ``krow`` of an MN-major ``[K/128 (packed: /4), MN]`` scale tensor, those past
    ``LIMIT`` zero-filled. The caller arrives on the slot's full barrier once they land
    (``async_copy.mbarrier_arrive``)."""
    SIZE: gl.constexpr = bufs.shape[2]
    layout: gl.constexpr = gl.BlockedLayout([SIZE // 32], [32], [1], [0])
    idx = off + gl.arange(0, SIZE, layout=layout)
    ptrs = ptr + krow * stride_k + idx
    mask = idx < LIMIT
    gluon_compat.cp_async_load(_ring_row(bufs, s), ptrs, mask=mask)


@gluon.jit
def _dense_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                          N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                          STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                          sfa_desc, sfa_bufs, SFA_TMA: gl.constexpr, SF_PACKED: gl.constexpr, sfb_bufs,
                          SFB_TMA: gl.constexpr, K_DYN: gl.constexpr, SPLIT_TAIL: gl.constexpr = False,
                          B_PREFETCH: gl.constexpr = 0, b1_desc=None, b1_bufs=None, BLOCK_N1: gl.constexpr = 0,
                          sfb_ptr=None, stride_sfb=0, sfa_ptr=None, stride_sfa_k=0):
    """``B_PREFETCH`` > 0: with each K block's loads, B's tile that many K blocks ahead (in the same work unit) is
    prefetched into L2 (:mod:`.l2_prefetch`). ``BLOCK_N1`` > 0: tiles ``BLOCK_N + BLOCK_N1`` wide, B's last
    ``BLOCK_N1`` rows of a tile in a second box (``b1_desc``) into ``b1_bufs``, on the same full barrier.
    ``SFB_TMA`` (the 1d1d tiles): the ring's scales (per-channel, and per-token with ``SFA_TMA``) are copied from
    ``sfb_ptr`` / ``sfa_ptr`` by ``cp.async`` after the slot's empty wait; each lane's copies complete on the slot's
    full barrier. Otherwise, with ``SFA_TMA``, the per-token scales come as TMA boxes on the full barrier."""
    num_kb = _num_k_blocks(a_desc, K, K_DYN)
    # A (and its ring scales) come in BOXES boxes of A_ROWS rows a stage: 1, or 3 at BLOCK_M 192
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    BOXES: gl.constexpr = BLOCK_M // A_ROWS
    # (1d1d tiles, the only ones with SFB_TMA, have one A box a stage: never BLOCK_M 192)
    SFA_CPASYNC: gl.constexpr = SFB_TMA and SFA_TMA
    # the ring scales that come as TMA boxes on the full barrier
    SFA_BOX: gl.constexpr = SFA_TMA and not SFA_CPASYNC
    nbytes: gl.constexpr = (BOXES * a_desc.block_type.nbytes + b_desc.block_type.nbytes
                            + (BOXES * sfa_desc.block_type.nbytes if SFA_BOX else 0)
                            + (b1_desc.block_type.nbytes if BLOCK_N1 > 0 else 0))
    TILE_N: gl.constexpr = BLOCK_N + BLOCK_N1
    kb_per_split = num_kb // SPLIT_K
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n: gl.constexpr = (N + TILE_N - 1) // TILE_N
    n_full, num_units = _unit_plan(num_pid_m * num_pid_n, SPLIT_K, SPLIT_TAIL)
    it = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        tile, split = _unit_tile(unit, n_full, SPLIT_K)
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * TILE_N
        kb0 = split * kb_per_split
        if SPLIT_K == 1:
            kb_count = num_kb
        else:
            kb_count = gl.where(unit < n_full, num_kb, kb_per_split)
        for kk in range(kb_count):
            s = it % STAGES
            phase = (it // STAGES) & 1
            kb = kb0 + kk
            # the MN-major scale tensors are [K/128 (packed: /4), M or N]: one row of the tile per stage
            krow = kb // 4 if SF_PACKED else kb
            mbarrier.wait(empty_bars.index(s), phase ^ 1)
            bar = full_bars.index(s)
            if SFB_TMA:
                _copy_scale_row(sfb_bufs, s, sfb_ptr, stride_sfb, krow, off_n, N)
                if SFA_CPASYNC:
                    _copy_scale_row(sfa_bufs, s, sfa_ptr, stride_sfa_k, krow, off_m, M)
                # each lane: one more pending arrival, made when its copies have landed
                async_copy.mbarrier_arrive(bar, increment_count=True)
            mbarrier.expect(bar, nbytes)
            for i in gl.static_range(BOXES):
                if SFA_BOX:
                    if BOXES == 1:
                        sfa_dst = sfa_bufs.index(s)
                    else:
                        sfa_dst = sfa_bufs.index(s).slice(i * A_ROWS, A_ROWS, dim=1)
                    gluon_compat.async_load(sfa_desc, [krow, off_m + i * A_ROWS], bar, sfa_dst)
            for i in gl.static_range(BOXES):
                gluon_compat.async_load(a_desc, [off_m + i * A_ROWS, kb * BLOCK_K], bar,
                                        a_bufs.index(s * BOXES + i))
            gluon_compat.async_load(b_desc, [off_n, kb * BLOCK_K], bar, b_bufs.index(s))
            if BLOCK_N1 > 0:
                gluon_compat.async_load(b1_desc, [off_n + BLOCK_N, kb * BLOCK_K], bar, b1_bufs.index(s))
            if B_PREFETCH > 0:
                if kk + B_PREFETCH < kb_count:
                    prefetch_tile_l2((kb + B_PREFETCH) * BLOCK_K, off_n, B_TENSOR_MAP)
            it += 1


@gluon.jit
def _load_tile(a_desc, b_desc, sfa_desc, a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it,
               a_row, b_row, sfa_row0, sfa_col, kb_count, STAGES: gl.constexpr, SFA_TMA: gl.constexpr,
               SF_PACKED: gl.constexpr, B_PREFETCH: gl.constexpr = 0, a_k0=0):
    """Producer of one grouped tile: ``kb_count`` K blocks of A rows ``a_row`` (from column ``a_k0``: the
    head-batched form's group offset), B rows ``b_row`` (and the tile's per-token scales, row ``sfa_row0 + kb``
    of the scale view, columns from ``sfa_col``); B's tile ``B_PREFETCH`` K blocks ahead prefetched into L2 with
    each block (see :func:`_dense_load_partition`)."""
    for kb in range(kb_count):
        s = it % STAGES
        mbarrier.wait(empty_bars.index(s), ((it // STAGES) & 1) ^ 1)
        bar = full_bars.index(s)
        if SFA_TMA:
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes + sfa_desc.block_type.nbytes)
            krow = kb // 4 if SF_PACKED else kb
            gluon_compat.async_load(sfa_desc, [sfa_row0 + krow, sfa_col], bar, sfa_bufs.index(s))
        else:
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        gluon_compat.async_load(a_desc, [a_row, a_k0 + kb * BLOCK_K], bar, a_bufs.index(s))
        gluon_compat.async_load(b_desc, [b_row, kb * BLOCK_K], bar, b_bufs.index(s))
        if B_PREFETCH > 0:
            if kb + B_PREFETCH < kb_count:
                prefetch_tile_l2((kb + B_PREFETCH) * BLOCK_K, b_row, B_TENSOR_MAP)
        it += 1
    return it


@gluon.jit
def _grouped_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                            N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                            STAGES: gl.constexpr, GROUP_M: gl.constexpr, sfa_desc, sfa_bufs,
                            SFA_TMA: gl.constexpr, SF_PACKED: gl.constexpr, layout_ptr, GROUPING: gl.constexpr,
                            NUM_GROUPS: gl.constexpr, GROUP_ROWS: gl.constexpr, SFK_ROWS: gl.constexpr,
                            USE_PSUM: gl.constexpr, ALIGN: gl.constexpr, B_PREFETCH: gl.constexpr = 0):
    """TMA producer of the m-grouped kernels: walks exactly the tiles the math partitions walk.

    Contiguous: A [M_total, K], B [G * N, K]; a tile of padding issues no load. Masked: A [G * max_m, K],
    the scale view [G * SFK_ROWS, max_m]; only tiles below ``masked_m[g]`` exist. Head-batched: A [M, G * K]
    (group g's K from column g * K), the scale view [G * SFK_ROWS, M]; every group's tiles.
    """
    num_kb: gl.constexpr = K // BLOCK_K
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    it = 0
    if GROUPING == 1:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = _tile_coords(unit, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_b = pid_n * BLOCK_N
            if BLOCK_M == 256:
                first, second, two, any_valid, lo, hi = _halves_of_tile(layout_ptr, off_m, M, NUM_GROUPS, USE_PSUM,
                                                                        ALIGN)
                it = _load_tile(a_desc, b_desc, sfa_desc, a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it,
                                off_m, first * N + off_b, 0, off_m, gl.where(any_valid, num_kb, 0), STAGES,
                                SFA_TMA, SF_PACKED, B_PREFETCH)
                if two:  # the second half's own group: the whole tile again with its B
                    it = _load_tile(a_desc, b_desc, sfa_desc, a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it,
                                    off_m, second * N + off_b, 0, off_m, num_kb, STAGES, SFA_TMA, SF_PACKED,
                                    B_PREFETCH)
            else:
                g, safe, valid, end = _contiguous_group(layout_ptr, off_m, NUM_GROUPS, USE_PSUM, ALIGN)
                kb_count = gl.where(valid, num_kb, 0)
                it = _load_tile(a_desc, b_desc, sfa_desc, a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it,
                                off_m, safe * N + off_b, 0, off_m, kb_count, STAGES, SFA_TMA, SF_PACKED,
                                B_PREFETCH)
    elif GROUPING == 2:
        g_start = 0
        for g in range(NUM_GROUPS):
            valid_rows, num_pid_m, tiles_g = _masked_group_tiles(layout_ptr, g, GROUP_ROWS, BLOCK_M, num_pid_n)
            local = _first_local_unit(g_start)
            while local < tiles_g:  # not range(): see _first_local_unit
                pid_m, pid_n = _tile_coords(local, num_pid_m, num_pid_n, GROUP_M)
                off_m = pid_m * BLOCK_M
                it = _load_tile(a_desc, b_desc, sfa_desc, a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it,
                                g * GROUP_ROWS + off_m, g * N + pid_n * BLOCK_N, g * SFK_ROWS, off_m, num_kb,
                                STAGES, SFA_TMA, SF_PACKED, B_PREFETCH)
                local += gl.num_programs(0)
            g_start += tiles_g
    else:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), NUM_GROUPS * num_pid_m * num_pid_n, gl.num_programs(0)):
            g, pid_m, pid_n = head_tile(unit, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            it = _load_tile(a_desc, b_desc, sfa_desc, a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it,
                            off_m, g * N + pid_n * BLOCK_N, g * SFK_ROWS, off_m, num_kb, STAGES, SFA_TMA, SF_PACKED,
                            B_PREFETCH, g * K)
