"""Hopper FP8 GEMM with fine-grained scales: warp-specialized, persistent, TMA + async WGMMA (Gluon).

``D[m, n] = C[m, n] + sum_kb (A_kb @ B_kb^T)[m, n] * sfa[m, kb] * sfb[., kb]`` for both recipes:
``1d2d`` (per-128x128-block RHS scales, BF16 or FP32 out) and ``1d1d`` (per-channel RHS scales, the
weight-gradient kernel, FP32 out with ``C`` accumulated). One kernel body (:func:`.kernel.fp8_gemm_kernel`), the
recipe a constexpr.

Modules: :mod:`.schedule` (tile walk, work units, split-K plan, grouped row lookups), :mod:`.load` (the producer),
:mod:`.mma` (WGMMA K loops, promotion, slot releases), :mod:`.dense`, :mod:`.split_n` and :mod:`.grouped` (the math
partitions), :mod:`.epilogue` (D stores, C prefetch, split-K reductions), :mod:`.kernel` (the entry).

Roles (``gl.warp_specialize``):
  - producer: 1 warp (padded by the compiler to a warpgroup, ``setmaxnreg.dec`` to 40 registers).
    Walks the same persistent tile sequence as the math partitions and, per 128-wide K block, waits
    ``empty[s]``, arms ``full[s]`` with the stage's byte count and issues the TMA loads of A and B. With
    ``SFA_TMA`` the per-token scales come too, as TMA boxes; in the 1d1d tiles (``SFB_TMA``) the per-channel and
    per-token scales are copied by the producer warp's ``cp.async`` instead.
  - math: one warpgroup (4 warps) per 64 rows of the tile up to two, each its own partition (the
    default one and, for BLOCK_M 128/256, a worker), ``setmaxnreg.inc`` to 232 registers. BLOCK_M 256:
    each warpgroup issues two 64-row waves per K block into one partial (see :func:`.mma._two_wave_loop`).
    BLOCK_M 192: three warpgroups of one wave each at 152 registers (one partial, dense 1d2d only); its A
    tile and ring scales arrive as three 64-row TMA boxes a stage (descriptor blocks and shared-memory
    shapes must be powers of two), and its D staging is one [64, BLOCK_N] buffer per warpgroup.
    Per K block:
    wait ``full[s]``, issue ``wgmma.mma_async`` (4 x m64nNk32 per warpgroup) into a *fresh*
    accumulator, and promote the previous block's partial on the CUDA cores while the tensor cores
    work (``PIPE_MMA``: two partials in flight, wait(1)), then release ``empty[s]``.
    The RHS scales come straight from global memory (L2-resident), one block ahead of their use, or
    (``SFB_TMA``) from the ring; the per-token LHS scales likewise, or (``SFA_TMA``) from the ring.
  - epilogue (math partition): optional ``C`` added in FP32, cast, registers -> shared memory ->
    TMA store, left in flight while the next tile's main loop runs (waited before the buffer is
    reused).

Stages: ``STAGES`` ring slots of (BLOCK_M + BLOCK_N) x 128 bytes (+ 4 x BLOCK_M with ``SFA_TMA``, + 4 x BLOCK_N
with ``SFB_TMA``).
Barriers: ``full[s]`` (count 1: the producer's expect-tx arrive, completed by the TMA bytes; with ``SFB_TMA`` each
producer lane adds one pending arrive that lands with its ``cp.async`` copies) and ``empty[s]`` (count: one
arrive per math warpgroup). Phase of slot ``s`` on its ``i``-th use is ``i & 1``; the producer waits on ``empty``
with the flipped phase so that the first pass through the ring does not block. ``c_bars[wg]`` (count 1, one per
math warpgroup): its C tile's TMA prefetch into its D staging rows (``C_TMA``).

Split-K (``SPLIT_K > 1``, small M): work units are (tile, k-split) pairs; each writes its FP32
partial tile to a workspace ``[SPLIT_K * M_pad, N]``. The reduction sums the splits in a fixed order
(deterministic), adds ``C`` and casts: either a second launch (:func:`.epilogue._splitk_reduce_kernel`, made with
programmatic dependent launch: the GEMM lets it start at once (:func:`.kernel.launch_dependents`) and it waits for
the GEMM's end in ``griddepcontrol.wait``, which takes its launch latency off the critical path), or
(``SPLITK_FUSED``) in the kernel itself: each math warpgroup stores its partial with plain stores,
counts its arrival on a per-(tile, warpgroup) counter (release/acquire at GPU scope), and the last of
the ``SPLIT_K`` to arrive reads all partials back in split order, finishes the tile through the usual
epilogue and resets the counter to 0 for the next launch (:func:`.epilogue._splitk_fused_epilogue`).

Notes:
  - Gluon 3.6 has no TMA multicast; tiles of A are re-read from L2 by every N tile.
  - A tile wider than 128 (BLOCK_N 256) spans two RHS scale blocks: the two scales are selected per column
    with a predicate, not by a second loop. BLOCK_N that is not a power of two (DeepGEMM's 96, 112, 160, 192)
    does not compile: Gluon tensors (the accumulator, the column vectors) need power-of-two shapes
    ("Shape element 0 must be a power of 2", CPU compile of 64x112, 128x144 and 128x192). Such widths of two
    power-of-two blocks (96, 144, 160, 192, ...) run as two column blocks (``BLOCK_N1``,
    :func:`.split_n._split_n_math`: dense recipe (1, 128, 128) tiles of BLOCK_M 64 / 128), as in gemm_bf16.
  - Gluon and Triton resolve a ``@gluon.jit`` function's globals in its own module: each module imports what its
    kernels call.
"""

from __future__ import annotations

from .epilogue import _d_rows, _prefetch_c, _splitk_reduce_kernel, _store_masked_wave, _store_wave
from .kernel import fp8_gemm_kernel, launch_dependents, ring_barriers, sfa_desc_layout, wait_prerequisites
from .schedule import (
    BLOCK_K,
    _contiguous_group,
    _first_local_unit,
    _masked_group_tiles,
    _rows_of_group,
    _tile_coords,
    head_tile,
    mma_layout_for,
    num_math_warpgroups,
)

# what the dispatch, compile checks, the BF16 kernels (which share the tile walk and the epilogue) and tests import
__all__ = [
    "BLOCK_K",
    "_contiguous_group",
    "_d_rows",
    "_first_local_unit",
    "_masked_group_tiles",
    "_prefetch_c",
    "_rows_of_group",
    "_splitk_reduce_kernel",
    "_store_masked_wave",
    "_store_wave",
    "_tile_coords",
    "fp8_gemm_kernel",
    "head_tile",
    "launch_dependents",
    "mma_layout_for",
    "num_math_warpgroups",
    "ring_barriers",
    "sfa_desc_layout",
    "wait_prerequisites",
]
