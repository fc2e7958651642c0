"""Config heuristic for the sm90 Gluon FP8 GEMM: a frozen :class:`GemmDesc` + :class:`DeviceFacts` in,
a frozen :class:`Sm90Config` out. Pure functions, no device access, unit-tested on the CPU.

Rules come from config sweeps on the H200 (benchmarks/results/sm90_v2_sweep.json, sm90_v3_sweep.json,
sm90_v4_smallm_wgrad_sweep.json and later ones); each rule's docstring names
the measurement behind it. Stages always fill the
shared memory left beside the epilogue tile.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..kernels.sm90 import layouts
from .device import DeviceFacts
from .heuristics import GemmDesc

# Deeper rings than this never measured faster (one 64x128 stage is 24 KiB: 8 fit anyway).
MAX_STAGES = 16


def column_blocks(block_n: int) -> tuple[int, int]:
    """A tile ``block_n`` columns wide as the sm90 kernels run it: (the largest power of two in it, the rest). The
    rest is 0 or a smaller power of two of at least 16 (a second WGMMA, B box and D box: gemm_bf16's and
    gemm_1d2d's ``BLOCK_N1``; e.g. 144 = 128 + 16, 192 = 128 + 64); other widths (112 = 64 + 48) raise ValueError."""
    if block_n > 0 and block_n & (block_n - 1) == 0:
        return block_n, 0
    if block_n < 16 or block_n % 16:
        raise ValueError(f"BLOCK_N must be a power of two or a multiple of 16, got {block_n}")
    first = 1 << (block_n.bit_length() - 1)
    rest = block_n - first
    if rest and (rest < 16 or rest & (rest - 1)):
        raise ValueError(f"BLOCK_N {block_n} = {first} + {rest}: the rest must be 0 or a power of two >= 16")
    return first, rest


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
    # BLOCK_M 256 only: the two waves of a warpgroup share one 64-row D staging buffer (one more stage fits)
    small_epi: bool = False
    # the per-token LHS scales ride in the ring by TMA instead of global loads in the math warps
    sfa_tma: bool = False
    # recipe (1, 1, 128): the per-channel RHS scales ride in the ring too, read from shared memory at
    # each promotion instead of held in registers a K block ahead
    sfb_tma: bool = False
    # K read from the A descriptor at run time instead of compiled in (no split-K): one kernel for every K
    # of a shape's N (the k-grouped per-group launches); ``K`` constexpr then a placeholder
    k_dynamic: bool = False
    # FP32 C and D, no split-K: each tile's C is loaded by TMA into the D staging buffer before its main
    # loop instead of by blocking loads in the epilogue (with small_epi: the first wave's C only)
    c_tma: bool = False
    # with c_tma on a pipelined one-wave tile (the kernel ignores it elsewhere): start the C load after the
    # first K-block pair instead of before the main loop (its wait for the previous D store then runs
    # under WGMMAs). On by default: a rule that turns PIPE_MMA on after make_config gets it too.
    c_tma_late: bool = True
    # split-K only: the splits are summed inside the GEMM kernel by the last split to finish a tile (arrival
    # counters, fixed summation order) instead of by a second launch
    splitk_fused: bool = False
    # with splitk_fused: split only the tiles of the grid's last, partial round (the whole rounds' tiles run
    # their whole K): a short tail round instead of one that leaves most SMs idle
    split_tail: bool = False
    # > 0: the producer prefetches B's tile this many K blocks ahead into L2 (cp.async.bulk.prefetch.tensor), for
    # B streaming from HBM (small M, masked decode); never picked by the rules until measured
    b_prefetch: int = 0

    @property
    def num_warps(self) -> int:
        """Warps of the default partition (math warpgroup 0); the others are worker partitions."""
        return 4

    @property
    def column_blocks(self) -> tuple[int, int]:
        """(``BLOCK_N``, ``BLOCK_N1``) of the kernel: see :func:`column_blocks`."""
        return column_blocks(self.block_n)

    @property
    def can_stage_c(self) -> bool:
        """Whether this tiling can stage C by TMA (``c_tma``; the tensors are checked at launch): no split-K
        (its reduction adds C; with ``split_tail`` the whole-K tiles stage theirs), BLOCK_M 256 only with the
        shared D staging (the kernel's static assert) and not with runtime K (CPU compile: 8 bytes of stack)."""
        return ((self.split_k == 1 or (self.splitk_fused and self.split_tail))
                and (self.block_m < 256 or (self.small_epi and not self.k_dynamic)))


def _split_for(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int) -> int:
    """Largest K split (1, 2, 4, 8) that keeps the work units within one wave and >= 12 K blocks each.

    Measured on the H200 (benchmarks/results/sm90_v2_sweep.json): at M <= 256 the N tiles alone leave SMs idle
    (e.g. 17 tiles for N=2112); splitting K fills them (64x2112x7168: 30.1 us -> 17.9 us with 4
    splits), but splits with fewer than ~12 K blocks lose to the reduction pass (64x7168x2048:
    s1 14.7 us, s2 16.3 us).
    """
    if desc.m > 256:
        return 1
    num_kb = desc.k // layouts.BLOCK_K
    tiles = _tiles(desc, bm, bn)
    best = 1
    for split in (2, 4, 8):
        if num_kb % split == 0 and num_kb // split >= 12 and tiles * split <= facts.num_sms:
            best = split
    return best


def _tiles(desc: GemmDesc, bm: int, bn: int) -> int:
    """Output tiles of ``bm x bn`` over ``desc``'s M x N."""
    return math.ceil(desc.m / bm) * math.ceil(desc.n / bn)


def _wave_efficiency(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int) -> float:
    """Busy fraction of the persistent grid's tile rounds: tiles / (rounds * SMs)."""
    tiles = _tiles(desc, bm, bn)
    return tiles / (math.ceil(tiles / facts.num_sms) * facts.num_sms)


def _rows_inside(m: int, bm: int) -> float:
    """Share of the BLOCK_M-row tiles' rows that lie inside M (the last tile's overhang wasted)."""
    return m / (math.ceil(m / bm) * bm)


def _fill(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int) -> float:
    """Useful fraction of the persistent grid's work: :func:`_wave_efficiency` times :func:`_rows_inside`."""
    return _wave_efficiency(desc, facts, bm, bn) * _rows_inside(desc.m, bm)


def _large_m_config(desc: GemmDesc, facts: DeviceFacts, bn: int) -> Sm90Config:
    """M > 256: measured rules of the v3 sweep (H200, M=4096, benchmarks/results/sm90_v3_sweep.json).

    - LHS scales by TMA in the ring (SFA_TMA) for BF16-out 1d2d: faster on all 6 shapes at both tile
      heights (128x128: 902.7 -> 758.0 us at N=7168 K=16384, 144.4 -> 119.9 us at N=2112).
    - BLOCK_M 256 (two waves a warpgroup, 3 stages) unless its last tile round idles clearly more SMs
      than 128 rows would (wave efficiency 10 points lower): 256x128 won 5 of 6 shapes (734.5 vs 758.0
      us at 7168x16384, 186.9 vs 193.2 at 4096x7168, 101.3 vs 105.7 at 7168x2048, 251.8 vs 266.6 at
      24576x1536, 145.6 vs 142.5 -- lost -- at 32768x512 until GROUP_M 16: 138.8); at N=2112 its 272
      tiles fill 132 SMs to 69 % against 82 % for 128-row tiles, and 128x128 won (119.9 vs 138.3 us).
    - GROUP_M 16 with 256-row tiles for K < 2048 (32768x512: 145.6 -> 138.8 us, 24576x1536: 251.8 ->
      250.4); at K >= 2048 it measured within 1 % (slightly slower), so 8 stays.
    - The D staging shared by a warpgroup's two waves (one more stage, 4) was 0-1.5 % slower
      everywhere: the in-flight TMA store matters more than the fourth stage. Not used.
    - FP32-out 1d2d (with or without C), v4 sweep: 256 rows with the shared D staging (the FP32 tile
      of 256 rows leaves no room for a third stage otherwise) and TMA scales: 4096x4096x7168 with C
      281.7 -> 216.5 us, 4096x7168x2048 197.4 -> 169.7 us (128x128 + TMA scales: 245.4 / 182.9).
    - The 1d1d recipe (weight gradients): :func:`_weight_grad_config` (v5).
    - BLOCK_M 192 (three math warpgroups, one 64-row wave each; v13, benchmarks/results/
      sm90_v13_three_warpgroups_sweep.json) for BF16-out 1d2d where its tiles fill the SMs clearly better
      than 128 and 256 rows (:func:`_fill`, 5 points): 4096x2112x7168 121.2 -> 103.9 us (374 tiles, 92 %
      of three rounds, against 82 % of five at 128 rows). Elsewhere it tied (24576x1536, 32768x512) or lost
      (7168x16384: 816.7 vs 747.9, 7168x2048: 104.5 vs 102.1), so nothing else takes it.
      FP32 out with C, same rule (v15, benchmarks/results/sm90_v15_bm192_fp32_sweep.json, 192x128 against the
      pick before, 128x128 or 256 rows with the shared staging): 4096x2112x7168 152.0 -> 121.2 us,
      4096x576x7168 51.7 -> 43.9, 1024x2112x7168 52.1 -> 42.1; v17 (sm90_v17_fp32_out_sweep.json, with C,
      192x128 / 256 rows shared staging / 128x128): 333x7168x2048 21.8 / 26.6 / 26.3, 333x24576x1536 46.2 /
      64.9 / 50.5, 577x4096x7168 44.6 / 53.1 / 60.0; without C 4096x2112x7168 109.3 / 229.2 / 133.7.
    - FP32 out at K <= 2048: 192 rows also where its fill is >= 0.85 (the FP32 tile's epilogue weighs on a short
      K loop, and 256 rows must share their D staging): 4096x7168x2048 with C 164.8 -> 155.9 us (v15),
      4096x24576x1536 510.0 -> 429.0 (v17; 128x128 428.0). At K = 7168 and above 256 rows stay
      (4096x4096x7168 209.9 against 228.2 at 192 rows; 4096x7168x16384 755.6 against 784.7).
    """
    if desc.kind == "fp8_1d1d":
        return _weight_grad_config(desc, facts, bn)
    fill_128, fill_192 = _fill(desc, facts, 128, bn), _fill(desc, facts, 192, bn)
    if fill_192 > max(fill_128, _fill(desc, facts, 256, bn)) + 0.05 or \
            (desc.out_fp32 and desc.k <= 2048 and fill_192 >= 0.85):
        return make_config(desc, facts, 192, bn, sfa_tma=True)  # unpipelined: make_config's rule at 192 rows
    bm = 256
    if _wave_efficiency(desc, facts, 128, bn) > _wave_efficiency(desc, facts, 256, bn) + 0.1:
        bm = 128
    if bm == 256 and desc.out_fp32 and not desc.with_c:
        # FP32 out without C: the 256-row tile (shared D staging) spills 104 bytes in its K loop (CPU compile,
        # ptxas 12.8 and 13.0; with C it does not), and v17 measured it about 2x slower than 192 rows without C
        # (229.2 against 109.3 us at 4096x2112x7168, 79.6 against 40.5 at 577x4096x7168): 192 rows unless 128
        # fill the SMs clearly better (with C, 128x128 tied 192 at 4096x4096x7168, 224.8 / 228.2 us, and lost
        # at 4096x7168x16384, 850.4 / 784.7)
        if fill_192 + 0.1 >= fill_128:
            return make_config(desc, facts, 192, bn, sfa_tma=True)
        bm = 128
    small_epi = desc.out_fp32 and bm == 256
    cfg = dataclasses.replace(make_config(desc, facts, bm, bn, sfa_tma=True, small_epi=small_epi), pipe_mma=False)
    if bm == 256 and desc.k < 2048 and not desc.out_fp32:
        cfg = dataclasses.replace(cfg, group_m=16)
    return cfg


# The weight-gradient rule's 64-row tiles (where they fill the SMs clearly better than 128 rows) yield to 128 rows
# with the last round split in the kernel (split_tail) where the 128-row grid has at least this many whole rounds.
# H100, in place (C is D, results/d-reduce-tiles-h100-2026-12-06-7aca7be.json, us): 2112x4096x7168
# 128x128 split 4 158.2-158.4 against the 64-row pick's 163.0-163.9; at 576x4096x7168 (one whole round) a tie
# (58.5 / 59.0), so it keeps 64 rows. With a separate C the 128-row split tail reads C in its epilogue (C by TMA
# spills there) and is 3 % slower at 2112x4096x7168 (171.7 against 166.4): the in-place accumulate is the
# weight-gradient's usual form (DeepGEMM's c = d, the FP8 training layers).
WGRAD_TAIL_MIN_ROUNDS = 2


def _weight_grad_config(desc: GemmDesc, facts: DeviceFacts, bn: int) -> Sm90Config:
    """Recipe (1, 1, 128) at M > 256 (the weight gradient; H200 sweep benchmarks/results/sm90_v5_wgrad_sweep.json,
    the 7 weight-gradient shapes with C, 8 configs each, unless stated).

    - K > 1024: both scale vectors by TMA in the ring (per-token and per-channel, read from shared memory at each
      promotion), 1.2-1.5x faster than global scale loads (4096x4096x7168: 417.2 -> 283.9 us at 128 rows;
      7168x4096x16384: 1358.2 -> 1021.8), and PIPE_MMA as K-block pairs (results/sm90_v6_pipe_sweep.json:
      2112x4096x7168 184.4 us against 206.9 unpipelined, 24576x4096x1536 534.7 against 580.2 plain,
      7168x4096x2048 200.0 against 226.6).
    - 128 rows rather than 256 at K >= 4096: the 128-row pipelined tile, which takes the in-place accumulate
      (D_REDUCE) when C is D, measured faster on an H100 (kernel us, 256 / 128 rows, two rounds: 4096x4096x7168
      280.7-283.5 / 269.8-270.0, 7168x4096x16384 1045.9-1047.3 / 1001.5-1016.9; k-grouped 4 / 8 x 4096 x 7168
      ~3 % faster).
    - K <= 1024: 128x64 (32768x4096x512: 410.2 us against 464.1 at 128x128 and 430.2 with global scale loads).
    - 64-row tiles (one math warpgroup, pipelined) where their last tile round is clearly fuller than 128 rows'
      (10 points) and no emptier than 256 rows': results/wgrad-tile-probe-h200-2026-12-03-007e9ca.json, C by
      TMA: 2112x4096x7168 (1056 tiles: 8 full rounds) 169.0 us against 178.8 for 128 rows; 576x4096x7168 66.6
      against 73.3 (128). At equal efficiency 64 rows lose (4096x4096x7168 325.3 vs 274.0; 7168x4096x2048 196.6
      vs 182.5). They yield to 128 rows with a split tail where that grid has :data:`WGRAD_TAIL_MIN_ROUNDS` whole
      rounds (2112x4096x7168).
    """
    eff = {bm: _wave_efficiency(desc, facts, bm, bn) for bm in (64, 128, 256)}
    if desc.k > 1024 and eff[64] >= eff[128] + 0.1 and eff[64] >= eff[256]:
        tailed = _with_split_tail(desc, facts, _pipelined(make_config(desc, facts, 128, bn, sfa_tma=True,
                                                                      sfb_tma=True)))
        whole_rounds = _tiles(desc, 128, bn) // facts.num_sms
        if tailed.split_tail and whole_rounds >= WGRAD_TAIL_MIN_ROUNDS:
            return tailed
        cfg = _pipelined(make_config(desc, facts, 64, bn, sfa_tma=True, sfb_tma=True))
        return _with_split_tail(desc, facts, cfg)
    if desc.k <= 1024:
        bn = min(bn, 64)
    return _with_split_tail(desc, facts, _pipelined(make_config(desc, facts, 128, bn, sfa_tma=True, sfb_tma=True)))


def _pipelined(cfg: Sm90Config) -> Sm90Config:
    """``cfg`` with PIPE_MMA on: make_config's register estimate keeps it off for the weight-gradient tiles (two
    partials + the transient scale vector); the compile checks show 64x128, 128x128 and 128x64 pipelined without
    spills (tests/test_sm90_compile.py)."""
    return dataclasses.replace(cfg, pipe_mma=True)


# split_tail: the split of the last round's tiles, and the fullest last round it is used for
SPLIT_TAIL_K = 4
_SPLIT_TAIL_MAX_FILL = 0.25


def _with_split_tail(desc: GemmDesc, facts: DeviceFacts, cfg: Sm90Config) -> Sm90Config:
    """``cfg`` with its last, partial tile round split ``SPLIT_TAIL_K`` ways along K (``split_tail``, the
    reduction in the kernel) when that round fills at most a quarter of the SMs and each split keeps >= 4 K
    blocks.

    v9 sweep (results/sm90_v9_split_tail_sweep.json, H200, C by TMA for the whole tiles): 576x4096x7168 at
    64x128 (288 tiles: 2 rounds and 24 tiles) 66.9 -> 59.5 us; 2112x4096x7168 at 128x128 (544 tiles: 4 rounds
    and 16) 176.1 -> 163.8 us, where the 64-row pick (1056 tiles, no tail) takes 168.3. Fuller tails gain
    less than the reduction costs; the BF16-out 4096x2112x7168 lost at every split (121.5 us unsplit, 126.3
    at the best split), so the dense 1d2d rule does not use it.
    """
    num_kb = desc.k // layouts.BLOCK_K
    tiles = _tiles(desc, cfg.block_m, cfg.block_n)
    tail = tiles % facts.num_sms
    if (cfg.block_m > 128 or cfg.split_k > 1 or tail == 0 or tiles < facts.num_sms
            or tail > _SPLIT_TAIL_MAX_FILL * facts.num_sms or num_kb % SPLIT_TAIL_K or num_kb // SPLIT_TAIL_K < 4):
        return cfg
    tailed = dataclasses.replace(cfg, split_k=SPLIT_TAIL_K, splitk_fused=True, split_tail=True)
    # C by TMA for the whole tiles at 64 rows only: at 128 rows (pipelined, per-channel scales) it spills 280
    # bytes beside the split tiles' reduction (CPU compile, ptxas 12.8 and 13.0)
    return dataclasses.replace(tailed, c_tma=desc.with_c and desc.out_fp32 and tailed.can_stage_c
                               and cfg.block_m == 64)


# Small-M tile candidates, largest first: ties in wave efficiency go to the larger tile (fewer
# CTAs share each B tile, fewer epilogues), and between the two 8192-element tiles to 64x128 (one
# pipelined warpgroup per tile beat two on 128-row tiles in v6: 128x7168x2048 11.1 vs 12.2 us,
# 128x7168x16384 43.4 vs 44.4, 128x24576x1536 20.2 vs 20.3). 128x32 was never measured.
_SMALL_M_TILES = ((128, 128), (64, 128), (128, 64), (64, 64), (64, 32))
# Below this wave efficiency even the best single-pass tiling leaves too many SMs idle: split K.
_SMALL_M_MIN_EFFICIENCY = 0.6


def _small_m_config(desc: GemmDesc, facts: DeviceFacts, bn_cap: int) -> Sm90Config:
    """BF16-out 1d2d at M <= 128 (decode): the v4 sweep's rule (benchmarks/results/
    sm90_v4_smallm_wgrad_sweep.json, H200; the 12 DeepSeek-V3 decode shapes, 6-10 configs each).

    - The tile (BLOCK_M 64 / 128 when M > 64; BLOCK_N 32 / 64 / 128) whose tile count fills the 132 SMs
      best; within 2 points the larger tile. This picked the measured best on 11 of 12 shapes, e.g.
      64x4096x7168: 64x32 19.6 us (v3 64x128 split-4: 22.0), 64x7168x16384: 64x64 46.3 (v3 53.2),
      128x7168x2048: 128x64 12.7 (v3 15.9), 128x2112x7168: 64x32 17.6 (v3 19.3).
    - When no tiling reaches 60 % (N=2112 at M <= 64: 66 tiles at best) split K as v2 did
      (:func:`_split_for`; 64x2112x7168 16.3 us, narrower tiles with splits 16.5-17.4).
    - LHS scales by TMA in the ring everywhere (faster on 11 of 12; 128x32768x512 lost 5 %: 14.3 vs
      13.6 us).
    - PIPE_MMA wherever registers allow (v6, K-block pairs; before them ptxas serialized the
      pipelined loop and v4 turned it off at 64x64 / 64x32): 64x64 pipelined 10.8 vs 11.8 us at
      64x7168x2048, 43.4 vs 45.7 at 64x7168x16384, 18.8 vs 20.6 at 64x24576x1536; 64x32 15.6 vs 16.9
      at 128x2112x7168 (results/sm90_v6_pipe_sweep.json).
    """
    tiles = [(bm, bn) for bm, bn in _SMALL_M_TILES if bn <= bn_cap and (bm == 64 or desc.m > 64)]
    eff = {t: _wave_efficiency(desc, facts, *t) for t in tiles}
    best = max(eff.values())
    if best < _SMALL_M_MIN_EFFICIENCY:
        bm = 64 if desc.m <= 64 else 128
        return make_config(desc, facts, bm, bn_cap, _split_for(desc, facts, bm, bn_cap), sfa_tma=True)
    bm, bn = next(t for t in tiles if eff[t] >= best - 0.02)
    return make_config(desc, facts, bm, bn, sfa_tma=True)


def get_sm90_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Config:
    """Tiles by measured rules (H200 sweeps: benchmarks/results/sm90_v2_sweep.json, sm90_v3_sweep.json).

    - BLOCK_N 128 won every DeepSeek-V3 shape (64 was 5-75 % slower at M=4096, within 2 % at M=64);
      narrower N only when N itself is narrow.
    - BF16-out 1d2d at M <= 128: :func:`_small_m_config` (v4).
    - Otherwise at M <= 256 (v2): BLOCK_M 64 (one math warpgroup) for M <= 64, else 128 (two
      warpgroups that overlap each other's promotion with their WGMMA); split-K by :func:`_split_for`;
      PIPE_MMA (two partials in flight per warpgroup) where registers allow; scales from global memory.
    - M > 256: :func:`_large_m_config` (v3, v4 for FP32 out).
    """
    bn = 128
    while bn > 32 and bn // 2 >= desc.n:
        bn //= 2
    if desc.m > 256:
        return _large_m_config(desc, facts, bn)
    if desc.m <= 128 and desc.kind == "fp8_1d2d" and not desc.out_fp32:
        return _small_m_config(desc, facts, bn)
    bm = 64 if desc.m <= 64 else 128
    return make_config(desc, facts, bm, bn, _split_for(desc, facts, bm, bn))


# BLOCK_N candidates under head splits (largest first): each must divide both ``left`` and ``right``
HEAD_SPLIT_BLOCK_NS = (128, 64, 32)


def head_split_config(desc: GemmDesc, facts: DeviceFacts, cfg: Sm90Config) -> Sm90Config:
    """``cfg`` fitted to D's head splits (``desc.head_splits``, ``fp8_gemm_nt_skip_head_mid``): every tile
    must land on consecutive D columns, so BLOCK_N divides ``left`` and ``right`` (the widest of
    :data:`HEAD_SPLIT_BLOCK_NS` that does, when ``cfg``'s does not), and tiles run their whole K (the
    split-K reductions write D by GEMM column). Unmeasured: the rules' tile otherwise."""
    left, _, right = desc.head_splits
    width = math.gcd(left, right)
    bn = cfg.block_n if width % cfg.block_n == 0 else next(b for b in HEAD_SPLIT_BLOCK_NS if width % b == 0)
    if bn == cfg.block_n and cfg.split_k == 1:
        return cfg
    bm = 128 if cfg.block_m == 192 else cfg.block_m  # 192-row tiles were measured at BLOCK_N 128 only
    return make_config(desc, facts, bm, bn, sfa_tma=cfg.sfa_tma)


def make_config(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int, split: int = 1,
                small_epi: bool = False, sfa_tma: bool = False, sfb_tma: bool = False) -> Sm90Config:
    """A config for explicit tiles: stages from the shared-memory budget, PIPE_MMA where registers allow. ``bn`` may
    be a width of two column blocks (:func:`column_blocks`, e.g. 192 or 96; dense 1d2d, BLOCK_M 64 / 128, no split-K;
    pipelined where the same register count allows, e.g. 64x96): never picked by the rules until measured.

    BLOCK_M 256 never pipelines (its two accumulator waves plus one partial already take 192 registers
    at BLOCK_N 128); ``small_epi`` (BLOCK_M 256 only) trades the D staging overlap for one more stage.
    """
    if bm == 192 and (desc.kind == "fp8_1d1d" or split > 1):
        raise ValueError(f"BLOCK_M 192 runs 1d2d tiles without split-K only (got {desc.kind}, split {split}): "
                         "the per-channel scales spill at its 152 registers")
    split_n = column_blocks(bn)[1] > 0
    if split_n and (bm > 128 or split > 1 or desc.kind != "fp8_1d2d" or desc.head_splits or desc.layout != "normal"):
        raise ValueError(f"BLOCK_N {bn} (two column blocks) runs dense recipe (1, 128, 128) tiles of BLOCK_M 64 / 128 "
                         f"without split-K or head splits only (got {desc.kind}, {desc.layout}, BLOCK_M {bm}, "
                         f"split {split})")
    out_fp32 = desc.out_fp32 or split > 1
    small_epi = small_epi and bm == 256
    # CPU compile check: packed UE8M0 scales from the ring at BLOCK_M 256 spill 112 bytes (the decode
    # splits the partial's register block); keep those on global loads.
    sfa_tma = sfa_tma and not (bm == 256 and desc.sf_packed)
    sfb_tma = sfb_tma and desc.kind == "fp8_1d1d"
    stages = min(MAX_STAGES, layouts.max_stages(bm, bn, out_fp32, facts.smem_per_block, small_epi, sfa_tma,
                                                sfb_tma))
    # Two partials in flight need 3 accumulators of registers; per-channel RHS scales from global
    # memory add two column vectors (current and next K block), from the ring one transient vector.
    # 192 leaves ~40 of the 232 for addresses.
    regs = layouts.accumulator_regs(bm, bn, pipelined=True)
    if desc.kind == "fp8_1d1d":
        regs += bn // 4 if sfb_tma else 2 * bn // 4
    pipe = regs <= 192 and bm <= 128  # BLOCK_M 192 runs three warpgroups at 152 registers: one partial
    # C by TMA into the D staging buffer wherever the kernel takes it (dispatch.c_tma_ok checks the tensors:
    # FP32 C, row-major, aligned). H200, results/c-epilogue-probe-h200-2026-12-03-8d46235.json, c = d:
    # 24576x4096x1536 536.8 -> 477.5 us, 7168x4096x2048 203.1 -> 181.9, 4096x7168x2048 209.2 -> 183.4,
    # 2112x4096x7168 188.2 -> 178.2, 256 rows (first wave only) 4096x4096x7168 278.8 -> 272.4; bitwise equal.
    # On pipelined one-wave tiles the C load starts after the first K-block pair (c_tma_late, the field's
    # default), its wait for the previous D store then under WGMMAs. H200, results/c-epilogue-probe-h200-
    # 2026-12-03-12ec969.json:
    # 24576x4096x1536 472.8 -> 447.4 us, 7168x4096x2048 181.6 -> 173.5, 4096x7168x2048 182.4 -> 175.1,
    # 2112x4096x7168 (64x128) 169.0 -> 168.5; the 256-row tiles (two waves) keep the early load.
    cfg = Sm90Config(bm, bn, stages, split, 8, facts.num_sms, pipe, small_epi, sfa_tma, sfb_tma)
    return dataclasses.replace(cfg, c_tma=desc.with_c and out_fp32 and cfg.can_stage_c and not split_n)


# ---------------------------------------------------------------------------------------------
# BF16 (finegemm.kernels.sm90.gemm_bf16): separate rules, a small cost model over the tile space.
# ---------------------------------------------------------------------------------------------
BF16_BLOCK_K = 64  # one 128-byte swizzle row of bf16 per TMA box row; 4 x k16 WGMMAs per slice
BF16_MAX_STAGES = 8
# Ring stages a dense tile over all of K may take (split-K units and the grouped kernels keep BF16_MAX_STAGES):
# only 64x64 (13) and 64x96 (10) fit more than 8. H100 (results/sm90-bf16-stages{8,16}-m64-128-*, two
# rounds, us, 8 / 13 stages, 64x64 whole K): 128x4096x7168 37.6 / 35.0 (cuBLAS 34.4: its 64x64 kernel runs 13),
# 64x4096x7168 36.8 / 33.7, 128x2112x7168 29.1 / 24.9, 128x7168x16384 114.1 / 106.3, 128x24576x1536 44.1 / 40.8;
# the picks that were 64x64 already tie (64x7168x16384 95.4 / 95.8). Split-K units gained nothing or lost
# (128x7168x16384 64x64 split 4 127.2 / 138.8).
BF16_MAX_STAGES_WHOLE_K = 16
# Model constants (H200, leads until measured: benchmarks/PERF.md, BF16): dense bf16 rate of a
# whole chip (cuBLAS on random data), HBM bandwidth, what one SM streams at most with a deep ring, and
# the fixed cost of the split-K reduction launch.
BF16_CHIP_TFLOPS = 790.0
BF16_HBM_GBPS = 4000.0
BF16_SM_STREAM_GBPS = 110.0
BF16_SPLITK_FIXED_US = 5.0
# The reduction's fixed cost was once modelled at 2.5 us: cuBLAS's own split-K reduce kernel takes 2.0-6.1 us on
# these shapes (results/cublas-bf16-kernels-h100-2026-12-06-3e186bc.json), and at 2.5 the model split where the
# deep whole-K ring measured faster (H100, us, pick before / whole-K 64x64 at 13 stages: 64x4096x7168 64x64 split 2
# 35.5 / 34.1, 128x4096x7168 64x128 split 2 37.8 / 33.9, 256x2112x7168 128x144 split 4 32.9 / 26.1).
# Split-K is a candidate up to BF16_SPLIT_MAX_M rows, or up to 512 where 64x64 tiles would fill fewer than half the
# SMs. At M = 192-512 with N >= 2112 every split lost to a whole-K tile (H100, results/sm90-bf16-picks-v26-*:
# 333x7168x16384 128x192 split 8 254.1 / whole-K 142.8 us, 256x7168x16384 128x128 split 8 168.6 / 104.5,
# 512x4096x7168 128x256 split 2 84.1 / 48.2, 192x2112x7168 64x256 split 4 31.1 / 26.4); at N = 576 (27-54 tiles
# of 64x64) splits still win (192x576x7168 64x128 split 4 16.0 / 64x64 whole-K 19.9, 256x576x7168 16.8 / 20.0).
BF16_SPLIT_MAX_M = 128
# Fraction of the WGMMA peak a warpgroup reaches per tile shape (m64 nN per instruction; wider N
# reads less shared memory per FLOP); 128-row tiles share each B slice between two warpgroups. (64, 256): the M = 4096
# fit below (673 TFLOPS against 128x256's 806; 0.80 before those runs).
BF16_TILE_EFF = {(128, 256): 0.92, (128, 128): 0.82, (64, 256): 0.77, (128, 64): 0.62,
                  (64, 128): 0.70, (64, 64): 0.50,
                  # three math warpgroups (BLOCK_M 192): the FP8 kernel's 192x128 tile ran at 1.04x the per-MAC
                  # rate of its 128x128 one (v13); 192x64 measured far slower there. (The H100 fit below has 192x128
                  # at 0.82; 0.85 keeps the H200's measured 192x128 picks, e.g. 8192x576x7168 without split widths.)
                  (192, 128): 0.85, (192, 64): 0.55}
# Widths that are not powers of two at M >= BF16_SPLIT_N_EFF_MIN_M (where they were measured: H100,
# results/sm90-bf16-tile-sweep-m4096-h100-2026-12-06-3e186bc.json; per tile, time = rounds x (fixed + K slices x
# rate) fitted over the six (N, K) at M = 4096; chip TFLOPS 128x192 818, 128x256 806,
# 192x192 776, 128x160 741, 128x128 721, 192x128 717, 192x144 712, 128x144 684, 192x160 684, 64x256 673, 192x96 553,
# 128x96 541; scaled so that 128x256 stays 0.92). Below it they take their first column block's figure: at M =
# 256-333 (one or two rounds) 128x192 measured no faster than 128x128 / 192x128 (256x24576x1536 45.2 / 42.7 us,
# 333x7168x2048 29.2 / 28.5).
BF16_SPLIT_N_EFF = {(128, 192): 0.93, (192, 192): 0.89, (128, 160): 0.85, (192, 144): 0.81, (128, 144): 0.78,
                    (192, 160): 0.78, (128, 96): 0.62, (192, 96): 0.63}
BF16_SPLIT_N_EFF_MIN_M = 1024


@dataclass(frozen=True)
class Sm90Bf16Config:
    """One compiled variant of :func:`finegemm.kernels.sm90.gemm_bf16.bf16_gemm_kernel` and its launch."""

    block_m: int
    block_n: int
    stages: int
    split_k: int = 1
    group_m: int = 8
    num_sms: int = 132
    block_k: int = BF16_BLOCK_K
    # > 0: the producer prefetches B's box this many K slices ahead into L2 (as Sm90Config.b_prefetch); never
    # picked by the rules until measured
    b_prefetch: int = 0
    # C (D's dtype, row-major; no split-K) rides into the D staging tile by TMA under each tile's main loop and
    # the epilogue adds it from shared memory (gemm_bf16's C_TMA); the launch falls back to global loads for a
    # C whose pointer TMA cannot address (dispatch_bf16.c_tma_ok)
    c_tma: bool = False
    # D staged and stored in two halves of BLOCK_N / 2 columns through one half-size buffer (gemm_bf16's D_HALVES):
    # the shared memory it frees takes one more ring stage (128x256: 4 instead of 3, FP32 out 3 instead of 2).
    # Power-of-two widths, no C staging; where make_bf16_config's rule (BF16_D_HALVES_MAX_STAGES) takes it
    d_halves: bool = False

    @property
    def num_warps(self) -> int:
        """Warps of the default partition (math warpgroup 0); the others are worker partitions."""
        return 4

    @property
    def column_blocks(self) -> tuple[int, int]:
        """(``BLOCK_N``, ``BLOCK_N1``) of the kernel: see :func:`column_blocks`."""
        return column_blocks(self.block_n)

    @property
    def d_box_cols(self) -> int:
        """Columns of D's (first) TMA box and staging tile: the kernel's ``BLOCK_N``, or half of it when D is
        staged in halves (``d_halves``; the kernel reads that from the box)."""
        block_n = self.column_blocks[0]
        return block_n // 2 if self.d_halves else block_n


# Tiles whose width is not a power of two (a second WGMMA and B box, gemm_bf16's BLOCK_N1), e.g. 4096x576 in 128
# tiles of 128x144 (one round of 132 SMs, no column past N) instead of 110 of 192x128. H100 harness
# (events, off / on, 2 rounds): 4096x576x7168 66.6-68.2 -> 56.2-56.6 us, with C 68.5-70.9 -> 58.2-59.1. Candidates
# of the rules and of explicit configs (make_bf16_config).
BF16_SPLIT_N_WIDTHS = (96, 144, 160, 192)
BF16_SPLIT_N_MARGIN = 0.92


def bf16_tile_eff(bm: int, bn: int, m: int = 0) -> float:
    """:data:`BF16_TILE_EFF` of a tile; a width that is not a power of two takes :data:`BF16_SPLIT_N_EFF` where
    ``m`` (the GEMM's rows) is at least :data:`BF16_SPLIT_N_EFF_MIN_M`, else its first column block's figure (two
    WGMMAs a K slice, the second narrower)."""
    if (bm, bn) in BF16_TILE_EFF:
        return BF16_TILE_EFF[(bm, bn)]
    if m >= BF16_SPLIT_N_EFF_MIN_M and (bm, bn) in BF16_SPLIT_N_EFF:
        return BF16_SPLIT_N_EFF[(bm, bn)]
    return BF16_TILE_EFF[(bm, column_blocks(bn)[0])]


# C staged by TMA in the BF16 GEMM, which also lets the rules take 64x256 accumulators beside a bf16 C. H100
# harness (events, off / on, 2 rounds): 4096x7168x16384+c 1510-1556 -> 1192-1198 us, 4096x24576x1536+c
# 573-574 -> 480-481, 4096x4096x7168+c 390-397 -> 312, 4096x32768x512+c 375 -> 335, 4096x7168x2048+c 206-211 ->
# 183, 128x32768x512+c 29.5-29.8 -> 27.2; at M = 1 the 64x256 picks it allows run 2-4 % slower than the 64x128 ones
# before (1x4096x7168+c 35.2-35.6 -> 36.6-36.8, the no-C call's tile and time).


# D staged in two halves (Sm90Bf16Config.d_halves) where the whole D tile leaves at most
# BF16_D_HALVES_MAX_STAGES ring stages and the half tile frees one more. H100 (events):
# - FP32 out (the LM head at prefill), results/sm90-bf16-f32-out-halves-{off,all}-h100-2026-12-06-76cb214.json,
#   us: 4096x129280x7168 128x256 at 2 stages 14184.5, in halves at 3 10348.6 (cuBLAS 10419-10519; the 128x128
#   pick before 12901.4); 577x129280x7168 2309.4 / 1565.8 (cuBLAS 1457-1496; 128x128 2244.3); 192x128 at 3 / 4
#   12785.5 / 11852.5.
# - 128x128 FP32 at 5 / 6 stages lost (12901.4 / 13275.2, 2244.3 / 2400.2): hence the stage bound.
# - BF16 out 128x256 at 3 / 4, harness M = 4096 twice off / on (results/harness-bf16-d-halves-*-h100-2026-12-06-
#   76cb214.json): 4096x32768x512 232.9-235.8 / 221.7-222.0, 4096x24576x1536 409.6-409.7 / 404.4-405.9,
#   4096x4096x7168 303.8-304.9 / 300.2-300.7, 4096x7168x2048 164.3-164.4 / 162.8-163.2; one loss,
#   4096x7168x16384 1175.9-1181.1 / 1187.3-1187.4 (+0.5-1 %; 1190.7 and 1194.8 in two later runs with halves):
#   BF16 D is staged whole from K > BF16_D_HALVES_BF16_MAX_K. (FP32 D keeps halves at any K: 128x256 in halves
#   is what beats 128x128 there, 4096x7168x16384:f32 1313.8 / 1379.2.)
BF16_D_HALVES_MAX_STAGES = 3
BF16_D_HALVES_BF16_MAX_K = 8192
# Up to K = BF16_D_HALVES_SHORT_K the 4-stage tiles take halves too (192x128 and 64x256 -> 5 stages). H100
# (results/sm90-bf16-halves-{rule,all}-4stage-tiles-h100-2026-12-06-5d19a49.json, us, whole / halves): 192x128
# 333x24576x1536 54.5 / 51.0, 333x7168x2048 28.3 / 25.4, 1024x7168x2048 57.8 / 57.5, 128x32768x512 24.5 / 24.7;
# 64x256 333x24576x1536 64.4 / 60.2, 333x7168x2048 36.4 / 33.5, 1024x7168x2048 61.0 / 55.9; at K = 7168 a tie or
# a loss (192x128 4096x2112x7168 187.9 / 187.3, 8192x576x7168 144.5 / 149.3; 64x256 271.6 / 278.2). Not at M <=
# 256, where the 64x256 picks stream B at one row tile (results/sm90-bf16-halves-{off,rule}-64x256-h100-2026-12-06-
# c3916cf.json: 64x24576x1536 42.4 / 43.4, 64x32768x512 22.6 / 22.8, 192x32768x512 26.2 / 26.0).
BF16_D_HALVES_SHORT_K = 2048
BF16_D_HALVES_SHORT_K_MIN_M = 256
BF16_D_HALVES_SHORT_K_MAX_STAGES = 4


def bf16_c_staged(desc: GemmDesc, split: int = 1) -> bool:
    """Whether the BF16 kernel stages ``desc``'s C by TMA (:attr:`Sm90Bf16Config.c_tma`): a C of D's dtype and
    layout (``desc.c_like_d``), added in the GEMM itself (no split-K)."""
    return desc.with_c and desc.c_like_d and split == 1


def bf16_stage_bytes(block_m: int, block_n: int) -> int:
    """Shared memory of one ring stage: bf16 A (``block_m`` x 64) and B (``block_n`` x 64) slices."""
    return (block_m + block_n) * BF16_BLOCK_K * 2


def bf16_max_stages(block_m: int, block_n: int, d_fp32: bool, smem_per_block: int,
                    cap: int | None = None, d_halves: bool = False) -> int:
    """Stages that fit beside the ``block_m x block_n`` D staging tile (half of it with ``d_halves``), at most
    ``cap`` (default :data:`BF16_MAX_STAGES`)."""
    d_cols = block_n // 2 if d_halves else block_n
    budget = smem_per_block - layouts.SMEM_RESERVED - block_m * d_cols * (4 if d_fp32 else 2)
    return min(BF16_MAX_STAGES if cap is None else cap, budget // bf16_stage_bytes(block_m, block_n))


def bf16_ring_stages(block_m: int, block_n: int, d_fp32: bool, smem_per_block: int, cap: int | None = None,
                     halves_up_to: int = 0) -> tuple[int, bool]:
    """(stages, D staged in halves): the stages beside the whole D tile (:func:`bf16_max_stages`), or beside half of
    it where the whole tile leaves at most ``halves_up_to`` stages and the half tile frees one more."""
    stages = bf16_max_stages(block_m, block_n, d_fp32, smem_per_block, cap)
    if stages <= halves_up_to:
        halves = bf16_max_stages(block_m, block_n, d_fp32, smem_per_block, cap, d_halves=True)
        if halves > stages:
            return halves, True
    return stages, False


def bf16_estimate_us(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int, split: int) -> float:
    """Predicted kernel time of one tile config: the slowest of compute, HBM and per-SM streaming,
    plus a tenth of the slower per-CTA term (so that, at the HBM floor, lighter CTAs win ties).

    - compute: the busiest CTA's work units at the tile shape's share of the chip rate;
    - HBM: A and B read once, D (and C) written once, plus the split-K workspace written and read;
    - streaming: the busiest CTA's operand bytes at what one SM pulls (memory-bound small M);
    plus the reduction launch for split-K.
    """
    m, n, k = desc.m, desc.n, desc.k
    k_split = math.ceil(math.ceil(k / BF16_BLOCK_K) / split) * BF16_BLOCK_K
    units = math.ceil(m / bm) * math.ceil(n / bn) * split
    sms = min(units, facts.num_sms)
    per_cta = math.ceil(units / sms)
    sm_flops = BF16_CHIP_TFLOPS * 1e6 / facts.num_sms * bf16_tile_eff(bm, bn, m)  # FLOP per us
    t_compute = per_cta * 2 * bm * bn * k_split / sm_flops
    out_bytes = 4 if desc.out_fp32 else 2
    hbm = 2 * (m * k + n * k) + m * n * out_bytes * (2 if desc.with_c else 1)
    if split > 1:
        hbm += 2 * split * m * n * 4
    t_hbm = hbm / (BF16_HBM_GBPS * 1e3)
    t_stream = per_cta * 2 * (bm + bn) * k_split / (BF16_SM_STREAM_GBPS * 1e3)
    slack = 0.1 * max(t_compute, t_stream)
    return max(t_compute, t_hbm, t_stream) + slack + (BF16_SPLITK_FIXED_US if split > 1 else 0.0)


def _bf16_candidates(desc: GemmDesc, facts: DeviceFacts):
    num_kb = math.ceil(desc.k / BF16_BLOCK_K)
    may_split = desc.m <= BF16_SPLIT_MAX_M or (desc.m <= 512 and 2 * _tiles(desc, 64, 64) < facts.num_sms)
    for bm in (64, 128, 192):
        if bm == 128 and desc.m <= 64:
            continue
        # BLOCK_M 192 (three warpgroups at 152 registers): at 128 columns (CPU
        # compile: a 64x256 accumulator needs 154 registers at its WGMMA), for M beyond the small-M rules whose
        # last 192-row tile is mostly inside M. H200 (results/sm90-bf16-bm192-h200-2026-12-04.json, us,
        # 192x128 / the best other): 4096x2112x7168 176.9 / 197.2, 4096x576x7168 61.4 / 82.8, 8192x576x7168
        # 122.5 / 138.5, 333x24576x1536 47.7 / 49.4, 333x7168x2048 25.2 / 27.7; at M = 577 (the last tile
        # 1/192 full) it lost twice (7168x16384 327.9 / 281.8, 7168x2048 40.7 / 38.1) and won once
        # (4096x7168 66.4 / 76.5). With a bf16 C
        # (results/bf16-c-probe-h200-2026-12-04.json, 192x128 / the pick before): 4096x576x7168 64.2 / 97.8,
        # 4096x2112x7168 189.3 / 213.9, 8192x576x7168 129.0 / 174.0 (4096x4096x7168 353.5 / 322.6: not picked)
        # FP32 out without C: with D in halves (4 stages). H100 (results/sm90-bf16-f32-out-192-h100-2026-12-06-
        # a7697cb.json, us, 192x128 / the pick before, each shape the rules give it): 4096x2112x7168 193.1 / 229.3,
        # 4096x576x7168 67.0 / 114.5, 8192x2112x7168 377.9 / 383.1, 8192x576x7168 145.5 / 209.3, 333x24576x1536
        # 57.3 / 62.9, 333x7168x16384 145.1 / 239.3, 333x7168x2048 29.2 / 32.4, the fastest of the four tiles timed
        # (128x128, 64x128, 128x256 in halves) on all seven; FP32 C beside it is untimed
        if bm == 192 and (desc.m <= 256 or _rows_inside(desc.m, 192) < 0.85
                          or (desc.out_fp32 and desc.with_c)):
            continue
        for bn in (64, 128, 256) + BF16_SPLIT_N_WIDTHS:
            if bn > 64 and bn // 2 >= desc.n:
                continue  # a narrower tile covers N
            # Widths that are not powers of two (two WGMMAs a K slice): at 192 rows no C read from global memory
            # (CPU compile: beside 192x192 it spills 312 bytes at 152 registers; staged, none). FP32 out: no C,
            # at most 128 rows and at least 4 stages beside the whole FP32 D tile. H100 (results/sm90-bf16-f32-
            # out-split-widths-h100-2026-12-06-84007f5.json, us, the pick so / the pick before): 4096x576x7168
            # 128x144 63.9 / 68.0, 8192x576x7168 128x144 117.8 / 147.2, 577x4096x7168 128x160 68.1 / 93.5,
            # 577x7168x2048 128x144 42.0 / 47.4, 1024x2112x7168 128x144 61.1 / 77.6, 192x7168x2048 64x192 23.2 /
            # 23.6, 333x4096x7168 64x192 52.2 / 51.0; 128x192 at its 3 stages lost (4096x2112x7168 235.1 against
            # 192x128 in halves 196.2).
            if bn not in (64, 128, 256) and (
                    (bm == 192 and desc.with_c and not bf16_c_staged(desc))
                    or (desc.out_fp32 and (desc.with_c or bm == 192
                                           or bf16_max_stages(bm, bn, True, facts.smem_per_block) < 4))):
                continue
            # Fewer than 64 rows: 64-column tiles lost to wider ones on every decode shape at M = 1 (H200,
            # results/sm90-bf16-m1-h200-2026-12-04.json: 1x7168x16384 64x64 112.8 us, 64x256 split 4 72.5;
            # 1x7168x2048 20.3 vs 17.4 for 64x128), while at M = 64 64x64 is the best tile there (69.7 us):
            # the A box, mostly rows past M, is loaded once per BLOCK_N columns of B.
            if bn == 64 and desc.m < 64 and desc.n > 64:
                continue
            # C read beside a 64x256 accumulator does not fit the registers unless a bf16 C comes from shared
            # memory (C staged by TMA) or is added by the split-K reduction; FP32 C staged spills too (CPU
            # compile, 128x256: 288 bytes of stack). FP32 out without C: 128x256 with D in halves (3 stages, the
            # measured one; 64x256 FP32 is untimed).
            if bn == 256 and desc.with_c and (desc.out_fp32 or not bf16_c_staged(desc)):
                continue
            if bn == 256 and desc.out_fp32 and bm != 128:
                continue
            if bm == 192 and bn == 256:
                continue
            for split in (1, 2, 3, 4, 6, 7, 8):
                if split > 1 and (not may_split or num_kb % split or num_kb // split < 8 or bm == 192):
                    continue
                yield bm, bn, split


def get_sm90_bf16_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Bf16Config:
    """The candidate (BLOCK_M in 64/128, BLOCK_N in 64/128/256, split-K 1-8) with the least
    :func:`bf16_estimate_us`; ties go to the earlier (smaller-M, no-split) candidate. A width that is not a power
    of two (:data:`BF16_SPLIT_N_WIDTHS`) must be predicted :data:`BF16_SPLIT_N_MARGIN` faster than the best other."""
    def estimate(c):
        return bf16_estimate_us(desc, facts, *c)

    candidates = list(_bf16_candidates(desc, facts))
    best = min((c for c in candidates if c[1] in (64, 128, 256)), key=estimate)
    split_n = [c for c in candidates if c[1] not in (64, 128, 256)]
    if split_n:
        best_split_n = min(split_n, key=estimate)
        if estimate(best_split_n) < BF16_SPLIT_N_MARGIN * estimate(best):
            best = best_split_n
    return make_bf16_config(desc, facts, *best)


def make_bf16_config(desc: GemmDesc, facts: DeviceFacts, bm: int, bn: int, split: int = 1) -> Sm90Bf16Config:
    """A BF16 config for explicit tiles: stages fill the shared memory left beside the D tile (up to
    :data:`BF16_MAX_STAGES_WHOLE_K` without split-K, :data:`BF16_MAX_STAGES` with it); C staged by TMA
    where :func:`bf16_c_staged` says so; ``bn`` a width :func:`column_blocks` takes. D staged in halves
    (``d_halves``) where the whole tile leaves at most :data:`BF16_D_HALVES_MAX_STAGES` stages
    (:data:`BF16_D_HALVES_SHORT_K_MAX_STAGES` up to :data:`BF16_D_HALVES_SHORT_K` beyond
    :data:`BF16_D_HALVES_SHORT_K_MIN_M` rows) and halves add one (a bf16 D only up to
    :data:`BF16_D_HALVES_BF16_MAX_K`)."""
    d_fp32 = desc.out_fp32 or split > 1
    _, bn1 = column_blocks(bn)  # raises for a width the kernel cannot run
    cap = BF16_MAX_STAGES_WHOLE_K if split == 1 else BF16_MAX_STAGES
    c_tma = bf16_c_staged(desc, split)
    halves_up_to = 0
    if (not c_tma and bn >= 128 and bn1 == 0
            and (d_fp32 or desc.k <= BF16_D_HALVES_BF16_MAX_K)):
        short_k = desc.k <= BF16_D_HALVES_SHORT_K and desc.m > BF16_D_HALVES_SHORT_K_MIN_M
        halves_up_to = max(BF16_D_HALVES_MAX_STAGES, BF16_D_HALVES_SHORT_K_MAX_STAGES if short_k else 0)
    stages, d_halves = bf16_ring_stages(bm, bn, d_fp32, facts.smem_per_block, cap, halves_up_to)
    return Sm90Bf16Config(bm, bn, stages, split, 8, facts.num_sms, c_tma=c_tma, d_halves=d_halves)


# ---------------------------------------------------------------------------------------------
# BF16 GEMV (finegemm.kernels.sm90.gemv_bf16): one-row GEMMs streamed along K without tensor cores.
# ---------------------------------------------------------------------------------------------
# Why: at M = 1 the tensor-core kernel is 0.82-0.98x cuBLAS (its GEMV) on 8 of the 16 one-row bf16 cases (H200,
# results/bench-bf16-sm90-h200-2026-12-05-26f8c93.json), worst the decode LM head 1x129280x7168 (FP32 out) at 534
# us against 438 (the HBM floor 436). H100 (results/gemv-probe-h100-2026-12-06-9aedee3.json, us, cuBLAS /
# tensor-core pick / GEMV): faster than both on all 16 harness one-row cases, 1.02-1.39x cuBLAS (1x129280x7168
# 641.2 / 621.3 / 591.5, 1x7168x16384 95.4 / 96.2 / 90.3, 1x7168x2048 19.6 / 21.4 / 19.3, 1x256x7168 10.8 /
# 11.5 / 7.8).
GEMV_NUM_WARPS = 4
# (block_n, block_k) by K: H100 (results/gemv-probe-h100-2026-12-06-d16ce47.json, us, cuBLAS / 4x1024 /
# 32x256 / 16x512): from K = 2048 narrow blocks of long slices (many programs, no split at large N) were best or
# near it (1x2112x7168 21.3 / 18.6 / 21.7 / 20.6, 1x7168x16384 95.3 / 89.7 / 91.1 / 93.3, 1x7168x2048 19.0 / 18.9 /
# 20.4 / 20.7); below it a 1024 slice runs half masked (1x24576x1536 39.7 / 41.9 / 38.5 / 38.1, 1x32768x512 21.5 /
# 26.9 / 19.8 / 20.5)
GEMV_LONG_K = 2048
GEMV_LONG_BLOCKS = (4, 1024)
GEMV_SHORT_BLOCKS = (32, 256)
GEMV_MAX_SPLIT = 16
# programs a call should have (per SM) before K is split: several CTAs an SM keep enough loads in flight
GEMV_PROGRAMS_PER_SM = 4


@dataclass(frozen=True)
class Sm90GemvConfig:
    """One variant of :func:`finegemm.kernels.sm90.gemv_bf16.gemv_bf16_kernel` and its launch: ``block_n`` rows of
    B a program, ``block_k`` elements of K an iteration, K split ``split_k`` ways (at most; the launch drops empty
    ranges)."""

    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = GEMV_NUM_WARPS
    num_sms: int = 132


def gemv_fits(desc: GemmDesc) -> bool:
    """Whether the GEMV kernel takes ``desc``: a plain BF16 GEMM of one row with a K-major B."""
    return desc.kind == "bf16" and desc.layout == "normal" and desc.m == 1 and desc.b_k_major and desc.k >= 1


def make_gemv_config(desc: GemmDesc, facts: DeviceFacts, block_n: int, block_k: int, split: int = 0,
                     num_warps: int = GEMV_NUM_WARPS) -> Sm90GemvConfig:
    """A GEMV config; ``split`` 0: split K until the call has :data:`GEMV_PROGRAMS_PER_SM` programs an SM (at most
    :data:`GEMV_MAX_SPLIT` ways, at least one ``block_k`` slice a range)."""
    if block_n & (block_n - 1) or block_k & (block_k - 1) or block_k < 8:
        raise ValueError(f"GEMV blocks must be powers of two (block_k >= 8); got {block_n}x{block_k}")
    if split <= 0:
        blocks = math.ceil(desc.n / block_n)
        wanted = math.ceil(GEMV_PROGRAMS_PER_SM * facts.num_sms / blocks)
        split = max(1, min(wanted, GEMV_MAX_SPLIT, math.ceil(desc.k / block_k)))
    return Sm90GemvConfig(block_n, block_k, split, num_warps, facts.num_sms)


def get_sm90_gemv_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90GemvConfig | None:
    """The GEMV config for ``desc`` where the GEMV kernel takes it (:func:`gemv_fits`), else None."""
    if not gemv_fits(desc):
        return None
    return make_gemv_config(desc, facts, *gemv_blocks(desc.k))


def gemv_blocks(k: int) -> tuple[int, int]:
    """The rule's (``block_n``, ``block_k``) at ``K = k``: :data:`GEMV_LONG_BLOCKS` from :data:`GEMV_LONG_K`, else
    :data:`GEMV_SHORT_BLOCKS`."""
    return GEMV_LONG_BLOCKS if k >= GEMV_LONG_K else GEMV_SHORT_BLOCKS
