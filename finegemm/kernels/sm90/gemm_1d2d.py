"""Hopper FP8 GEMM with fine-grained scales: warp-specialized, persistent, TMA + async WGMMA (Gluon).

``D[m, n] = C[m, n] + sum_kb (A_kb @ B_kb^T)[m, n] * sfa[m, kb] * sfb[., kb]`` for both recipes:
``1d2d`` (per-128x128-block RHS scales, BF16 or FP32 out) and ``1d1d`` (per-channel RHS scales, the
weight-gradient kernel, FP32 out with ``C`` accumulated). One kernel body, the recipe a constexpr.

Roles (``gl.warp_specialize``):
  - producer: 1 warp (padded by the compiler to a warpgroup, ``setmaxnreg.dec`` to 40 registers).
    Walks the same persistent tile sequence as the math partition and, per 128-wide K block, waits
    ``empty[s]``, arms ``full[s]`` with the stage's byte count and issues two TMA loads (A and B).
  - math: one warpgroup (4 warps) per 64 rows of the tile up to two, each its own partition (the
    default one and, for BLOCK_M 128/256, a worker), ``setmaxnreg.inc`` to 232 registers. BLOCK_M 256:
    each warpgroup issues two 64-row waves per K block into one partial (see :func:`_two_wave_loop`).
    BLOCK_M 192: three warpgroups of one wave each at 152 registers (one partial, dense 1d2d only); its A
    tile and ring scales arrive as three 64-row TMA boxes a stage (descriptor blocks and shared-memory
    shapes must be powers of two), and its D staging is one [64, BLOCK_N] buffer per warpgroup.
    Per K block:
    wait ``full[s]``, issue ``wgmma.mma_async`` (4 x m64nNk32 per warpgroup) into a *fresh*
    accumulator, and promote the previous block's partial on the CUDA cores while the tensor cores
    work (``PIPE_MMA``: two partials in flight, wait(1)), then release ``empty[s]``.
    The RHS scales come straight from global memory (L2-resident), one block ahead of their use;
    the per-token LHS scales too, or (``SFA_TMA``) by TMA into the ring beside A and B.
  - epilogue (math partition): optional ``C`` added in FP32, cast, registers -> shared memory ->
    TMA store, left in flight while the next tile's main loop runs (waited before the buffer is
    reused).

Stages: ``STAGES`` ring slots of (BLOCK_M + BLOCK_N) x 128 bytes (+ 4 x BLOCK_M with ``SFA_TMA``).
Barriers: ``full[s]`` (count 1, expect-tx) and ``empty[s]`` (count: one elected arrive per math
warpgroup). Phase of slot ``s`` on its ``i``-th use is ``i & 1``; the producer waits on ``empty``
with the flipped phase so that the first pass through the ring does not block.

Split-K (``SPLIT_K > 1``, small M): work units are (tile, k-split) pairs; each writes its FP32
partial tile to a workspace ``[SPLIT_K * M_pad, N]``. The reduction sums the splits in a fixed order
(deterministic), adds ``C`` and casts: either a second launch (:func:`_splitk_reduce_kernel`, made with
programmatic dependent launch: the GEMM lets it start at once (:func:`launch_dependents`) and it waits for the
GEMM's end in ``griddepcontrol.wait``, which takes its launch latency off the critical path), or
(``SPLITK_FUSED``) in the kernel itself: each math warpgroup stores its partial with plain stores,
counts its arrival on a per-(tile, warpgroup) counter (release/acquire at GPU scope), and the last of
the ``SPLIT_K`` to arrive reads all partials back in split order, finishes the tile through the usual
epilogue and resets the counter to 0 for the next launch (:func:`_splitk_fused_epilogue`).

NOTES:
  - Gluon 3.6 has no TMA multicast; tiles of A are re-read from L2 by every N tile.
  - A tile wider than 128 (BLOCK_N 256) spans two RHS scale blocks: the two scales are selected per column
    with a predicate, not by a second loop. BLOCK_N that is not a power of two (DeepGEMM's 96, 112, 160, 192)
    does not compile: Gluon tensors (the accumulator, the column vectors) need power-of-two shapes
    ("Shape element 0 must be a power of 2", CPU compile of 64x112, 128x144 and 128x192, session 19). Such widths
    of two power-of-two blocks (96, 144, 160, 192, ...) run as two column blocks (``BLOCK_N1``, :func:`_split_n_math`:
    dense recipe (1, 128, 128) tiles of BLOCK_M 64 / 128), as in gemm_bf16.
"""

from __future__ import annotations

import os
import warnings

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.extra.cuda import gdc_wait

from . import gluon_compat
from .l2_prefetch import prefetch_tile_l2, tensor_map_param

BLOCK_K: tl.constexpr = tl.constexpr(128)
# B's tensor map as fp8_gemm_kernel's lowered parameter (a_desc takes 0-4): for the L2 prefetch's inline PTX
B_TENSOR_MAP: gl.constexpr = gl.constexpr(tensor_map_param("fp8_gemm_kernel", 5))
# Probe only (scripts/warp_release_probe.py; never set by the library): the byte offset from ``global_smem`` of
# the ring's empty barriers in the one FP8 kernel variant this process compiles (read from a CPU compile of the
# same variant by ``compile_check.empty_barrier_offset``). Nonzero: lane 0 of every math warp releases a slot by
# inline PTX and the empty barriers count one arrive per math warp, instead of Triton's arrive, which puts a
# warpgroup-wide named barrier before thread 0's arrive (NOTES v19, "The 256x128 K-block in SASS"; measured in
# v20: 1.002-1.017x on the H100, not adopted).
PROBE_EMPTY_SMEM: gl.constexpr = gl.constexpr(int(os.environ.get("FINEGEMM_PROBE_EMPTY_SMEM", "0")))
if PROBE_EMPTY_SMEM.value:
    warnings.warn(f"FINEGEMM_PROBE_EMPTY_SMEM={PROBE_EMPTY_SMEM.value}: the FP8 sm90 kernels release ring slots "
                  "through that shared-memory offset, right for one config only (scripts/warp_release_probe.py); "
                  "unset it for anything else", stacklevel=2)
