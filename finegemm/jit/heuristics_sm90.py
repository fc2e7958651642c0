"""Config heuristic for the sm90 Gluon FP8 GEMM: a frozen :class:`GemmDesc` + :class:`DeviceFacts` in,
a frozen :class:`Sm90Config` out. Pure functions, no device access, unit-tested on the CPU.

The model ranks every legal candidate (BLOCK_M, BLOCK_N, SPLIT_K) by an estimated time:

- a *unit* is one (tile, K split); units are spread over ``num_sms`` persistent CTAs, so time is
  ``waves x time per unit`` with ``waves = ceil(units / num_sms)`` (the wave-quantization that
  DeepGEMM fights with odd BLOCK_N);
- a unit costs the larger of its tensor-core time and its memory time; memory time counts the A
  tile (re-read from L2 by every N tile) and the B tile (streamed from HBM, shared by the active CTAs);
- split-K adds a fixed-order reduction pass over ``SPLIT_K x M x N`` FP32 partials plus a launch.

Constants are H200 measurements or datasheet leads, named below with their source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..kernels.sm90 import layouts
from .device import DeviceFacts
from .heuristics import GemmDesc

# Dense FP8 tensor-core rate actually reached by a 2-warpgroup WGMMA loop (DeepGEMM's best shapes
# reach ~1490 TFLOPS on the H200 anchors; datasheet 1979).
FP8_TFLOPS = 1500.0
# HBM copy rate on the H200 (anchors README: "4.25 TB/s"); L2 -> SM fill rate, a lead (~2.5x HBM).
HBM_TBPS = 4.0
L2_TBPS = 9.0
# One extra kernel launch on the stream plus the reduction's own latency (us), a lead.
SPLITK_FIXED_US = 2.5
# Fixed per-unit overhead: pipeline fill (first TMA round trip ~1 us) and epilogue.
UNIT_FIXED_US = 0.6

BLOCK_NS = (16, 32, 64, 128)
BLOCK_MS = (64, 128)
MAX_STAGES = 16
SPLITS = (1, 2, 3, 4, 6, 7, 8, 12, 14, 16)


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


def _units(desc: GemmDesc, bm: int, bn: int, split: int) -> int:
    return math.ceil(desc.m / bm) * math.ceil(desc.n / bn) * split


def estimate_us(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int, split: int) -> float:
    """Modelled kernel time in microseconds (see module docstring)."""
    sms = facts.num_sms
    units = _units(desc, bm, bn, split)
    waves = math.ceil(units / sms)
    active = min(units, sms)
    k_per_unit = desc.k / split
    flops = 2.0 * bm * bn * k_per_unit
    # Small tiles run the tensor cores below peak (m64 with narrow N issues short instructions).
    eff = min(1.0, bn / 128) ** 0.5 * (1.0 if bm >= 128 else 0.85)
    compute_us = flops / (FP8_TFLOPS * 1e6 / sms * eff)
    # Operand tiles come through L2 (A re-read by every N tile, B by every M tile); every unique
    # byte crosses HBM once, which bounds the whole kernel from below.
    tile_bytes = (min(bm, desc.m) + min(bn, desc.n)) * k_per_unit
    mem_us = tile_bytes / (L2_TBPS * 1e6 / active)
    unique_bytes = (desc.m + desc.n) * desc.k + desc.m * desc.n * (4 if desc.out_fp32 else 2)
    t = max(waves * (max(compute_us, mem_us) + UNIT_FIXED_US), unique_bytes / (HBM_TBPS * 1e6) + UNIT_FIXED_US)
    if split > 1:
        out_bytes = 4.0 * desc.m * desc.n * (split + 1)
        t += SPLITK_FIXED_US + out_bytes / (HBM_TBPS * 1e6)
    return t


def _legal(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int, split: int) -> bool:
    num_kb = desc.k // layouts.BLOCK_K
    if num_kb % split:
        return False
    if split > 1 and (desc.m > 256 or num_kb // split < 2):
        return False
    out_fp32 = desc.out_fp32 or split > 1
    if layouts.max_stages(bm, bn, out_fp32, facts.smem_per_block) < 3:
        return False
    if bm == 128 and desc.m <= 64:
        return False
    return True


def get_sm90_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Config:
    """The fastest candidate under :func:`estimate_us` (ties: bigger tiles, fewer splits)."""
    best = None
    for bm in BLOCK_MS:
        for bn in BLOCK_NS:
            for split in SPLITS:
                if not _legal(desc, facts, bm, bn, split):
                    continue
                t = estimate_us(desc, facts, bm, bn, split)
                key = (round(t, 3), -bm * bn, split)
                if best is None or key < best[0]:
                    best = (key, bm, bn, split)
    assert best is not None, desc
    _, bm, bn, split = best
    return make_config(desc, facts, bm, bn, split)


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
