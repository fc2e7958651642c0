"""Epilogues of the sm90 FP8 GEMM: D staged in shared memory and stored (or reduce-added) by TMA, the C prefetch into
the staging rows, the masked stores of the grouped forms and the split-K reductions (in the kernel, or as a second
launch).
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
)
from triton.language.extra.cuda import gdc_wait

from .. import gluon_compat


@gluon.jit
def _d_rows(d_smem, row0: gl.constexpr):
    """The D staging rows ``row0 + [0, 64)``: a slice, or (BLOCK_M 192: [3, 64, BLOCK_N]) one buffer."""
    if len(d_smem.shape) == 3:
        return d_smem.index(row0 // 64)
    else:
        return d_smem.slice(row0, 64, dim=0)


@gluon.jit
def _store_wave(acc, d_desc, d_sub, c_ptr, rows, cols, row_mask, col_mask, stride_cm, out_row, off_n,
                PENDING: gl.constexpr, ADD_C: gl.constexpr, C_STAGED: gl.constexpr = False, c_bar=None,
                c_phase=0, REDUCE: gl.constexpr = False):
    """Epilogue of one 64-row wave: (+ C in FP32), cast, registers -> ``d_sub`` [64, BLOCK_N] -> TMA store.

    ``C_STAGED``: this wave's C tile is already on its way into ``d_sub`` by TMA (:func:`_prefetch_c`,
    arriving on ``c_bar`` with phase ``c_phase``); else, with ``ADD_C``, C is read here from global memory.
    The store is left in flight; ``PENDING`` TMA stores of this warpgroup may still be running when
    ``d_sub`` is overwritten (they read other buffers). ``REDUCE``: the TMA adds the tile into D instead of
    storing it (D += acc, FP32).
    """
    if C_STAGED:
        mbarrier.wait(c_bar, c_phase)
        # each thread reads back exactly the elements it overwrites below (same layout): no barrier between
        acc = acc + d_sub.load(acc.type.layout)
    elif ADD_C:
        c_ptrs = c_ptr + rows.to(gl.int64)[:, None] * stride_cm + cols[None, :]
        c = gl.load(c_ptrs, mask=row_mask[:, None] & col_mask[None, :], other=0.0)
        acc = acc + c.to(gl.float32)
    tma.store_wait(PENDING)
    gluon_compat.thread_barrier()
    d_sub.store(acc.to(d_desc.dtype))
    fence_async_shared()
    gluon_compat.thread_barrier()
    if REDUCE:
        gluon_compat.async_reduce_add(d_desc, [out_row, off_n], d_sub)
    else:
        gluon_compat.async_store(d_desc, [out_row, off_n], d_sub)


@gluon.jit
def _splitk_fused_epilogue(acc, ws_tile, cnt_ptr, slot, split, local, d_desc, d_sub, c_ptr, rows, cols, row_mask,
                           col_mask, stride_cm, out_row, off_n, PLANE: gl.constexpr, SPLIT_K: gl.constexpr,
                           HAS_C: gl.constexpr, REDUCE: gl.constexpr = False):
    """In-kernel split-K reduction of one 64-row wave (``SPLITK_FUSED``).

    ``ws_tile``: the tile's ``SPLIT_K`` FP32 partial planes of ``PLANE`` (= BLOCK_M x BLOCK_N) words each,
    row-major; ``local``: this wave's offsets in a plane. Stores this split's partial (plain stores), then
    one thread counts the arrival on ``cnt_ptr[slot]`` (acq_rel, GPU scope) after a barrier of the
    warpgroup, so that every thread's partial is released with it. The split that arrives last sums the
    planes in split order (the result does not depend on which split arrives last), adds C, stores D
    through :func:`_store_wave` (``REDUCE``: adds the sum into D by the TMA instead, C being D) and resets the
    counter to 0; the others store nothing more.
    """
    gl.store(ws_tile + split * PLANE + local, acc)
    gluon_compat.thread_barrier()
    arrived = gl.atomic_add(cnt_ptr + slot, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:
        # L2 reads (.cg): the other splits' partials were written by other SMs
        total = gl.load(ws_tile + local, cache_modifier=".cg")
        for s in gl.static_range(1, SPLIT_K):
            total += gl.load(ws_tile + s * PLANE + local, cache_modifier=".cg")
        gl.store(cnt_ptr + slot, 0)
        _store_wave(total, d_desc, d_sub, c_ptr, rows, cols, row_mask, col_mask, stride_cm, out_row, off_n, 0,
                    HAS_C, REDUCE=REDUCE)


@gluon.jit
def _prefetch_c(c_desc, c_bar, d_sub, off_row, off_n, c1_desc=None, d1_sub=None, off_n1=0):
    """Start the TMA load of the 64 C rows from ``off_row`` into this warpgroup's D staging rows ``d_sub``,
    arriving on ``c_bar``: it runs under the tile's main loop. With ``c1_desc`` (a tile of two column blocks) the
    second block's C, columns from ``off_n1``, comes into ``d1_sub`` on the same expect-tx.

    The buffer must be free: every TMA store of this warpgroup has finished reading it first.
    Rows past M arrive as zeros (and are never stored).
    """
    tma.store_wait(0)
    gluon_compat.thread_barrier()
    if c1_desc is None:
        mbarrier.expect(c_bar, c_desc.block_type.nbytes)
    else:
        mbarrier.expect(c_bar, c_desc.block_type.nbytes + c1_desc.block_type.nbytes)
    gluon_compat.async_load(c_desc, [off_row, off_n], c_bar, d_sub)
    if c1_desc is not None:
        gluon_compat.async_load(c1_desc, [off_row, off_n1], c_bar, d1_sub)


@gluon.jit
def _store_masked_wave(acc, d_desc, d_sub, d_ptr, rows, first_row, cols, col_mask, valid_rows, out_row, off_n,
                       N: gl.constexpr):
    """Masked epilogue of one 64-row wave: rows ``rows`` (``first_row + [0, 64)`` within the group) below
    ``valid_rows`` only.

    A full wave goes through the TMA store; a partial one is stored from registers with a row mask
    (a TMA box would write the rows at or past ``masked_m``); a wave past the valid rows stores nothing.
    ``out_row``: the wave's first row in the [G * max_m, N] view of D.
    """
    if first_row + 64 <= valid_rows:  # every row of the wave is valid
        _store_wave(acc, d_desc, d_sub, None, rows, cols, col_mask, col_mask, 0, out_row, off_n, 0, False)
    elif first_row < valid_rows:
        ok = rows < valid_rows
        out = out_row.to(gl.int64) + (rows - first_row).to(gl.int64)
        ptrs = d_ptr + out[:, None] * N + cols[None, :]
        gl.store(ptrs, acc.to(d_ptr.dtype.element_ty), mask=ok[:, None] & col_mask[None, :])


@gluon.jit
def _store_masked_wave_staged(acc, d_desc, d_sub, d_ptr, first_row, valid_rows, out_row, off_n, N: gl.constexpr,
                              PENDING: gl.constexpr):
    """:func:`_store_masked_wave` for 256-row tiles, whose second accumulator leaves no registers for a
    [64, BLOCK_N] pointer tensor: the wave always goes to its staging rows ``d_sub`` first (once this
    warpgroup's TMA stores but ``PENDING`` have read theirs); a full wave leaves by TMA, a partial one 16 rows
    at a time back through registers in a row-contiguous layout, stored with a row mask."""
    BLOCK_N: gl.constexpr = d_sub.shape[1]
    TPW_N: gl.constexpr = BLOCK_N // 8 if BLOCK_N // 8 < 32 else 32
    CHUNK: gl.constexpr = 16
    rows_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TPW_N, TPW_N], [4, 1], [1, 0])
    tma.store_wait(PENDING)
    gluon_compat.thread_barrier()
    d_sub.store(acc.to(d_desc.dtype))
    fence_async_shared()
    gluon_compat.thread_barrier()
    if first_row + 64 <= valid_rows:
        gluon_compat.async_store(d_desc, [out_row, off_n], d_sub)
    elif first_row < valid_rows:
        cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, rows_layout))
        for c in gl.static_range(64 // CHUNK):
            r = c * CHUNK + gl.arange(0, CHUNK, layout=gl.SliceLayout(1, rows_layout))
            v = d_sub.slice(c * CHUNK, CHUNK, dim=0).load(rows_layout)
            ptrs = d_ptr + (out_row + r).to(gl.int64)[:, None] * N + cols[None, :]
            gl.store(ptrs, v, mask=(first_row + r < valid_rows)[:, None] & (cols < N)[None, :])
        gluon_compat.thread_barrier()  # every thread's reads of d_sub before anyone rewrites it


@triton.jit
def _splitk_reduce_kernel(ws_ptr, d_ptr, c_ptr, M, N, M_PAD, stride_dm, stride_cm,
                          SPLIT_K: tl.constexpr, HAS_C: tl.constexpr, BLOCK: tl.constexpr):
    # launched with programmatic dependent launch: wait here until the GEMM grid has finished (its partials visible)
    gdc_wait()
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