# its arrive: a warp barrier orders the other lanes' shared-memory reads of the slot (ring scales) before lane 0's
# release; $1 is the slot
_WARP_RELEASE_ASM: gl.constexpr = gl.constexpr(
    "{ .reg .pred p; .reg .b32 a; bar.warp.sync 0xffffffff; mov.u32 a, %laneid; setp.eq.u32 p, a, 0; "
    "mov.u32 a, global_smem; mad.lo.u32 a, $1, 8, a; "
    f"@p mbarrier.arrive.shared::cta.b64 _, [a+{PROBE_EMPTY_SMEM.value}]; mov.u32 $0, 0; }}")
# In the 1d1d kernels with both scale vectors in the ring (``SFB_TMA``) the producer warp copies a slot's scales
# with ``cp.async`` (each lane's copies completing on the slot's full barrier) instead of TMA boxes. The math
# warpgroups' generic reads of them and the producer's next write are then ordered by the ring's mbarriers alone:
# the release needs no proxy fence (``MEMBAR.ALL.CTA``; v5 measured it at up to 23 % on 128-row weight-gradient
# tiles). The fused split-K tiles keep theirs (``FENCE_RING``: see there). Measured without that fence too (NOTES
# v31, H100): 1.4 % faster in geometric mean over the weight-grad and k-grouped suites (up to 5 %), race-free in 19
# repeat configurations. Loading the scales and storing them with ``st.shared`` instead was 3-25 % slower (v30:
# the producer waited for its loads). ``FINEGEMM_PROBE_RING_STS=0`` (read at import) restores the TMA boxes and
# the fenced releases.
RING_CPASYNC: gl.constexpr = gl.constexpr(os.environ.get("FINEGEMM_PROBE_RING_STS", "2") != "0")
# Tiles of two column blocks read the per-token ring scales twice a K block (one layout a block) and release the slot
# behind a proxy fence, the hazard _release describes: without it their first GPU run (session 24, H100) had
# 4095x4096x1536 at 128x160 differ between two runs, and scripts/repeat_probe.py 5 of 5 repeats (up to 738 k
# elements; NOTES v26). FINEGEMM_PROBE_SPLIT_N_FENCE=0 drops the fence (that probe's A/B); read at import.
SPLIT_N_RING_FENCE: gl.constexpr = gl.constexpr(os.environ.get("FINEGEMM_PROBE_SPLIT_N_FENCE", "1") != "0")


