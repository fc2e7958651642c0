"""Hopper BF16 GEMM: warp-specialized, persistent, TMA + async WGMMA accumulating over all of K (Gluon).

``D[M, N] = C[M, N] + A[M, K] @ B[N, K]^T`` with bf16 operands, FP32 accumulation (the tensor cores'
full FP32 accumulator: no promotion is needed for BF16), optional ``C`` (bf16 or fp32) added in FP32,
bf16 or fp32 ``D`` (row-major, rows 16-byte aligned).

Operand majors (all four DeepGEMM layouts, no copies):
  - ``A_MN_MAJOR=False``: A stored ``[M, K]`` K-contiguous; TMA box ``[64, BLOCK_K]`` per warpgroup.
  - ``A_MN_MAJOR=True``: A stored as ``A^T [K, M]`` M-contiguous; box ``[BLOCK_K, 64]``, handed to
    WGMMA as the transposed view ``[64, BLOCK_K]`` (16-bit WGMMA reads MN-major smem operands).
  - ``B_MN_MAJOR=False``: B stored ``[N, K]``; box ``[BLOCK_N, BLOCK_K]``, permuted view ``[K, N]``.
  - ``B_MN_MAJOR=True``: B stored as ``B^T [K, N]``; box ``[BLOCK_K, BLOCK_N]`` used as it is.

Roles (``gl.warp_specialize``), like :mod:`.gemm_1d2d`:
  - producer: 1 warp, ``setmaxnreg.dec`` to 40. Walks the persistent work-unit sequence; per
    ``BLOCK_K`` (64) slice of K waits ``empty[s]``, arms ``full[s]`` with the stage's bytes and issues
    one TMA load of A per math warpgroup and one of B.
  - math: one warpgroup per 64 rows of the tile, each its own partition (``setmaxnreg.inc`` 232).
    Per K slice: wait ``full[s]``, issue ``wgmma.mma_async`` (m64 n``BLOCK_N`` k16, 4 per slice)
    into the running accumulator, wait until only this one is in flight, release the previous
    slice's ``empty``. Epilogue: ``C`` in FP32, cast, registers -> smem -> TMA store left in flight
    while the next tile's main loop runs.

Split-K (``SPLIT_K > 1``, small M): work units are (tile, K split) pairs; each stores its FP32 partial
to a workspace ``[SPLIT_K * M_pad, N]`` and :func:`splitk_reduce_kernel` sums the splits in a fixed
order (deterministic), adds ``C`` and casts.

Shared memory: ``STAGES`` x (``BLOCK_M`` x 64 + ``BLOCK_N`` x 64) bf16 plus the ``BLOCK_M x BLOCK_N`` D
tile. K needs no alignment beyond TMA's 16-byte strides: the last K slice is zero-filled by TMA.

Tiles whose width is not a power of two (``BLOCK_N1`` > 0, e.g. 144 = 128 + 16): Gluon tensors and TMA boxes
need power-of-two shapes, so the tile's columns are two blocks, each with its own B box and ring buffer, WGMMA and
accumulator, D staging tile and D box (:func:`_mma_k_range` with ``BLOCK_N1``).

m-grouped MoE forms (:func:`bf16_grouped_gemm_kernel`, ``GROUPING`` 1 contiguous / 2 masked): the same
ring, roles and K loops (:func:`_load_k_range`, :func:`_mma_k_range`) over a grouped persistent
schedule: gemm_1d2d's device-side group lookup per M tile (contiguous: per-row ids with -1 padding or
PSUM ends; padding tiles run no K slice and store zeros, rows of another group are written as 0) and
its walk over only the valid tiles of each group (masked: ``masked_m`` read on the device, rows at or
past it never written, partial 64-row waves stored with a row mask). B ``[G, N, K]`` is one
``[G * N, K]`` descriptor, or for the ``nn`` form (N-major B) ``[G * K, N]`` read as ``B_MN_MAJOR``
boxes. A separate entry keeps :func:`bf16_gemm_kernel`'s signature (and its compiled code) unchanged.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.extra.cuda import gdc_wait

from . import gluon_compat
from .gemm_1d2d import (
    _contiguous_group,
    _d_rows,
    _first_local_unit,
    _masked_group_tiles,
    _prefetch_c,
    _rows_of_group,
    _store_masked_wave,
    _store_wave,
    _tile_coords,
    head_tile,
    launch_dependents,
    ring_barriers,
)
from .l2_prefetch import prefetch_tile_l2, tensor_map_param

# Rows of the tile each math warpgroup owns (one m64 WGMMA row block).
WG_M: tl.constexpr = tl.constexpr(64)
# B's tensor map as each kernel's lowered parameter (a_desc takes 0-4), for the L2 prefetch's inline PTX
DENSE_B_MAP: gl.constexpr = gl.constexpr(tensor_map_param("bf16_gemm_kernel", 5))
GROUPED_B_MAP: gl.constexpr = gl.constexpr(tensor_map_param("bf16_grouped_gemm_kernel", 5))


@gluon.constexpr_function
def bf16_mma_layout(block_n):
    """Accumulator layout of one warpgroup: 4 warps stacked along M, one m64 n``block_n`` k16 WGMMA."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, block_n, 16])


