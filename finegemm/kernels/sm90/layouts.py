"""Layout and pipeline arithmetic for the sm90 Gluon kernels: plain functions, tested on the CPU.

Everything here is host-side Python (no Gluon), so the heuristics and the tests can use it without
a GPU; the kernel calls the same functions through ``@gl.constexpr_function`` wrappers.
"""

from __future__ import annotations

# K is consumed in blocks of 128: the scale granularity (DESIGN.md §1); 4 WGMMA k32 steps each.
BLOCK_K = 128
# Hopper opt-in shared memory per CTA (232448 B) minus what the compiler keeps for itself
# (barriers, alignment padding, the reduction scratch of layout conversions).
SMEM_RESERVED = 2 * 1024
# Registers the TMA producer warp keeps after setmaxnreg.dec: it only computes tile
# coordinates and waits on barriers (DeepGEMM gives its producer warpgroup 40).
PRODUCER_REGS = 40


# Registers each math warpgroup asks for with setmaxnreg.inc (the compiler's leftover rule then
# gives the default partition the same 232 when a producer warpgroup keeps 40).
MATH_REGS = 232
# With three math warpgroups (BLOCK_M 192) the register file (64 Ki) holds 3 x 128 threads at this many
# beside the producer's warpgroup at PRODUCER_REGS: (65536 - 128 * 40) / 384 = 157, rounded down to 8.
MATH_REGS_3WG = 152


def math_warpgroups(block_m: int) -> int:
    """Math warpgroups, each its own partition: one per 64 rows of the tile (m64nNk32 WGMMA), at most two,
    except BLOCK_M 192: three (one wave each)."""
    assert block_m in (64, 128, 192, 256), block_m
    return 3 if block_m == 192 else min(block_m // 64, 2)


def math_regs(block_m: int) -> int:
    """setmaxnreg of each math warpgroup for a BLOCK_M tile."""
    return MATH_REGS_3WG if math_warpgroups(block_m) == 3 else MATH_REGS


def waves_per_warpgroup(block_m: int) -> int:
    """64-row WGMMA waves each math warpgroup issues per K block (BLOCK_M 256: two, one partial each)."""
    return block_m // (64 * math_warpgroups(block_m))


def sfa_ring_row(block_m: int) -> int:
    """Length of a stage's per-token scale row in shared memory (``sfa_tma``): BLOCK_M, or 256 at BLOCK_M 192
    (shared-memory shapes are powers of two; its last 64 words stay unused)."""
    return 256 if block_m == 192 else block_m


def stage_bytes(block_m: int, block_n: int, sfa_tma: bool = False, sfb_tma: bool = False) -> int:
    """Shared memory of one pipeline stage: an e4m3 A tile and an e4m3 B tile of 128 K each, plus the
    tile's BLOCK_M 4-byte per-token scales when they ride in the ring (``sfa_tma``) and its BLOCK_N
    per-channel RHS scales (``sfb_tma``, recipe (1, 1, 128)); the scales' row is :func:`sfa_ring_row` long."""
    return ((block_m + block_n) * BLOCK_K + (4 * sfa_ring_row(block_m) if sfa_tma else 0)
            + (4 * block_n if sfb_tma else 0))


def epilogue_bytes(block_m: int, block_n: int, out_fp32: bool, small_epi: bool = False) -> int:
    """The D staging tile for the TMA store (``small_epi``: one 64-row wave per warpgroup, reused)."""
    rows = 64 * math_warpgroups(block_m) if small_epi else block_m
    return rows * block_n * (4 if out_fp32 else 2)


def max_stages(block_m: int, block_n: int, out_fp32: bool, smem_per_block: int, small_epi: bool = False,
               sfa_tma: bool = False, sfb_tma: bool = False) -> int:
    """How many stages fit next to the epilogue tile (and the 16-byte scale slot when scales are not in the ring)."""
    budget = smem_per_block - SMEM_RESERVED - epilogue_bytes(block_m, block_n, out_fp32, small_epi)
    if not sfa_tma:
        budget -= 16
    return budget // stage_bytes(block_m, block_n, sfa_tma, sfb_tma)


def full_barrier_arrivals() -> int:
    """The producer's one expect-tx arrival per stage (TMA bytes complete the phase)."""
    return 1


def empty_barrier_arrivals(block_m: int) -> int:
    """Each math warpgroup releases a stage with one (elected) arrival after its WGMMA finished."""
    return math_warpgroups(block_m)


def stage_tx_bytes(block_m: int, block_n: int, sfa_tma: bool = False, sfb_tma: bool = False) -> int:
    """Bytes the TMA loads of one stage deliver (boxes past the edge still count in full)."""
    return (block_m + block_n) * BLOCK_K + (4 * block_m if sfa_tma else 0) + (4 * block_n if sfb_tma else 0)


def accumulator_regs(block_m: int, block_n: int, pipelined: bool) -> int:
    """FP32 registers per math thread: the promoted result of each wave plus one (or two) WGMMA partials."""
    per_thread = 64 * block_n // 128  # a warpgroup's 64 x BLOCK_N fp32 tile over 128 threads
    return per_thread * (waves_per_warpgroup(block_m) + (2 if pipelined else 1))


def wgmma_instr_n(block_n: int) -> int:
    """N of each wgmma.mma_async: the whole tile width (multiples of 8 up to 256 are legal for fp8)."""
    assert block_n % 8 == 0 and 8 <= block_n <= 256, block_n
    return block_n


def a_box_rows(block_m: int) -> int:
    """Rows of one TMA box of A (and of the per-token scales): the whole tile, or for BLOCK_M 192 (not a power
    of two, which a descriptor's block must be) one warpgroup's 64, three boxes a stage."""
    return 64 if block_m == 192 else block_m


def sfa_box(block_m: int, sfa_tma: bool) -> list[int]:
    """TMA box of the LHS-scale descriptor over the [K/128, M] view: one K block's scales of
    :func:`a_box_rows` rows (or a 16-byte placeholder box when the scales are loaded from global memory)."""
    return [1, a_box_rows(block_m)] if sfa_tma else [1, 4]



def sfb_box(block_n: int) -> list[int]:
    """TMA box of the per-channel RHS-scale descriptor over the [K/128, N] view (``sfb_tma``): one K
    block's BLOCK_N scales."""
    return [1, block_n]
