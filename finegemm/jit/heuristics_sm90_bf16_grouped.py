"""Config heuristic for the sm90 m-grouped BF16 GEMMs (contiguous and masked; bf16 in, FP32 accumulation, bf16 out).

A frozen :class:`GemmDesc` (kind ``bf16``, layout ``m_grouped_contiguous`` or ``m_grouped_masked``) plus
:class:`DeviceFacts` in, a frozen :class:`~finegemm.jit.heuristics_sm90.Sm90Bf16Config` out (the
config type of the dense BF16 kernel, whose grouped entry :func:`finegemm.kernels.sm90.gemm_bf16.
bf16_grouped_gemm_kernel` it configures). Pure functions, no device access, unit-tested on the CPU
(tests/test_sm90_bf16_grouped_compile.py).

The grouped entry takes BLOCK_M 64 or 128 (both divide the 128-row segment alignment), BLOCK_N 64 /
128 / 256, no split-K. The choice is the dense BF16 cost model (:func:`~finegemm.jit.heuristics_sm90.
bf16_estimate_us`: compute at a per-tile-shape share of the chip rate, HBM, per-SM streaming) applied to
the grouped work:

- work units: contiguous, the tiles of ``[M_total, N]`` (padding tiles run no K slice and are ignored);
  masked, ``G * ceil(rows / BLOCK_M) * ceil(N / BLOCK_N)`` with ``rows`` = ``expected_m`` (clamped to
  ``max_m``): the valid tiles the persistent scheduler walks;
- HBM: every group's ``[N, K]`` B is read at least once (``G * N * K`` bf16: 940 MB for 16 experts at
  4096 x 7168, which makes small-row masked decode memory-bound whatever the tile), the valid rows of A
  once, D written once.

Ties go to the earlier candidate in (BLOCK_M 64, 128) x (BLOCK_N 64, 128, 256) order. These are model
choices, not yet sweep results: benchmarks/NOTES.md records what the H200 measured.
"""

from __future__ import annotations

import math

from .device import DeviceFacts
from .heuristics import BF16_BLOCK_K, GemmDesc
from .heuristics_sm90 import (
    _BF16_TILE_EFF,
    BF16_CHIP_TFLOPS,
    BF16_HBM_GBPS,
    BF16_SM_STREAM_GBPS,
    Sm90Bf16Config,
    bf16_max_stages,
)

GROUPED_LAYOUTS = ("m_grouped_contiguous", "m_grouped_masked")
# bf16_grouped_gemm_kernel's static asserts: one warpgroup per 64 rows, BLOCK_M dividing the 128 alignment
GROUPED_BLOCK_M = (64, 128)
GROUPED_BLOCK_N = (64, 128, 256)


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


def grouped_estimate_us(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int) -> float:
    """Predicted kernel time of ``bm x bn`` tiles: the dense BF16 model's terms (see the module doc).

    compute: the busiest CTA's tiles at the tile shape's share of the chip rate; HBM: valid A rows,
    every group's B and the valid D rows once; streaming: the busiest CTA's operand bytes at what one SM
    pulls; plus a tenth of the slower per-CTA term, so that at the HBM floor lighter CTAs win.
    """
    k = desc.k
    k_pad = math.ceil(k / BF16_BLOCK_K) * BF16_BLOCK_K
    units = grouped_units(desc, bm, bn)
    sms = max(1, min(units, facts.num_sms))
    per_cta = math.ceil(units / sms)
    sm_flops = BF16_CHIP_TFLOPS * 1e6 / facts.num_sms * _BF16_TILE_EFF[(bm, bn)]  # FLOP per us
    t_compute = per_cta * 2 * bm * bn * k_pad / sm_flops
    valid_rows = desc.m if desc.layout == "m_grouped_contiguous" else desc.num_groups * rows_per_group(desc)
    hbm = 2 * (valid_rows * k + desc.num_groups * desc.n * k + valid_rows * desc.n)
    t_hbm = hbm / (BF16_HBM_GBPS * 1e3)
    t_stream = per_cta * 2 * (bm + bn) * k_pad / (BF16_SM_STREAM_GBPS * 1e3)
    return max(t_compute, t_hbm, t_stream) + 0.1 * max(t_compute, t_stream)


def grouped_candidates(desc: GemmDesc) -> list[tuple[int, int]]:
    """(BLOCK_M, BLOCK_N) pairs worth pricing: no 128-row tiles for <= 64 rows a group, no BLOCK_N
    wider than twice N."""
    rows = rows_per_group(desc)
    out = []
    for bm in GROUPED_BLOCK_M:
        if bm == 128 and rows <= 64:
            continue
        for bn in GROUPED_BLOCK_N:
            if bn > 64 and bn // 2 >= desc.n:
                continue
            out.append((bm, bn))
    return out


def make_bf16_grouped_config(facts: DeviceFacts, bm: int, bn: int, group_m: int = 8) -> Sm90Bf16Config:
    """A grouped config for explicit tiles: stages fill the shared memory beside the bf16 D staging tile."""
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
    return make_bf16_grouped_config(facts, bm, bn)
