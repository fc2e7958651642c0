"""Hopper FP8 GEMM with fine-grained scales: warp-specialized, persistent, TMA + async WGMMA (Gluon).

``D[m, n] = C[m, n] + sum_kb (A_kb @ B_kb^T)[m, n] * sfa[m, kb] * sfb[., kb]`` for both recipes:
``1d2d`` (per-128x128-block RHS scales, BF16 or FP32 out) and ``1d1d`` (per-channel RHS scales, the
weight-gradient kernel, FP32 out with ``C`` accumulated). One kernel body, the recipe a constexpr.

Roles (``gl.warp_specialize``):
  - producer: 1 warp (padded by the compiler to a warpgroup, ``setmaxnreg.dec`` to 40 registers).
    Walks the same persistent tile sequence as the math partition and, per 128-wide K block, waits
    ``empty[s]``, arms ``full[s]`` with the stage's byte count and issues two TMA loads (A and B).
  - math: one warpgroup (4 warps) per 64 rows of the tile, each its own partition (the default one
    and, for BLOCK_M 128, a worker), ``setmaxnreg.inc`` to 232 registers. Per K block:
    wait ``full[s]``, issue ``wgmma.mma_async`` (4 x m64nNk32 per warpgroup) into a *fresh*
    accumulator, and promote the previous block's partial on the CUDA cores while the tensor cores
    work (``PIPE_MMA``: two partials in flight, wait(1)), then release ``empty[s]``.
    The per-token LHS scales and the RHS scales come straight from global memory (L2-resident,
    a few hundred bytes per K block), one block ahead of their use.
  - epilogue (math partition): optional ``C`` added in FP32, cast, registers -> shared memory ->
    TMA store, left in flight while the next tile's main loop runs (waited before the buffer is
    reused).

Stages: ``STAGES`` ring slots of (BLOCK_M + BLOCK_N) x 128 bytes. Barriers: ``full[s]`` (count 1,
expect-tx) and ``empty[s]`` (count BLOCK_M / 64: one elected arrive per math warpgroup). Phase of slot ``s`` on
its ``i``-th use is ``i & 1``; the producer waits on ``empty`` with the flipped phase so that the
first pass through the ring does not block.

Split-K (``SPLIT_K > 1``, small M): work units are (tile, k-split) pairs; each writes its FP32
partial tile to a workspace ``[SPLIT_K * M_pad, N]`` and :func:`_splitk_reduce_kernel` sums the
splits in a fixed order (deterministic), adds ``C`` and casts.

NOTES:
  - Gluon 3.6 has no TMA multicast; tiles of A are re-read from L2 by every N tile.
  - BLOCK_N that does not divide 128 (e.g. 112, 160, 192) lets one tile straddle two RHS scale
    blocks: the two scales are selected per column with a predicate, not by a second loop.
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

BLOCK_K: tl.constexpr = tl.constexpr(128)


@gluon.constexpr_function
def mma_layout_for(block_m, block_n, num_warps):
    """Accumulator layout: warps stacked along M (16 rows each per instruction), full-width N."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, block_n, 32])


@gluon.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """(pid_m, pid_n) of a linear tile id: GROUP_M M blocks walk N together so B tiles stay in L2."""
    per_group = GROUP_M * num_pid_n
    group = tile // per_group
    first_m = group * GROUP_M
    rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@gluon.jit