@gluon.jit
def _unit_range(unit, num_pid_m, num_pid_n, num_kb, SPLIT_K: gl.constexpr, GROUP_M: gl.constexpr):
    """(pid_m, pid_n, split, first K slice, end K slice) of work unit ``unit``."""
    tile = unit // SPLIT_K
    split = unit % SPLIT_K
    pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
    per_split = (num_kb + SPLIT_K - 1) // SPLIT_K
    kb0 = split * per_split
    kb1 = gl.minimum(kb0 + per_split, num_kb)
    return pid_m, pid_n, split, kb0, kb1


@gluon.jit
def _load_k_range(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, it, kb0, kb1, a_row, b_row, b_k0,
                  BLOCK_K: gl.constexpr, STAGES: gl.constexpr, A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr,
                  B_PREFETCH: gl.constexpr = 0, B_MAP: gl.constexpr = "", a_k0=0, b1_desc=None, b1_bufs=None,
                  SPLIT_N: gl.constexpr = 0):
    """Producer of one work unit: K slices ``[kb0, kb1)`` into the ring; returns the ring counter.

    A rows ``a_row + [0, BLOCK_M)`` (one box per math warpgroup); B rows ``b_row + [0, BLOCK_N)`` of the
    ``[N', K]`` view, or (``B_MN_MAJOR``) columns ``b_row + [0, BLOCK_N)`` of the ``[K', N]`` view from
    row ``b_k0`` on (a grouped B's group offset along K; 0 for dense). A's K starts at ``a_k0`` (the head-batched
    form's group offset along A's columns; 0 elsewhere). ``B_PREFETCH`` > 0: with each slice,
    B's box that many slices ahead (inside the unit) is prefetched into L2 through the tensor map parameter
    ``B_MAP`` (:mod:`.l2_prefetch`). ``SPLIT_N`` > 0 (a tile ``SPLIT_N + BLOCK_N1`` wide): B's second box,
    ``b1_desc``'s ``BLOCK_N1`` rows (columns) from ``b_row + SPLIT_N``, lands in ``b1_bufs`` with the first.
    """
    NUM_WG: gl.constexpr = a_bufs.shape[0] // STAGES
    if SPLIT_N > 0:
        stage_bytes: gl.constexpr = (NUM_WG * a_desc.block_type.nbytes + b_desc.block_type.nbytes
                                     + b1_desc.block_type.nbytes)
    else:
        stage_bytes: gl.constexpr = NUM_WG * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for kb in range(kb0, kb1):
        s = it % STAGES
        mbarrier.wait(empty_bars.index(s), ((it // STAGES) & 1) ^ 1)
        bar = full_bars.index(s)
        mbarrier.expect(bar, stage_bytes)
        k = kb * BLOCK_K
        for wg in gl.static_range(NUM_WG):
            if A_MN_MAJOR:
                gluon_compat.async_load(a_desc, [a_k0 + k, a_row + wg * 64], bar,
                                        a_bufs.index(s * NUM_WG + wg))
            else:
                gluon_compat.async_load(a_desc, [a_row + wg * 64, a_k0 + k], bar,
                                        a_bufs.index(s * NUM_WG + wg))
        if B_MN_MAJOR:
            gluon_compat.async_load(b_desc, [b_k0 + k, b_row], bar, b_bufs.index(s))
        else:
            gluon_compat.async_load(b_desc, [b_row, k], bar, b_bufs.index(s))
        if SPLIT_N > 0:
            if B_MN_MAJOR:
                gluon_compat.async_load(b1_desc, [b_k0 + k, b_row + SPLIT_N], bar, b1_bufs.index(s))
            else:
                gluon_compat.async_load(b1_desc, [b_row + SPLIT_N, k], bar, b1_bufs.index(s))
        if B_PREFETCH > 0:
            if kb + B_PREFETCH < kb1:
                k_ahead = (kb + B_PREFETCH) * BLOCK_K
                if B_MN_MAJOR:
                    prefetch_tile_l2(b_row, b_k0 + k_ahead, B_MAP)
                else:
                    prefetch_tile_l2(k_ahead, b_row, B_MAP)
        it += 1
    return it


@gluon.jit
def _load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, B_PREFETCH: gl.constexpr,
                    b1_desc, b1_bufs, BLOCK_N1: gl.constexpr):
    TILE_N: gl.constexpr = BLOCK_N + BLOCK_N1
    num_kb = gl.cdiv(K, BLOCK_K)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, TILE_N)
    num_units = num_pid_m * num_pid_n * SPLIT_K
    it = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        pid_m, pid_n, split, kb0, kb1 = _unit_range(unit, num_pid_m, num_pid_n, num_kb, SPLIT_K, GROUP_M)
        it = _load_k_range(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, it, kb0, kb1,
                           pid_m * BLOCK_M, pid_n * TILE_N, 0, BLOCK_K, STAGES, A_MN_MAJOR, B_MN_MAJOR,
                           B_PREFETCH, DENSE_B_MAP, 0, b1_desc, b1_bufs, BLOCK_N if BLOCK_N1 > 0 else 0)


@gluon.jit
def _mma_k_range(a_bufs, b_bufs, full_bars, empty_bars, it, kb0, kb1, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                 A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, WG: gl.constexpr, b1_bufs=None,
                 BLOCK_N1: gl.constexpr = 0):
    """Warpgroup ``WG``'s 64 rows of one work unit over K slices ``[kb0, kb1)``: (fp32 [64, BLOCK_N]
    accumulator in :func:`bf16_mma_layout`, ring counter). An empty range gives zeros and touches no barrier.

    ``BLOCK_N1`` > 0: a tile ``BLOCK_N + BLOCK_N1`` wide (a width that is not a power of two, which no Gluon tensor
    can have): per K slice a second WGMMA on the same A rows into a [64, BLOCK_N1] accumulator from the slot's
    second B box (``b1_bufs``); returns (accumulator, second accumulator, ring counter)."""
    NUM_WG: gl.constexpr = a_bufs.shape[0] // STAGES
    mma_layout: gl.constexpr = bf16_mma_layout(BLOCK_N)
    acc = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
    if BLOCK_N1 > 0:
        layout1: gl.constexpr = bf16_mma_layout(BLOCK_N1)
        acc1 = gl.zeros([64, BLOCK_N1], gl.float32, layout1)
    prev_s = 0
    for kb in range(kb0, kb1):
        s = it % STAGES
        mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
        a = _a_operand(a_bufs, s, NUM_WG, WG, A_MN_MAJOR)
        acc = warpgroup_mma(a, _b_operand(b_bufs, s, B_MN_MAJOR), acc, is_async=True)
        # The previous slice's WGMMA(s) have finished once only this slice's are in flight: free its stage.
        if BLOCK_N1 > 0:
            acc1 = warpgroup_mma(a, _b_operand(b1_bufs, s, B_MN_MAJOR), acc1, is_async=True)
            acc, acc1 = warpgroup_mma_wait(2, deps=(acc, acc1))
        else:
            acc = warpgroup_mma_wait(1, deps=(acc,))
        mbarrier.arrive(empty_bars.index(prev_s), count=1, pred=kb > kb0)
        prev_s = s
        it += 1
    if BLOCK_N1 > 0:
        acc, acc1 = warpgroup_mma_wait(0, deps=(acc, acc1))
        mbarrier.arrive(empty_bars.index(prev_s), count=1, pred=kb1 > kb0)
        return acc, acc1, it
    else:
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty_bars.index(prev_s), count=1, pred=kb1 > kb0)
        return acc, it


