"""The math partition of the sm90 FP8 GEMM for tiles of two column blocks (``BLOCK_N1`` > 0): a width that is not a
power of two, which no Gluon tensor can have, run as two WGMMAs a K block.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .epilogue import _d_rows, _store_wave
from .mma import _a_rows, _promote, _release, _ring_scale, _scales
from .schedule import BLOCK_K, _tile_coords, mma_layout_for


@gluon.jit
def _split_n_issue(a_bufs, b_bufs, b1_bufs, full_bars, it, row0: gl.constexpr, zero, zero1, STAGES: gl.constexpr):
    """Wait for ring entry ``it`` and issue its two WGMMAs (the tile's two column blocks, the same A rows) into fresh
    partials: (partial, second partial, slot)."""
    s = it % STAGES
    mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
    a = _a_rows(a_bufs, s, row0)
    part = warpgroup_mma(a, b_bufs.index(s).permute((1, 0)), zero, use_acc=False, is_async=True)
    part1 = warpgroup_mma(a, b1_bufs.index(s).permute((1, 0)), zero1, use_acc=False, is_async=True)
    return part, part1, s


@gluon.jit
def _split_n_retire(acc, acc1, part, part1, s, kb, PENDING: gl.constexpr, sfa_bufs, empty_bars, row0: gl.constexpr,
                    sa, sb0, sb1, sa1, tb0, tb1, second_col, second_col1, PACKED: gl.constexpr,
                    SFA_TMA: gl.constexpr):
    """Wait for K block ``kb``'s two WGMMAs (``PENDING`` later groups stay in flight), promote each partial with its
    column block's scales (the first block may straddle two 128-column scale blocks, the second never does: its
    offset is a multiple of its power-of-two width; ring scales read here), release slot ``s`` (behind a proxy
    fence when the scales came from it: without it the first H100 run had 4095x4096x1536 at 128x160 differ between two
    runs, and a repeat test 5 of 5 repeats, up to 738 k elements)."""
    part, part1 = warpgroup_mma_wait(PENDING, deps=(part, part1))
    if SFA_TMA:
        sa = _ring_scale(sfa_bufs, s, kb, row0, gl.SliceLayout(1, part.type.layout), PACKED)
        sa1 = _ring_scale(sfa_bufs, s, kb, row0, gl.SliceLayout(1, part1.type.layout), PACKED)
    acc = _promote(acc, part, sa, sb0, sb1, second_col, False, False)
    acc1 = _promote(acc1, part1, sa1, tb0, tb1, second_col1, False, True)
    _release(empty_bars, s, SFA_TMA)
    return acc, acc1


@gluon.jit
def _split_n_scales(sfa_ptr, sfb_ptr, rows, rows1, row_mask, row_mask1, cols, cols1, col_mask, col_mask1, nb0, nb1,
                    second_col, second_col1, kb, stride_sfa_k, stride_sfb, NUM_NB: gl.constexpr,
                    SF_PACKED: gl.constexpr, SFA_TMA: gl.constexpr):
    """Both column blocks' scales for K block ``kb``: (sa, sb0, sb1) of the first, (sa1, tb0, tb1) of the second."""
    sa, sb0, sb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col, kb, stride_sfa_k,
                           stride_sfb, NUM_NB, SF_PACKED, False, False, SFA_TMA)
    sa1, tb0, tb1 = _scales(sfa_ptr, sfb_ptr, rows1, cols1, row_mask1, col_mask1, nb1, second_col1, kb, stride_sfa_k,
                            stride_sfb, NUM_NB, SF_PACKED, False, True, SFA_TMA)
    return sa, sb0, sb1, sa1, tb0, tb1


