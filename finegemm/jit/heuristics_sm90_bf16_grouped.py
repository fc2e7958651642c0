"""Config heuristic for the sm90 m-grouped BF16 GEMMs (contiguous and masked; bf16 in, FP32 accumulation, bf16 out).

A frozen :class:`GemmDesc` (kind ``bf16``, layout ``m_grouped_contiguous`` or ``m_grouped_masked``) plus
:class:`DeviceFacts` in, a frozen :class:`~finegemm.jit.heuristics_sm90.Sm90Bf16Config` out (the
config type of the dense BF16 kernel, whose grouped entry :func:`finegemm.kernels.sm90.gemm_bf16.
bf16_grouped_gemm_kernel` it configures). Pure functions, no device access, unit-tested on the CPU
(tests/test_sm90_bf16_grouped_compile.py).

The grouped entry takes BLOCK_M 64 or 128 (both divide the 128-row segment alignment), BLOCK_N 64 /
128 / 256, no split-K. The choice is the dense BF16 cost model's structure (:func:`~finegemm.jit.
heuristics_sm90.bf16_estimate_us`: compute at a per-tile-shape share of the chip rate, per-SM streaming,
memory) applied to the grouped work, with the memory term measured for this kernel:

- work units: contiguous, the tiles of ``[M_total, N]`` (padding tiles run no K slice and are ignored);
  masked, ``G * ceil(rows / BLOCK_M) * ceil(N / BLOCK_N)`` with ``rows`` = ``expected_m`` (clamped to
  ``max_m``): the valid tiles the persistent scheduler walks;
- memory: every group's ``[N, K]`` B is read once (``G * N * K`` bf16: 940 MB for 16 experts at
  4096 x 7168), the valid rows of A once, D written once, at the rate the kernel reaches with that tile
  when B streams from HBM (:data:`GROUPED_HBM_TBPS`, the H200 sweep benchmarks/results/
  bf16-grouped-sweep-h200-2026-12-03.json): far below the 4 TB/s the dense model assumes, and lower the
  bigger the tile and the longer K (a B row of 14 KB at K=7168 against 4 KB at K=2048). E.g. 4 x 256
  rows at 4096 x 7168: 128x256 (3 stages) 273.9 us = 0.86 TB/s, 128x128 143.6, 64x128 100.8 us; 16 x 64
  rows: 64x256 621.8, 64x128 483.3, 64x64 351.9 us.

On the 8 swept masked shapes this picked the measured best on 6 and a config within 15 % of it on the
other two (4 x 256 at 7168 x 2048: 64x128 61.9 us against 128x128 53.8; 1 x 1024 was not swept beyond
the rule's 128x256). After the walk fix (H100, 6 masked shapes): the measured best on 5, within 1 % on the
sixth (4 x 256 at 7168 x 2048: 128x128 66.6 us against 64x128 66.0).

Contiguous: 128x256 (compute-bound, 3 stages) with GROUP_M 16 (2810.6 / 1356.1 us against 128x128's
3304.4 / 1515.2 at 4 x 8192 x (4096, 7168) / (7168, 2048); GROUP_M 8 measured 2829.3 / 1435.2 in the run
before). Ties go to the earlier candidate in (BLOCK_M 64, 128) x (BLOCK_N 64, 128, 256) order.
"""

from __future__ import annotations

import math

from .device import DeviceFacts
from .heuristics import BF16_BLOCK_K, GemmDesc
from .heuristics_sm90 import (
    BF16_CHIP_TFLOPS,
    BF16_SM_STREAM_GBPS,
    BF16_TILE_EFF,
    Sm90Bf16Config,
    bf16_max_stages,
)

GROUPED_LAYOUTS = ("m_grouped_contiguous", "m_grouped_masked")
# bf16_grouped_gemm_kernel's static asserts: one warpgroup per 64 rows, BLOCK_M dividing the 128 alignment
GROUPED_BLOCK_M = (64, 128)
GROUPED_BLOCK_N = (64, 128, 256)
# Memory rate (TB/s) the grouped kernel reached per tile when B streamed from HBM at K >= 4096 (H200 sweep,
# 2026-12-03: 16 x 64 and 4 x 256 rows at 4096 x 7168, memory-bound runs; 128x64 bounded from below by a
# compute-bound run). Stages: as many as fit (8 / 8 / 8 / 6 / 4 / 3). That sweep ran under the masked walk bug
# (every group's tiles started at CTA 0), which held the multi-group rates down; (128, 128) is the
# H100's after the fix (4 x 256 x (4096, 7168): 108.8 us = 2.37 TB/s, the measured best, which the old 1.65
# priced out; benchmarks/results/bf16-grouped-sweep-masked-h100-2026-12-05-f03df06.json). The others
# wait for an H200 sweep after the fix: on the H100 the 64-row tiles stream at
# 2.7-2.8 TB/s alike, but raising them alone moves picks to 128x256, which measured slower.
GROUPED_HBM_TBPS = {(64, 64): 2.7, (64, 128): 2.1, (128, 64): 2.1, (128, 128): 2.4, (64, 256): 1.5,
                    (128, 256): 0.9}
# At K < 4096 every tile streamed about 1.4x faster (7168 x 2048: 64x64 3.56, 64x128 3.0, 128x128 2.5,
# 64x256 1.8, 128x256 1.27 TB/s).
SHORT_K = 4096
SHORT_K_SPEEDUP = 1.4
# Contiguous tiles walk GROUP_M 16 M blocks per N sweep (measured faster at K=2048, equal at K=7168)
CONTIGUOUS_GROUP_M = 16
# The grouped tiles keep BF16_MAX_STAGES: at up to 13 stages (the dense whole-K cap) the masked sweep measured no
# gain (H100, results/bf16-grouped-masked-deep{0,1}-h100-2026-12-06-76cb214.json, us, 8 / 13 stages at
# 64x64: 16 x 64 x (4096, 7168) 328.5 / 335.2, 4 x 256 166.1 / 176.5, 2 x 512 170.8 / 188.9; never the pick there).


