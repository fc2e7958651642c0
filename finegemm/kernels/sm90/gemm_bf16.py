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

from .gemm_1d2d import _tile_coords

# Rows of the tile each math warpgroup owns (one m64 WGMMA row block).
WG_M: tl.constexpr = tl.constexpr(64)


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
def _load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr):
    NUM_WG: gl.constexpr = BLOCK_M // 64
    num_kb = gl.cdiv(K, BLOCK_K)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    num_units = num_pid_m * num_pid_n * SPLIT_K
    stage_bytes: gl.constexpr = NUM_WG * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    it = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        pid_m, pid_n, split, kb0, kb1 = _unit_range(unit, num_pid_m, num_pid_n, num_kb, SPLIT_K, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for kb in range(kb0, kb1):
            s = it % STAGES
            mbarrier.wait(empty_bars.index(s), ((it // STAGES) & 1) ^ 1)
            bar = full_bars.index(s)
            mbarrier.expect(bar, stage_bytes)
            k = kb * BLOCK_K
            for wg in gl.static_range(NUM_WG):
                if A_MN_MAJOR:
                    tma.async_copy_global_to_shared(a_desc, [k, off_m + wg * 64], bar, a_bufs.index(s * NUM_WG + wg))
                else:
                    tma.async_copy_global_to_shared(a_desc, [off_m + wg * 64, k], bar, a_bufs.index(s * NUM_WG + wg))
            if B_MN_MAJOR:
                tma.async_copy_global_to_shared(b_desc, [k, off_n], bar, b_bufs.index(s))
            else:
                tma.async_copy_global_to_shared(b_desc, [off_n, k], bar, b_bufs.index(s))
            it += 1


@gluon.jit
def _math_partition(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr,
                    M, N, K, stride_cm, stride_cn,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, HAS_C: gl.constexpr,
                    WG: gl.constexpr):
    # One warpgroup: rows [64 * WG, 64 * WG + 64) of every BLOCK_M tile.
    NUM_WG: gl.constexpr = BLOCK_M // 64
    mma_layout: gl.constexpr = bf16_mma_layout(BLOCK_N)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    num_kb = gl.cdiv(K, BLOCK_K)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    num_units = num_pid_m * num_pid_n * SPLIT_K

    d_sub = d_smem.slice(WG * 64, 64, dim=0)
    it = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        pid_m, pid_n, split, kb0, kb1 = _unit_range(unit, num_pid_m, num_pid_n, num_kb, SPLIT_K, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        acc = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
        prev_s = 0
        for kb in range(kb0, kb1):
            s = it % STAGES
            mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
            a = a_bufs.index(s * NUM_WG + WG)
            if A_MN_MAJOR:
                a = a.permute((1, 0))
            b = b_bufs.index(s)
            if not B_MN_MAJOR:
                b = b.permute((1, 0))
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # The previous slice's WGMMA has finished once only this one is in flight: free its stage.
            acc = warpgroup_mma_wait(1, deps=(acc,))
            mbarrier.arrive(empty_bars.index(prev_s), count=1, pred=kb > kb0)
            prev_s = s
            it += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty_bars.index(prev_s), count=1, pred=kb1 > kb0)

        # Epilogue: C in FP32, cast, registers -> smem -> TMA store (left in flight).
        if SPLIT_K > 1:
            out_row = split * (num_pid_m * BLOCK_M) + off_m + WG * 64
        else:
            out_row = off_m + WG * 64
            if HAS_C:
                rows = off_m + WG * 64 + gl.arange(0, 64, layout=row_layout)
                cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
                c_ptrs = c_ptr + rows.to(gl.int64)[:, None] * stride_cm + cols.to(gl.int64)[None, :] * stride_cn
                c = gl.load(c_ptrs, mask=(rows < M)[:, None] & (cols < N)[None, :], other=0.0)
                acc = acc + c.to(gl.float32)
        tma.store_wait(0)
        gl.thread_barrier()
        d_sub.store(acc.to(d_desc.dtype))
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(d_desc, [out_row, off_n], d_sub)
    tma.store_wait(0)


@gluon.jit
def bf16_gemm_kernel(a_desc, b_desc, d_desc, c_ptr, M, N, K, stride_cm, stride_cn,
                     BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                     STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                     A_MN_MAJOR: gl.constexpr, B_MN_MAJOR: gl.constexpr, HAS_C: gl.constexpr,
                     PRODUCER_REGS: gl.constexpr, MATH_REGS: gl.constexpr):
    """Entry: carve shared memory, init barriers, fork the producer and the math partitions.

    ``a_desc`` boxes are one warpgroup's 64 rows (``[64, BLOCK_K]`` or, MN-major, ``[BLOCK_K, 64]``);
    ``b_desc`` boxes ``[BLOCK_N, BLOCK_K]`` (MN-major ``[BLOCK_K, BLOCK_N]``); ``d_desc`` boxes
    ``[64, BLOCK_N]`` over D (or the FP32 split-K workspace).
    """
    NUM_WG: gl.constexpr = BLOCK_M // 64
    gl.static_assert(BLOCK_M == 64 or BLOCK_M == 128, "BLOCK_M is 64 or 128 (one warpgroup per 64 rows)")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * NUM_WG] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    d_smem = gl.allocate_shared_memory(d_desc.dtype, [BLOCK_M, BLOCK_N], d_desc.layout)
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=NUM_WG)
    fence_async_shared()

    # (argument tuples written out per partition: a tuple held in a variable loses the constexprs)
    if NUM_WG == 2:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 0)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                               BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K, A_MN_MAJOR, B_MN_MAJOR)),
        ], [4, 1], [MATH_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, c_ptr, M, N, K,
                               stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K,
                               A_MN_MAJOR, B_MN_MAJOR, HAS_C, 0)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K,
                               BLOCK_M, BLOCK_N, BLOCK_K, STAGES, GROUP_M, SPLIT_K, A_MN_MAJOR, B_MN_MAJOR)),
        ], [1], [PRODUCER_REGS])


@triton.jit
def splitk_reduce_kernel(ws_ptr, d_ptr, c_ptr, N, M_PAD, stride_dm, stride_cm, stride_cn,
                         SPLIT_K: tl.constexpr, HAS_C: tl.constexpr, BLOCK: tl.constexpr):
    """``d[m, :] = c[m, :] + sum_s ws[s * M_PAD + m, :]`` in a fixed order; grid ``(M, cdiv(N, BLOCK))``."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    acc = tl.load(ws_ptr + row * N + cols, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(ws_ptr + (s * M_PAD + row) * N + cols, mask=mask, other=0.0)
    if HAS_C:
        acc += tl.load(c_ptr + row * stride_cm + cols * stride_cn, mask=mask, other=0.0).to(tl.float32)
    tl.store(d_ptr + row * stride_dm + cols, acc.to(d_ptr.dtype.element_ty), mask=mask)