@gluon.jit
def _a_operand(a_bufs, s, NUM_WG: gl.constexpr, WG: gl.constexpr, A_MN_MAJOR: gl.constexpr):
    """Warpgroup ``WG``'s [64, BLOCK_K] A box of ring slot ``s`` as WGMMA reads it."""
    a = a_bufs.index(s * NUM_WG + WG)
    if A_MN_MAJOR:
        a = a.permute((1, 0))
    return a


@gluon.jit
def _b_operand(b_bufs, s, B_MN_MAJOR: gl.constexpr):
    """The B box of ring slot ``s`` as WGMMA reads it: [BLOCK_K, width]."""
    b = b_bufs.index(s)
    if not B_MN_MAJOR:
        b = b.permute((1, 0))
    return b


@gluon.jit
def _add_c(acc, c_ptr, rows, off_n, M, N, stride_cm, stride_cn, WIDTH: gl.constexpr):
    """``acc + C[rows, off_n + [0, WIDTH)]`` in FP32, C read from global memory (rows / columns past M / N as 0)."""
    cols = off_n + gl.arange(0, WIDTH, layout=gl.SliceLayout(0, acc.type.layout))
    c_ptrs = c_ptr + rows.to(gl.int64)[:, None] * stride_cm + cols.to(gl.int64)[None, :] * stride_cn
    c = gl.load(c_ptrs, mask=(rows < M)[:, None] & (cols < N)[None, :], other=0.0)
    return acc + c.to(gl.float32)