def _check_desc(desc: GemmDesc) -> None:
    if desc.layout not in GROUPED_LAYOUTS:
        raise ValueError(f"the m-grouped BF16 heuristic takes an m-grouped desc, got layout {desc.layout!r}")
    if desc.kind != "bf16":
        raise ValueError(f"the m-grouped BF16 heuristic takes kind 'bf16', got {desc.kind!r}")


def rows_per_group(desc: GemmDesc) -> int:
    """Typical valid rows of one group: masked, ``expected_m`` clamped to [1, max_m] (max_m without it);
    contiguous, ``M_total / G``."""
    if desc.layout == "m_grouped_masked":
        hint = desc.expected_m if desc.expected_m is not None else desc.m
        return max(1, min(hint, desc.m))
    return max(1, desc.m // max(desc.num_groups, 1))


def grouped_units(desc: GemmDesc, bm: int, bn: int) -> int:
    """Work units (output tiles) the persistent grid walks for ``desc`` with ``bm x bn`` tiles."""
    _check_desc(desc)
    n_tiles = math.ceil(desc.n / bn)
    if desc.layout == "m_grouped_contiguous":
        return math.ceil(desc.m / bm) * n_tiles
    return desc.num_groups * math.ceil(rows_per_group(desc) / bm) * n_tiles


def grouped_hbm_tbps(bm: int, bn: int, k: int) -> float:
    """Memory rate of ``bm x bn`` grouped tiles at this K (:data:`GROUPED_HBM_TBPS`, faster at short K)."""
    return GROUPED_HBM_TBPS[(bm, bn)] * (SHORT_K_SPEEDUP if k < SHORT_K else 1.0)


def grouped_estimate_us(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int) -> float:
    """Predicted kernel time of ``bm x bn`` tiles: the dense BF16 model's terms (see the module doc).

    compute: the busiest CTA's tiles at the tile shape's share of the chip rate; memory: valid A rows,
    every group's B and the valid D rows once at :func:`grouped_hbm_tbps`; streaming: the busiest CTA's
    operand bytes at what one SM pulls; plus a tenth of the slower per-CTA term, so that at the memory
    floor lighter CTAs win.
    """
    k = desc.k
    k_pad = math.ceil(k / BF16_BLOCK_K) * BF16_BLOCK_K
    units = grouped_units(desc, bm, bn)
    sms = max(1, min(units, facts.num_sms))
    per_cta = math.ceil(units / sms)
    sm_flops = BF16_CHIP_TFLOPS * 1e6 / facts.num_sms * BF16_TILE_EFF[(bm, bn)]  # FLOP per us
    t_compute = per_cta * 2 * bm * bn * k_pad / sm_flops
    valid_rows = desc.m if desc.layout == "m_grouped_contiguous" else desc.num_groups * rows_per_group(desc)
    hbm = 2 * (valid_rows * k + desc.num_groups * desc.n * k + valid_rows * desc.n)
    t_hbm = hbm / (grouped_hbm_tbps(bm, bn, k) * 1e6)
    t_stream = per_cta * 2 * (bm + bn) * k_pad / (BF16_SM_STREAM_GBPS * 1e3)
    return max(t_compute, t_hbm, t_stream) + 0.1 * max(t_compute, t_stream)


def grouped_candidates(desc: GemmDesc) -> list[tuple[int, int]]:
    """(BLOCK_M, BLOCK_N) pairs worth pricing: no 128-row tiles for <= 64 rows a group or for contiguous segments
    aligned to 64 rows (they would straddle two experts), no BLOCK_N wider than twice N."""
    rows = rows_per_group(desc)
    out = []
    for bm in GROUPED_BLOCK_M:
        if bm == 128 and (rows <= 64 or (desc.layout == "m_grouped_contiguous" and desc.alignment % 128)):
            continue
        for bn in GROUPED_BLOCK_N:
            if bn > 64 and bn // 2 >= desc.n:
                continue
            out.append((bm, bn))
    return out


def make_bf16_grouped_config(facts: DeviceFacts, bm: int, bn: int, group_m: int = 8) -> Sm90Bf16Config:
    """A grouped config for explicit tiles: stages fill the shared memory beside the bf16 D staging tile (at most
    :data:`~finegemm.jit.heuristics_sm90.BF16_MAX_STAGES`)."""
    if bm not in GROUPED_BLOCK_M:
        raise ValueError(f"grouped BF16 BLOCK_M must be one of {GROUPED_BLOCK_M}, got {bm}")
    if bn not in GROUPED_BLOCK_N:
        raise ValueError(f"grouped BF16 BLOCK_N must be one of {GROUPED_BLOCK_N}, got {bn}")
    stages = bf16_max_stages(bm, bn, False, facts.smem_per_block)
    if stages < 2:
        raise ValueError(f"{bm}x{bn} tiles leave room for {stages} stages in {facts.smem_per_block} bytes")
    return Sm90Bf16Config(bm, bn, stages, 1, group_m, facts.num_sms)


def get_sm90_bf16_grouped_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Bf16Config:
    """The candidate with the least :func:`grouped_estimate_us` (module doc); ties to the earlier one."""
    _check_desc(desc)
    bm, bn = min(grouped_candidates(desc), key=lambda t: grouped_estimate_us(desc, facts, *t))
    group_m = CONTIGUOUS_GROUP_M if desc.layout == "m_grouped_contiguous" else 8
    return make_bf16_grouped_config(facts, bm, bn, group_m)
