"""Config heuristic for the sm90 Gluon FP8 GEMM: a frozen :class:`GemmDesc` + :class:`DeviceFacts` in,
a frozen :class:`Sm90Config` out. Pure functions, no device access, unit-tested on the CPU.

Rules come from the v2 config sweep on the H200 (benchmarks/NOTES.md, benchmarks/results/
sm90_v2_sweep.json); each rule's docstring names the measurement behind it. Stages always fill the
shared memory left beside the epilogue tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..kernels.sm90 import layouts
from .device import DeviceFacts
from .heuristics import GemmDesc

# Deeper rings than this never measured faster (one 64x128 stage is 24 KiB: 8 fit anyway).
MAX_STAGES = 16


@dataclass(frozen=True)
class Sm90Config:
    """One compiled variant of :func:`finegemm.kernels.sm90.gemm_1d2d.fp8_gemm_kernel` and its launch."""

    block_m: int
    block_n: int
    stages: int
    split_k: int = 1
    group_m: int = 8
    num_sms: int = 132
    pipe_mma: bool = True

    @property
    def num_warps(self) -> int:
        """Warps of the default partition (math warpgroup 0); the others are worker partitions."""
        return 4


def _split_for(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int) -> int:
    """Largest K split (1, 2, 4, 8) that keeps the work units within one wave and >= 12 K blocks each.

    Measured on the H200 (benchmarks/NOTES.md, v2): at M <= 256 the N tiles alone leave SMs idle
    (e.g. 17 tiles for N=2112); splitting K fills them (64x2112x7168: 30.1 us -> 17.9 us with 4
    splits), but splits with fewer than ~12 K blocks lose to the reduction pass (64x7168x2048:
    s1 14.7 us, s2 16.3 us).
    """
    if desc.m > 256:
        return 1
    num_kb = desc.k // layouts.BLOCK_K
    tiles = math.ceil(desc.m / bm) * math.ceil(desc.n / bn)
    best = 1
    for split in (2, 4, 8):
        if num_kb % split == 0 and num_kb // split >= 12 and tiles * split <= facts.num_sms:
            best = split
    return best


def get_sm90_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Config:
    """Tiles by measured rules (v2 sweep on the H200, benchmarks/NOTES.md).

    - BLOCK_N 128 won every DeepSeek-V3 shape (64 was 5-75 % slower at M=4096, within 2 % at M=64);
      narrower N only when N itself is narrow.
    - BLOCK_M 64 (one math warpgroup) for M <= 64, else 128 (two warpgroups that overlap each
      other's promotion with their WGMMA).
    - Split-K for M <= 256 by :func:`_split_for`.
    - PIPE_MMA (two partials in flight per warpgroup) for M <= 256; at M=4096 the plain schedule
      wins by 8-25 % (the second warpgroup already hides the promotion, and the extra registers cost).
    """
    bm = 64 if desc.m <= 64 else 128
    bn = 128
    while bn > 32 and bn // 2 >= desc.n:
        bn //= 2
    split = _split_for(desc, facts, bm, bn)
    cfg = make_config(desc, facts, bm, bn, split)
    if desc.m > 256 and cfg.pipe_mma:
        cfg = Sm90Config(cfg.block_m, cfg.block_n, cfg.stages, cfg.split_k, cfg.group_m, cfg.num_sms, False)
    return cfg


def make_config(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int, split: int = 1) -> Sm90Config:
    """A config for explicit tiles: stages from the shared-memory budget, PIPE_MMA where registers allow."""
    out_fp32 = desc.out_fp32 or split > 1
    stages = min(MAX_STAGES, layouts.max_stages(bm, bn, out_fp32, facts.smem_per_block))
    # Two partials in flight need 3 accumulators of registers; per-channel RHS scales add two
    # column vectors (current and next K block). 192 leaves ~40 of the 232 for addresses.
    regs = layouts.accumulator_regs(bm, bn, pipelined=True)
    if desc.kind == "fp8_1d1d":
        regs += 2 * bn // 4
    pipe = regs <= 192
    return Sm90Config(bm, bn, stages, split, 8, facts.num_sms, pipe)
