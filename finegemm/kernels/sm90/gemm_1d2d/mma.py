"""The math warpgroups' K loops of the sm90 FP8 GEMM: WGMMA per 128 of K into a fresh partial, FP32 promotion with the
scales (from global memory or the ring), and the ring slot releases.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .. import gluon_compat
from .epilogue import _prefetch_c


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


@gluon.jit
def _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col, kb,
            stride_sfa_k, stride_sfb, NUM_NB: gl.constexpr,
            SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, SFB_UNIFORM: gl.constexpr,
            SFA_TMA: gl.constexpr = False, SFB_TMA: gl.constexpr = False):
    """(row scale [64], column scale [BN] or scalar(s)) for K block ``kb``.

    With ``SFA_TMA`` (``SFB_TMA``) the row (per-channel column) scales ride in the ring
    (:func:`_ring_scale`, read once the stage is full); a constant placeholder of the same type is
    returned here instead.
    """
    if SFA_TMA:
        sa = gl.full(rows.shape, 1.0, gl.float32, rows.type.layout)
    else:
        sa = _load_scale(sfa_ptr, rows, kb, stride_sfa_k, row_mask, SF_PACKED)
    if SFB_PER_CHANNEL:
        if SFB_TMA:
            sb = gl.full(cols.shape, 1.0, gl.float32, cols.type.layout)
        else:
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
def _ring_scale(sf_bufs, s, kb, start: gl.constexpr, layout: gl.constexpr, PACKED: gl.constexpr,
                size: gl.constexpr = 64):
    """Scales ``start + [0, size)`` of the tile (per-token rows, or per-channel columns) for K block
    ``kb`` from ring slot ``s``.

    ``sf_bufs`` is [STAGES, 1, BLOCK_M or BLOCK_N] (one TMA box of the MN-major scale tensor per
    stage, no swizzle), read as flat rows; packed UE8M0 words hold K blocks ``4 * (kb // 4) + [0, 4)``.
    """
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    row = gluon_compat.reinterpret(sf_bufs.index(s), sf_bufs.dtype, [sf_bufs.shape[2]], flat)
    if size == sf_bufs.shape[2]:
        v = row.load(layout)
    else:
        v = row.slice(start, size).load(layout)
    if PACKED:
        return _decode1(v, kb)
    else:
        return v


@gluon.jit
def _ring_scales(sfa_bufs, sfb_bufs, s, kb, row0: gl.constexpr, row_layout: gl.constexpr,
                 col_layout: gl.constexpr, sa, sb0, sb1, PACKED: gl.constexpr, SFA_TMA: gl.constexpr,
                 SFB_TMA: gl.constexpr):
    """(row scales, column scales x2) of one 64-row wave for K block ``kb``: those riding in ring slot
    ``s`` (``SFA_TMA`` / ``SFB_TMA``) read from it, the others (``sa``, ``sb0``, ``sb1``) passed through."""
    if SFA_TMA:
        sa = _ring_scale(sfa_bufs, s, kb, row0, row_layout, PACKED)
    if SFB_TMA:
        sb0 = _ring_scale(sfb_bufs, s, kb, 0, col_layout, PACKED, sfb_bufs.shape[2])
        sb1 = sb0
    return sa, sb0, sb1


@gluon.jit
def _release(empty_bars, s, READ_RING: gl.constexpr):
    """Hand ring slot ``s`` back to the producer (one arrive per math warpgroup).

    ``READ_RING``: a proxy fence first, ordering this warpgroup's generic ``ld.shared`` of the slot's scales
    before the producer's next async-proxy (TMA) write of it. WGMMA reads are async-proxy already.
    The 1d1d tiles' ring scales (``SFB_TMA``) are written by the producer's ``cp.async``, a generic-proxy write
    that the mbarriers order: their whole-K tiles release without the fence (H100: 1.4 % faster in geometric mean
    over the weight-grad and k-grouped suites, up to 5 %, race-free in 19 repeat configurations; with TMA boxes
    instead, that fence was needed: without it the H200 gave run-to-run differences, 8-row x 32-column patches
    of D).
    The per-token ring scales (``SFA_TMA``, 2 words a thread, TMA boxes) are released without the fence (it
    measured 2-11 % slower on the dense 1d2d shapes: it also waits for the epilogue's in-flight TMA
    store), after the promotion that consumes them, so that no ``ld.shared`` of the slot is still in
    flight at the arrive; no repeat test has differed there (132, 16 and 4 CTAs).
    The kernels that sum split-K in the kernel (``SPLITK_FUSED``) do differ without the fence (a 16-CTA
    grid on the H200) and release every slot behind it (``FENCE_RING``), as do the tiles of two column blocks
    (:func:`_split_n_retire`).
    """
    if READ_RING:
        fence_async_shared()
    mbarrier.arrive(empty_bars.index(s), count=1)


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
def _a_rows(a_bufs, s, row0: gl.constexpr, STAGES: gl.constexpr = 0):
    """Rows ``row0 + [0, 64)`` (one WGMMA wave) of the A tile in ring slot ``s``: a slice of the slot's box,
    or with several boxes a slot (BLOCK_M 192: ``a_bufs`` [STAGES * 3, 64, 128]; pass ``STAGES``) the box
    of those rows."""
    BOXES: gl.constexpr = a_bufs.shape[0] // STAGES if STAGES > 0 else 1
    if BOXES == 1:
        return a_bufs.index(s).slice(row0, 64, dim=0)
    else:
        return a_bufs.index(s * BOXES + row0 // 64)


@gluon.jit
def _issue_block(a_bufs, b_bufs, full_bars, it, row0: gl.constexpr, zero, STAGES: gl.constexpr):
    """Wait for ring entry ``it`` and issue its WGMMA (one K block of one wave) into a fresh partial:
    (async token, slot)."""
    s = it % STAGES
    mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
    tok = warpgroup_mma(_a_rows(a_bufs, s, row0, STAGES), b_bufs.index(s).permute((1, 0)), zero, use_acc=False,
                        is_async=True)
    return tok, s


@gluon.jit
def _retire_block(acc, tok, s, kb, PENDING: gl.constexpr, sfa_bufs, sfb_bufs, empty_bars, row0: gl.constexpr,
                  row_layout: gl.constexpr, col_layout: gl.constexpr, sa, sb0, sb1, second_col,
                  PACKED: gl.constexpr, SFA_TMA: gl.constexpr, SFB_TMA: gl.constexpr,
                  SFB_PER_CHANNEL: gl.constexpr, SFB_UNIFORM: gl.constexpr, FENCE_RING: gl.constexpr = False):
    """Wait for K block ``kb``'s WGMMA (``PENDING`` later ones stay in flight), release its slot ``s`` and
    promote it into ``acc`` with its scales (ring ones read here, the others passed in)."""
    part = warpgroup_mma_wait(PENDING, deps=(tok,))
    sa, sb0, sb1 = _ring_scales(sfa_bufs, sfb_bufs, s, kb, row0, row_layout, col_layout, sa, sb0, sb1, PACKED,
                                SFA_TMA, SFB_TMA)
    acc = _promote(acc, part, sa, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
    # after the promotion has consumed the slot's ring scales (see _release)
    _release(empty_bars, s, FENCE_RING)
    return acc


@gluon.jit
def _one_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, kb0, row0: gl.constexpr,
                   sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col, stride_sfa_k, stride_sfb,
                   mma_layout: gl.constexpr, NUM_NB: gl.constexpr, KB, STAGES: gl.constexpr,
                   SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, SFB_UNIFORM: gl.constexpr,
                   PIPE_MMA: gl.constexpr, SFA_TMA: gl.constexpr, sfb_bufs=None, SFB_TMA: gl.constexpr = False,
                   c_desc=None, c_bar=None, c_sub=None, c_row=0, c_col=0, C_LATE: gl.constexpr = False,
                   FENCE_RING: gl.constexpr = False):
    """One 64-row wave over ``KB`` K blocks: returns (promoted [64, BLOCK_N] fp32 accumulator, ring counter).

    ``KB`` is a constexpr for dense tiles; grouped tiles pass a runtime count (0 for a skipped tile: a
    zero accumulator, no barrier touched). ``C_LATE`` (PIPE_MMA only): start the tile's C load
    (:func:`_prefetch_c` of ``c_row, c_col`` into ``c_sub``) once the first K-block pair is issued, so
    that its wait for the previous tile's D store to leave the buffer runs under those WGMMAs.
    ``FENCE_RING``: every slot is released behind the proxy fence (as with ``SFB_TMA``), see :func:`_release`.
    """
    gl.static_assert(PIPE_MMA or not C_LATE, "C_LATE: the paired PIPE_MMA loop only")
    BLOCK_N: gl.constexpr = b_bufs.shape[1]
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    zero = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
    acc = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
    sa, sb0, sb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col, kb0,
                           stride_sfa_k, stride_sfb, NUM_NB, SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, SFA_TMA,
                           SFB_TMA)
    if PIPE_MMA:
        # K blocks in pairs: both WGMMAs issued back to back into two partials, the first promoted while
        # the second runs, the second after it. Nothing is in flight at the loop's back edge: carrying
        # an in-flight partial across it made ptxas copy its registers and serialize every WGMMA
        # (C7514/C7515), whatever the order of the issues.
        for kk in range(0, KB - 1, 2):
            tok_a, s_a = _issue_block(a_bufs, b_bufs, full_bars, it, row0, zero, STAGES)
            tok_b, s_b = _issue_block(a_bufs, b_bufs, full_bars, it + 1, row0, zero, STAGES)
            it += 2
            if C_LATE:
                if kk == 0:
                    _prefetch_c(c_desc, c_bar, c_sub, c_row, c_col)
            nsa, nsb0, nsb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col,
                                      kb0 + kk + 1, stride_sfa_k, stride_sfb, NUM_NB,
                                      SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, SFA_TMA, SFB_TMA)
            acc = _retire_block(acc, tok_a, s_a, kb0 + kk, 1, sfa_bufs, sfb_bufs, empty_bars, row0,
                                row_layout, col_layout, sa, sb0, sb1, second_col, SF_PACKED, SFA_TMA, SFB_TMA,
                                SFB_PER_CHANNEL, SFB_UNIFORM, FENCE_RING)
            sa, sb0, sb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col,
                                   gl.minimum(kb0 + kk + 2, kb0 + KB - 1), stride_sfa_k, stride_sfb, NUM_NB,
                                   SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, SFA_TMA, SFB_TMA)
            acc = _retire_block(acc, tok_b, s_b, kb0 + kk + 1, 0, sfa_bufs, sfb_bufs, empty_bars, row0,
                                row_layout, col_layout, nsa, nsb0, nsb1, second_col, SF_PACKED, SFA_TMA, SFB_TMA,
                                SFB_PER_CHANNEL, SFB_UNIFORM, FENCE_RING)
        if C_LATE:
            if KB < 2:  # no pair issued
                _prefetch_c(c_desc, c_bar, c_sub, c_row, c_col)
        if KB % 2 == 1:
            tok_a, s_a = _issue_block(a_bufs, b_bufs, full_bars, it, row0, zero, STAGES)
            it += 1
            acc = _retire_block(acc, tok_a, s_a, kb0 + KB - 1, 0, sfa_bufs, sfb_bufs, empty_bars, row0,
                                row_layout, col_layout, sa, sb0, sb1, second_col, SF_PACKED, SFA_TMA, SFB_TMA,
                                SFB_PER_CHANNEL, SFB_UNIFORM, FENCE_RING)
    else:
        for kk in range(KB):
            part, s = _issue_block(a_bufs, b_bufs, full_bars, it, row0, zero, STAGES)
            sa, sb0, sb1 = _ring_scales(sfa_bufs, sfb_bufs, s, kb0 + kk, row0, row_layout, col_layout,
                                        sa, sb0, sb1, SF_PACKED, SFA_TMA, SFB_TMA)
            # Next block's scales load while the WGMMA runs (the last iteration reloads its own).
            nkb = gl.minimum(kb0 + kk + 1, kb0 + KB - 1)
            nsa, nsb0, nsb1 = _scales(sfa_ptr, sfb_ptr, rows, cols, row_mask, col_mask, nb0, second_col,
                                      nkb, stride_sfa_k, stride_sfb, NUM_NB,
                                      SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, SFA_TMA, SFB_TMA)
            part = warpgroup_mma_wait(0, deps=(part,))
            acc = _promote(acc, part, sa, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
            _release(empty_bars, s, FENCE_RING)
            sa = nsa
            sb0 = nsb0
            sb1 = nsb1
            it += 1
    return acc, it


@gluon.jit
def _two_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, kb0, row0: gl.constexpr,
                   row1: gl.constexpr, sfa_ptr, sfb_ptr, rows0, rows1, cols, mask0, mask1, col_mask, nb0,
                   second_col, stride_sfa_k, stride_sfb,
                   mma_layout: gl.constexpr, NUM_NB: gl.constexpr, KB, STAGES: gl.constexpr,
                   SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, SFB_UNIFORM: gl.constexpr,
                   SFA_TMA: gl.constexpr, sfb_bufs=None, SFB_TMA: gl.constexpr = False):
    """Two 64-row waves (tile rows ``row0`` and ``row1`` + [0, 64)) over ``KB`` K blocks, BLOCK_M 256.

    Per K block: WGMMA wave 0 into the one partial, promote it into ``acc0``, then wave 1 into the same
    partial registers, promote into ``acc1`` (64 + 2 x 64 fp32 registers a thread at BLOCK_N 128).
    The partial is reused rather than doubled: two partials would need 256 registers. The other
    math warpgroup's WGMMAs keep the tensor cores busy while this one promotes.
    With ``SFB_TMA`` the per-channel scales are read from the ring before each wave's promotion (twice
    per K block) rather than kept live across the second wave's WGMMA.
    Returns (acc0, acc1, ring counter).
    """
    BLOCK_N: gl.constexpr = b_bufs.shape[1]
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, mma_layout)
    zero = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
    acc0 = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
    acc1 = gl.zeros([64, BLOCK_N], gl.float32, mma_layout)
    # The partial is threaded through every WGMMA (use_acc=False ignores its value) so that both waves
    # and all K blocks write one register block; fresh zero inputs let ptxas give each wave its own
    # block, which fragments the register file and spilled 14 accumulator registers.
    part = zero
    sa0, sb0, sb1 = _scales(sfa_ptr, sfb_ptr, rows0, cols, mask0, col_mask, nb0, second_col, kb0,
                            stride_sfa_k, stride_sfb, NUM_NB, SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM, SFA_TMA,
                            SFB_TMA)
    sa1 = sa0
    if not SFA_TMA:
        sa1 = _load_scale(sfa_ptr, rows1, kb0, stride_sfa_k, mask1, SF_PACKED)
    for kk in range(KB):
        s = it % STAGES
        mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
        b_tile = b_bufs.index(s).permute((1, 0))
        part = warpgroup_mma(_a_rows(a_bufs, s, row0), b_tile, part, use_acc=False, is_async=True)
        if SFA_TMA:
            sa0 = _ring_scale(sfa_bufs, s, kb0 + kk, row0, row_layout, SF_PACKED)
        part = warpgroup_mma_wait(0, deps=(part,))
        if SFB_TMA:
            sb0 = _ring_scale(sfb_bufs, s, kb0 + kk, 0, col_layout, SF_PACKED, BLOCK_N)
            sb1 = sb0
        acc0 = _promote(acc0, part, sa0, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
        part = warpgroup_mma(_a_rows(a_bufs, s, row1), b_tile, part, use_acc=False, is_async=True)
        if SFA_TMA:
            sa1 = _ring_scale(sfa_bufs, s, kb0 + kk, row1, row_layout, SF_PACKED)
        # Next block's scales load while the second wave's WGMMA runs (after wave 0's promotion, so
        # that the two waves' scale vectors are not live at once next to three accumulators).
        nkb = gl.minimum(kb0 + kk + 1, kb0 + KB - 1)
        nsa0, nsb0, nsb1 = _scales(sfa_ptr, sfb_ptr, rows0, cols, mask0, col_mask, nb0, second_col, nkb,
                                   stride_sfa_k, stride_sfb, NUM_NB, SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM,
                                   SFA_TMA, SFB_TMA)
        nsa1 = nsa0
        if not SFA_TMA:
            nsa1 = _load_scale(sfa_ptr, rows1, nkb, stride_sfa_k, mask1, SF_PACKED)
        part = warpgroup_mma_wait(0, deps=(part,))
        if SFB_TMA:
            sb0 = _ring_scale(sfb_bufs, s, kb0 + kk, 0, col_layout, SF_PACKED, BLOCK_N)
            sb1 = sb0
        acc1 = _promote(acc1, part, sa1, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
        _release(empty_bars, s, False)
        sa0 = nsa0
        sa1 = nsa1
        sb0 = nsb0
        sb1 = nsb1
        it += 1
    return acc0, acc1, it
