"""Config heuristic for the sm90 m-grouped FP8 GEMMs (contiguous and masked, recipe 1d2d, BF16 out).

A frozen :class:`GemmDesc` (``layout`` ``m_grouped_contiguous`` or ``m_grouped_masked``) plus
:class:`DeviceFacts` in, a frozen :class:`~finegemm.jit.heuristics_sm90.Sm90Config` out. Pure
functions, no device access, unit-tested on the CPU (tests/test_heuristics_sm90_grouped.py).

The grouped kernel form (``GROUPING`` 1/2 of ``fp8_gemm_kernel``) takes BLOCK_M 64 or 128 (one 64-row
wave per math warpgroup) or 256 (two, one partial), no split-K (its static asserts), so the choice is BLOCK_M,
BLOCK_N, whether the per-token scales ride in the ring (SFA_TMA), PIPE_MMA and the stage count.
Rules carried over from the dense sweeps, then confirmed by the grouped
sweep (results/grouped-sm90-sweep-h200-2026-12-03-e189e71.json: the pick was the fastest of 4-6
configs on all 9 shapes of that sweep):

- BLOCK_N 128 (won every dense DeepSeek-V3 shape); narrower only when N itself is narrow.
- Contiguous: BLOCK_M 64 when the segments are aligned to 64 rows only (a larger tile would straddle two
  experts; unmeasured). Else BLOCK_M 256 from 512 rows a group (:data:`CONTIGUOUS_256_MIN_ROWS`) where its tiles fill
  the SMs within 10 points of 128-row ones, else 128, and 64 only when 128-row tiles would leave SMs
  idle (fewer tiles than SMs). Segments are 128-aligned, so a 256-row tile is two halves that may hold
  two experts; such a tile runs its K loop once per expert, one wave each (the kernel's
  ``_contiguous_math_256``). H200 (results/grouped-sm90-contiguous-256-h200-2026-12-04-b.json, us,
  128x128 -> 256x128): 4 x 8192 x (4096, 7168) 1679.3 -> 1521.5, 4 x 8192 x (7168, 2048) 821.6 -> 752.1,
  8 x 4096 alike 1673.5 -> 1510.3 and 823.4 -> 754.5; random group sizes (U(0.7, 1.3) x expected, padded
  to 128, so tiles straddle experts) 8 x ~4096 x (4096, 7168) 1810.3 -> 1710.5, x (7168, 2048) 883.4 ->
  820.0, 4 x ~8192 1712.2 -> 1531.8 and 725.6 -> 680.1. SFA_TMA on: it won all 6 dense shapes at
  M = 4096 (e.g. 144.4 -> 119.9 us at N=2112).
- Masked: BLOCK_M 64 when the expected rows per group are <= 64 (one warpgroup; a 128-row tile
  would compute half empty rows), else 128. Scales by TMA at both heights: 16 groups x 64 rows at
  (7168, 2048) 141.3 -> 92.8 us, at (4096, 7168) 447.5 -> 286.2 us; 128-row tiles at 1 x 1024 56.3 us
  and 4 x 256 37.5 us beat 64-row ones (75.1, 48.9).
- Masked 64-row tiles: 64x64, pipelined (K blocks in pairs). The e189e71 sweep's "PIPE_MMA slower on
  every masked shape" was measured while ptxas serialized that loop; the f591c04 sweep
  (results/grouped-sm90-sweep-h200-2026-12-03-f591c04.json) with the loop fixed: 16 x 64 at
  (7168, 2048) 64x64 pipelined 13 stages 75.2 us (64x128 plain 92.2, pipelined 84.4), at (4096, 7168)
  189.9 (285.9, 272.8), 32 x 64 at (7168, 2048) 137.2 (176.7, 161.3). 128-row tiles: within 1 % either
  way (1 x 1024 at (4096, 7168) 54.8 pipelined vs 55.4; 4 x 256 at (7168, 2048) 38.4 vs 38.1), so they stay
  plain. Contiguous likewise within 1 % (1654.7 vs 1661.7 us at 4 x 8192 x (4096, 7168)): plain.
- Masked, more rows, K >= 4096 (results/grouped-sm90-masked-sweep-h200-2026-12-03-2c47859.json): at
  up to 256 rows a group 64x128 pipelined (4 x 256 x (4096, 7168) 103.2 -> 68.8 us; 128x64 pipelined
  72.7), above 128x128 pipelined (2 x 512 58.0 -> 55.2, 1 x 1024 54.9 -> 54.6). At K = 2048 the plain
  128x128 tile stays (4 x 256 x (7168, 2048) 38.1 vs 38.4 pipelined and 43.6 for 64x128 pipelined).
- Masked 256-row tiles (``_masked_math_256``) from 256 rows a group, where the 256-row tiles of all groups
  fill at least :data:`MASKED_256_MIN_FILL` of the SMs. Until the group walk fix every
  group's tiles started at CTA 0, so these tiles ran on one group's worth of CTAs and "lost badly" (4 x 256 x
  (4096, 7168) 165.3 us on the H200); the rules above this one were swept under that bug too, and the masked
  256-row rule was only where one group fills the SMs (1 x 1024 x (4096, 7168) 49.3 vs 54.7 us). After the fix
  (H100 sweep, results/grouped-masked-sweep-h100-2026-12-05-d1a0bc0.json, us, 256x128 / 128x128 / 128x128
  pipelined / 64x128 pipelined): 4 x 256 x (4096, 7168) 65.5 / 67.4 / 69.0 / 74.8, 2 x 512 x (4096, 7168) 53.8 /
  61.9 / 58.8 / 68.7, 4 x 256 x (7168, 2048) 42.0 / 42.6 / 43.7 / 44.5, 2 x 512 x (7168, 2048) 34.7 / 37.4 / 37.7 /
  39.1, 1 x 1024 x (4096, 7168) 50.0 / 56.0 / 55.2 / 68.3. The 64-row rule held (16 x 64: 64x64 and 64x128 within
  1.5 %).
"""