def _load_scale(ptr, idx, kb, stride_k, mask, PACKED: gl.constexpr):
    """FP32 scales at ``ptr[idx + kb * stride_k]`` (``idx`` tensor or scalar); packed UE8M0 decoded."""
    if PACKED:
        word = gl.load(ptr + idx + (kb // 4) * stride_k, mask=mask, other=0)
        exp = (word >> ((kb % 4) * 8)) & 0xFF
        # exponent 0 is 2**-127, an fp32 denormal; every other exponent is exp << 23.
        bits = gl.where(exp == 0, 0x00400000, exp << 23)
        return bits.to(gl.float32, bitcast=True)
    else:
        return gl.load(ptr + idx + kb * stride_k, mask=mask, other=0.0)


# ---------------------------------------------------------------------------------------------
# Producer: TMA loads into the ring.
# ---------------------------------------------------------------------------------------------
@gluon.jit
def _load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                    N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr):
    num_kb: gl.constexpr = K // BLOCK_K
    kb_per_split: gl.constexpr = num_kb // SPLIT_K
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    num_units = num_pid_m * num_pid_n * SPLIT_K
    it = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        tile = unit // SPLIT_K
        split = unit % SPLIT_K
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        kb0 = split * kb_per_split
        for kk in range(kb_per_split):
            s = it % STAGES
            phase = (it // STAGES) & 1
            mbarrier.wait(empty_bars.index(s), phase ^ 1)
            bar = full_bars.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            k = (kb0 + kk) * BLOCK_K
            tma.async_copy_global_to_shared(a_desc, [off_m, k], bar, a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [off_n, k], bar, b_bufs.index(s))
            it += 1


# ---------------------------------------------------------------------------------------------
# Math: WGMMA per 128 of K into a fresh accumulator, FP32 promotion, epilogue.
# ---------------------------------------------------------------------------------------------
@gluon.jit
def _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col, kb,
            stride_sfa_k, stride_sfb, NUM_NB: gl.constexpr,
            SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, SFB_UNIFORM: gl.constexpr):
    """(row scale [BM], column scale [BN] or scalar(s)) for K block ``kb``."""
    sa = _load_scale(sfa_ptr, rows, kb, stride_sfa_k, row_mask, SF_PACKED)
    if SFB_PER_CHANNEL:
        sb = _load_scale(sfb_ptr, cols, kb, stride_sfb, col_mask, SF_PACKED)
        return sa, sb, sb
    else:
        # per-block RHS scales: row-major [ceil(N/128), SFK] (packed: [ceil(N/128), ceil(SFK/4)])
        if SF_PACKED:
            w0 = gl.load(sfb_ptr + nb0 * stride_sfb + kb // 4)
            sb0 = _decode1(w0, kb)
        else:
            sb0 = gl.load(sfb_ptr + nb0 * stride_sfb + kb)
        if SFB_UNIFORM:
            return sa, sb0, sb0
        else:
            nb1 = gl.minimum(nb0 + 1, NUM_NB - 1)
            if SF_PACKED:
                w1 = gl.load(sfb_ptr + nb1 * stride_sfb + kb // 4)
                sb1 = _decode1(w1, kb)
            else:
                sb1 = gl.load(sfb_ptr + nb1 * stride_sfb + kb)
            return sa, sb0, sb1


@gluon.jit
def _decode1(word, kb):
    exp = (word >> ((kb % 4) * 8)) & 0xFF
    bits = gl.where(exp == 0, 0x00400000, exp << 23)
    return bits.to(gl.float32, bitcast=True)


@gluon.jit
def _promote(acc, part, sa, sb0, sb1, second_col,
             SFB_PER_CHANNEL: gl.constexpr, SFB_UNIFORM: gl.constexpr):
    """acc += part * sa[m] * sb[n] in FP32 (DESIGN.md §1 promotion)."""
    if SFB_PER_CHANNEL:
        return acc + (part * sb0[None, :]) * sa[:, None]
    else:
        if SFB_UNIFORM:
            return acc + part * (sa * sb0)[:, None]
        else:
            s0 = (sa * sb0)[:, None]
            s1 = (sa * sb1)[:, None]
            return acc + part * gl.where(second_col[None, :], s1, s0)


@gluon.jit
def _a_rows(a_bufs, s, WG: gl.constexpr):
    """This warpgroup's 64 rows of the A tile in ring slot ``s``."""
    return a_bufs.index(s).slice(WG * 64, 64, dim=0)


@gluon.jit
def _math_partition(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                    sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                    N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, HAS_C: gl.constexpr,
                    PIPE_MMA: gl.constexpr, WG: gl.constexpr):
    # One warpgroup: rows [64 * WG, 64 * WG + 64) of every BLOCK_M tile.
    WG_M: gl.constexpr = 64
    mma_layout: gl.constexpr = mma_layout_for(WG_M, BLOCK_N, 4)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    SFB_UNIFORM: gl.constexpr = (128 % BLOCK_N) == 0
    NUM_NB: gl.constexpr = (N + 127) // 128
    num_kb: gl.constexpr = K // BLOCK_K
    kb_per_split: gl.constexpr = num_kb // SPLIT_K
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    num_units = num_pid_m * num_pid_n * SPLIT_K

    zero = gl.zeros([WG_M, BLOCK_N], gl.float32, mma_layout)
    d_sub = d_smem.slice(WG * WG_M, WG_M, dim=0)
    it = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        tile = unit // SPLIT_K
        split = unit % SPLIT_K
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        kb0 = split * kb_per_split
        rows = off_m + WG * WG_M + gl.arange(0, WG_M, layout=row_layout)
        cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
        row_mask = rows < M
        col_mask = cols < N
        nb0 = off_n // 128
        second_col = (cols // 128) != nb0

        acc = gl.zeros([WG_M, BLOCK_N], gl.float32, mma_layout)
        sa, sb0, sb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col, kb0,
                               stride_sfa_k, stride_sfb, NUM_NB, SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM)
        if PIPE_MMA:
            # Prologue: the first K block's WGMMA in flight.
            s = it % STAGES
            mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
            prev = warpgroup_mma(_a_rows(a_bufs, s, WG), b_bufs.index(s).permute((1, 0)), zero,
                                 use_acc=False, is_async=True)
            prev_s = s
            it += 1
            for kk in range(1, kb_per_split):
                s = it % STAGES
                mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
                cur = warpgroup_mma(_a_rows(a_bufs, s, WG), b_bufs.index(s).permute((1, 0)), zero,
                                    use_acc=False, is_async=True)
                # Next block's scales load while both WGMMAs run.
                nsa, nsb0, nsb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col,
                                          kb0 + kk, stride_sfa_k, stride_sfb, NUM_NB,
                                          SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM)
                part = warpgroup_mma_wait(1, deps=(prev,))
                mbarrier.arrive(empty_bars.index(prev_s), count=1)
                acc = _promote(acc, part, sa, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
                sa = nsa
                sb0 = nsb0
                sb1 = nsb1
                prev = cur
                prev_s = s
                it += 1
            part = warpgroup_mma_wait(0, deps=(prev,))
            mbarrier.arrive(empty_bars.index(prev_s), count=1)
            acc = _promote(acc, part, sa, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
        else:
            for kk in range(kb_per_split):
                s = it % STAGES
                mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
                part = warpgroup_mma(_a_rows(a_bufs, s, WG), b_bufs.index(s).permute((1, 0)), zero,
                                     use_acc=False, is_async=True)
                # Next block's scales load while the WGMMA runs (the last iteration reloads its own).
                nkb = gl.minimum(kb0 + kk + 1, kb0 + kb_per_split - 1)
                nsa, nsb0, nsb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col,
                                          nkb, stride_sfa_k, stride_sfb, NUM_NB,
                                          SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM)
                part = warpgroup_mma_wait(0, deps=(part,))
                mbarrier.arrive(empty_bars.index(s), count=1)
                acc = _promote(acc, part, sa, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
                sa = nsa
                sb0 = nsb0
                sb1 = nsb1
                it += 1

        # Epilogue: C in FP32, cast, registers -> smem -> TMA store (left in flight).
        if SPLIT_K > 1:
            out_row = split * (num_pid_m * BLOCK_M) + off_m + WG * WG_M
        else:
            out_row = off_m + WG * WG_M
            if HAS_C:
                c_ptrs = c_ptr + rows.to(gl.int64)[:, None] * stride_cm + cols[None, :]
                c = gl.load(c_ptrs, mask=row_mask[:, None] & col_mask[None, :], other=0.0)
                acc = acc + c.to(gl.float32)
        tma.store_wait(0)
        gl.thread_barrier()
        d_sub.store(acc.to(d_desc.dtype))
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(d_desc, [out_row, off_n], d_sub)
    tma.store_wait(0)


@gluon.jit
def fp8_gemm_kernel(a_desc, b_desc, d_desc, sfa_ptr, sfb_ptr, c_ptr,
                    M, stride_sfa_k, stride_sfb, stride_cm,
                    N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, HAS_C: gl.constexpr,
                    PIPE_MMA: gl.constexpr, PRODUCER_REGS: gl.constexpr, MATH_REGS: gl.constexpr):
    """Entry: carve shared memory, init barriers, fork producer and math partitions."""
    NUM_WG: gl.constexpr = BLOCK_M // 64
    gl.static_assert(K % 128 == 0, "K must be a multiple of 128 (the scale block)")
    gl.static_assert((K // 128) % SPLIT_K == 0, "SPLIT_K must divide K / 128")
    gl.static_assert(BLOCK_N % 8 == 0, "BLOCK_N must be a multiple of 8")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    d_smem = gl.allocate_shared_memory(d_desc.dtype, [BLOCK_M, BLOCK_N], d_desc.layout)
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=NUM_WG)
    fence_async_shared()

    if NUM_WG == 2:
        # Two math warpgroups in two partitions: no CTA-wide barrier couples them, so one
        # promotes while the other's WGMMA runs (the overlap DeepGEMM gets from its 2 WGs).
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, 0)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, 1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K)),
        ], [4, 1], [MATH_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, 0)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K)),
        ], [1], [PRODUCER_REGS])


# ---------------------------------------------------------------------------------------------
# Split-K reduction: fixed-order sum of the FP32 partials, + C, cast (deterministic).
# ---------------------------------------------------------------------------------------------
@triton.jit
def _splitk_reduce_kernel(ws_ptr, d_ptr, c_ptr, M, N, M_PAD, stride_dm, stride_cm,
                          SPLIT_K: tl.constexpr, HAS_C: tl.constexpr, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    cols = pid_n * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    row = pid_m.to(tl.int64)
    acc = tl.load(ws_ptr + row * N + cols, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(ws_ptr + (s * M_PAD + row) * N + cols, mask=mask, other=0.0)
    if HAS_C:
        acc += tl.load(c_ptr + row * stride_cm + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(d_ptr + row * stride_dm + cols, acc.to(d_ptr.dtype.element_ty), mask=mask)