@gluon.jit
def _math_partition(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr,
                    M, N, K, stride_cm, stride_cn,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, HAS_C: gl.constexpr,
                    WG: gl.constexpr, c_desc, c_bars, C_TMA: gl.constexpr, b1_bufs, d1_desc, d1_smem,
                    BLOCK_N1: gl.constexpr, c1_desc):
    # One warpgroup: rows [64 * WG, 64 * WG + 64) of every BLOCK_M tile. C_TMA: each tile's C rows arrive by
    # TMA in this warpgroup's D staging rows while its main loop runs (gemm_1d2d._prefetch_c), on c_bars[WG].
    # BLOCK_N1 > 0: tiles BLOCK_N + BLOCK_N1 wide, the second accumulator staged in d1_smem, stored by d1_desc
    # (and with C_TMA its C loaded there by c1_desc).
    mma_layout: gl.constexpr = bf16_mma_layout(BLOCK_N)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    TILE_N: gl.constexpr = BLOCK_N + BLOCK_N1
    num_kb = gl.cdiv(K, BLOCK_K)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, TILE_N)
    num_units = num_pid_m * num_pid_n * SPLIT_K

    d_sub = _d_rows(d_smem, WG * 64)
    d1_sub = _d_rows(d1_smem, WG * 64)
    # D's box half the tile wide: D staged and stored in two halves (:func:`_store_halves`)
    D_HALVES: gl.constexpr = d_desc.block_type.shape[1] < BLOCK_N
    if D_HALVES:
        gl.static_assert(d_desc.block_type.shape[1] * 2 == BLOCK_N and BLOCK_N1 == 0 and not C_TMA,
                         "D_HALVES: a power-of-two width, D's box half of it, no C staged in D's buffer")
    if C_TMA:
        gl.static_assert(HAS_C and SPLIT_K == 1, "C_TMA: C added in this kernel (no split-K)")
    c_bar = c_bars.index(WG)
    it = 0
    tcount = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        pid_m, pid_n, split, kb0, kb1 = _unit_range(unit, num_pid_m, num_pid_n, num_kb, SPLIT_K, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * TILE_N
        if C_TMA:
            if BLOCK_N1 > 0:
                _prefetch_c(c_desc, c_bar, d_sub, off_m + WG * 64, off_n, c1_desc, d1_sub, off_n + BLOCK_N)
            else:
                _prefetch_c(c_desc, c_bar, d_sub, off_m + WG * 64, off_n)

        if BLOCK_N1 > 0:
            acc, acc1, it = _mma_k_range(a_bufs, b_bufs, full_bars, empty_bars, it, kb0, kb1, BLOCK_N, STAGES,
                                         A_MN_MAJOR, B_MN_MAJOR, WG, b1_bufs, BLOCK_N1)
        else:
            acc, it = _mma_k_range(a_bufs, b_bufs, full_bars, empty_bars, it, kb0, kb1, BLOCK_N, STAGES,
                                   A_MN_MAJOR, B_MN_MAJOR, WG)

        # Epilogue: C in FP32, cast, registers -> smem -> TMA store (left in flight).
        if SPLIT_K > 1:
            out_row = split * (num_pid_m * BLOCK_M) + off_m + WG * 64
        elif C_TMA:
            out_row = off_m + WG * 64
            mbarrier.wait(c_bar, tcount & 1)
            tcount += 1
            # each thread reads back exactly the elements it overwrites below (same layout)
            acc = acc + d_sub.load(mma_layout).to(gl.float32)
            if BLOCK_N1 > 0:
                acc1 = acc1 + d1_sub.load(acc1.type.layout).to(gl.float32)
        else:
            out_row = off_m + WG * 64
            if HAS_C:
                rows = off_m + WG * 64 + gl.arange(0, 64, layout=row_layout)
                acc = _add_c(acc, c_ptr, rows, off_n, M, N, stride_cm, stride_cn, BLOCK_N)
                if BLOCK_N1 > 0:
                    rows1 = off_m + WG * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, acc1.type.layout))
                    acc1 = _add_c(acc1, c_ptr, rows1, off_n + BLOCK_N, M, N, stride_cm, stride_cn, BLOCK_N1)
        tma.store_wait(0)
        gluon_compat.thread_barrier()
        if D_HALVES:
            _store_halves(acc, d_desc, d_sub, out_row, off_n, BLOCK_N)
        else:
            d_sub.store(acc.to(d_desc.dtype))
            if BLOCK_N1 > 0:
                d1_sub.store(acc1.to(d1_desc.dtype))
            fence_async_shared()
            gluon_compat.thread_barrier()
            gluon_compat.async_store(d_desc, [out_row, off_n], d_sub)
            if BLOCK_N1 > 0:
                gluon_compat.async_store(d1_desc, [out_row, off_n + BLOCK_N], d1_sub)
    tma.store_wait(0)


@gluon.jit
def _store_halves(acc, d_desc, d_sub, out_row, off_n, BLOCK_N: gl.constexpr):
    """D_HALVES epilogue of one warpgroup: its [64, BLOCK_N] accumulator through the [64, BLOCK_N / 2] staging rows
    ``d_sub`` in two TMA stores, the second half staged once the first store has read the buffer. The caller has
    waited for this warpgroup's earlier stores; the second store is left in flight. (Splitting the accumulator's
    columns moves no data: they are separate registers of every thread.)"""
    HALF: gl.constexpr = BLOCK_N // 2
    lo, hi = gl.split(acc.reshape([64, 2, HALF]).permute(0, 2, 1))
    d_sub.store(lo.to(d_desc.dtype))
    fence_async_shared()
    gluon_compat.thread_barrier()
    gluon_compat.async_store(d_desc, [out_row, off_n], d_sub)
    tma.store_wait(0)
    gluon_compat.thread_barrier()
    d_sub.store(hi.to(d_desc.dtype))
    fence_async_shared()
    gluon_compat.thread_barrier()
    gluon_compat.async_store(d_desc, [out_row, off_n + HALF], d_sub)


@gluon.jit
def _shared_ring(a_desc, b_desc, d_desc, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """Shared memory of both entries: the ring (``STAGES`` x one A box per warpgroup and one B box), the D staging
    tile (``BLOCK_M`` rows of D's box width: BLOCK_N, or half of it for D staged in halves), and the full/empty
    barriers, initialized (empty: one arrive per math warpgroup)."""
    NUM_WG: gl.constexpr = BLOCK_M // 64
    # D's box width: BLOCK_N, or BLOCK_N / 2 when the tile's D is staged in halves (D_HALVES)
    D_COLS: gl.constexpr = d_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * NUM_WG] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    if NUM_WG == 3:  # shared-memory shapes are powers of two: one [64, D_COLS] staging buffer per warpgroup
        d_smem = gl.allocate_shared_memory(d_desc.dtype, [3, 64, D_COLS], d_desc.layout)
    else:
        d_smem = gl.allocate_shared_memory(d_desc.dtype, [BLOCK_M, D_COLS], d_desc.layout)
    full_bars, empty_bars = ring_barriers(STAGES, NUM_WG)
    return a_bufs, b_bufs, d_smem, full_bars, empty_bars


