"""The sm90 config heuristic and its layout arithmetic: pure functions, CPU only."""

from __future__ import annotations

import dataclasses

import pytest

from finegemm.jit.device import H200, DeviceFacts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import Sm90Config, get_sm90_config, make_config
from finegemm.kernels.sm90 import layouts
from finegemm.kernels.sm90.dispatch import unsupported_reason

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
AWKWARD = [(m, n, k) for m in (1, 77, 333, 4095) for n in (2112, 576) for k in (128, 7168)]


def all_descs():
    for m in (64, 128, 4096):
        for n, k in NK:
            yield GemmDesc("fp8_1d2d", m, n, k)
    for m, n, k in AWKWARD:
        yield GemmDesc("fp8_1d2d", m, n, k)
        yield GemmDesc("fp8_1d2d", m, n, k, out_fp32=True, with_c=True)
        yield GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
        yield GemmDesc("fp8_1d2d", m, n, k, sf_packed=True)


@pytest.mark.parametrize("desc", list(all_descs()), ids=str)
def test_config_is_legal(desc):
    cfg = get_sm90_config(desc, H200)
    assert isinstance(cfg, Sm90Config)
    hash(cfg)  # frozen: usable as a cache key
    assert cfg.block_m in (64, 128, 192, 256) and cfg.block_n in (32, 64, 128)
    if cfg.block_m == 192:  # three math warpgroups at 152 registers: one partial, 1d2d, no split-K
        assert not cfg.pipe_mma and desc.kind == "fp8_1d2d" and cfg.split_k == 1
    assert (desc.k // 128) % cfg.split_k == 0
    assert cfg.split_k == 1 or desc.m <= 256 or cfg.split_tail
    assert not cfg.split_tail or (cfg.splitk_fused and cfg.split_k > 1 and cfg.block_m <= 128)
    assert cfg.stages >= 3
    out_fp32 = desc.out_fp32 or (cfg.split_k > 1 and not cfg.splitk_fused)
    smem = cfg.stages * layouts.stage_bytes(cfg.block_m, cfg.block_n, cfg.sfa_tma, cfg.sfb_tma) + \
        layouts.epilogue_bytes(cfg.block_m, cfg.block_n, out_fp32, cfg.small_epi)
    assert smem + layouts.SMEM_RESERVED <= H200.smem_per_block
    assert layouts.accumulator_regs(cfg.block_m, cfg.block_n, cfg.pipe_mma) <= 192
    assert not cfg.sfb_tma or desc.kind == "fp8_1d1d"  # per-channel RHS scales exist in recipe (1, 1, 128) only
    if cfg.block_m == 256:  # FP32 out with shared D staging; packed scales stay off the ring
        assert not cfg.pipe_mma and (cfg.small_epi or not desc.out_fp32)
        assert not (desc.sf_packed and cfg.sfa_tma)
        # 1d1d at 256 rows only with the per-channel scales in the ring (the register-held ones spill)
        assert desc.kind == "fp8_1d2d" or cfg.sfb_tma


def test_config_is_deterministic_and_pure():
    desc = GemmDesc("fp8_1d2d", 64, 2112, 7168)
    assert get_sm90_config(desc, H200) == get_sm90_config(desc, H200)
    small = DeviceFacts("test", 66, 232448, (9, 0))
    # fewer SMs: fewer splits needed to fill them
    assert get_sm90_config(desc, small).split_k <= get_sm90_config(desc, H200).split_k


def test_measured_rules():
    # 84dddfb sweep: split-K fills the SMs at small M.
    assert get_sm90_config(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200).split_k == 4
    assert get_sm90_config(GemmDesc("fp8_1d2d", 64, 7168, 2048), H200).split_k == 1
    assert get_sm90_config(GemmDesc("fp8_1d2d", 64, 4096, 7168), H200).block_m == 64
    # FP32 out at small M keeps the 84dddfb schedule (scales from global memory)
    assert not get_sm90_config(GemmDesc("fp8_1d2d", 128, 4096, 7168, out_fp32=True), H200).sfa_tma


# a792a80 sweep at M <= 128 (benchmarks/results/sm90_v4_smallm_wgrad_sweep.json), e2beb20 for PIPE_MMA: the measured
# best (block_m, block_n, split_k, pipe_mma) per decode shape; 128x32768x512 measured best at 128x128 too
V4_SMALL_BEST = {  # with e2beb20's PIPE_MMA and tile order (results/sm90_v6_pipe_sweep.json)
    (64, 2112, 7168): (64, 128, 4, True), (64, 24576, 1536): (64, 64, 1, True),
    (64, 32768, 512): (64, 128, 1, True), (64, 7168, 16384): (64, 64, 1, True),
    (64, 4096, 7168): (64, 32, 1, True), (64, 7168, 2048): (64, 64, 1, True),
    (128, 2112, 7168): (64, 32, 1, True), (128, 24576, 1536): (64, 128, 1, True),
    (128, 32768, 512): (128, 128, 1, True), (128, 7168, 16384): (64, 128, 1, True),
    (128, 4096, 7168): (64, 64, 1, True), (128, 7168, 2048): (64, 128, 1, True),
}


@pytest.mark.parametrize("mnk", list(V4_SMALL_BEST), ids=str)
def test_v4_small_m_rules(mnk):
    cfg = get_sm90_config(GemmDesc("fp8_1d2d", *mnk), H200)
    assert (cfg.block_m, cfg.block_n, cfg.split_k, cfg.pipe_mma) == V4_SMALL_BEST[mnk]
    assert cfg.sfa_tma


def test_v4_small_m_fills_sms_on_other_devices():
    # fewer SMs: the wave-efficiency rule moves to the tile that fills them, never below 60 % busy
    from finegemm.jit.heuristics_sm90 import _wave_efficiency

    small = DeviceFacts("test", 66, 232448, (9, 0))
    for mnk in V4_SMALL_BEST:
        desc = GemmDesc("fp8_1d2d", *mnk)
        cfg = get_sm90_config(desc, small)
        assert cfg.split_k > 1 or _wave_efficiency(desc, small, cfg.block_m, cfg.block_n) >= 0.6


# e7bde22 sweep at M=4096 (benchmarks/results/sm90_v3_sweep.json): (block_m, group_m) that measured best; N=2112 since
# df388fa (sm90_v13_three_warpgroups_sweep.json): 192 rows, three math warpgroups (103.9 us against 121.2 at 128 rows)
V3_BEST = {(2112, 7168): (192, 8), (24576, 1536): (256, 16), (32768, 512): (256, 16),
           (7168, 16384): (256, 8), (4096, 7168): (256, 8), (7168, 2048): (256, 8)}


@pytest.mark.parametrize("nk", list(V3_BEST), ids=str)
def test_v3_measured_rules(nk):
    cfg = get_sm90_config(GemmDesc("fp8_1d2d", 4096, *nk), H200)
    assert (cfg.block_m, cfg.group_m) == V3_BEST[nk]
    assert cfg.block_n == 128 and cfg.split_k == 1 and not cfg.pipe_mma and not cfg.small_epi
    assert cfg.sfa_tma and cfg.stages == {256: 3, 192: 4, 128: 5}[cfg.block_m]


def test_v5_weight_grad_rules():
    """benchmarks/results/sm90_v5_wgrad_sweep.json, sm90_v6_pipe_sweep.json: both scale vectors in the ring;
    128-row tiles pipelined (K-block pairs), 128x64 at K <= 1024; 128 rows also at K >= 4096 (H100, in place)."""
    def cfg(m, k):
        return get_sm90_config(GemmDesc("fp8_1d1d", m, 4096, k, out_fp32=True, with_c=True), H200)

    for m, k in ((4096, 7168), (7168, 16384)):
        c = cfg(m, k)
        assert (c.block_m, c.block_n, c.small_epi, c.sfa_tma, c.sfb_tma, c.pipe_mma, c.stages) == (
            128, 128, False, True, True, True, 4)
    for m, k in ((24576, 1536), (7168, 2048)):
        c = cfg(m, k)
        assert (c.block_m, c.block_n, c.sfa_tma, c.sfb_tma, c.pipe_mma, c.stages) == (128, 128, True, True, True, 4)
    c = cfg(32768, 512)
    assert (c.block_m, c.block_n, c.sfa_tma, c.sfb_tma, c.pipe_mma) == (128, 64, True, True, True)
    # 64-row tiles where they fill the SMs clearly better (576: 73 % vs 61 % at 128 rows), unless the 128-row grid
    # has two whole rounds and a tail it splits in the kernel (2112: 4 rounds and 16 tiles; badbb7e)
    c = cfg(576, 7168)
    assert (c.block_m, c.block_n, c.sfa_tma, c.sfb_tma, c.pipe_mma, c.c_tma) == (64, 128, True, True, True, True)
    c = cfg(2112, 7168)
    assert (c.block_m, c.block_n, c.pipe_mma, c.split_k, c.splitk_fused, c.split_tail) == (128, 128, True, 4, True,
                                                                                           True)
    # every weight-gradient pick stages C by TMA, and the pipelined one-wave ones start its load after the
    # first K-block pair (c_tma_late; the rule turns PIPE_MMA on after make_config, which must keep it)
    assert all(cfg(m, k).c_tma for m, k in ((4096, 7168), (24576, 1536), (32768, 512)))
    for m, k in ((24576, 1536), (7168, 2048), (32768, 512)):
        c = cfg(m, k)
        assert c.c_tma and c.c_tma_late and c.pipe_mma and c.block_m < 256, c


def test_v3_keeps_v2_where_unmeasured():
    # a792a80: FP32-out 1d2d at large M and long K runs 256 rows with shared D staging and TMA scales (at K <= 2048
    # BLOCK_M 192 since 3f6512b: test_fp32_out_block_m_192_at_short_k)
    for nk in ((4096, 7168), (7168, 16384)):
        cfg = get_sm90_config(GemmDesc("fp8_1d2d", 4096, *nk, out_fp32=True, with_c=True), H200)
        assert (cfg.block_m, cfg.block_n, cfg.small_epi, cfg.sfa_tma, cfg.pipe_mma) == (256, 128, True, True, False)
        assert cfg.stages == 3 and cfg.group_m == 8
    # packed UE8M0 at 256 rows: ring scales would spill, so they stay global loads
    cfg = get_sm90_config(GemmDesc("fp8_1d2d", 4096, 7168, 2048, sf_packed=True), H200)
    assert cfg.block_m == 256 and not cfg.sfa_tma


# v14 (benchmarks/results/sm90_v14_bm192_rule_sweep.json, us: 192 rows / the rule before): 4096x576x7168
# 35.7 / 48.1, 1024x2112x7168 35.4 / 47.5, 333x7168x2048 16.2 / 18.7, 333x24576x1536 29.4 / 40.0,
# 577x4096x7168 37.8 / 48.0
BM192 = [(4096, 2112, 7168), (4096, 576, 7168), (1024, 2112, 7168), (333, 7168, 2048), (333, 24576, 1536),
         (577, 4096, 7168)]


@pytest.mark.parametrize("mnk", BM192, ids=str)
def test_block_m_192_where_it_fills_the_sms_better(mnk):
    cfg = get_sm90_config(GemmDesc("fp8_1d2d", *mnk), H200)
    assert (cfg.block_m, cfg.block_n, cfg.split_k, cfg.pipe_mma, cfg.sfa_tma) == (192, 128, 1, False, True)
    # FP32 out with C likewise (1f0b162: 4096x2112x7168 152.0 -> 121.2 us); the weight-gradient recipe (its
    # scales spill at 192 rows) keeps its rules
    fp32 = get_sm90_config(GemmDesc("fp8_1d2d", *mnk, out_fp32=True, with_c=True), H200)
    assert (fp32.block_m, fp32.block_n, fp32.split_k, fp32.sfa_tma) == (192, 128, 1, True)
    assert get_sm90_config(GemmDesc("fp8_1d1d", *mnk, out_fp32=True, with_c=True), H200).block_m != 192


@pytest.mark.parametrize("mnk,bm", [((4096, 7168, 2048), 192), ((4096, 24576, 1536), 192),
                                    ((4096, 4096, 7168), 256), ((4096, 7168, 16384), 256)], ids=str)
def test_fp32_out_block_m_192_at_short_k(mnk, bm):
    # 1f0b162 / 3f6512b: FP32 out at K <= 2048 takes 192 rows where they fill >= 85 % (4096x24576x1536 510.0 -> 429.0
    # us); at long K the 256-row pick stays (4096x4096x7168 209.9 against 228.2)
    assert get_sm90_config(GemmDesc("fp8_1d2d", *mnk, out_fp32=True, with_c=True), H200).block_m == bm
    assert get_sm90_config(GemmDesc("fp8_1d2d", *mnk), H200).block_m != 192  # BF16 out: the fill rule only


def test_block_m_192_only_for_unsplit_1d2d():
    with pytest.raises(ValueError, match="BLOCK_M 192"):
        make_config(GemmDesc("fp8_1d1d", 4096, 2112, 7168, out_fp32=True, with_c=True), H200, 192, 128)
    with pytest.raises(ValueError, match="BLOCK_M 192"):
        make_config(GemmDesc("fp8_1d2d", 333, 2112, 7168), H200, 192, 128, 2)


def test_wave_efficiency_picks_block_m():
    from finegemm.jit.heuristics_sm90 import _wave_efficiency

    # N=2112: 272 tiles of 256x128 fill 132 SMs to 69 %, 544 of 128x128 to 82 %
    desc = GemmDesc("fp8_1d2d", 4096, 2112, 7168)
    assert _wave_efficiency(desc, H200, 256, 128) == pytest.approx(272 / 396)
    assert _wave_efficiency(desc, H200, 128, 128) == pytest.approx(544 / 660)


def test_stages_fill_shared_memory():
    desc = GemmDesc("fp8_1d2d", 4096, 4096, 7168)
    cfg = make_config(desc, H200, 128, 128)
    assert cfg.stages == 6  # (232448 - 2048 - 32768) // 32768
    cfg32 = make_config(dataclasses.replace(desc, out_fp32=True), H200, 128, 128)
    assert cfg32.stages == 5
    # 256x128: (256 + 128) x 128 B a stage beside a 64 KiB D tile -> 3, like DeepGEMM's 256x128 config
    assert make_config(desc, H200, 256, 128).stages == 3
    assert make_config(desc, H200, 256, 128, small_epi=True).stages == 4  # D staging 32 KiB
    assert make_config(desc, H200, 256, 128, small_epi=True, sfa_tma=True).stages == 3
    assert make_config(desc, H200, 128, 128, sfa_tma=True).stages == 5  # 512 B of scales a stage
    assert not make_config(desc, H200, 128, 128, small_epi=True).small_epi  # 256 rows only


def test_barrier_arithmetic():
    assert layouts.full_barrier_arrivals() == 1
    assert layouts.empty_barrier_arrivals(64) == 1
    assert layouts.empty_barrier_arrivals(128) == 2
    assert layouts.stage_tx_bytes(128, 128) == 32768
    assert layouts.math_warpgroups(128) == 2
    assert layouts.math_warpgroups(256) == 2 and layouts.waves_per_warpgroup(256) == 2
    assert layouts.accumulator_regs(256, 128, pipelined=False) == 192  # 2 waves + 1 partial of 64
    assert layouts.stage_tx_bytes(256, 128, sfa_tma=True) == 49152 + 1024
    assert layouts.sfa_box(256, True) == [1, 256] and layouts.sfa_box(64, False) == [1, 4]
    # BLOCK_M 192: three warpgroups, A and its scales in 64-row boxes (descriptor blocks are powers of two),
    # three warpgroups at 152 registers beside the producer's at 40 fit the 64 Ki register file
    assert layouts.math_warpgroups(192) == 3 and layouts.waves_per_warpgroup(192) == 1
    assert layouts.empty_barrier_arrivals(192) == 3
    assert layouts.a_box_rows(192) == 64 and layouts.a_box_rows(256) == 256 and layouts.sfa_box(192, True) == [1, 64]
    assert layouts.stage_tx_bytes(192, 128, sfa_tma=True) == 320 * 128 + 768
    assert layouts.stage_bytes(192, 128, sfa_tma=True) == 320 * 128 + 1024  # the scales' row is 256 long
    assert 3 * 128 * layouts.math_regs(192) + 128 * layouts.PRODUCER_REGS <= 65536
    assert layouts.math_regs(128) == layouts.MATH_REGS


def test_unsupported_reasons():
    assert unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200) is None
    assert unsupported_reason(GemmDesc("fp8_1d1d", 64, 2112, 7168, out_fp32=True, with_c=True), H200) is None
    assert "bf16" in unsupported_reason(GemmDesc("bf16", 64, 2112, 7168), H200)
    assert "K-major" in unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7168, a_k_major=False), H200)
    assert "multiple of 128" in unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7000), H200)
    assert "16-byte" in unsupported_reason(GemmDesc("fp8_1d2d", 64, 2113, 7168), H200)
    assert unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7168, layout="m_grouped_masked"), H200)