def sfa_desc_layout() -> gl.NVMMASharedLayout:
    """Host side: the unswizzled shared layout of the LHS-scale TMA boxes (read back as flat rows)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)


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
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    sfa_desc=None, sfa_bufs=None, SFA_TMA: gl.constexpr = False, SF_PACKED: gl.constexpr = False,
                    layout_ptr=None, GROUPING: gl.constexpr = 0, NUM_GROUPS: gl.constexpr = 1,
                    GROUP_ROWS: gl.constexpr = 0, SFK_ROWS: gl.constexpr = 0, USE_PSUM: gl.constexpr = False,
                    ALIGN: gl.constexpr = 128, sfb_desc=None, sfb_bufs=None, SFB_TMA: gl.constexpr = False,
                    K_DYN: gl.constexpr = False, SPLIT_TAIL: gl.constexpr = False, B_PREFETCH: gl.constexpr = 0,
                    b1_desc=None, b1_bufs=None, BLOCK_N1: gl.constexpr = 0, sfb_ptr=None, stride_sfb=0, sfa_ptr=None,
                    stride_sfa_k=0):
    if GROUPING != 0:
        _grouped_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K, BLOCK_M, BLOCK_N,
                                STAGES, GROUP_M, sfa_desc, sfa_bufs, SFA_TMA, SF_PACKED, layout_ptr, GROUPING,
                                NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM, ALIGN, B_PREFETCH)
    else:
        _dense_load_partition(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M, N, K, BLOCK_M, BLOCK_N,
                              STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA, SF_PACKED, sfb_desc, sfb_bufs,
                              SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_desc, b1_bufs, BLOCK_N1, sfb_ptr, stride_sfb,
                              sfa_ptr, stride_sfa_k)


@gluon.jit
def _ring_row(bufs, s):
    """``RING_CPASYNC``: ring slot ``s`` of a ``[STAGES, 1, SIZE]`` scale ring as the flat ``[SIZE]`` view that
    :func:`_ring_scale` reads (which spells it out: routing it through here reorders that kernel's code enough for
    ptxas to spill 272 bytes in the 1d1d split-tail pick, tests/test_sm90_compile.py)."""
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    return gluon_compat.reinterpret(bufs.index(s), bufs.dtype, [bufs.shape[2]], flat)


@gluon.jit
def _copy_scale_row(bufs, s, ptr, stride_k, krow, off, LIMIT):
    """``RING_CPASYNC``: ``cp.async`` by the producer warp of one K block's scales of a tile into ring slot ``s``:
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
                          sfa_desc, sfa_bufs, SFA_TMA: gl.constexpr, SF_PACKED: gl.constexpr, sfb_desc, sfb_bufs,
                          SFB_TMA: gl.constexpr, K_DYN: gl.constexpr, SPLIT_TAIL: gl.constexpr = False,
                          B_PREFETCH: gl.constexpr = 0, b1_desc=None, b1_bufs=None, BLOCK_N1: gl.constexpr = 0,
                          sfb_ptr=None, stride_sfb=0, sfa_ptr=None, stride_sfa_k=0):
    """``B_PREFETCH`` > 0: with each K block's loads, B's tile that many K blocks ahead (in the same work unit) is
    prefetched into L2 (:mod:`.l2_prefetch`). ``BLOCK_N1`` > 0: tiles ``BLOCK_N + BLOCK_N1`` wide, B's last
    ``BLOCK_N1`` rows of a tile in a second box (``b1_desc``) into ``b1_bufs``, on the same full barrier.
    ``SFB_TMA`` with ``RING_CPASYNC``: the ring's scales (per-channel, and per-token with ``SFA_TMA``) are copied from
    ``sfb_ptr`` / ``sfa_ptr`` by ``cp.async`` after the slot's empty wait instead of by TMA boxes; each lane's
    copies complete on the slot's full barrier."""
    num_kb = _num_k_blocks(a_desc, K, K_DYN)
    # A (and its ring scales) come in BOXES boxes of A_ROWS rows a stage: 1, or 3 at BLOCK_M 192
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    BOXES: gl.constexpr = BLOCK_M // A_ROWS
    # (1d1d tiles, the only ones with SFB_TMA, have one A box a stage: never BLOCK_M 192)
    SFB_CPASYNC: gl.constexpr = SFB_TMA and RING_CPASYNC
    SFA_CPASYNC: gl.constexpr = SFB_CPASYNC and SFA_TMA
    # the ring scales that still come as TMA boxes on the full barrier
    SFA_BOX: gl.constexpr = SFA_TMA and not SFA_CPASYNC
    SFB_BOX: gl.constexpr = SFB_TMA and not SFB_CPASYNC
    nbytes: gl.constexpr = (BOXES * a_desc.block_type.nbytes + b_desc.block_type.nbytes
                            + (BOXES * sfa_desc.block_type.nbytes if SFA_BOX else 0)
                            + (sfb_desc.block_type.nbytes if SFB_BOX else 0)
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
            if SFB_CPASYNC:
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
            if SFB_BOX:
                gluon_compat.async_load(sfb_desc, [krow, off_n], bar, sfb_bufs.index(s))
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


# ---------------------------------------------------------------------------------------------
# Grouped (MoE) scheduling, shared by the producer and the math partitions (GROUPING 1 / 2).
# ---------------------------------------------------------------------------------------------
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
    (masked 4 x 256 x (4096, 7168) at 128x128 tiles ran on 64 of 132 SMs; NOTES v19).
    ``tests/test_sm90_grouped_compile.py`` checks the compiled IR, ``tests/test_kernel_loop_carries.py`` the source
    of every Gluon kernel for the pattern.
    """
    nprog = gl.num_programs(0)
    return (gl.program_id(0) + nprog - g_start % nprog) % nprog


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


# ---------------------------------------------------------------------------------------------
# Math: WGMMA per 128 of K into a fresh accumulator, FP32 promotion, epilogue.
# ---------------------------------------------------------------------------------------------
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

    ``READ_RING``: this warpgroup read the slot's per-channel scales (``SFB_TMA``, 32 words a thread)
    with generic ``ld.shared``; the producer's next TMA write to it is an async-proxy access, so a proxy
    fence orders the reads before the release. Without it the H200 produced run-to-run differences
    (8-row x 32-column patches of D; benchmarks/NOTES.md v5). WGMMA reads are async-proxy already.
    With ``RING_CPASYNC`` (the default) the producer writes those scales by ``cp.async``, a generic-proxy
    write that the mbarriers order, so the release needs no fence.
    The per-token ring scales (``SFA_TMA``, 2 words a thread) are released without the fence (it
    measured 2-11 % slower on the dense 1d2d shapes: it also waits for the epilogue's in-flight TMA
    store), after the promotion that consumes them, so that no ``ld.shared`` of the slot is still in
    flight at the arrive; no repeat test or probe has differed there (132, 16 and 4 CTAs; NOTES v10).
    The kernels that sum split-K in the kernel (``SPLITK_FUSED``) do differ without the fence (a 16-CTA
    grid on the H200, NOTES v10) and release every slot behind it (``FENCE_RING``).
    """
    if READ_RING:
        fence_async_shared()
    if PROBE_EMPTY_SMEM != 0:
        _warp_release(s)
    else:
        mbarrier.arrive(empty_bars.index(s), count=1)


@gluon.jit
def _warp_release(s):
    """``PROBE_EMPTY_SMEM``: lane 0 of this warp arrives on empty barrier ``s`` (``_WARP_RELEASE_ASM``)."""
    gl.inline_asm_elementwise(_WARP_RELEASE_ASM, "=r,r", [s], dtype=gl.int32, is_pure=False, pack=1)


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
def _d_rows(d_smem, row0: gl.constexpr):
    """The D staging rows ``row0 + [0, 64)``: a slice, or (BLOCK_M 192: [3, 64, BLOCK_N]) one buffer."""
    if len(d_smem.shape) == 3:
        return d_smem.index(row0 // 64)
    else:
        return d_smem.slice(row0, 64, dim=0)


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
    _release(empty_bars, s, (SFB_TMA and not RING_CPASYNC) or FENCE_RING)
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
            _release(empty_bars, s, (SFB_TMA and not RING_CPASYNC) or FENCE_RING)
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
                   SFA_TMA: gl.constexpr, sfb_bufs=None, SFB_TMA: gl.constexpr = False, trace_ptr=None,
                   TRACE: gl.constexpr = 0, trace_row=-1):
    """Two 64-row waves (tile rows ``row0`` and ``row1`` + [0, 64)) over ``KB`` K blocks, BLOCK_M 256.

    Per K block: WGMMA wave 0 into the one partial, promote it into ``acc0``, then wave 1 into the same
    partial registers, promote into ``acc1`` (64 + 2 x 64 fp32 registers a thread at BLOCK_N 128).
    The partial is reused rather than doubled: two partials would need 256 registers. The other
    math warpgroup's WGMMAs keep the tensor cores busy while this one promotes.
    With ``SFB_TMA`` the per-channel scales are read from the ring before each wave's promotion (twice
    per K block) rather than kept live across the second wave's WGMMA.
    ``TRACE`` 2 with ``trace_row`` >= 0 (a timing probe): :func:`_wave_stamp` at five points of each of the
    first ``TRACE_KB`` K blocks.
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
        _wave_stamp(trace_ptr, trace_row, kk, 0, TRACE)
        b_tile = b_bufs.index(s).permute((1, 0))
        part = warpgroup_mma(_a_rows(a_bufs, s, row0), b_tile, part, use_acc=False, is_async=True)
        if SFA_TMA:
            sa0 = _ring_scale(sfa_bufs, s, kb0 + kk, row0, row_layout, SF_PACKED)
        part = warpgroup_mma_wait(0, deps=(part,))
        _wave_stamp(trace_ptr, trace_row, kk, 1, TRACE)
        if SFB_TMA:
            sb0 = _ring_scale(sfb_bufs, s, kb0 + kk, 0, col_layout, SF_PACKED, BLOCK_N)
            sb1 = sb0
        acc0 = _promote(acc0, part, sa0, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
        part = warpgroup_mma(_a_rows(a_bufs, s, row1), b_tile, part, use_acc=False, is_async=True)
        _wave_stamp(trace_ptr, trace_row, kk, 2, TRACE)
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
        _wave_stamp(trace_ptr, trace_row, kk, 3, TRACE)
        if SFB_TMA:
            sb0 = _ring_scale(sfb_bufs, s, kb0 + kk, 0, col_layout, SF_PACKED, BLOCK_N)
            sb1 = sb0
        acc1 = _promote(acc1, part, sa1, sb0, sb1, second_col, SFB_PER_CHANNEL, SFB_UNIFORM)
        _release(empty_bars, s, SFB_TMA and not RING_CPASYNC)
        _wave_stamp(trace_ptr, trace_row, kk, 4, TRACE)
        sa0 = nsa0
        sa1 = nsa1
        sb0 = nsb0
        sb1 = nsb1
        it += 1
    return acc0, acc1, it


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


# Units a CTA may record with ``TRACE`` (the last slot holds the partition's entry time).
TRACE_UNITS: tl.constexpr = tl.constexpr(64)


@gluon.jit
def _stamp(trace_ptr, unit, wg: gl.constexpr, event: gl.constexpr, NUM_WG: gl.constexpr, TRACE: gl.constexpr):
    """``TRACE`` only (a timing probe, never dispatched): store ``%globaltimer`` (ns) at
    ``trace_ptr[((program * TRACE_UNITS + unit) * NUM_WG + wg) * 3 + event]``; events 0 unit start, 1 main
    loop done, 2 epilogue issued (``unit`` ``TRACE_UNITS - 1``, event 0: the partition's entry)."""
    if TRACE:
        if unit < TRACE_UNITS:
            t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False,
                                          pack=1)
            slot = ((gl.program_id(0) * TRACE_UNITS + unit) * NUM_WG + wg) * 3 + event
            gl.store(trace_ptr + slot, t)


# ``TRACE`` 2: K blocks of each CTA's first unit that each 256-row math warpgroup stamps (_wave_stamp), five times
# each: full barrier passed (wave 0 issued next), wave 0 done, wave 1 issued, wave 1 done, slot released and wave 1
# promoted; int64 %clock64 at trace_ptr[grid * TRACE_UNITS * NUM_WG * 3 + ((program * NUM_WG + wg) * TRACE_KB + kb)
# * 5 + event], after the unit stamps
TRACE_KB: tl.constexpr = tl.constexpr(64)
WAVE_EVENTS: tl.constexpr = tl.constexpr(5)


@gluon.jit
def _wave_stamp(trace_ptr, row, kk, event: gl.constexpr, TRACE: gl.constexpr):
    """``TRACE`` 2 only (a timing probe): the SM's ``%clock64`` for K block ``kk`` and ``event`` at
    ``trace_ptr[row + kk * WAVE_EVENTS + event]`` when ``row`` >= 0 and ``kk`` < ``TRACE_KB``."""
    if TRACE == 2:
        t = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
        on = (row >= 0) & (kk < TRACE_KB)
        gl.store(trace_ptr + gl.where(on, row + kk * WAVE_EVENTS + event, 0), t, mask=on)


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
                    SPLIT_TAIL: gl.constexpr = False, trace_ptr=None, TRACE: gl.constexpr = False,
                    HEAD_SPLITS: gl.constexpr = (0, 0, 0), D_REDUCE: gl.constexpr = False, b1_bufs=None,
                    d1_desc=None, d1_smem=None, BLOCK_N1: gl.constexpr = 0):
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
                    SPLIT_TAIL, trace_ptr, TRACE, HEAD_SPLITS, D_REDUCE)