@gluon.jit
def bf16_gemm_kernel(a_desc, b_desc, d_desc, c_ptr, M, N, K, stride_cm, stride_cn,
                     BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                     STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                     A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, HAS_C: gl.constexpr,
                     PRODUCER_REGS: gl.constexpr, MATH_REGS: gl.constexpr, B_PREFETCH: gl.constexpr = 0,
                     c_desc=None, C_TMA: gl.constexpr = False, b1_desc=None, d1_desc=None,
                     BLOCK_N1: gl.constexpr = 0, c1_desc=None):
    """Entry: carve shared memory, init barriers, fork the producer and the math partitions.

    ``B_PREFETCH`` > 0: the producer also prefetches B's box that many K slices ahead into L2 (for B streaming
    from HBM at small M; :mod:`.l2_prefetch`).

    ``a_desc`` boxes are one warpgroup's 64 rows (``[64, BLOCK_K]`` or, MN-major, ``[BLOCK_K, 64]``);
    ``b_desc`` boxes ``[BLOCK_N, BLOCK_K]`` (MN-major ``[BLOCK_K, BLOCK_N]``); ``d_desc`` boxes
    ``[64, BLOCK_N]`` over D (or the FP32 split-K workspace).

    ``C_TMA`` (C of D's dtype, row-major, TMA-aligned; no split-K): ``c_desc`` (boxes ``[64, BLOCK_N]``, D's
    layout) loads each tile's C into the D staging tile before its main loop; the epilogue adds it from shared
    memory instead of global loads, which also leaves room for 64x256 accumulators beside C.

    ``BLOCK_N1`` > 0 (a power of two below ``BLOCK_N``): tiles ``BLOCK_N + BLOCK_N1`` columns wide (e.g. 144, 192),
    which fill 132 SMs where power-of-two widths leave a round mostly idle. B's last ``BLOCK_N1`` rows of a tile
    come in a second box (``b1_desc``, ``[BLOCK_N1, BLOCK_K]`` / ``[BLOCK_K, BLOCK_N1]``) into their own ring
    buffer, each K slice runs a second WGMMA into a [64, BLOCK_N1] accumulator, and ``d1_desc`` (boxes
    ``[64, BLOCK_N1]``) stores it from its own staging tile; with ``C_TMA``, ``c1_desc`` (D's layout, boxes
    ``[64, BLOCK_N1]``) loads its C there.
    """
    NUM_WG: gl.constexpr = BLOCK_M // 64
    gl.static_assert(BLOCK_M == 64 or BLOCK_M == 128 or BLOCK_M == 192,
                     "BLOCK_M is 64, 128 or 192 (one warpgroup per 64 rows)")
    a_bufs, b_bufs, d_smem, full_bars, empty_bars = _shared_ring(a_desc, b_desc, d_desc, BLOCK_M, BLOCK_N, STAGES)
    # warp_specialize takes no None argument: without C_TMA the ring's barriers and d_desc stand in (never used)
    if C_TMA:
        c_bars = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_WG):
            mbarrier.init(c_bars.index(i), count=1)
        fence_async_shared()
        c_tma_desc = c_desc
    else:
        c_bars = full_bars
        c_tma_desc = d_desc
    # the second column block's ring buffer and D staging (BLOCK_N1 > 0); else the first block's stand in (unused)
    if BLOCK_N1 > 0:
        gl.static_assert(BLOCK_N1 < BLOCK_N, "BLOCK_N1: the smaller, second block of the tile's columns")
        b1_bufs = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_type.shape, b1_desc.layout)
        if NUM_WG == 3:
            d1_smem = gl.allocate_shared_memory(d1_desc.dtype, [3, 64, BLOCK_N1], d1_desc.layout)
        else:
            d1_smem = gl.allocate_shared_memory(d1_desc.dtype, [BLOCK_M, BLOCK_N1], d1_desc.layout)
        b1_tma_desc = b1_desc
        d1_tma_desc = d1_desc
        if C_TMA:
            c1_tma_desc = c1_desc
        else:
            c1_tma_desc = d1_desc
    else:
        b1_bufs = b_bufs
        d1_smem = d_smem
        b1_tma_desc = b_desc
        d1_tma_desc = d_desc
        c1_tma_desc = d_desc
    if SPLIT_K > 1:
        launch_dependents()  # the reduction's CTAs wait for this grid on the SMs it leaves free

    # (argument tuples written out per partition: a tuple held in a variable loses the constexprs)
    if NUM_WG == 2:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 0, c_tma_desc, c_bars,
                               C_TMA, b1_bufs, d1_tma_desc, d1_smem, BLOCK_N1,
                               c1_tma_desc)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 1, c_tma_desc, c_bars,
                               C_TMA, b1_bufs, d1_tma_desc, d1_smem, BLOCK_N1,
                               c1_tma_desc)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                               BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K, A_MN_MAJOR, B_MN_MAJOR,
                               B_PREFETCH, b1_tma_desc, b1_bufs, BLOCK_N1)),
        ], [4, 1], [MATH_REGS, PRODUCER_REGS])
    elif NUM_WG == 3:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 0, c_tma_desc, c_bars,
                               C_TMA, b1_bufs, d1_tma_desc, d1_smem, BLOCK_N1,
                               c1_tma_desc)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 1, c_tma_desc, c_bars,
                               C_TMA, b1_bufs, d1_tma_desc, d1_smem, BLOCK_N1,
                               c1_tma_desc)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 2, c_tma_desc, c_bars,
                               C_TMA, b1_bufs, d1_tma_desc, d1_smem, BLOCK_N1,
                               c1_tma_desc)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                               BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K, A_MN_MAJOR, B_MN_MAJOR,
                               B_PREFETCH, b1_tma_desc, b1_bufs, BLOCK_N1)),
        ], [4, 4, 1], [MATH_REGS, MATH_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 0, c_tma_desc, c_bars,
                               C_TMA, b1_bufs, d1_tma_desc, d1_smem, BLOCK_N1,
                               c1_tma_desc)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                               BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K, A_MN_MAJOR, B_MN_MAJOR,
                               B_PREFETCH, b1_tma_desc, b1_bufs, BLOCK_N1)),
        ], [1], [PRODUCER_REGS])