@gluon.jit
def _split_n_loop(a_bufs, b_bufs, b1_bufs, sfa_bufs, full_bars, empty_bars, it, row0: gl.constexpr, sfa_ptr,
                  sfb_ptr, rows, rows1, row_mask, row_mask1, cols, cols1, col_mask, col_mask1, nb0, nb1, second_col,
                  second_col1, stride_sfa_k, stride_sfb, NUM_NB: gl.constexpr, KB, STAGES: gl.constexpr,
                  SF_PACKED: gl.constexpr, SFA_TMA: gl.constexpr, PIPE_MMA: gl.constexpr = False):
    """One 64-row wave of a tile ``BLOCK_N + BLOCK_N1`` wide over ``KB`` K blocks (recipe (1, 128, 128)): per K block
    two WGMMAs on the same A rows, into a [64, BLOCK_N] and a [64, BLOCK_N1] partial from B's two boxes of the slot,
    waited together and promoted each with its own columns' scales (:func:`_split_n_retire`). ``PIPE_MMA`` (where
    registers allow: 64x96 takes 144 of them, 128 + 64 would take 288): K blocks in pairs as in
    :func:`_one_wave_loop`, the first pair's partials promoted while the second's run, nothing in flight at the
    loop's back edge. Returns (acc, acc1, ring counter)."""
    BLOCK_N: gl.constexpr = b_bufs.shape[1]
    BLOCK_N1: gl.constexpr = b1_bufs.shape[1]
    layout: gl.constexpr = mma_layout_for(64, BLOCK_N, 4)
    layout1: gl.constexpr = mma_layout_for(64, BLOCK_N1, 4)
    zero = gl.zeros([64, BLOCK_N], gl.float32, layout)
    zero1 = gl.zeros([64, BLOCK_N1], gl.float32, layout1)
    acc = gl.zeros([64, BLOCK_N], gl.float32, layout)
    acc1 = gl.zeros([64, BLOCK_N1], gl.float32, layout1)
    sa, sb0, sb1, sa1, tb0, tb1 = _split_n_scales(sfa_ptr, sfb_ptr, rows, rows1, row_mask, row_mask1, cols, cols1,
                                                  col_mask, col_mask1, nb0, nb1, second_col, second_col1, 0,
                                                  stride_sfa_k, stride_sfb, NUM_NB, SF_PACKED, SFA_TMA)
    if PIPE_MMA:
        for kk in range(0, KB - 1, 2):
            pa, pa1, s_a = _split_n_issue(a_bufs, b_bufs, b1_bufs, full_bars, it, row0, zero, zero1, STAGES)
            pb, pb1, s_b = _split_n_issue(a_bufs, b_bufs, b1_bufs, full_bars, it + 1, row0, zero, zero1, STAGES)
            it += 2
            nsa, nsb0, nsb1, nsa1, ntb0, ntb1 = _split_n_scales(sfa_ptr, sfb_ptr, rows, rows1, row_mask, row_mask1,
                                                                cols, cols1, col_mask, col_mask1, nb0, nb1,
                                                                second_col, second_col1, kk + 1, stride_sfa_k,
                                                                stride_sfb, NUM_NB, SF_PACKED, SFA_TMA)
            acc, acc1 = _split_n_retire(acc, acc1, pa, pa1, s_a, kk, 2, sfa_bufs, empty_bars, row0, sa, sb0, sb1,
                                        sa1, tb0, tb1, second_col, second_col1, SF_PACKED, SFA_TMA)
            sa, sb0, sb1, sa1, tb0, tb1 = _split_n_scales(sfa_ptr, sfb_ptr, rows, rows1, row_mask, row_mask1, cols,
                                                          cols1, col_mask, col_mask1, nb0, nb1, second_col,
                                                          second_col1, gl.minimum(kk + 2, KB - 1), stride_sfa_k,
                                                          stride_sfb, NUM_NB, SF_PACKED, SFA_TMA)
            acc, acc1 = _split_n_retire(acc, acc1, pb, pb1, s_b, kk + 1, 0, sfa_bufs, empty_bars, row0, nsa, nsb0,
                                        nsb1, nsa1, ntb0, ntb1, second_col, second_col1, SF_PACKED, SFA_TMA)
        if KB % 2 == 1:
            part, part1, s = _split_n_issue(a_bufs, b_bufs, b1_bufs, full_bars, it, row0, zero, zero1, STAGES)
            it += 1
            acc, acc1 = _split_n_retire(acc, acc1, part, part1, s, KB - 1, 0, sfa_bufs, empty_bars, row0, sa, sb0,
                                        sb1, sa1, tb0, tb1, second_col, second_col1, SF_PACKED, SFA_TMA)
    else:
        for kk in range(KB):
            part, part1, s = _split_n_issue(a_bufs, b_bufs, b1_bufs, full_bars, it, row0, zero, zero1, STAGES)
            # the next block's scales load while the WGMMAs run (the last iteration reloads its own)
            nsa, nsb0, nsb1, nsa1, ntb0, ntb1 = _split_n_scales(sfa_ptr, sfb_ptr, rows, rows1, row_mask, row_mask1,
                                                                cols, cols1, col_mask, col_mask1, nb0, nb1,
                                                                second_col, second_col1, gl.minimum(kk + 1, KB - 1),
                                                                stride_sfa_k, stride_sfb, NUM_NB, SF_PACKED, SFA_TMA)
            acc, acc1 = _split_n_retire(acc, acc1, part, part1, s, kk, 0, sfa_bufs, empty_bars, row0, sa, sb0, sb1,
                                        sa1, tb0, tb1, second_col, second_col1, SF_PACKED, SFA_TMA)
            sa = nsa
            sb0 = nsb0
            sb1 = nsb1
            sa1 = nsa1
            tb0 = ntb0
            tb1 = ntb1
            it += 1
    return acc, acc1, it