def test_split_tail_rule():
    """The last partial tile round splits K 4 ways (split_tail, ff4294d) only where it fills <= 1/4 of the SMs."""
    from finegemm.jit.heuristics_sm90 import SPLIT_TAIL_K

    wgrad = GemmDesc("fp8_1d1d", 576, 4096, 7168, out_fp32=True, with_c=True)
    cfg = get_sm90_config(wgrad, H200)  # 64x128: 288 tiles, 2 rounds and 24
    assert (cfg.block_m, cfg.block_n, cfg.split_k, cfg.splitk_fused, cfg.split_tail) == (64, 128, SPLIT_TAIL_K,
                                                                                         True, True)
    assert cfg.c_tma and cfg.can_stage_c  # the whole tiles still stage C by TMA
    # 2112 rows: 128x128 (544 tiles: 4 whole rounds and 16) with the tail split, where 64 rows filled 8 rounds (badbb7e)
    cfg = get_sm90_config(GemmDesc("fp8_1d1d", 2112, 4096, 7168, out_fp32=True, with_c=True), H200)
    assert (cfg.block_m, cfg.block_n, cfg.split_k, cfg.split_tail, cfg.c_tma) == (128, 128, SPLIT_TAIL_K, True, False)
    # a 76-tile tail, 256-row tiles, BF16-out 1d2d: no split tail
    for desc in (GemmDesc("fp8_1d1d", 7168, 4096, 2048, out_fp32=True, with_c=True),
                 GemmDesc("fp8_1d1d", 4096, 4096, 7168, out_fp32=True, with_c=True),
                 GemmDesc("fp8_1d2d", 4096, 2112, 7168)):
        assert not get_sm90_config(desc, H200).split_tail, desc
    # the same shape on a device whose SM count leaves no tail
    assert not get_sm90_config(wgrad, DeviceFacts("test", 144, 232448, (9, 0))).split_tail
