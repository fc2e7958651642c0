"""The m-grouped (MoE) math partitions of the sm90 FP8 GEMM: contiguous, masked and head-batched (``GROUPING`` 1, 2,
3), 256-row tiles included.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    tma,
)

from .epilogue import _store_masked_wave, _store_masked_wave_staged, _store_wave
from .mma import _one_wave_loop, _two_wave_loop
from .schedule import (
    BLOCK_K,
    _contiguous_group,
    _first_local_unit,
    _halves_of_tile,
    _masked_group_tiles,
    _rows_of_group,
    _tile_coords,
    head_tile,
    mma_layout_for,
)


@gluon.jit
def _grouped_wave(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, sfa_ptr, sfb_ptr, rows, row_ok,
                  off_n, kb_count, stride_sfa_k, stride_sfb, N: gl.constexpr, K: gl.constexpr,
                  STAGES: gl.constexpr, SF_PACKED: gl.constexpr, SFA_TMA: gl.constexpr, WG: gl.constexpr,
                  PIPE_MMA: gl.constexpr = False):
    """Main loop of this warpgroup's 64-row wave of one grouped tile: (acc, cols, col_mask, ring counter).

    ``rows``: the wave's row indices in the scale tensor's M (``sfa_ptr`` already offset to the group);
    ``kb_count``: K blocks to run (0 for a skipped tile: a zero accumulator, no barrier touched).
    """
    BLOCK_N: gl.constexpr = b_bufs.shape[1]
    mma_layout: gl.constexpr = mma_layout_for(64, BLOCK_N, 4)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
    col_mask = cols < N
    nb0 = off_n // 128
    second_col = (cols // 128) != nb0
    acc, it = _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, 0, WG * 64,
                             sfa_ptr, sfb_ptr, rows, cols, row_ok, col_mask, nb0, second_col,
                             stride_sfa_k, stride_sfb, mma_layout, (N + 127) // 128, kb_count, STAGES,
                             SF_PACKED, False, (128 % BLOCK_N) == 0, PIPE_MMA, SFA_TMA)
    return acc, cols, col_mask, it


@gluon.jit
def _grouped_math(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, M, stride_sfa_k,
                  stride_sfb, N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  STAGES: gl.constexpr, GROUP_M: gl.constexpr, SF_PACKED: gl.constexpr, sfa_bufs,
                  SFA_TMA: gl.constexpr, WG: gl.constexpr, layout_ptr, d_ptr, GROUPING: gl.constexpr,
                  NUM_GROUPS: gl.constexpr, GROUP_ROWS: gl.constexpr, SFA_STRIDE_G: gl.constexpr,
                  SFB_STRIDE_G: gl.constexpr, USE_PSUM: gl.constexpr, ALIGN: gl.constexpr,
                  PIPE_MMA: gl.constexpr = False):
    """Math warpgroup ``WG`` of the m-grouped kernels (BLOCK_M 64/128: one 64-row wave per warpgroup; 256-row
    tiles: :func:`_contiguous_math_256`, :func:`_masked_math_256`).

    GROUPING 1 (contiguous): the tiles of [M_total, N]; each reads its group once; rows that are not the
    group's (padding, or ids outside [0, G)) are written as 0, a padding tile runs no K block and
    stores a zero tile. GROUPING 2 (masked): the valid tiles of every group in order (the producer's
    walk); rows at or past ``masked_m[g]`` are neither computed into the result nor written. GROUPING 3
    (head-batched): every group's tiles of [M, N], group g's D columns ``g * N + [0, N)`` (the TMA store clips
    the rows past M).
    """
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout_for(64, BLOCK_N, 4))
    num_kb: gl.constexpr = K // BLOCK_K
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    d_sub = d_smem.slice(WG * 64, 64, dim=0)
    it = 0
    if BLOCK_M == 256:
        if GROUPING == 1:
            _contiguous_math_256(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, M,
                                 stride_sfa_k, stride_sfb, N, K, BLOCK_N, STAGES, GROUP_M, SF_PACKED, sfa_bufs,
                                 SFA_TMA, WG, layout_ptr, NUM_GROUPS, SFB_STRIDE_G, USE_PSUM, ALIGN)
        else:
            _masked_math_256(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, d_ptr,
                             stride_sfa_k, stride_sfb, N, K, BLOCK_N, STAGES, GROUP_M, SF_PACKED, sfa_bufs, SFA_TMA,
                             WG, layout_ptr, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G, SFB_STRIDE_G)
    elif GROUPING == 1:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = _tile_coords(unit, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            g, safe, valid, end = _contiguous_group(layout_ptr, off_m, NUM_GROUPS, USE_PSUM, ALIGN)
            rows = off_m + WG * 64 + gl.arange(0, 64, layout=row_layout)
            in_m = rows < M
            acc, cols, col_mask, it = _grouped_wave(
                a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, sfa_ptr, sfb_ptr + safe * SFB_STRIDE_G,
                rows, in_m, off_n, gl.where(valid, num_kb, 0), stride_sfa_k, stride_sfb, N, K, STAGES,
                SF_PACKED, SFA_TMA, WG)
            acc = gl.where(_rows_of_group(layout_ptr, rows, in_m, (g, valid, end), USE_PSUM)[:, None], acc, 0.0)
            _store_wave(acc, d_desc, d_sub, None, rows, cols, in_m, col_mask, 0, off_m + WG * 64, off_n, 0, False)
    elif GROUPING == 2:
        g_start = 0
        for g in range(NUM_GROUPS):
            valid_rows, num_pid_m, tiles_g = _masked_group_tiles(layout_ptr, g, GROUP_ROWS, BLOCK_M, num_pid_n)
            local = _first_local_unit(g_start)
            while local < tiles_g:  # not range(): see _first_local_unit
                pid_m, pid_n = _tile_coords(local, num_pid_m, num_pid_n, GROUP_M)
                off_m = pid_m * BLOCK_M
                off_n = pid_n * BLOCK_N
                rows = off_m + WG * 64 + gl.arange(0, 64, layout=row_layout)
                acc, cols, col_mask, it = _grouped_wave(
                    a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, sfa_ptr + g * SFA_STRIDE_G,
                    sfb_ptr + g * SFB_STRIDE_G, rows, rows < valid_rows, off_n, num_kb, stride_sfa_k, stride_sfb,
                    N, K, STAGES, SF_PACKED, SFA_TMA, WG, PIPE_MMA)
                _store_masked_wave(acc, d_desc, d_sub, d_ptr, rows, off_m + WG * 64, cols, col_mask, valid_rows,
                                   g * GROUP_ROWS + off_m + WG * 64, off_n, N)
                local += gl.num_programs(0)
            g_start += tiles_g
    else:
        num_pid_m = gl.cdiv(M, BLOCK_M)
        for unit in range(gl.program_id(0), NUM_GROUPS * num_pid_m * num_pid_n, gl.num_programs(0)):
            g, pid_m, pid_n = head_tile(unit, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            rows = off_m + WG * 64 + gl.arange(0, 64, layout=row_layout)
            in_m = rows < M
            acc, cols, col_mask, it = _grouped_wave(
                a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, sfa_ptr + g * SFA_STRIDE_G,
                sfb_ptr + g * SFB_STRIDE_G, rows, in_m, off_n, num_kb, stride_sfa_k, stride_sfb, N, K, STAGES,
                SF_PACKED, SFA_TMA, WG, PIPE_MMA)
            _store_wave(acc, d_desc, d_sub, None, rows, cols, in_m, col_mask, 0, off_m + WG * 64, g * N + off_n, 0,
                        False)
    tma.store_wait(0)


@gluon.jit
def _contiguous_math_256(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, M, stride_sfa_k,
                         stride_sfb, N: gl.constexpr, K: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                         GROUP_M: gl.constexpr, SF_PACKED: gl.constexpr, sfa_bufs, SFA_TMA: gl.constexpr,
                         WG: gl.constexpr, layout_ptr, NUM_GROUPS: gl.constexpr, SFB_STRIDE_G: gl.constexpr,
                         USE_PSUM: gl.constexpr, ALIGN: gl.constexpr):
    """Math warpgroup ``WG`` of the contiguous kernel at BLOCK_M 256 (two 64-row waves a warpgroup, the dense
    order: wave 0 in the tile's first 128-row half, wave 1 in the second).

    Each half lies inside one segment (:func:`_halves_of_tile`). A tile whose halves belong to one group
    runs once; one whose halves belong to two groups (only at group boundaries that are not multiples of
    256: at most G - 1 tile rows) runs its K loop twice, each pass with one group's B and only that group's
    wave (the producer loads the whole A tile both times). Rows not of their half's group (padding, ids outside [0, G))
    are written as 0; a tile with no valid half runs no K block and stores zeros.
    """
    BLOCK_M: gl.constexpr = 256
    mma_layout: gl.constexpr = mma_layout_for(64, BLOCK_N, 4)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    SFB_UNIFORM: gl.constexpr = (128 % BLOCK_N) == 0
    NUM_NB: gl.constexpr = (N + 127) // 128
    num_kb: gl.constexpr = K // BLOCK_K
    row0: gl.constexpr = WG * 64
    row1: gl.constexpr = 128 + WG * 64
    d_sub0 = d_smem.slice(row0, 64, dim=0)
    d_sub1 = d_smem.slice(row1, 64, dim=0)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    it = 0
    for unit in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(unit, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        first, second, two, any_valid, lo, hi = _halves_of_tile(layout_ptr, off_m, M, NUM_GROUPS, USE_PSUM, ALIGN)
        rows0 = off_m + row0 + gl.arange(0, 64, layout=row_layout)
        rows1 = off_m + row1 + gl.arange(0, 64, layout=row_layout)
        in0 = rows0 < M
        in1 = rows1 < M
        cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
        col_mask = cols < N
        nb0 = off_n // 128
        second_col = (cols // 128) != nb0
        if two:
            # one wave per pass: the first half's rows with its group's B, then the second half's with its own
            acc0, it = _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, 0, row0, sfa_ptr,
                                      sfb_ptr + first * SFB_STRIDE_G, rows0, cols, in0, col_mask, nb0, second_col,
                                      stride_sfa_k, stride_sfb, mma_layout, NUM_NB, num_kb, STAGES, SF_PACKED,
                                      False, SFB_UNIFORM, False, SFA_TMA)
            acc0 = gl.where(_rows_of_group(layout_ptr, rows0, in0, lo, USE_PSUM)[:, None], acc0, 0.0)
            _store_wave(acc0, d_desc, d_sub0, None, rows0, cols, in0, col_mask, 0, off_m + row0, off_n, 0, False)
            acc1, it = _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, 0, row1, sfa_ptr,
                                      sfb_ptr + second * SFB_STRIDE_G, rows1, cols, in1, col_mask, nb0, second_col,
                                      stride_sfa_k, stride_sfb, mma_layout, NUM_NB, num_kb, STAGES, SF_PACKED,
                                      False, SFB_UNIFORM, False, SFA_TMA)
        else:
            acc0, acc1, it = _two_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, 0, row0, row1,
                                            sfa_ptr, sfb_ptr + first * SFB_STRIDE_G, rows0, rows1, cols, in0, in1,
                                            col_mask, nb0, second_col, stride_sfa_k, stride_sfb, mma_layout, NUM_NB,
                                            gl.where(any_valid, num_kb, 0), STAGES, SF_PACKED, False, SFB_UNIFORM,
                                            SFA_TMA)
            acc0 = gl.where(_rows_of_group(layout_ptr, rows0, in0, lo, USE_PSUM)[:, None], acc0, 0.0)
            _store_wave(acc0, d_desc, d_sub0, None, rows0, cols, in0, col_mask, 0, off_m + row0, off_n, 0, False)
        acc1 = gl.where(_rows_of_group(layout_ptr, rows1, in1, hi, USE_PSUM)[:, None], acc1, 0.0)
        _store_wave(acc1, d_desc, d_sub1, None, rows1, cols, in1, col_mask, 0, off_m + row1, off_n, 1, False)
    tma.store_wait(0)


@gluon.jit
def _masked_math_256(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, d_ptr, stride_sfa_k,
                     stride_sfb, N: gl.constexpr, K: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                     GROUP_M: gl.constexpr, SF_PACKED: gl.constexpr, sfa_bufs, SFA_TMA: gl.constexpr,
                     WG: gl.constexpr, layout_ptr, NUM_GROUPS: gl.constexpr, GROUP_ROWS: gl.constexpr,
                     SFA_STRIDE_G: gl.constexpr, SFB_STRIDE_G: gl.constexpr):
    """Math warpgroup ``WG`` of the masked kernel at BLOCK_M 256 (two 64-row waves a warpgroup, the dense order):
    the valid 256-row tiles of every group in the producer's order; each wave is stored by
    :func:`_store_masked_wave_staged` (rows at or past ``masked_m[g]`` are not written)."""
    BLOCK_M: gl.constexpr = 256
    mma_layout: gl.constexpr = mma_layout_for(64, BLOCK_N, 4)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    SFB_UNIFORM: gl.constexpr = (128 % BLOCK_N) == 0
    NUM_NB: gl.constexpr = (N + 127) // 128
    num_kb: gl.constexpr = K // BLOCK_K
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    row0: gl.constexpr = WG * 64
    row1: gl.constexpr = 128 + WG * 64
    d_sub0 = d_smem.slice(row0, 64, dim=0)
    d_sub1 = d_smem.slice(row1, 64, dim=0)
    it = 0
    g_start = 0
    for g in range(NUM_GROUPS):
        valid_rows, num_pid_m, tiles_g = _masked_group_tiles(layout_ptr, g, GROUP_ROWS, BLOCK_M, num_pid_n)
        local = _first_local_unit(g_start)
        while local < tiles_g:  # not range(): see _first_local_unit
            pid_m, pid_n = _tile_coords(local, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            rows0 = off_m + row0 + gl.arange(0, 64, layout=row_layout)
            rows1 = off_m + row1 + gl.arange(0, 64, layout=row_layout)
            cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
            col_mask = cols < N
            nb0 = off_n // 128
            second_col = (cols // 128) != nb0
            acc0, acc1, it = _two_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, 0, row0, row1,
                                            sfa_ptr + g * SFA_STRIDE_G, sfb_ptr + g * SFB_STRIDE_G, rows0, rows1,
                                            cols, rows0 < valid_rows, rows1 < valid_rows, col_mask, nb0, second_col,
                                            stride_sfa_k, stride_sfb, mma_layout, NUM_NB, num_kb, STAGES, SF_PACKED,
                                            False, SFB_UNIFORM, SFA_TMA)
            out_row = g * GROUP_ROWS + off_m
            _store_masked_wave_staged(acc0, d_desc, d_sub0, d_ptr, off_m + row0, valid_rows, out_row + row0, off_n,
                                      N, 0)
            _store_masked_wave_staged(acc1, d_desc, d_sub1, d_ptr, off_m + row1, valid_rows, out_row + row1, off_n,
                                      N, 1)
            local += gl.num_programs(0)
        g_start += tiles_g
    tma.store_wait(0)