# ---------------------------------------------------------------------------------------------
# m-grouped (MoE) forms: GROUPING 1 contiguous, 2 masked. The group lookup and the masked walk are
# gemm_1d2d's (_contiguous_group, _masked_rows, _first_local_unit, _store_masked_wave); the K loops are
# the dense ones above (_load_k_range, _mma_k_range).
# ---------------------------------------------------------------------------------------------
@gluon.jit
def _grouped_b_coords(g, off_n, N: gl.constexpr, K: gl.constexpr, B_MN_MAJOR: gl.constexpr):
    """(b_row, b_k0) of group ``g``'s B tile at ``off_n`` for :func:`_load_k_range`: K-major B is the
    ``[G * N, K]`` view (rows ``g * N + off_n``), MN-major B the ``[G * K, N]`` view (rows from ``g * K``)."""
    if B_MN_MAJOR:
        return off_n, g * K
    else:
        return g * N + off_n, 0


@gluon.jit
def _grouped_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, layout_ptr, M,
                            N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                            BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                            A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, GROUPING: gl.constexpr,
                            NUM_GROUPS: gl.constexpr, GROUP_ROWS: gl.constexpr, USE_PSUM: gl.constexpr,
                            ALIGN: gl.constexpr, B_PREFETCH: gl.constexpr = 0):
    """TMA producer of the m-grouped forms: walks exactly the tiles the math partitions walk.

    Contiguous: the tiles of ``[M_total, N]``; a padding tile loads nothing. Masked: per group, only the
    tiles below ``masked_m[g]`` (A rows ``g * max_m + off_m`` of the ``[G * max_m, K]`` view). Head-batched:
    every group's tiles, A columns from ``g * K``.
    """
    num_kb: gl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    it = 0
    if GROUPING == 1:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = _tile_coords(unit, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            g, safe, valid, end = _contiguous_group(layout_ptr, off_m, NUM_GROUPS, USE_PSUM, ALIGN)
            b_row, b_k0 = _grouped_b_coords(safe, pid_n * BLOCK_N, N, K, B_MN_MAJOR)
            it = _load_k_range(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, it, 0,
                               gl.where(valid, num_kb, 0), off_m, b_row, b_k0, BLOCK_K, STAGES,
                               A_MN_MAJOR, B_MN_MAJOR, B_PREFETCH, GROUPED_B_MAP)
    elif GROUPING == 2:
        g_start = 0
        for g in range(NUM_GROUPS):
            valid_rows, num_pid_m, tiles_g = _masked_group_tiles(layout_ptr, g, GROUP_ROWS, BLOCK_M, num_pid_n)
            local = _first_local_unit(g_start)
            while local < tiles_g:  # not range(): see _first_local_unit
                pid_m, pid_n = _tile_coords(local, num_pid_m, num_pid_n, GROUP_M)
                b_row, b_k0 = _grouped_b_coords(g, pid_n * BLOCK_N, N, K, B_MN_MAJOR)
                it = _load_k_range(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, it, 0, num_kb,
                                   g * GROUP_ROWS + pid_m * BLOCK_M, b_row, b_k0, BLOCK_K, STAGES,
                                   A_MN_MAJOR, B_MN_MAJOR, B_PREFETCH, GROUPED_B_MAP)
                local += gl.num_programs(0)
            g_start += tiles_g
    else:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), NUM_GROUPS * num_pid_m * num_pid_n, gl.num_programs(0)):
            g, pid_m, pid_n = head_tile(unit, num_pid_m, num_pid_n, GROUP_M)
            b_row, b_k0 = _grouped_b_coords(g, pid_n * BLOCK_N, N, K, B_MN_MAJOR)
            it = _load_k_range(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, it, 0, num_kb,
                               pid_m * BLOCK_M, b_row, b_k0, BLOCK_K, STAGES, A_MN_MAJOR, B_MN_MAJOR, B_PREFETCH,
                               GROUPED_B_MAP, g * K)