@gluon.jit
def _split_n_math(a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, d_desc, d_smem, d1_desc, d1_smem, sfa_ptr,
                  sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm, N: gl.constexpr, K: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_N1: gl.constexpr, STAGES: gl.constexpr,
                  GROUP_M: gl.constexpr, SF_PACKED: gl.constexpr, HAS_C: gl.constexpr, sfa_bufs,
                  SFA_TMA: gl.constexpr, WG: gl.constexpr, PIPE_MMA: gl.constexpr = False):
    """The dense math partition for tiles ``BLOCK_N + BLOCK_N1`` wide (``BLOCK_N1`` > 0; a width that is not a power
    of two, which no Gluon tensor can have): BLOCK_M 64 / 128 (one wave a warpgroup), recipe (1, 128, 128), whole
    K, no C staging. Each tile's two column blocks are stored from their own staging rows (``d_smem`` and
    ``d1_smem``) by ``d_desc`` and ``d1_desc``; C, if any, is read from global memory in the epilogue."""
    row0: gl.constexpr = WG * 64
    TILE_N: gl.constexpr = BLOCK_N + BLOCK_N1
    layout: gl.constexpr = mma_layout_for(64, BLOCK_N, 4)
    layout1: gl.constexpr = mma_layout_for(64, BLOCK_N1, 4)
    NUM_NB: gl.constexpr = (N + 127) // 128
    num_kb: gl.constexpr = K // BLOCK_K
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n: gl.constexpr = (N + TILE_N - 1) // TILE_N
    d_sub = _d_rows(d_smem, row0)
    d1_sub = _d_rows(d1_smem, row0)
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * TILE_N
        rows = off_m + row0 + gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
        rows1 = off_m + row0 + gl.arange(0, 64, layout=gl.SliceLayout(1, layout1))
        cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
        cols1 = off_n + BLOCK_N + gl.arange(0, BLOCK_N1, layout=gl.SliceLayout(0, layout1))
        row_mask = rows < M
        row_mask1 = rows1 < M
        col_mask = cols < N
        col_mask1 = cols1 < N
        nb0 = off_n // 128
        # the last tile's second block may lie wholly past N: its scale row is clamped (its columns are never stored)
        nb1 = gl.minimum((off_n + BLOCK_N) // 128, NUM_NB - 1)
        second_col = (cols // 128) != nb0
        second_col1 = (cols1 // 128) != nb1
        acc, acc1, it = _split_n_loop(a_bufs, b_bufs, b1_bufs, sfa_bufs, full_bars, empty_bars, it, row0, sfa_ptr,
                                      sfb_ptr, rows, rows1, row_mask, row_mask1, cols, cols1, col_mask, col_mask1, nb0,
                                      nb1, second_col, second_col1, stride_sfa_k, stride_sfb, NUM_NB, num_kb, STAGES,
                                      SF_PACKED, SFA_TMA, PIPE_MMA)
        _store_wave(acc, d_desc, d_sub, c_ptr, rows, cols, row_mask, col_mask, stride_cm, off_m + row0, off_n, 0,
                    HAS_C)
        # the first block's store may still be in flight; the second's staging rows were freed by its wait
        _store_wave(acc1, d1_desc, d1_sub, c_ptr, rows1, cols1, row_mask1, col_mask1, stride_cm, off_m + row0,
                    off_n + BLOCK_N, 1, HAS_C)
    tma.store_wait(0)
