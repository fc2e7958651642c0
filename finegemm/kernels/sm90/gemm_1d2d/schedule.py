"""Tile walk of the sm90 FP8 GEMM: tile coordinates, the persistent grid's work units and split-K plan, the head-
batched and head-split column maps, and the m-grouped (MoE) row lookups that the producer and the math partitions
share.
"""

from __future__ import annotations

import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

BLOCK_K: tl.constexpr = tl.constexpr(128)


@gluon.constexpr_function
def mma_layout_for(block_m, block_n, num_warps):
    """Accumulator layout: warps stacked along M (16 rows each per instruction), full-width N."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, block_n, 32])


@gluon.constexpr_function
def num_math_warpgroups(block_m):
    """Math warpgroups of a BLOCK_M tile: one per 64 rows up to two (BLOCK_M 256: two waves each); BLOCK_M
    192: three, one wave each. Restates :func:`.layouts.math_warpgroups`: Triton 3.6 rejects a plain Python
    function referenced from a kernel's (constexpr) helpers ("Unsupported function referenced")."""
    return 3 if block_m == 192 else min(block_m // 64, 2)


@gluon.constexpr_function
def d_staging_rows(block_m, small_epi):
    """Rows of the D staging buffer: the whole tile, or one 64-row wave per warpgroup (``SMALL_EPI``)."""
    return 64 * num_math_warpgroups(block_m) if small_epi else block_m


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
def head_tile(unit, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """(group, pid_m, pid_n) of work unit ``unit`` of the head-batched schedule (``GROUPING`` 3 here and in the
    BF16 grouped kernel): every group's ``num_pid_m x num_pid_n`` tiles in turn."""
    tiles = num_pid_m * num_pid_n
    pid_m, pid_n = _tile_coords(unit % tiles, num_pid_m, num_pid_n, GROUP_M)
    return unit // tiles, pid_m, pid_n


@gluon.jit
def head_split_column(col, HEAD_SPLITS: gl.constexpr):
    """D column of GEMM column ``col`` under ``HEAD_SPLITS`` ``(left, mid, right)``: each head's ``left + right``
    GEMM columns land as ``left``, a gap of ``mid`` left untouched, ``right`` (DeepGEMM's
    ``fp8_gemm_nt_skip_head_mid``); ``mid == 0`` is the identity."""
    if HEAD_SPLITS[1] > 0:
        return col + (col + HEAD_SPLITS[2]) // (HEAD_SPLITS[0] + HEAD_SPLITS[2]) * HEAD_SPLITS[1]
    else:
        return col


@gluon.jit
def _num_k_blocks(a_desc, K: gl.constexpr, K_DYN: gl.constexpr):
    """K blocks of 128 per tile: ``K // 128`` (compile-time), or with ``K_DYN`` the A descriptor's K extent
    at run time (one compiled kernel serves every K, e.g. the k-grouped launches' per-group K)."""
    if K_DYN:
        return a_desc.shape[1] // BLOCK_K
    else:
        return K // BLOCK_K


@gluon.jit
def _unit_plan(num_tiles, SPLIT_K: gl.constexpr, SPLIT_TAIL: gl.constexpr):
    """(whole tiles, work units) of the persistent grid: without split-K every tile is one unit; with it
    (``SPLIT_K > 1``) every tile is ``SPLIT_K`` units, or with ``SPLIT_TAIL`` only the tiles of the last,
    partial round of the grid are (the whole rounds' tiles run whole first)."""
    if SPLIT_K == 1:
        n_full = num_tiles
    elif SPLIT_TAIL:
        n_full = num_tiles // gl.num_programs(0) * gl.num_programs(0)
    else:
        n_full = num_tiles * 0
    return n_full, n_full + (num_tiles - n_full) * SPLIT_K


@gluon.jit
def _unit_tile(unit, n_full, SPLIT_K: gl.constexpr):
    """(tile, split) of work unit ``unit`` (:func:`_unit_plan`); a whole tile is split 0 of 1."""
    if SPLIT_K == 1:
        return unit, unit * 0
    else:
        v = gl.maximum(unit - n_full, 0)
        return gl.where(unit < n_full, unit, n_full + v // SPLIT_K), gl.where(unit < n_full, 0, v % SPLIT_K)


@gluon.jit
def _contiguous_group(layout_ptr, off_m, NUM_GROUPS: gl.constexpr, USE_PSUM: gl.constexpr, ALIGN: gl.constexpr):
    """(group id as stored, safe id in [0, G), tile has work, end row) of the contiguous M tile at ``off_m``.

    Per-row layout (``grouped_layout`` int32 [M_total]): the id of the tile's first row (BLOCK_M divides
    the segment alignment, so a tile never straddles two segments); ids outside [0, G) mark padding.
    The end row is a large sentinel: the epilogue compares every row's own id instead.
    PSUM layout (int32 [G] cumulative end rows): the tile's group is the number of groups whose aligned
    end is <= ``off_m``; it has work if that is < G and ``off_m`` < the group's end.
    """
    if USE_PSUM:
        g = off_m * 0
        for j in range(NUM_GROUPS):
            end_j = gl.maximum(gl.load(layout_ptr + j), 0)
            g += ((end_j + (ALIGN - 1)) // ALIGN * ALIGN <= off_m).to(gl.int32)
        safe = gl.minimum(g, NUM_GROUPS - 1)
        end = gl.load(layout_ptr + safe)
        valid = (g < NUM_GROUPS) & (off_m < end)
    else:
        g = gl.load(layout_ptr + off_m)
        valid = (g >= 0) & (g < NUM_GROUPS)
        safe = gl.where(valid, g, 0)
        end = off_m * 0 + 2147483647
    return g, safe, valid, end


@gluon.jit
def _halves_of_tile(layout_ptr, off_m, M, NUM_GROUPS: gl.constexpr, USE_PSUM: gl.constexpr, ALIGN: gl.constexpr):
    """A 256-row contiguous tile as two 128-row halves, each inside one segment (segments start on multiples
    of ``ALIGN`` = 128, so a group boundary can fall only between the halves).

    Returns (group of the first pass, group of the second, whether a second pass runs, whether any half has
    work, lo, hi) where lo / hi are each half's (group as stored, valid, end row) for the epilogue's row
    masks. The first pass uses the first valid half's group; a second pass (the whole tile again, with the
    other B) runs only when both halves are valid and their groups differ. A half starting at or past M
    has no work (and its group is never read past the end of ``grouped_layout``).
    """
    g_lo, safe_lo, valid_lo, end_lo = _contiguous_group(layout_ptr, off_m, NUM_GROUPS, USE_PSUM, ALIGN)
    hi_row = off_m + 128
    g_hi, safe_hi, valid_hi, end_hi = _contiguous_group(layout_ptr, gl.minimum(hi_row, M - 1), NUM_GROUPS,
                                                        USE_PSUM, ALIGN)
    valid_hi = valid_hi & (hi_row < M)
    first = gl.where(valid_lo, safe_lo, safe_hi)
    two = valid_lo & valid_hi & (safe_lo != safe_hi)
    return first, safe_hi, two, valid_lo | valid_hi, (g_lo, valid_lo, end_lo), (g_hi, valid_hi, end_hi)


@gluon.jit
def _rows_of_group(layout_ptr, rows, in_m, half, USE_PSUM: gl.constexpr):
    """Which of ``rows`` (one wave inside one half, ``half`` = its (group, valid, end) from
    :func:`_halves_of_tile` or :func:`_contiguous_group`) are real rows of that group (not padding)."""
    g, valid, end = half
    if USE_PSUM:
        mine = in_m & (rows < end)
    else:
        mine = gl.load(layout_ptr + rows, mask=in_m, other=-1) == g
    return mine & valid


@gluon.jit
def _masked_rows(layout_ptr, g, GROUP_ROWS: gl.constexpr):
    """Valid rows of group ``g``: ``masked_m[g]`` clamped to [0, max_m] (read on the device only)."""
    return gl.minimum(gl.maximum(gl.load(layout_ptr + g), 0), GROUP_ROWS)


@gluon.jit
def _masked_group_tiles(layout_ptr, g, GROUP_ROWS: gl.constexpr, BLOCK_M: gl.constexpr, num_pid_n: gl.constexpr):
    """Group ``g`` of the masked layout: (valid rows, its BLOCK_M-row tiles along M, its tiles in all)."""
    valid_rows = _masked_rows(layout_ptr, g, GROUP_ROWS)
    num_pid_m = gl.cdiv(valid_rows, BLOCK_M)
    return valid_rows, num_pid_m, num_pid_m * num_pid_n


@gluon.jit
def _first_local_unit(g_start):
    """This CTA's first tile of a group whose tiles are the global units ``g_start + [0, tiles_g)``.

    The persistent CTAs stride over the concatenation of every group's *valid* tiles (units
    ``pid, pid + P, ...``), so the work is balanced over the valid rows and skipped rows cost nothing.

    Callers walk a group's tiles with ``while local < tiles_g``, never ``range(_first_local_unit(g_start), ...)``:
    Triton 3.6's Gluon pipeline (its SCCP pass) folds a value carried by the group loop to its initial value
    when it feeds an inner ``scf.for``'s bounds, so ``g_start`` became 0 and every group started at CTA 0
    (masked 4 x 256 x (4096, 7168) at 128x128 tiles ran on 64 of 132 SMs).
    ``tests/test_sm90_grouped_compile.py`` checks the compiled IR, ``tests/test_kernel_loop_carries.py`` the source
    of every Gluon kernel for the pattern.
    """
    nprog = gl.num_programs(0)
    return (gl.program_id(0) + nprog - g_start % nprog) % nprog