@gluon.jit
def _whole_k_wave(a_bufs, b_bufs, full_bars, empty_bars, it, pid_m, pid_n, num_kb, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr,
                  WG: gl.constexpr):
    """Warpgroup ``WG``'s wave of tile (pid_m, pid_n) over every K slice: (accumulator, ring counter, off_m, off_n,
    the wave's rows and the tile's columns in the accumulator's slice layouts)."""
    mma_layout: gl.constexpr = bf16_mma_layout(BLOCK_N)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc, it = _mma_k_range(a_bufs, b_bufs, full_bars, empty_bars, it, 0, num_kb, BLOCK_N, STAGES, A_MN_MAJOR,
                           B_MN_MAJOR, WG)
    rows = off_m + WG * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, mma_layout))
    cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma_layout))
    return acc, it, off_m, off_n, rows, cols


@gluon.jit
def _grouped_math_partition(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, layout_ptr, d_ptr, M,
                            N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                            BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                            A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, GROUPING: gl.constexpr,
                            NUM_GROUPS: gl.constexpr, GROUP_ROWS: gl.constexpr, USE_PSUM: gl.constexpr,
                            ALIGN: gl.constexpr, WG: gl.constexpr):
    """Math warpgroup ``WG`` (rows ``64 * WG + [0, 64)`` of each tile) of the m-grouped forms.

    GROUPING 1 (contiguous): rows that are not the tile's group (padding, ids outside [0, G)) are written
    as 0; a padding tile runs no K slice and stores a zero tile. GROUPING 2 (masked): the valid tiles of
    every group in the producer's order; rows at or past ``masked_m[g]`` are not written.
    """
    mma_layout: gl.constexpr = bf16_mma_layout(BLOCK_N)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    num_kb: gl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    d_sub = d_smem.slice(WG * 64, 64, dim=0)
    it = 0
    if GROUPING == 1:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = _tile_coords(unit, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            g, safe, valid, end = _contiguous_group(layout_ptr, off_m, NUM_GROUPS, USE_PSUM, ALIGN)
            # A constant trip count in a branch, not a run-time one (0 for padding tiles): with the latter
            # ptxas serialized every WGMMA of the loop (C7514, compile_check.wgmma_serialization).
            if valid:
                acc, it = _mma_k_range(a_bufs, b_bufs, full_bars, empty_bars, it, 0, num_kb, BLOCK_N, STAGES,
                                       A_MN_MAJOR, B_MN_MAJOR, WG)
            else:
                acc = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
            rows = off_m + WG * 64 + gl.arange(0, 64, layout=row_layout)
            cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
            in_m = rows < M
            acc = gl.where(_rows_of_group(layout_ptr, rows, in_m, (g, valid, end), USE_PSUM)[:, None], acc, 0.0)
            _store_wave(acc, d_desc, d_sub, None, rows, cols, in_m, cols < N, 0, off_m + WG * 64, off_n, 0, False)
    elif GROUPING == 2:
        g_start = 0
        for g in range(NUM_GROUPS):
            valid_rows, num_pid_m, tiles_g = _masked_group_tiles(layout_ptr, g, GROUP_ROWS, BLOCK_M, num_pid_n)
            local = _first_local_unit(g_start)
            while local < tiles_g:  # not range(): see _first_local_unit
                pid_m, pid_n = _tile_coords(local, num_pid_m, num_pid_n, GROUP_M)
                acc, it, off_m, off_n, rows, cols = _whole_k_wave(a_bufs, b_bufs, full_bars, empty_bars, it, pid_m,
                                                                  pid_n, num_kb, BLOCK_M, BLOCK_N, STAGES,
                                                                  A_MN_MAJOR, B_MN_MAJOR, WG)
                _store_masked_wave(acc, d_desc, d_sub, d_ptr, rows, off_m + WG * 64, cols, cols < N, valid_rows,
                                   g * GROUP_ROWS + off_m + WG * 64, off_n, N)
                local += gl.num_programs(0)
            g_start += tiles_g
    else:
        # head-batched: every group's tiles of [M, N], group g's D columns g * N + [0, N) (TMA clips rows >= M)
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), NUM_GROUPS * num_pid_m * num_pid_n, gl.num_programs(0)):
            g, pid_m, pid_n = head_tile(unit, num_pid_m, num_pid_n, GROUP_M)
            acc, it, off_m, off_n, rows, cols = _whole_k_wave(a_bufs, b_bufs, full_bars, empty_bars, it, pid_m, pid_n,
                                                              num_kb, BLOCK_M, BLOCK_N, STAGES, A_MN_MAJOR,
                                                              B_MN_MAJOR, WG)
            _store_wave(acc, d_desc, d_sub, None, rows, cols, rows < M, cols < N, 0, off_m + WG * 64, g * N + off_n,
                        0, False)
    tma.store_wait(0)