from __future__ import annotations

import math

from ..kernels.sm90 import layouts
from .device import DeviceFacts
from .heuristics import GemmDesc
from .heuristics_sm90 import MAX_STAGES, Sm90Config, _wave_efficiency

GROUPED_LAYOUTS = ("m_grouped_contiguous", "m_grouped_masked")
# fp8_gemm_kernel's grouped static asserts: one 64-row wave per math warpgroup, or two (256, one partial)
GROUPED_BLOCK_M = (64, 128, 256)
# Contiguous 256-row tiles from this many rows a group: a tile whose halves hold two groups runs twice
# (fp8_gemm_kernel's _contiguous_math_256), at most G - 1 such tiles against M_total / 256 in all.
CONTIGUOUS_256_MIN_ROWS = 512
# Masked 256-row tiles from 256 rows a group when their count fills this share of the SMs (one wave or close)
MASKED_256_MIN_FILL = 0.9


def block_n_for(n: int) -> int:
    """128, halved while half of it still covers N (N=64 -> 64, N=32 -> 32; never below 32)."""
    bn = 128
    while bn > 32 and bn // 2 >= n:
        bn //= 2
    return bn


def rows_per_group(desc: GemmDesc) -> int:
    """Typical rows of one group: ``expected_m`` when given, else M_total / G (contiguous) or max_m (masked)."""
    if desc.expected_m is not None:
        return desc.expected_m
    if desc.layout == "m_grouped_contiguous":
        return max(1, desc.m // max(desc.num_groups, 1))
    return desc.m


def make_grouped_config(facts: DeviceFacts, bm: int, bn: int, sfa_tma: bool, group_m: int = 8,
                        pipe_mma: bool = False) -> Sm90Config:
    """A grouped config for explicit tiles: stages fill the shared memory beside the BF16 D staging tile.

    ``pipe_mma``: K blocks in pairs, two WGMMA partials in flight per warpgroup (both forms, BLOCK_M <= 128)."""
    if bm not in GROUPED_BLOCK_M:
        raise ValueError(f"grouped BLOCK_M must be one of {GROUPED_BLOCK_M}, got {bm}")
    if bm == 256 and pipe_mma:
        raise ValueError("grouped BLOCK_M 256 has registers for one WGMMA partial only (pipe_mma=False)")
    stages = min(MAX_STAGES, layouts.max_stages(bm, bn, False, facts.smem_per_block, False, sfa_tma))
    return Sm90Config(bm, bn, stages, 1, group_m, facts.num_sms, pipe_mma=pipe_mma, small_epi=False, sfa_tma=sfa_tma)


def get_sm90_grouped_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Config:
    """Tiles for an m-grouped FP8 1d2d GEMM (rules in the module docstring)."""
    if desc.layout not in GROUPED_LAYOUTS:
        raise ValueError(f"get_sm90_grouped_config takes an m-grouped desc, got layout {desc.layout!r}")
    bn = block_n_for(desc.n)
    if desc.layout == "m_grouped_contiguous":
        tiles_128 = math.ceil(desc.m / 128) * math.ceil(desc.n / bn)
        # segments aligned to 64 rows (set_mk_alignment_for_contiguous_layout): only 64-row tiles stay inside one
        if desc.alignment < 128 or tiles_128 < facts.num_sms:
            return make_grouped_config(facts, 64, bn, sfa_tma=True)
        if rows_per_group(desc) >= CONTIGUOUS_256_MIN_ROWS and bn == 128 and \
                _wave_efficiency(desc, facts, 256, bn) + 0.1 >= _wave_efficiency(desc, facts, 128, bn):
            # scales in the ring, packed UE8M0 ones too (CPU compile: from global memory those spill 88 bytes
            # at 256 rows here, while the dense kernel spills with them in the ring)
            return make_grouped_config(facts, 256, bn, sfa_tma=True)
        return make_grouped_config(facts, 128, bn, sfa_tma=True)
    rows = rows_per_group(desc)
    if rows <= 64:
        return make_grouped_config(facts, 64, min(bn, 64), sfa_tma=True, pipe_mma=True)
    tiles_256 = desc.num_groups * math.ceil(rows / 256) * math.ceil(desc.n / bn)
    if bn == 128 and rows >= 256 and tiles_256 >= MASKED_256_MIN_FILL * facts.num_sms:
        # packed UE8M0 scales from global memory at 256 rows (in the ring they spill 88 bytes, CPU compile)
        return make_grouped_config(facts, 256, bn, sfa_tma=not desc.sf_packed)
    long_k = desc.k >= 4096
    if rows <= 256 and long_k:
        return make_grouped_config(facts, 64, bn, sfa_tma=True, pipe_mma=True)
    return make_grouped_config(facts, 128, bn, sfa_tma=True, pipe_mma=long_k)
