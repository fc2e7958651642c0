"""The sm90 FP8 GEMM's entry: checks the constexprs, carves shared memory, initializes the barriers and forks the
producer and math partitions (``gl.warp_specialize``).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
)

from .dense import _math_partition
from .load import _load_partition
from .schedule import d_staging_rows, num_math_warpgroups


def sfa_desc_layout() -> gl.NVMMASharedLayout:
    """Host side: the unswizzled shared layout of the LHS-scale TMA boxes (read back as flat rows)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)


@gluon.jit
def ring_barriers(STAGES: gl.constexpr, NUM_WG: gl.constexpr):
    """The ring's full barriers (one producer arrive plus the TMA bytes) and empty barriers (one arrive
    per math warpgroup), ``STAGES`` each, initialized and fenced for the async proxy."""
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=NUM_WG)
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
                    PDL: gl.constexpr = False, PDL_CHAIN: gl.constexpr = 0, B_PREFETCH: gl.constexpr = 0,
                    HEAD_SPLITS: gl.constexpr = (0, 0, 0), D_REDUCE: gl.constexpr = False, b1_desc=None,
                    d1_desc=None, BLOCK_N1: gl.constexpr = 0):
    """Entry: carve shared memory, init barriers, fork producer and math partitions.

    ``BLOCK_N1`` > 0 (a power of two below ``BLOCK_N``; dense recipe (1, 128, 128) tiles of BLOCK_M 64 / 128,
    whole K, no C staging, no head splits; ``PIPE_MMA`` where registers allow): tiles ``BLOCK_N + BLOCK_N1`` wide,
    e.g. 192 = 128 + 64 (DeepGEMM's 4096x2112 tile), as two column blocks: B's second box ``b1_desc``
    (``[BLOCK_N1, 128]``) in its own ring buffer, a second WGMMA and accumulator, and ``d1_desc``
    (``[64, BLOCK_N1]``) storing it (:func:`_split_n_math`).

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
                                       and not K_DYN and B_PREFETCH == 0 and HEAD_SPLITS[1] == 0),
                     "BLOCK_N1: dense 1d2d tiles of BLOCK_M 64/128, whole K, no C staging / head splits")
    # warp_specialize takes no None argument: unfused, the scale pointers stand in (never read)
    if SPLITK_FUSED:
        ws_arg = ws_ptr
        cnt_arg = cnt_ptr
    else:
        ws_arg = sfa_ptr
        cnt_arg = sfb_ptr
    # one A box a stage, or at BLOCK_M 192 (shared-memory shapes are powers of two) three 64-row boxes:
    # slot s's rows 64 i + [0, 64) are a_bufs[3 s + i] (_a_rows)
    A_BOXES: gl.constexpr = BLOCK_M // a_desc.block_type.shape[0]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * A_BOXES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    SFA_SLOTS: gl.constexpr = STAGES if SFA_TMA else 1
    # BLOCK_M 192: the three boxes of ring scales land in one row of 256, its last 64 unused (layouts.sfa_ring_row)
    SFA_ROW: gl.constexpr = (256 if BLOCK_M == 192 else BLOCK_M) if SFA_TMA else sfa_desc.block_type.shape[1]
    sfa_bufs = gl.allocate_shared_memory(sfa_desc.dtype, [SFA_SLOTS, 1, SFA_ROW], sfa_desc.layout)
    # warp_specialize takes no None argument: without SFB_TMA a 16-byte placeholder buffer stands in (never read)
    if SFB_TMA:
        sfb_bufs = gl.allocate_shared_memory(sfb_desc.dtype, [STAGES] + sfb_desc.block_type.shape, sfb_desc.layout)
    else:
        sfb_bufs = gl.allocate_shared_memory(gl.float32, [1, 1, 4], sfa_desc.layout)
    if BLOCK_M == 192:  # one [64, BLOCK_N] staging buffer per warpgroup (_d_rows)
        d_smem = gl.allocate_shared_memory(d_desc.dtype, [3, 64, BLOCK_N], d_desc.layout)
    else:
        d_smem = gl.allocate_shared_memory(d_desc.dtype, [d_staging_rows(BLOCK_M, SMALL_EPI), BLOCK_N],
                                           d_desc.layout)
    full_bars, empty_bars = ring_barriers(STAGES, NUM_WG)
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
                               SPLIT_TAIL, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 1,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA,
                               SF_PACKED, layout_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM,
                               ALIGN, sfb_bufs, SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_tma_desc,
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
                               SPLIT_TAIL, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 1,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_math_partition, (a_bufs, b_bufs, full_bars, empty_bars, d_desc, d_smem,
                               sfa_ptr, sfb_ptr, c_ptr, M, stride_sfa_k, stride_sfb, stride_cm,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K,
                               SF_PACKED, SFB_PER_CHANNEL, HAS_C, PIPE_MMA, SMALL_EPI, sfa_bufs, SFA_TMA, 2,
                               layout_ptr, d_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFA_STRIDE_G,
                               SFB_STRIDE_G, USE_PSUM, ALIGN, sfb_bufs, SFB_TMA, a_desc, K_DYN,
                               c_tma_desc, c_bars, C_TMA, C_TMA_LATE, ws_arg, cnt_arg, SPLITK_FUSED,
                               SPLIT_TAIL, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA,
                               SF_PACKED, layout_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM,
                               ALIGN, sfb_bufs, SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_tma_desc,
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
                               SPLIT_TAIL, HEAD_SPLITS, D_REDUCE, b1_bufs, d1_tma_desc, d1_smem,
                               BLOCK_N1)),
            (_load_partition, (a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, M,
                               N, K, BLOCK_M, BLOCK_N, STAGES, GROUP_M, SPLIT_K, sfa_desc, sfa_bufs, SFA_TMA,
                               SF_PACKED, layout_ptr, GROUPING, NUM_GROUPS, GROUP_ROWS, SFK_ROWS, USE_PSUM,
                               ALIGN, sfb_bufs, SFB_TMA, K_DYN, SPLIT_TAIL, B_PREFETCH, b1_tma_desc,
                               b1_bufs, BLOCK_N1, sfb_ptr, stride_sfb, sfa_ptr, stride_sfa_k)),
        ], [1], [PRODUCER_REGS])
    if PDL_CHAIN == 2:
        wait_prerequisites()  # finish only after the previous link has