@gluon.jit
def _dense_math(a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, HAS_C: gl.constexpr,
                PIPE_MMA: gl.constexpr, SMALL_EPI: gl.constexpr, sfa_bufs, SFA_TMA: gl.constexpr,
                WG: gl.constexpr, sfb_bufs, SFB_TMA: gl.constexpr, a_desc, K_DYN: gl.constexpr, c_desc, c_bars,
                C_TMA: gl.constexpr, C_TMA_LATE: gl.constexpr = False, ws_ptr=None, cnt_ptr=None,
                SPLITK_FUSED: gl.constexpr = False, SPLIT_TAIL: gl.constexpr = False, trace_ptr=None,
                TRACE: gl.constexpr = False, HEAD_SPLITS: gl.constexpr = (0, 0, 0), D_REDUCE: gl.constexpr = False):
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
    # (a 16-CTA grid; NOTES v10): the warpgroups drift apart around the reduction.
    # (1d1d with RING_CPASYNC: no TMA write of the ring's scales to order against, but without the fence ptxas
    # spills 272 bytes in the fused split-K epilogue of the 4096x2112x7168 FP32-out pick; kept, NOTES v31)
    FENCE_RING: gl.constexpr = SPLITK_FUSED and SFA_TMA
    # this wave's offsets in a split tile's partial plane (SPLITK_FUSED)
    local = (row0 + gl.arange(0, WG_M, layout=row_layout))[:, None] * BLOCK_N + gl.arange(
        0, BLOCK_N, layout=col_layout)[None, :]

    d_sub0 = _d_rows(d_smem, row0)
    c_bar = c_bars.index(WG)
    it = 0
    tcount = 0
    _stamp(trace_ptr, TRACE_UNITS - 1, WG, 0, NUM_WG, TRACE)
    for unit in range(gl.program_id(0), num_units, gl.num_programs(0)):
        _stamp(trace_ptr, tcount, WG, 0, NUM_WG, TRACE)
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
            _stamp(trace_ptr, tcount - 1, WG, 1, NUM_WG, TRACE)
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
            _stamp(trace_ptr, tcount - 1, WG, 2, NUM_WG, TRACE)
        else:
            rows1 = off_m + row1 + gl.arange(0, WG_M, layout=row_layout)
            mask1 = rows1 < M
            # TRACE 2: the first unit's K blocks stamped (_wave_stamp), after the unit stamps
            trace_row = gl.where(tcount == 1, gl.num_programs(0) * (TRACE_UNITS * NUM_WG * 3)
                                 + (gl.program_id(0) * NUM_WG + WG) * (TRACE_KB * WAVE_EVENTS), -1)
            acc0, acc1, it = _two_wave_loop(a_bufs, b_bufs, sfa_bufs, full_bars, empty_bars, it, kb0, row0,
                                            row1, sfa_ptr, sfb_ptr, rows0, rows1, cols, mask0, mask1, col_mask,
                                            nb0, second_col, stride_sfa_k, stride_sfb, mma_layout, NUM_NB,
                                            kb_per_split, STAGES, SF_PACKED, SFB_PER_CHANNEL, SFB_UNIFORM,
                                            SFA_TMA, sfb_bufs, SFB_TMA, trace_ptr, TRACE, trace_row)
            _stamp(trace_ptr, tcount - 1, WG, 1, NUM_WG, TRACE)
            _store_wave(acc0, d_desc, d_sub0, c_ptr, rows0, cols, mask0, col_mask, stride_cm,
                        out_m + row0, out_n, 0, ADD_C, C_TMA, c_bar, c_phase, D_REDUCE)
            # SMALL_EPI: wave 1 reuses wave 0's buffer, so wave 0's store must have read it first.
            if SMALL_EPI:
                d_sub1 = d_sub0
            else:
                d_sub1 = d_smem.slice(row1, WG_M, dim=0)
            _store_wave(acc1, d_desc, d_sub1, c_ptr, rows1, cols, mask1, col_mask, stride_cm,
                        out_m + row1, out_n, 0 if SMALL_EPI else 1, ADD_C, REDUCE=D_REDUCE)
            _stamp(trace_ptr, tcount - 1, WG, 2, NUM_WG, TRACE)
    tma.store_wait(0)


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
    fence when the scales came from it: :data:`SPLIT_N_RING_FENCE`)."""
    part, part1 = warpgroup_mma_wait(PENDING, deps=(part, part1))
    if SFA_TMA:
        sa = _ring_scale(sfa_bufs, s, kb, row0, gl.SliceLayout(1, part.type.layout), PACKED)
        sa1 = _ring_scale(sfa_bufs, s, kb, row0, gl.SliceLayout(1, part1.type.layout), PACKED)
    acc = _promote(acc, part, sa, sb0, sb1, second_col, False, False)
    acc1 = _promote(acc1, part1, sa1, tb0, tb1, second_col1, False, True)
    _release(empty_bars, s, SFA_TMA and SPLIT_N_RING_FENCE)
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


@gluon.jit
def ring_barriers(STAGES: gl.constexpr, NUM_WG: gl.constexpr, PER_WARP: gl.constexpr = False):
    """The ring's full barriers (one producer arrive plus the TMA bytes) and empty barriers (one arrive
    per math warpgroup, or with ``PER_WARP`` per math warp), ``STAGES`` each, initialized and fenced for the
    async proxy."""
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=NUM_WG * 4 if PER_WARP else NUM_WG)
    fence_async_shared()
    return full_bars, empty_bars


@gluon.jit
def launch_dependents():
    """``griddepcontrol.launch_dependents``: the next kernel in the stream, if it was launched with programmatic
    dependent launch (the split-K reductions), may start its CTAs now, on SMs this grid leaves free, and park
    them in ``griddepcontrol.wait``, which returns once this grid has finished and its writes are visible.
    Correctness never rests on this call (without it the dependents start at this grid's end); it only
    takes their launch off the critical path."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                              pack=1)


@gluon.jit
def wait_prerequisites():
    """``griddepcontrol.wait``: under programmatic dependent launch, block until the grids this launch depends
    on (the previous kernels of the stream) have finished and their writes are visible; a no-op otherwise.
    Called before the kernel's first global memory access, so only its launch and shared-memory setup
    overlap the previous kernel's tail."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def fp8_gemm_kernel(a_desc, b_desc, d_desc, sfa_ptr, sfb_ptr, c_ptr,
                    M, stride_sfa_k, stride_sfb, stride_cm, sfa_desc,
                    N: gl.constexpr, K: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    STAGES: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr,
                    SF_PACKED: gl.constexpr, SFB_PER_CHANNEL: gl.constexpr, HAS_C: gl.constexpr,
                    PIPE_MMA: gl.constexpr, PRODUCER_REGS: gl.constexpr, MATH_REGS: gl.constexpr,
                    SMALL_EPI: gl.constexpr = False, SFA_TMA: gl.constexpr = False,
                    layout_ptr=None, d_ptr=None, GROUPING: gl.constexpr = 0, NUM_GROUPS: gl.constexpr = 1,
                    GROUP_ROWS: gl.constexpr = 0, SFK_ROWS: gl.constexpr = 0, SFA_STRIDE_G: gl.constexpr = 0,
                    SFB_STRIDE_G: gl.constexpr = 0, USE_PSUM: gl.constexpr = False, ALIGN: gl.constexpr = 128,
                    sfb_desc=None, SFB_TMA: gl.constexpr = False, K_DYN: gl.constexpr = False,
                    c_desc=None, C_TMA: gl.constexpr = False, C_TMA_LATE: gl.constexpr = False,
                    ws_ptr=None, cnt_ptr=None, SPLITK_FUSED: gl.constexpr = False, SPLIT_TAIL: gl.constexpr = False,
                    PDL: gl.constexpr = False, trace_ptr=None, TRACE: gl.constexpr = False,
                    PDL_CHAIN: gl.constexpr = 0, B_PREFETCH: gl.constexpr = 0,
                    HEAD_SPLITS: gl.constexpr = (0, 0, 0), D_REDUCE: gl.constexpr = False, b1_desc=None,
                    d1_desc=None, BLOCK_N1: gl.constexpr = 0):
    """Entry: carve shared memory, init barriers, fork producer and math partitions.

    ``BLOCK_N1`` > 0 (a power of two below ``BLOCK_N``; dense recipe (1, 128, 128) tiles of BLOCK_M 64 / 128,
    whole K, no C staging, no head splits; ``PIPE_MMA`` where registers allow): tiles ``BLOCK_N + BLOCK_N1`` wide,
    e.g. 192 = 128 + 64 (DeepGEMM's 4096x2112 tile), as two column blocks: B's second box ``b1_desc``
    (``[BLOCK_N1, 128]``) in its own ring buffer, a second WGMMA and accumulator, and ``d1_desc``
    (``[64, BLOCK_N1]``) storing it (:func:`_split_n_math`).

    ``TRACE`` (timing probes only, ``scripts/trace_probe.py``): every math warpgroup of the dense form records
    ``%globaltimer`` into int64 ``trace_ptr`` [grid, TRACE_UNITS, math warpgroups, 3] (:func:`_stamp`); with
    ``TRACE`` 2 the 256-row warpgroups also stamp their first unit's K blocks after that (:func:`_wave_stamp`).

    ``PDL``: launched with programmatic dependent launch; waits for the previous kernels
    (:func:`wait_prerequisites`) after the barriers are initialized, before any global memory access.

    ``PDL_CHAIN`` (a chain of independent launches, the k-grouped groups: each reads and writes only its own
    operands): 1, the chain's first launch, triggers its dependents (:func:`launch_dependents`) right after
    its ``PDL`` wait; 2, a later link, launched with PDL, triggers them at its start, starts without waiting
    and waits for its predecessor only before it exits, so that it finishes after it: the next group's CTAs
    take the SMs this grid's tail leaves idle, and whatever the stream runs after the chain still starts only
    once every link has finished.

    ``B_PREFETCH`` > 0: the producer also prefetches B's tile that many K blocks ahead into L2 (for operands that
    stream from HBM; :mod:`.l2_prefetch`).

    ``c_desc`` (``C_TMA`` only, else None): TMA descriptor of the FP32 C ``[M, N]``, box [64, BLOCK_N], the
    layout of ``d_desc`` (C is staged in the D buffer).

    ``sfa_desc``: TMA descriptor of the LHS scales as [K/128 (packed: ceil(K/512)), M] (the MN-major
    tensor's transpose), box [1, BLOCK_M] (BLOCK_M 192: [1, 64], three a stage), no swizzle; only read with
    ``SFA_TMA`` (else any small box). ``a_desc``'s box is [BLOCK_M, 128], or [64, 128] at BLOCK_M 192.
    ``sfb_desc`` (recipe (1, 1, 128) with ``SFB_TMA`` only, else None): the per-channel RHS scales
    likewise as [K/128 (packed: ceil(K/512)), N], box [1, BLOCK_N].

    m-grouped MoE forms (``GROUPING``; 0 = dense, every grouped argument left at its default):

    - 1, contiguous: ``a_desc`` [M_total, K]; ``b_desc`` [G * N, K] (group g's B is rows g*N + [0, N));
      ``layout_ptr`` int32 ``grouped_layout`` ([M_total] ids, -1 padding; ``USE_PSUM``: [G] cumulative
      end rows, segments aligned to ``ALIGN``); ``d_desc`` [M_total, N]; ``sfb_ptr`` [G, ceil(N/128), SFK]
      with group stride ``SFB_STRIDE_G``. BLOCK_M must divide ``ALIGN``.
    - 2, masked: ``a_desc`` [G * max_m, K] (``GROUP_ROWS`` = max_m); ``layout_ptr`` int32 ``masked_m`` [G]
      on the device; ``d_desc`` [G * max_m, N] and ``d_ptr`` its base (partial waves are stored with a
      row mask); ``sfa_ptr`` [G, max_m, SFK] MN-major with group stride ``SFA_STRIDE_G``, ``sfa_desc``
      its [G * SFK_ROWS, max_m] view; ``M`` = G * max_m.
    - 3, head-batched (fp8_einsum's ``bhr,hdr->bhd``): every group has all ``M`` rows; ``a_desc`` [M, G * K] (group
      g's K from column g * K), ``d_desc`` [M, G * N] (group g's columns g * N + [0, N), N a multiple of BLOCK_N;
      the TMA store clips the rows past M); ``sfa_ptr`` / ``sfa_desc`` as the masked form's with max_m = M;
      ``layout_ptr`` / ``d_ptr`` unused; BLOCK_M 64 or 128.

    Grouped forms use BLOCK_M 64/128 or 256 (:func:`_contiguous_math_256`, :func:`_masked_math_256`), no split-K,
    no C, the 1d2d recipe.

    ``SPLITK_FUSED`` (dense, ``SPLIT_K > 1``, BLOCK_M 64/128): ``ws_ptr`` fp32 [split tiles, SPLIT_K,
    BLOCK_M, BLOCK_N], ``cnt_ptr`` int32 [split tiles * math warpgroups], all 0 at launch (and left 0);
    ``d_desc`` is D's own descriptor. Without it, split-K ``d_desc`` is the workspace's. ``SPLIT_TAIL``
    (with ``SPLITK_FUSED``): only the tiles past the last whole round of the grid are split.
    """
    if GROUPING != 0:
        gl.static_assert(BLOCK_M <= 128 or (BLOCK_M == 256 and not PIPE_MMA),
                         "grouped tiles: BLOCK_M 64, 128 or 256 (one partial)")
        gl.static_assert(SPLIT_K == 1, "grouped tiles: no split-K")
        gl.static_assert(not HAS_C, "grouped tiles: no C")
        gl.static_assert(not SFB_PER_CHANNEL, "grouped tiles: recipe (1, 128, 128) only")
    if GROUPING == 3:
        gl.static_assert(BLOCK_M <= 128 and N % BLOCK_N == 0,
                         "head-batched: BLOCK_M 64/128, a tile never reaching into the next group's D columns")
    if GROUPING == 1:
        # 256-row tiles run as two 128-row halves, each inside one segment (_halves_of_tile)
        gl.static_assert(ALIGN % min(BLOCK_M, 128) == 0,
                         "contiguous: BLOCK_M (128 at BLOCK_M 256) must divide the alignment")
    NUM_WG: gl.constexpr = num_math_warpgroups(BLOCK_M)
    gl.static_assert(BLOCK_M == 64 or BLOCK_M == 128 or BLOCK_M == 192 or BLOCK_M == 256,
                     "BLOCK_M must be 64, 128, 192 or 256")
    gl.static_assert(BLOCK_M != 192 or (GROUPING == 0 and not PIPE_MMA and not SFB_PER_CHANNEL and SPLIT_K == 1),
                     "BLOCK_M 192 (three math warpgroups, 152 registers): dense 1d2d tiles, one partial, no split-K")
    gl.static_assert(BLOCK_M == 256 or not SMALL_EPI, "SMALL_EPI needs two waves a warpgroup")
    gl.static_assert(BLOCK_M < 256 or not PIPE_MMA, "BLOCK_M 256 has registers for one partial only")
    gl.static_assert(K % 128 == 0, "K must be a multiple of 128 (the scale block)")
    gl.static_assert((K // 128) % SPLIT_K == 0, "SPLIT_K must divide K / 128")
    # K_DYN: K comes from a_desc at run time (the host checks it is a multiple of 128); ``K`` is unused
    gl.static_assert(not K_DYN or (SPLIT_K == 1 and GROUPING == 0), "K_DYN: dense tiles without split-K")
    gl.static_assert(BLOCK_N % 8 == 0, "BLOCK_N must be a multiple of 8")
    gl.static_assert(SFB_PER_CHANNEL or not SFB_TMA, "SFB_TMA: recipe (1, 1, 128) only")
    gl.static_assert(not SPLITK_FUSED or (SPLIT_K > 1 and GROUPING == 0 and BLOCK_M <= 128),
                     "SPLITK_FUSED: dense split-K tiles of BLOCK_M 64/128")
    gl.static_assert(not C_TMA or SPLIT_K == 1 or SPLIT_TAIL, "C_TMA: whole-K tiles (split ones add C themselves)")
    gl.static_assert(not SPLIT_TAIL or SPLITK_FUSED, "SPLIT_TAIL needs SPLITK_FUSED")
    gl.static_assert(HEAD_SPLITS[1] == 0 or (GROUPING == 0 and not HAS_C and SPLIT_K == 1
                                             and HEAD_SPLITS[0] % BLOCK_N == 0 and HEAD_SPLITS[2] % BLOCK_N == 0),
                     "HEAD_SPLITS: dense tiles without C or split-K, BLOCK_N dividing left and right")
    gl.static_assert(BLOCK_N1 == 0 or (GROUPING == 0 and BLOCK_M <= 128 and BLOCK_N1 < BLOCK_N and SPLIT_K == 1
                                       and not SFB_PER_CHANNEL and not C_TMA and not D_REDUCE
                                       and not K_DYN and not TRACE and B_PREFETCH == 0 and HEAD_SPLITS[1] == 0),
                     "BLOCK_N1: dense 1d2d tiles of BLOCK_M 64/128, whole K, no C staging / head splits")
    # warp_specialize takes no None argument: unfused, the scale pointers stand in (never read)
    if SPLITK_FUSED:
        ws_arg = ws_ptr
        cnt_arg = cnt_ptr
    else:
        ws_arg = sfa_ptr
        cnt_arg = sfb_ptr
    trace_arg = trace_ptr if TRACE else sfa_ptr
    # one A box a stage, or at BLOCK_M 192 (shared-memory shapes are powers of two) three 64-row boxes:
    # slot s's rows 64 i + [0, 64) are a_bufs[3 s + i] (_a_rows)
    A_BOXES: gl.constexpr = BLOCK_M // a_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * A_BOXES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    SFA_SLOTS: gl.constexpr = STAGES if SFA_TMA else 1
    # BLOCK_M 192: the three boxes of ring scales land in one row of 256, its last 64 unused (layouts.sfa_ring_row)
    SFA_ROW: gl.constexpr = (256 if BLOCK_M == 192 else BLOCK_M) if SFA_TMA else sfa_desc.block_type.shape[1]
    sfa_bufs = gl.allocate_shared_memory(sfa_desc.dtype, [SFA_SLOTS, 1, SFA_ROW], sfa_desc.layout)
    # warp_specialize takes no None argument: without SFB_TMA a 16-byte placeholder buffer and the LHS
    # scale descriptor stand in (never read)
    if SFB_TMA:
        sfb_tma_desc = sfb_desc
        sfb_bufs = gl.allocate_shared_memory(sfb_desc.dtype, [STAGES] + sfb_desc.block_type.shape, sfb_desc.layout)
    else:
        sfb_tma_desc = sfa_desc
        sfb_bufs = gl.allocate_shared_memory(gl.float32, [1, 1, 4], sfa_desc.layout)
    if BLOCK_M == 192:  # one [64, BLOCK_N] staging buffer per warpgroup (_d_rows)
        d_smem = gl.allocate_shared_memory(d_desc.dtype, [3, 64, BLOCK_N], d_desc.layout)
    else:
        d_smem = gl.allocate_shared_memory(d_desc.dtype, [d_staging_rows(BLOCK_M, SMALL_EPI), BLOCK_N],
                                           d_desc.layout)
    full_bars, empty_bars = ring_barriers(STAGES, NUM_WG, PROBE_EMPTY_SMEM != 0)
    # one C-arrival barrier per math warpgroup; without C_TMA never waited on, and d_desc stands in for c_desc
    c_bars = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_WG):
        mbarrier.init(c_bars.index(i), count=1)
    fence_async_shared()
    if C_TMA:
        gl.static_assert(GROUPING == 0, "C_TMA: dense tiles")
        c_tma_desc = c_desc
    else:
        c_tma_desc = d_desc
    # the second column block's ring buffer and D staging (BLOCK_N1 > 0); else the first's stand in (never used)
    if BLOCK_N1 > 0:
        b1_bufs = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_type.shape, b1_desc.layout)
        d1_smem = gl.allocate_shared_memory(d1_desc.dtype, [BLOCK_M, BLOCK_N1], d1_desc.layout)
        b1_tma_desc = b1_desc
        d1_tma_desc = d1_desc
    else:
        b1_bufs = b_bufs
        d1_smem = d_smem
        b1_tma_desc = b_desc
        d1_tma_desc = d_desc

    gl.static_assert(PDL_CHAIN == 0 or (SPLIT_K == 1 and GROUPING == 0 and (PDL_CHAIN == 1) == PDL),
                     "PDL_CHAIN: dense unsplit launches; its first link waits (PDL), the others do not")
    if PDL:
        wait_prerequisites()
    if (SPLIT_K > 1 and not SPLITK_FUSED) or PDL_CHAIN != 0:
        launch_dependents()  # the dependents' CTAs (split-K reduction, next link) start on SMs this grid frees

    # (argument tuples written out per partition: a tuple held in a variable loses the constexprs)
    if NUM_WG == 2:
        # Two math warpgroups in two partitions: no CTA-wide barrier couples them, so one
        # promotes while the other's WGMMA runs (the overlap DeepGEMM gets from its 2 WGs).
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 0,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, trace_arg, TRACE, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 1,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, trace_arg, TRACE, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA,
                               SF_PACKED, layout_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM,
                               ALIGN, sfb_tma_desc, sfb_bufs, SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_tma_desc,
                               b1_bufs, BLOCK_N1, sfb_ptr, stride_sfb, sfa_ptr, stride_sfa_k)),
        ], [4, 1], [MATH_REGS, PRODUCER_REGS])
    elif NUM_WG == 3:
        # BLOCK_M 192: three math warpgroups, one 64-row wave each, at MATH_REGS (152: see layouts)
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 0,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, trace_arg, TRACE, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 1,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, trace_arg, TRACE, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 2,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, trace_arg, TRACE, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA,
                               SF_PACKED, layout_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM,
                               ALIGN, sfb_tma_desc, sfb_bufs, SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_tma_desc,
                               b1_bufs, BLOCK_N1, sfb_ptr, stride_sfb, sfa_ptr, stride_sfa_k)),
        ], [4, 4, 1], [MATH_REGS, MATH_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 0,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, trace_arg, TRACE, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA,
                               SF_PACKED, layout_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM,
                               ALIGN, sfb_tma_desc, sfb_bufs, SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_tma_desc,
                               b1_bufs, BLOCK_N1, sfb_ptr, stride_sfb, sfa_ptr, stride_sfa_k)),
        ], [1], [PRODUCER_REGS])
    if PDL_CHAIN == 2:
        wait_prerequisites()  # finish only after the previous link has


# ---------------------------------------------------------------------------------------------
# Split-K reduction: fixed-order sum of the FP32 partials, + C, cast (deterministic).
# ---------------------------------------------------------------------------------------------
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