@gluon.jit
def bf16_grouped_gemm_kernel(a_desc, b_desc, d_desc, layout_ptr, d_ptr, M,
                             N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                             BLOCK_K: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                             A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, GROUPING: gl.constexpr,
                             NUM_GROUPS: gl.constexpr, GROUP_ROWS: gl.constexpr, USE_PSUM: gl.constexpr,
                             ALIGN: gl.constexpr, PRODUCER_REGS: gl.constexpr, MATH_REGS: gl.constexpr,
                             B_PREFETCH: gl.constexpr = 0):
    """Entry of the m-grouped BF16 GEMMs (``D[r] = A[r] @ B[group(r)]^T``, FP32 accumulation, bf16 D).

    - ``GROUPING`` 1, contiguous: ``a_desc`` over A ``[M_total, K]`` (``A_MN_MAJOR``: ``A^T [K, M_total]``);
      ``layout_ptr`` int32 ``grouped_layout`` (``[M_total]`` ids, -1 padding; ``USE_PSUM``: ``[G]``
      cumulative end rows, segments aligned to ``ALIGN``, which BLOCK_M divides); ``d_desc`` over D
      ``[M_total, N]``; ``M`` = M_total.
    - ``GROUPING`` 2, masked: ``a_desc`` over A ``[G * max_m, K]`` (K-major; ``GROUP_ROWS`` = max_m);
      ``layout_ptr`` int32 ``masked_m [G]`` read on the device only; ``d_desc`` over D ``[G * max_m, N]``
      and ``d_ptr`` its base (partial 64-row waves are stored with a row mask); ``M`` = G * max_m.
    - ``GROUPING`` 3, head-batched (einsum's ``bhr,hdr->bhd`` / ``bhd,hdr->bhr``): every group has all ``M`` rows;
      ``a_desc`` over A ``[M, G * K]`` (K-major; group g's K is columns ``g * K + [0, K)``), ``d_desc`` over D
      ``[M, G * N]`` (group g's columns ``g * N + [0, N)``, N a multiple of BLOCK_N); rows past M are clipped by
      the descriptors; ``layout_ptr`` / ``d_ptr`` unused. A K-major B's K tail is zero-filled, so the columns
      of the next group a last A slice reads add nothing; an MN-major B needs K a multiple of BLOCK_K.

    B: ``b_desc`` over ``[G * N, K]`` (K-major, box ``[BLOCK_N, BLOCK_K]``) or, ``B_MN_MAJOR``, over
    ``[G * K, N]`` (box ``[BLOCK_K, BLOCK_N]``; K a multiple of BLOCK_K so that no K slice reaches into
    the next group's rows). Boxes and roles as :func:`bf16_gemm_kernel`; no split-K, no C.
    """
    NUM_WG: gl.constexpr = BLOCK_M // 64
    gl.static_assert(BLOCK_M == 64 or BLOCK_M == 128, "BLOCK_M is 64 or 128 (one warpgroup per 64 rows)")
    gl.static_assert(GROUPING == 1 or GROUPING == 2 or GROUPING == 3, "GROUPING: 1 contiguous, 2 masked, 3 heads")
    if GROUPING == 1:
        gl.static_assert(ALIGN % BLOCK_M == 0, "contiguous: BLOCK_M must divide the segment alignment")
    else:
        gl.static_assert(not A_MN_MAJOR, "masked and head-batched: A is K-major")
    if GROUPING == 3:
        gl.static_assert(N % BLOCK_N == 0, "head-batched: a tile must not reach into the next group's D columns")
    if B_MN_MAJOR:
        gl.static_assert(K % BLOCK_K == 0, "MN-major grouped B: K must be a multiple of BLOCK_K")
    a_bufs, b_bufs, d_smem, full_bars, empty_bars = _shared_ring(a_desc, b_desc, d_desc, BLOCK_M, BLOCK_N, STAGES)

    if NUM_WG == 2:
        gl.warp_specialize([
            (_grouped_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, layout_ptr, d_ptr, M,
                                       N, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, A_MN_MAJOR, B_MN_MAJOR,
                                       GROUPING, NUM_GROUPS, GROUP_ROWS, USE_PSUM, ALIGN, 0)),
            (_grouped_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, layout_ptr, d_ptr, M,
                                       N, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, A_MN_MAJOR, B_MN_MAJOR,
                                       GROUPING, NUM_GROUPS, GROUP_ROWS, USE_PSUM, ALIGN, 1)),
            (_grouped_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, layout_ptr, M,
                                       N, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, A_MN_MAJOR, B_MN_MAJOR,
                                       GROUPING, NUM_GROUPS, GROUP_ROWS, USE_PSUM, ALIGN, B_PREFETCH)),
        ], [4, 1], [MATH_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_grouped_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, layout_ptr, d_ptr, M,
                                       N, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, A_MN_MAJOR, B_MN_MAJOR,
                                       GROUPING, NUM_GROUPS, GROUP_ROWS, USE_PSUM, ALIGN, 0)),
            (_grouped_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, layout_ptr, M,
                                       N, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, A_MN_MAJOR, B_MN_MAJOR,
                                       GROUPING, NUM_GROUPS, GROUP_ROWS, USE_PSUM, ALIGN, B_PREFETCH)),
        ], [1], [PRODUCER_REGS])


@triton.jit
def splitk_reduce_kernel(ws_ptr, d_ptr, c_ptr, N, M_PAD, stride_dm, stride_cm, stride_cn,
                         SPLIT_K: tl.constexpr, HAS_C: tl.constexpr, BLOCK: tl.constexpr):
    """``d[m, :] = c[m, :] + sum_s ws[s * M_PAD + m, :]`` in a fixed order; grid ``(M, cdiv(N, BLOCK))``.
    Launched with programmatic dependent launch: waits first until the GEMM grid has finished."""
    gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    acc = tl.load(ws_ptr + row * N + cols, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(ws_ptr + (s * M_PAD + row) * N + cols, mask=mask, other=0.0)
    if HAS_C:
        acc += tl.load(c_ptr + row * stride_cm + cols * stride_cn, mask=mask, other=0.0).to(tl.float32)
    tl.store(d_ptr + row * stride_dm + cols, acc.to(d_ptr.dtype.element_ty), mask=mask)
