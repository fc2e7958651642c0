"""The dense math partition of the sm90 FP8 GEMM, and the entry every math warpgroup runs (:func:`_math_partition`),
which picks it, the split-width one (:mod:`.split_n`) or the grouped one (:mod:`.grouped`).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    tma,
)

from .epilogue import _d_rows, _prefetch_c, _splitk_fused_epilogue, _store_wave
from .grouped import _grouped_math
from .mma import _one_wave_loop, _two_wave_loop
from .schedule import (
    _num_k_blocks,
    _tile_coords,
    _unit_plan,
    _unit_tile,
    head_split_column,
    mma_layout_for,
    num_math_warpgroups,
)
from .split_n import _split_n_math


@gluon.jit
def _math_partition(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                    sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                    N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, HAS_C: gl.constexpr,
                    PIPE_MMA: gl.constexpr, SMALL_EPI: gl.constexpr, sfa_bufs, SFA_TMA: gl.constexpr,
                    WG: gl.constexpr, layout_ptr=None, d_ptr=None, GROUPING: gl.constexpr = 0,
                    NUM_GROUPS: gl.constexpr = 1, GROUP_ROWS: gl.constexpr = 0, SFA_STRIDE_G: gl.constexpr = 0,
                    SFB_STRIDE_G: gl.constexpr = 0, USE_PSUM: gl.constexpr = False, ALIGN: gl.constexpr = 128,
                    sfb_bufs=None, SFB_TMA: gl.constexpr = False, a_desc=None,
                    K_DYN: gl.constexpr = False, c_desc=None, c_bars=None, C_TMA: gl.constexpr = False,
                    C_TMA_LATE: gl.constexpr = False, ws_ptr=None, cnt_ptr=None, SPLITK_FUSED: gl.constexpr = False,
                    SPLIT_TAIL: gl.constexpr = False, HEAD_SPLITS: gl.constexpr = (0, 0, 0),
                    D_REDUCE: gl.constexpr = False, b1_bufs=None, d1_desc=None, d1_smem=None,
                    BLOCK_N1: gl.constexpr = 0):
    """One math warpgroup (4 warps). Its rows of each tile: wave ``w`` covers tile rows
    ``w * 64 * NUM_WG + 64 * WG + [0, 64)`` (BLOCK_M 64/128: one wave; 256: two, DeepGEMM's order).
    ``d_smem`` holds [BLOCK_M, BLOCK_N] (or, with ``SMALL_EPI``, [64 * NUM_WG, BLOCK_N] that both
    waves of a warpgroup reuse in turn) rows of D staging. ``GROUPING`` 1/2: :func:`_grouped_math`.
    ``BLOCK_N1`` > 0: :func:`_split_n_math`."""
    if GROUPING != 0:
        _grouped_math(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, M, stride_sfa_k,
                      stride_sfb, N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SF_PACKED, sfa_bufs, SFA_TMA, WG,
                      layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G, SFB_STRIDE_G, USE_PSUM,
                      ALIGN, PIPE_MMA)
    elif BLOCK_N1 > 0:
        _split_n_math(a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, d_desc, d_smem, d1_desc, d1_smem, sfa_ptr,
                      sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm, N, K, BLOCK_M, BLOCK_N, BLOCK_N1, STAGES,
                      GROUP_M, SF_PACKED, HAS_C, sfa_bufs, SFA_TMA, WG, PIPE_MMA)
    else:
        _dense_math(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem, sfa_ptr, sfb_ptr, c_ptr, M,
                    stride_sfa_k, stride_sfb, stride_cm, N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                    SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, WG, sfb_bufs,
                    SFB_TMA, a_desc, K_DYN, c_desc, c_bars, C_TMA, C_TMA_LATE, ws_ptr, cnt_ptr, SPLITK_FUSED,
                    SPLIT_TAIL, HEAD_SPLITS, D_REDUCE)


@gluon.jit
def _dense_math(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, HAS_C: gl.constexpr,
                PIPE_MMA: gl.constexpr, SMALL_EPI: gl.constexpr, sfa_bufs, SFA_TMA: gl.constexpr,
                WG: gl.constexpr, sfb_bufs, SFB_TMA: gl.constexpr, a_desc, K_DYN: gl.constexpr, c_desc, c_bars,
                C_TMA: gl.constexpr, C_TMA_LATE: gl.constexpr = False, ws_ptr=None, cnt_ptr=None,
                SPLITK_FUSED: gl.constexpr = False, SPLIT_TAIL: gl.constexpr = False,
                HEAD_SPLITS: gl.constexpr = (0, 0, 0), D_REDUCE: gl.constexpr = False):
    """The dense math partition (GROUPING 0): persistent (tile, k-split) units.

    ``D_REDUCE`` (C is D, FP32, whole K or split-K summed in the kernel; ``HAS_C`` is then off): each wave's tile
    (a split tile's sum, by the split that arrives last) is added into D by a TMA reduce-add (:mod:`.gluon_compat`)
    instead of C being read and D stored: no C load on the critical path.

    ``C_TMA`` (with C, no split-K, FP32 C and D): the C rows of each tile's first wave are loaded by TMA into
    its D staging rows before the main loop (:func:`_prefetch_c`) instead of by blocking loads in the
    epilogue. BLOCK_M 256 needs ``SMALL_EPI`` (without it, the CPU compile spills 280 bytes), and there the
    second wave reads its C as before: it reuses the first wave's buffer.

    ``SPLITK_FUSED``: the split-K reduction runs here (:func:`_splitk_fused_epilogue`); ``d_desc`` is D's
    descriptor then, ``ws_ptr`` the FP32 workspace (``SPLIT_K`` planes of BLOCK_M x BLOCK_N per split tile)
    and ``cnt_ptr`` int32 arrival counters, one per (split tile, math warpgroup), 0 between launches.
    ``SPLIT_TAIL``: only the tiles of the grid's last, partial round are split (:func:`_unit_plan`); the
    others run their whole K and store as usual.

    ``HEAD_SPLITS`` ``(left, mid, right)`` with ``mid > 0``: D's columns skip ``mid`` after every ``left`` and
    before every ``right`` of each head's ``left + right`` (:func:`head_split_column`); BLOCK_N divides ``left``
    and ``right``, so every tile lands on consecutive columns."""
    WG_M: gl.constexpr = 64
    NUM_WG: gl.constexpr = num_math_warpgroups(BLOCK_M)
    WAVES: gl.constexpr = BLOCK_M // (WG_M * NUM_WG)
    row0: gl.constexpr = WG * WG_M
    row1: gl.constexpr = WG_M * NUM_WG + WG * WG_M
    mma_layout: gl.constexpr = mma_layout_for(WG_M, BLOCK_N, 4)
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    SFB_UNIFORM: gl.constexpr = (128 % BLOCK_N) == 0
    NUM_NB: gl.constexpr = (N + 127) // 128
    num_kb = _num_k_blocks(a_desc, K, K_DYN)
    kb_per_split = num_kb // SPLIT_K
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n: gl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    n_full, num_units = _unit_plan(num_pid_m * num_pid_n, SPLIT_K, SPLIT_TAIL)
    ADD_C: gl.constexpr = HAS_C and (SPLIT_K == 1 or SPLITK_FUSED)
    gl.static_assert(not C_TMA or ADD_C, "C_TMA: C added in the kernel (no split-K)")
    gl.static_assert(not D_REDUCE or ((SPLIT_K == 1 or SPLITK_FUSED) and not HAS_C and not C_TMA),
                     "D_REDUCE: D += tile, whole K or split-K summed in the kernel")
    gl.static_assert(not C_TMA or WAVES == 1 or SMALL_EPI, "C_TMA at BLOCK_M 256 needs SMALL_EPI (else it spills)")
    gl.static_assert(not SPLIT_TAIL or SPLITK_FUSED, "SPLIT_TAIL: the reduction in the kernel")
    # C_TMA_LATE: the C load starts after the first K-block pair instead of before the main loop (whole K only)
    C_LATE: gl.constexpr = C_TMA and C_TMA_LATE and WAVES == 1 and PIPE_MMA and not SPLIT_TAIL
    PLANE: gl.constexpr = BLOCK_M * BLOCK_N
    # In-kernel split-K with the per-token scales in the ring: release every slot behind the proxy fence.
    # Without it the H200 gave wrong and run-to-run different results once CTAs ran several split units
    # (a 16-CTA grid): the warpgroups drift apart around the reduction.
    # (1d1d: no TMA write of the ring's scales to order against, but without the fence ptxas spills 272 bytes in
    # the fused split-K epilogue of the 4096x2112x7168 FP32-out pick, CPU compile; kept)
    FENCE_RING: gl.constexpr = SPLITK_FUSED and SFA_TMA
    # this wave's offsets in a split tile's partial plane (SPLITK_FUSED)
    local = (row0 + gl.arange(0, WG_M, layout=row_layout))[:, None] * BLOCK_N + gl.arange(
        0, BLOCK_N, layout=col_layout)[None, :]

    d_sub0 = _d_rows(d_smem, row0)
    c_bar = c_bars.index(WG)
    it = 0
    tcount = 0
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        tile, split = _unit_tile(unit, n_full, SPLIT_K)
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        out_n = head_split_column(off_n, HEAD_SPLITS)
        kb0 = split * kb_per_split
        if SPLIT_K > 1 and not SPLITK_FUSED:
            # partials go to the workspace, split after split; the reduction adds C
            out_m = split * (num_pid_m * BLOCK_M) + off_m
        else:
            out_m = off_m
        rows0 = off_m + row0 + gl.arange(0, WG_M, layout=row_layout)
        cols = off_n + gl.arange(0, BLOCK_N, layout=col_layout)
        mask0 = rows0 < M
        col_mask = cols < N
        nb0 = off_n // 128
        second_col = (cols // 128) != nb0
        if C_TMA and not C_LATE:
            if SPLIT_TAIL:
                if unit < n_full:  # split tiles add C from global memory in their reduction
                    _prefetch_c(c_desc, c_bar, d_sub0, off_m + row0, off_n)
            else:
                _prefetch_c(c_desc, c_bar, d_sub0, off_m + row0, off_n)
        c_phase = tcount & 1
        tcount += 1
        if WAVES == 1:
            if SPLIT_TAIL:
                # whole tiles and split ones each with a constant trip count (a runtime one risks ptxas
                # serializing the WGMMAs)
                if unit < n_full:
                    acc, it = _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, 0, row0,
                                             sfa_ptr, sfb_ptr, rows0, cols, mask0, col_mask, nb0, second_col,
                                             stride_sfa_k, stride_sfb, mma_layout, NUM_NB, num_kb, STAGES,
                                             SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, PIPE_MMA, SFA_TMA, sfb_bufs,
                                             SFB_TMA, FENCE_RING=FENCE_RING)
                else:
                    acc, it = _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, kb0, row0,
                                             sfa_ptr, sfb_ptr, rows0, cols, mask0, col_mask, nb0, second_col,
                                             stride_sfa_k, stride_sfb, mma_layout, NUM_NB, kb_per_split, STAGES,
                                             SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, PIPE_MMA, SFA_TMA, sfb_bufs,
                                             SFB_TMA, FENCE_RING=FENCE_RING)
            else:
                acc, it = _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, kb0, row0,
                                         sfa_ptr, sfb_ptr, rows0, cols, mask0, col_mask, nb0, second_col,
                                         stride_sfa_k, stride_sfb, mma_layout, NUM_NB, kb_per_split, STAGES,
                                         SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, PIPE_MMA, SFA_TMA, sfb_bufs,
                                         SFB_TMA, c_desc, c_bar, d_sub0, off_m + row0, off_n, C_LATE, FENCE_RING)
            if SPLITK_FUSED:
                if unit < n_full:
                    _store_wave(acc, d_desc, d_sub0, c_ptr, rows0, cols, mask0, col_mask, stride_cm,
                                out_m + row0, out_n, 0, ADD_C, C_TMA, c_bar, c_phase, D_REDUCE)
                else:
                    split_tile = (tile - n_full).to(gl.int64)
                    _splitk_fused_epilogue(acc, ws_ptr + split_tile * (SPLIT_K * PLANE), cnt_ptr,
                                           split_tile * NUM_WG + WG, split, local, d_desc, d_sub0, c_ptr, rows0,
                                           cols, mask0, col_mask, stride_cm, off_m + row0, out_n, PLANE, SPLIT_K,
                                           HAS_C, D_REDUCE)
            else:
                _store_wave(acc, d_desc, d_sub0, c_ptr, rows0, cols, mask0, col_mask, stride_cm,
                            out_m + row0, out_n, 0, ADD_C, C_TMA, c_bar, c_phase, D_REDUCE)
        else:
            rows1 = off_m + row1 + gl.arange(0, WG_M, layout=row_layout)
            mask1 = rows1 < M
            acc0, acc1, it = _two_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, kb0, row0,
                                            row1, sfa_ptr, sfb_ptr, rows0, rows1, cols, mask0, mask1, col_mask,
                                            nb0, second_col, stride_sfa_k, stride_sfb, mma_layout, NUM_NB,
                                            kb_per_split, STAGES, SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM,
                                            SFA_TMA, sfb_bufs, SFB_TMA)
            _store_wave(acc0, d_desc, d_sub0, c_ptr, rows0, cols, mask0, col_mask, stride_cm,
                        out_m + row0, out_n, 0, ADD_C, C_TMA, c_bar, c_phase, D_REDUCE)
            # SMALL_EPI: wave 1 reuses wave 0's buffer, so wave 0's store must have read it first.
            if SMALL_EPI:
                d_sub1 = d_sub0
            else:
                d_sub1 = d_smem.slice(row1, WG_M, dim=0)
            _store_wave(acc1, d_desc, d_sub1, c_ptr, rows1, cols, mask1, col_mask, stride_cm,
                        out_m + row1, out_n, 0 if SMALL_EPI else 1, ADD_C, REDUCE=D_REDUCE)
    tma.store_wait(0)
