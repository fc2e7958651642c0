"""sm90 BF16 GEMM on the CPU: heuristic, support rule, backend routing, and sm_90 compiles of every
config the heuristic picks (PTX has bf16 WGMMA, TMA, mbarriers, setmaxnreg; no spills)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from finegemm.api.dispatch import BackendError, _choose
from finegemm.jit import heuristics_sm90
from finegemm.jit.device import H200, DeviceFacts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import (
    Sm90Bf16Config,
    bf16_estimate_us,
    bf16_max_stages,
    bf16_stage_bytes,
    get_sm90_bf16_config,
    make_bf16_config,
)
from finegemm.kernels.sm90 import dispatch_bf16
from finegemm.kernels.sm90.compile_check import (
    BF16_PTX_MUST_CONTAIN,
    TMA_LOAD_PTX,
    TMA_STORE_PTX,
    assert_ptx_contains,
    compile_bf16_variant,
    expect_tx_ptx,
    lowered_arg_names,
    resource_usage,
)

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DSV3 = [(m, n, k) for m in (64, 128, 4096) for n, k in NK]
LAYOUT_MAJORS = {"nt": (True, True), "nn": (True, False), "tn": (False, False), "tt": (False, True)}


def _desc(m, n, k, layout="nt", out_fp32=False, with_c=False):
    a_k, b_k = LAYOUT_MAJORS[layout]
    return GemmDesc("bf16", m, n, k, a_k, b_k, out_fp32, with_c)


# ------------------------------------------------------------------------------------ heuristic
@pytest.mark.parametrize("m,n,k", DSV3 + [(1, 2112, 7168), (77, 576, 7168), (333, 2112, 7168), (4095, 2112, 128)])
@pytest.mark.parametrize("out_fp32,with_c", [(False, False), (True, True), (True, False)])
def test_config_fits_the_device(m, n, k, out_fp32, with_c):
    desc = _desc(m, n, k, out_fp32=out_fp32, with_c=with_c)
    cfg = get_sm90_bf16_config(desc, H200)
    assert cfg.block_m in (64, 128, 192) and cfg.block_n in (64, 128, 256) + heuristics_sm90.BF16_SPLIT_N_WIDTHS
    if cfg.block_m == 192:  # three warpgroups at 152 registers: a 64x128 accumulator at most, no split; FP32 out
        assert cfg.block_n <= 128 and cfg.split_k == 1  # only without C, with D in halves
        assert not out_fp32 or (not with_c and cfg.d_halves)
    assert cfg.stages >= 2
    d_cols = cfg.block_n // 2 if cfg.d_halves else cfg.block_n
    d_bytes = cfg.block_m * d_cols * (4 if out_fp32 or cfg.split_k > 1 else 2)
    assert cfg.stages * bf16_stage_bytes(cfg.block_m, cfg.block_n) + d_bytes <= H200.smem_per_block
    num_kb = -(-k // cfg.block_k)
    assert num_kb % cfg.split_k == 0
    if cfg.split_k > 1:
        assert m <= 512 and num_kb // cfg.split_k >= 8
    if out_fp32 and with_c:
        assert cfg.block_n <= 128  # a 64x256 FP32 accumulator plus C would not fit the registers
    if out_fp32 and cfg.block_n == 256:
        assert cfg.block_m == 128 and cfg.d_halves and cfg.stages == 3


def test_heuristic_prefers_wide_tiles_at_large_m_and_splits_small_m():
    big = get_sm90_bf16_config(_desc(4096, 4096, 7168), H200)
    assert (big.block_m, big.block_n, big.split_k) == (128, 256, 1)
    small = get_sm90_bf16_config(_desc(64, 2112, 7168), H200)
    assert small.block_m == 64 and small.split_k > 1  # 17-33 N tiles alone leave most SMs idle


@pytest.mark.parametrize("n,k", [(7168, 16384), (7168, 2048), (24576, 1536), (4096, 7168), (64, 7168)])
def test_single_row_takes_no_64_column_tile(n, k):
    """Below 64 rows the BF16 tile is at least 128 columns wide (64-column tiles lost every M = 1 decode shape on
    the H200), unless N itself fits 64 columns."""
    cfg = get_sm90_bf16_config(_desc(1, n, k), H200)
    assert cfg.block_n >= 128 or n <= 64
    assert get_sm90_bf16_config(_desc(64, 7168, 16384), H200).block_n == 64  # the M = 64 pick is unchanged


@pytest.mark.parametrize("m,n,k,bm", [(4096, 2112, 7168, 192), (4096, 576, 7168, 192), (8192, 576, 7168, 192),
                                      (333, 24576, 1536, 192), (577, 7168, 16384, 64), (4096, 4096, 7168, 128)])
def test_block_m_192_where_measured_faster(m, n, k, bm, monkeypatch):
    """Three math warpgroups (BLOCK_M 192, 192x128) where the H200 measured them faster than other power-of-two
    widths, with or without a bf16 C; not where the last 192-row tile would be mostly past M (M = 577), nor with
    FP32 out and C, nor at 256 columns, among the power-of-two widths. (Widths that are not powers of two and FP32
    out without C are tested apart.)"""
    monkeypatch.setattr(heuristics_sm90, "BF16_SPLIT_N_WIDTHS", ())
    cfg = get_sm90_bf16_config(_desc(m, n, k), H200)
    assert cfg.block_m == bm and (bm != 192 or (cfg.block_n, cfg.split_k) == (128, 1))
    if bm == 192 and n < 4096:
        assert get_sm90_bf16_config(_desc(m, n, k, with_c=True), H200).block_m == 192
    assert get_sm90_bf16_config(_desc(m, n, k, out_fp32=True, with_c=True), H200).block_m != 192


def test_whole_k_tiles_take_the_deep_ring():
    """64x64 and 64x96 over all of K fill shared memory up to 13 and 10 stages (BF16_MAX_STAGES_WHOLE_K: H100
    128x4096x7168 37.6 -> 35.0 us at 64x64, commit 3e186bc); split-K units and the grouped kernels keep 8."""
    assert make_bf16_config(_desc(128, 4096, 7168), H200, 64, 64).stages == 13
    assert make_bf16_config(_desc(128, 4096, 7168), H200, 64, 96).stages == 10
    assert make_bf16_config(_desc(128, 4096, 7168), H200, 64, 64, 2).stages == heuristics_sm90.BF16_MAX_STAGES == 8
    assert make_bf16_config(_desc(4096, 4096, 7168), H200, 128, 256).stages == 4  # D in halves (3 with it whole)
    assert bf16_max_stages(64, 64, False, H200.smem_per_block) == 8  # the grouped rules' default cap


# (M, N, K) -> (BLOCK_M, BLOCK_N, split) the rules take since commit 3e186bc, each the fastest the H100 timed there or
# within 1 % of it (results/sm90-bf16-picks-v26-*, sm90-bf16-stages16-*; us, pick / the pick before): 64x4096x7168
# 34.1 / 35.5, 128x4096x7168 33.9 / 37.8, 192x2112x7168 26.4 / 31.1, 256x2112x7168 26.1 / 32.9, 256x7168x16384
# 104.5 / 168.6, 333x2112x7168 33.6 / 39.9, 333x4096x7168 48.1 / 60.6, 512x4096x7168 48.2 / 84.1,
# 4096x2112x7168 176.8 / 185.1
V26_PICKS = [((64, 4096, 7168), (64, 64, 1)), ((128, 4096, 7168), (64, 64, 1)), ((192, 2112, 7168), (64, 64, 1)),
             ((256, 2112, 7168), (64, 64, 1)), ((256, 7168, 16384), (128, 128, 1)),
             ((333, 2112, 7168), (64, 128, 1)), ((333, 4096, 7168), (64, 192, 1)), ((512, 4096, 7168), (128, 128, 1)),
             ((4096, 2112, 7168), (128, 192, 1))]


@pytest.mark.parametrize("shape,tile", V26_PICKS, ids=[f"{m}x{n}x{k}" for (m, n, k), _ in V26_PICKS])
def test_v26_picks(shape, tile):
    cfg = get_sm90_bf16_config(_desc(*shape), H200)
    assert (cfg.block_m, cfg.block_n, cfg.split_k) == tile


@pytest.mark.parametrize("m", [192, 256, 333, 512])
def test_split_k_past_128_rows_only_where_tiles_are_few(m):
    """Past 128 rows every split lost to a whole-K tile at N >= 2112 (H100, commit 3e186bc: 333x7168x16384 split 8 254.1
    us / whole-K 142.8); at N = 576, where 64x64 tiles fill under half the SMs up to M = 512, splits still win
    (192x576x7168 16.0 / 19.9)."""
    for n, k in NK:
        assert get_sm90_bf16_config(_desc(m, n, k), H200).split_k == 1, (m, n, k)
    few = get_sm90_bf16_config(_desc(m, 576, 7168), H200)
    assert (few.split_k > 1) == (2 * -(-m // 64) * 9 < H200.num_sms)


def test_split_width_rates_only_where_measured():
    """The measured rates of widths that are not powers of two (M = 4096) apply from BF16_SPLIT_N_EFF_MIN_M rows;
    below it a width takes its first column block's rate."""
    eff = heuristics_sm90.bf16_tile_eff
    assert eff(128, 192, 4096) == heuristics_sm90.BF16_SPLIT_N_EFF[(128, 192)] > eff(128, 256, 4096)
    assert eff(128, 192, 333) == eff(128, 128, 333) == heuristics_sm90.BF16_TILE_EFF[(128, 128)]
    assert eff(64, 96, 64) == heuristics_sm90.BF16_TILE_EFF[(64, 64)]


def test_estimate_is_monotone_in_work():
    a = bf16_estimate_us(_desc(4096, 4096, 7168), H200, 128, 256, 1)
    b = bf16_estimate_us(_desc(4096, 4096, 14336), H200, 128, 256, 1)
    assert b > 1.9 * a


def test_stages_from_smem_budget():
    assert bf16_stage_bytes(128, 256) == 48 * 1024
    assert bf16_max_stages(128, 256, False, H200.smem_per_block) == 3
    assert make_bf16_config(_desc(128, 2112, 7168), H200, 64, 64, 4).stages == 8
    small = DeviceFacts("small", 66, 101376, (9, 0))
    assert make_bf16_config(_desc(4096, 4096, 7168), small, 128, 128).num_sms == 66


# ------------------------------------------------------------------------------------ support rule
@pytest.mark.parametrize("layout", list(LAYOUT_MAJORS))
def test_all_layouts_supported(layout):
    assert dispatch_bf16.unsupported_reason(_desc(4096, 2112, 7168, layout), H200) is None


@pytest.mark.parametrize("desc,fragment", [
    (GemmDesc("bf16", 64, 2112, 7100), "K % 8"),
    (GemmDesc("bf16", 77, 2112, 7168, False, True), "M % 8"),
    (GemmDesc("bf16", 64, 2110, 7168, True, False), "N % 8"),
    (GemmDesc("bf16", 64, 2110, 7168), "16-byte aligned for the TMA store"),
    (GemmDesc("bf16", 64, 2112, 7168, layout="m_grouped_contiguous"), "layout"),
    (GemmDesc("fp8_1d2d", 64, 2112, 7168), "not a BF16"),
])
def test_unsupported_reasons(desc, fragment):
    reason = dispatch_bf16.unsupported_reason(desc, H200)
    assert reason is not None and fragment in reason


def test_backend_choice_routes_bf16_to_sm90():
    backend, cfg = _choose(_desc(128, 2112, 7168), H200, "auto")
    assert backend == "sm90" and isinstance(cfg, Sm90Bf16Config)
    backend, _ = _choose(_desc(128, 2112, 7168), H200, "portable")
    assert backend == "portable"
    backend, _ = _choose(GemmDesc("bf16", 64, 2112, 7100), H200, "auto")
    assert backend == "portable"
    with pytest.raises(BackendError, match="K % 8"):
        _choose(GemmDesc("bf16", 64, 2112, 7100), H200, "sm90")
    not_hopper = DeviceFacts("NVIDIA A100", 108, 166912, (8, 0))
    assert _choose(_desc(128, 2112, 7168), not_hopper, "auto")[0] == "portable"


# ------------------------------------------------------------------------------------ sm_90 compiles
def _variants():
    seen = {}

    def add(desc, cfg, c_dtype="bf16"):
        # the kernel is specialized only on constexprs: majors, C, D dtype and the config
        key = (desc.a_k_major, desc.b_k_major, desc.out_fp32 or cfg.split_k > 1, desc.with_c, cfg, c_dtype)
        seen.setdefault(key, (desc, cfg, c_dtype))

    for m, n, k in DSV3:
        for layout in LAYOUT_MAJORS:
            d = _desc(m, n, k, layout)
            add(d, get_sm90_bf16_config(d, H200))
    for m in (1, 77, 333):
        for n in (2112, 576):
            d = _desc(m, n, 7168)
            add(d, get_sm90_bf16_config(d, H200))
            d = _desc(m, n, 7168, out_fp32=True, with_c=True)
            add(d, get_sm90_bf16_config(d, H200), "fp32")
    # the rules' 192x192 and 128x144 picks; 3e186bc's mid-M whole-K picks (64x192, 192x128 beside 16384 of K)
    for m, n, k in ((8192, 576, 7168), (577, 7168, 16384), (333, 4096, 7168), (333, 7168, 16384)):
        d = _desc(m, n, k)
        add(d, get_sm90_bf16_config(d, H200))
    d = _desc(4096, 4096, 7168, out_fp32=True, with_c=True)
    add(d, get_sm90_bf16_config(d, H200), "fp32")
    d = _desc(4096, 4096, 7168, with_c=True)
    add(d, get_sm90_bf16_config(d, H200), "bf16")
    return list(seen.values())


VARIANTS = _variants()


@pytest.mark.parametrize("desc,cfg,c_dtype", VARIANTS, ids=[
    f"{'k' if d.a_k_major else 'm'}{'k' if d.b_k_major else 'n'}-{c.block_m}x{c.block_n}s{c.split_k}"
    f"{'-f32' if d.out_fp32 else ''}{'-c' if d.with_c else ''}" for d, c, _ in VARIANTS])
def test_bf16_compiles_with_required_instructions(desc, cfg, c_dtype):
    kernel = compile_bf16_variant(desc, cfg, c_dtype)
    ptx = assert_ptx_contains(kernel, BF16_PTX_MUST_CONTAIN)
    for width in cfg.column_blocks:  # one WGMMA per column block (the second 0 for a power-of-two width)
        assert not width or re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{width}k16\.f32\.bf16\.bf16", ptx)
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"register spills: {usage}"
    assert kernel.metadata.shared <= H200.smem_per_block
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+2(32|40|48|56)", ptx)


@pytest.mark.parametrize("value,pdl", [(None, True), ("0", False)])
def test_plan_pdl_and_three_warpgroups(value, pdl, monkeypatch):
    """The BF16 launch plan (built on CPU tensors: descriptors are host objects): the split-K reduction is launched
    with programmatic dependent launch unless ``FINEGEMM_PDL=0``; BLOCK_M 192 runs three math warpgroups at 152
    registers with one 64-row A box each."""
    import torch

    if value is None:
        monkeypatch.delenv("FINEGEMM_PDL", raising=False)
    else:
        monkeypatch.setenv("FINEGEMM_PDL", value)

    def plan(m, n, k, bm, bn, split):
        desc = _desc(m, n, k)
        cfg = make_bf16_config(desc, H200, bm, bn, split)
        a, b = torch.zeros(m, k, dtype=torch.bfloat16), torch.zeros(n, k, dtype=torch.bfloat16)
        return dispatch_bf16._build_plan(desc, cfg, a, b, torch.zeros(m, n, dtype=torch.bfloat16), None)

    reduce = plan(64, 2112, 7168, 64, 64, 4)[3]
    assert reduce is not None and reduce[2]["launch_pdl"] is pdl
    grid, args, meta, reduce = plan(4095, 2112, 7168, 192, 128, 1)
    assert reduce is None and meta["BLOCK_M"] == 192 and meta["MATH_REGS"] == 152
    assert list(args[0].block_shape) == [64, 64]  # one [64 rows, BLOCK_K] A box per warpgroup


@pytest.mark.parametrize("b_k_major", [True, False])
def test_b_prefetch_variant(b_k_major):
    """``b_prefetch``: the producer also prefetches B's box some K slices ahead into L2 on B's own tensor map
    (bf16_gemm_kernel's sixth lowered argument), K-major or MN-major B, without spills; off, no prefetch."""
    d = GemmDesc("bf16", 64, 7168, 16384, True, b_k_major)
    cfg = get_sm90_bf16_config(d, H200)
    assert "cp.async.bulk.prefetch" not in compile_bf16_variant(d, cfg).asm["ptx"]
    kernel = compile_bf16_variant(d, dataclasses.replace(cfg, b_prefetch=8))
    ptx = assert_ptx_contains(kernel, BF16_PTX_MUST_CONTAIN)
    assert "cp.async.bulk.prefetch.tensor.2d.L2.global.tile" in ptx and "bf16_gemm_kernel_param_5" in ptx
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"register spills: {usage}"
    assert lowered_arg_names(kernel)[5] == "b_desc"


# ------------------------------------------------------------------------ C staged by TMA (C_TMA)
def _staged(m, n, k, out_fp32=False):
    """The rules' config for a C of D's dtype and layout (staged by TMA)."""
    desc = GemmDesc("bf16", m, n, k, True, True, out_fp32, True, c_like_d=True)
    return desc, get_sm90_bf16_config(desc, H200)


@pytest.mark.parametrize("m,n,k", [(4096, 7168, 16384), (4096, 4096, 7168), (4096, 24576, 1536), (128, 32768, 512)])
def test_staged_c_lets_the_rules_take_the_wide_tile(m, n, k):
    """A bf16 C staged by TMA no longer costs registers beside the accumulator, so the rules pick the tile they pick
    without C (128x256 at these shapes); a C that is not D's dtype / layout keeps C out of 64x256 tiles and is
    never staged."""
    desc, cfg = _staged(m, n, k)
    no_c = get_sm90_bf16_config(GemmDesc("bf16", m, n, k), H200)
    assert cfg.c_tma and (cfg.block_m, cfg.block_n, cfg.split_k) == (no_c.block_m, no_c.block_n, no_c.split_k)
    assert cfg.block_n == 256
    other = get_sm90_bf16_config(GemmDesc("bf16", m, n, k, True, True, False, True, c_like_d=False), H200)
    assert not other.c_tma and other.block_n < 256
    # what the launch runs instead when this C's pointer turns out unaligned for TMA
    assert dispatch_bf16._unstaged_config(desc, cfg) == other


def test_staged_c_never_with_split_k_or_fp32_wide_tiles():
    """Split-K adds C in its reduction (nothing to stage); an FP32 D keeps 64x256 tiles out either way."""
    desc, cfg = _staged(1, 7168, 16384)
    assert cfg.split_k > 1 and not cfg.c_tma
    assert not make_bf16_config(desc, H200, 64, 128, 4).c_tma and make_bf16_config(desc, H200, 64, 128, 1).c_tma
    desc32, cfg32 = _staged(4096, 4096, 7168, out_fp32=True)
    assert cfg32.c_tma and cfg32.block_n == 128


STAGED_VARIANTS = [((4096, 7168, 16384), False, "bf16"), ((4096, 576, 7168), False, "bf16"),
                   ((128, 4096, 7168), False, "bf16"), ((4096, 4096, 7168), True, "fp32"),
                   ((1, 24576, 1536), False, "bf16")]


@pytest.mark.parametrize("shape,out_fp32,c_dtype", STAGED_VARIANTS, ids=[str(v[0]) for v in STAGED_VARIANTS])
def test_staged_c_compiles_without_spills_or_c_loads(shape, out_fp32, c_dtype):
    """C_TMA variants (64x256 with a bf16 C, 192 rows, 64 rows, FP32 C and D, the rules' 128x144 at 4096x576): one C
    box per math warpgroup and column block by TMA besides the A and B boxes, no global load of C left, no spills,
    within the shared memory."""
    desc, cfg = _staged(*shape, out_fp32=out_fp32)
    assert cfg.c_tma and cfg.split_k == 1
    kernel = compile_bf16_variant(desc, cfg, c_dtype)
    ptx = assert_ptx_contains(kernel, BF16_PTX_MUST_CONTAIN)
    wgs = cfg.block_m // 64
    blocks = 2 if cfg.column_blocks[1] else 1
    loads = re.findall(TMA_LOAD_PTX, ptx)
    assert len(loads) == wgs + blocks + wgs * blocks, (len(loads), wgs)  # A per warpgroup, B, C per both
    assert not re.search(r"ld\.global(?!\.nc)", ptx), "C still read from global memory"
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"register spills: {usage}"
    assert kernel.metadata.shared <= H200.smem_per_block
    # the global-load form of the same tile reads C with plain loads and no C box
    plain = compile_bf16_variant(desc, dataclasses.replace(cfg, c_tma=False), c_dtype)
    assert len(re.findall(TMA_LOAD_PTX, plain.asm["ptx"])) == wgs + blocks


SPLIT_STAGED = [((4096, 576, 7168), 128, 144, False), ((333, 584, 1536), 128, 144, False),
                ((777, 1000, 2048), 128, 160, True), ((4096, 2112, 7168), 192, 192, False)]


@pytest.mark.parametrize("shape,bm,bn,out_fp32", SPLIT_STAGED, ids=[f"{v[0]}-{v[1]}x{v[2]}" for v in SPLIT_STAGED])
def test_staged_c_on_split_width_tiles(shape, bm, bn, out_fp32):
    """C staged on a tile of two column blocks: a warpgroup's two C boxes arrive on one expect-tx of their bytes
    (besides A's boxes and B's two), no global load of C is left, no spills (192x192 included, which spills 312
    bytes with C read from global memory)."""
    desc = GemmDesc("bf16", *shape, True, True, out_fp32, True, c_like_d=True)
    cfg = make_bf16_config(desc, H200, bm, bn)
    assert cfg.c_tma and cfg.column_blocks[1] > 0
    kernel = compile_bf16_variant(desc, cfg, "fp32" if out_fp32 else "bf16")
    ptx = assert_ptx_contains(kernel, BF16_PTX_MUST_CONTAIN)
    wgs = bm // 64
    loads = re.findall(TMA_LOAD_PTX, ptx)
    assert len(loads) == wgs + 2 + 2 * wgs, len(loads)
    c_bytes = 64 * bn * (4 if out_fp32 else 2)  # one expect-tx for a warpgroup's two C boxes
    assert re.search(expect_tx_ptx(c_bytes), ptx), c_bytes
    assert not re.search(r"ld\.global(?!\.nc)", ptx), "C still read from global memory"
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"register spills: {usage}"
    assert kernel.metadata.shared <= H200.smem_per_block


def test_plan_stages_only_a_c_tma_can_read():
    """The launch plan passes ``c_desc`` / ``C_TMA`` for a row-major C of D's dtype and falls back to the
    global-load epilogue (same tile) for a transposed C, a C of another dtype, a C whose base TMA cannot address, or a
    broadcast C (row stride 0)."""
    import torch

    desc, cfg = _staged(256, 512, 256)
    assert cfg.c_tma
    a, b = torch.zeros(256, 256, dtype=torch.bfloat16), torch.zeros(512, 256, dtype=torch.bfloat16)
    d = torch.zeros(256, 512, dtype=torch.bfloat16)

    def meta(c):
        return dispatch_bf16._build_plan(desc, cfg, a, b, d, c)[2]

    m = meta(torch.zeros(256, 512, dtype=torch.bfloat16))
    assert m.get("C_TMA") is True and list(m["c_desc"].block_shape) == [64, cfg.block_n] and "c1_desc" not in m
    split = dispatch_bf16._build_plan(desc, make_bf16_config(desc, H200, 128, 144), a, b, d,
                                      torch.zeros(256, 512, dtype=torch.bfloat16))[2]
    assert [list(split[k].block_shape) for k in ("c_desc", "c1_desc")] == [[64, 128], [64, 16]]
    assert "C_TMA" not in meta(torch.zeros(512, 256, dtype=torch.bfloat16).T)
    assert "C_TMA" not in meta(torch.zeros(256, 512, dtype=torch.float32))
    assert "C_TMA" not in meta(torch.zeros(256 * 512 + 1, dtype=torch.bfloat16)[1:].view(256, 512))
    assert "C_TMA" not in meta(torch.zeros(1, 512, dtype=torch.bfloat16).expand(256, 512))  # broadcast: row stride 0
    assert "C_TMA" not in meta(None)


def test_api_describes_c_like_d():
    """bf16_gemm_nt's plan marks a C of D's dtype with unit column stride (``GemmDesc.c_like_d``), which the rules
    read; a C of another dtype, a transposed C or a broadcast row is not."""
    import torch

    from finegemm.api.gemm import _plan_bf16

    a, b = torch.zeros(8, 16, dtype=torch.bfloat16), torch.zeros(32, 16, dtype=torch.bfloat16)
    d = torch.zeros(8, 32, dtype=torch.bfloat16)
    assert _plan_bf16(a, b, d, torch.zeros(8, 32, dtype=torch.bfloat16)).desc.c_like_d
    assert not _plan_bf16(a, b, d, torch.zeros(8, 32, dtype=torch.float32)).desc.c_like_d
    assert not _plan_bf16(a, b, d, torch.zeros(32, 8, dtype=torch.bfloat16).T).desc.c_like_d
    assert not _plan_bf16(a, b, d, torch.zeros(1, 32, dtype=torch.bfloat16).expand(8, 32)).desc.c_like_d
    assert not _plan_bf16(a, b, d, None).desc.c_like_d


# ------------------------------------------------ tiles whose width is not a power of two (BLOCK_N1)
@pytest.mark.parametrize("width,blocks", [(64, (64, 0)), (96, (64, 32)), (144, (128, 16)), (160, (128, 32)),
                                          (192, (128, 64)), (256, (256, 0)), (48, (32, 16))])
def test_column_blocks(width, blocks):
    from finegemm.jit.heuristics_sm90 import column_blocks

    assert column_blocks(width) == blocks


@pytest.mark.parametrize("width", [112, 200, 24, 0, 100])
def test_column_blocks_reject_three_blocks_and_odd_widths(width):
    with pytest.raises(ValueError, match="BLOCK_N"):
        make_bf16_config(_desc(4096, 576, 7168), H200, 128, width)


def test_split_n_tiles_only_where_predicted_clearly_faster(monkeypatch):
    """The rules take a width that is not a power of two only where the model predicts it 10 % faster than the best
    power-of-two tile: 4096x576x7168 (128 tiles of 128x144, one round of 132 SMs, against 110 of 192x128) and
    4096x2112x7168 (128x192, 352 tiles at the fastest measured rate: H100 177.1 us against 185.1 for 192x128), with
    or without C (a C not D's layout: not staged), and 4096x24576x1536 and 4096x32768x512 with such a C, where the
    128x256 tile cannot take it and 192x128 was the pick (without C 128x192 / 192x128 measured 424.0 / 430.1 and
    232.7 / 229.7 us: a tie); every other DeepSeek-V3 shape keeps its power-of-two pick."""
    expected = {((4096, 576, 7168), c): (128, 144, 1, False) for c in (False, True)}
    expected.update({((4096, 2112, 7168), c): (128, 192, 1, False) for c in (False, True)})
    expected[((4096, 24576, 1536), True)] = expected[((4096, 32768, 512), True)] = (128, 192, 1, False)
    monkeypatch.setattr(heuristics_sm90, "BF16_SPLIT_N_WIDTHS", ())  # the power-of-two picks
    shapes = DSV3 + [(4096, 576, 7168), (1, 2112, 7168), (128, 576, 7168)]
    before = {(s, c): get_sm90_bf16_config(_desc(*s, with_c=c), H200) for s in shapes for c in (False, True)}
    assert all(cfg.column_blocks[1] == 0 for cfg in before.values())
    monkeypatch.undo()
    for (shape, c), old in before.items():
        new = get_sm90_bf16_config(_desc(*shape, with_c=c), H200)
        if (shape, c) in expected:
            assert (new.block_m, new.block_n, new.split_k, new.c_tma) == expected[(shape, c)], (shape, c)
        else:
            assert new == old, (shape, c)


SPLIT_N_VARIANTS = [(_desc(4096, 576, 7168), 128, 144, 1), (_desc(4096, 576, 7168, "nn"), 128, 160, 1),
                    (_desc(4096, 2112, 7168), 192, 192, 1), (_desc(64, 2112, 7168), 64, 96, 4),
                    (_desc(4096, 576, 7168, out_fp32=True, with_c=True), 128, 160, 1),
                    (_desc(4096, 584, 7168, with_c=True), 128, 144, 1)]


@pytest.mark.parametrize("desc,bm,bn,split", SPLIT_N_VARIANTS,
                         ids=[f"{d.m}x{d.n}-{bm}x{bn}s{s}{'-nn' if not d.b_k_major else ''}{'-c' if d.with_c else ''}"
                              for d, bm, bn, s in SPLIT_N_VARIANTS])
def test_split_n_compiles(desc, bm, bn, split):
    """Both column blocks' WGMMAs, B's two boxes in one stage's byte count, both D boxes stored per warpgroup, the
    two accumulators' waits pipelined (wait_group 2, no serialized WGMMA), no spills, within the shared memory."""
    from finegemm.kernels.sm90.compile_check import wgmma_serialization

    cfg = make_bf16_config(desc, H200, bm, bn, split)
    bn0, bn1 = cfg.column_blocks
    kernel = compile_bf16_variant(desc, cfg, "fp32" if desc.out_fp32 else "bf16")
    ptx = assert_ptx_contains(kernel, BF16_PTX_MUST_CONTAIN)
    for width in (bn0, bn1):
        assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{width}k16\.f32\.bf16\.bf16", ptx), width
    stage = (bm + bn) * 64 * 2  # A (one box a warpgroup) + B's two boxes, bf16
    assert re.search(expect_tx_ptx(stage), ptx), stage
    stores = re.findall(TMA_STORE_PTX, ptx)
    assert len(stores) >= 2 * (bm // 64), len(stores)
    assert "wgmma.wait_group.sync.aligned 2;" in ptx
    assert wgmma_serialization(kernel) == []
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"register spills: {usage}"
    assert kernel.metadata.shared <= H200.smem_per_block


def test_plan_of_a_split_n_tile():
    """The launch plan of a 128x144 tile: B's [128, 64] and [16, 64] boxes, D's [64, 128] and [64, 16] boxes, the
    kernel's BLOCK_N 128 and BLOCK_N1 16, and a grid of 144-wide column tiles (4096 x 576: 32 x 4 = 128 CTAs)."""
    import torch

    desc = _desc(4096, 576, 7168)
    cfg = make_bf16_config(desc, H200, 128, 144)
    a, b = torch.zeros(4096, 7168, dtype=torch.bfloat16), torch.zeros(576, 7168, dtype=torch.bfloat16)
    grid, args, meta, reduce = dispatch_bf16._build_plan(desc, cfg, a, b, torch.zeros(4096, 576, dtype=torch.bfloat16),
                                                         None)
    assert grid == (128,) and reduce is None
    assert list(args[1].block_shape) == [128, 64] and list(meta["b1_desc"].block_shape) == [16, 64]
    assert list(args[2].block_shape) == [64, 128] and list(meta["d1_desc"].block_shape) == [64, 16]
    assert (meta["BLOCK_N"], meta["BLOCK_N1"]) == (128, 16) and "C_TMA" not in meta


def test_d_halves_rule():
    """D is staged in halves where the whole D tile leaves at most BF16_D_HALVES_MAX_STAGES ring stages and the half
    tile frees one more, on power-of-two widths without C staged in D's buffer."""
    cfg = make_bf16_config(_desc(4096, 4096, 7168), H200, 128, 256)
    assert cfg.d_halves and cfg.stages == 4  # 3 beside the whole 64 KB D tile
    f32 = make_bf16_config(_desc(4096, 129280, 7168, out_fp32=True), H200, 128, 256)
    assert f32.d_halves and f32.stages == 3  # 2 beside the whole 128 KB FP32 tile
    long_k = make_bf16_config(_desc(4096, 7168, 16384), H200, 128, 256)  # bf16 D: whole beyond K = 8192
    assert not long_k.d_halves and long_k.stages == 3
    assert make_bf16_config(_desc(4096, 7168, 16384, out_fp32=True), H200, 128, 256).d_halves
    # 4-stage tiles beyond 256 rows up to K = 2048 (333x7168x2048: 28.3 -> 25.4 us on the H100), not at K = 7168 nor
    # at a single 64-row tile (64x24576x1536 at 64x256: 42.4 / 43.4)
    short = make_bf16_config(_desc(333, 7168, 2048), H200, 192, 128)
    assert short.d_halves and short.stages == 5
    assert not make_bf16_config(_desc(4096, 2112, 7168), H200, 192, 128).d_halves
    assert not make_bf16_config(_desc(64, 24576, 1536), H200, 64, 256).d_halves
    assert not make_bf16_config(_desc(4096, 4096, 7168, out_fp32=True), H200, 128, 128).d_halves  # 5 stages
    assert not make_bf16_config(_desc(4096, 4096, 7168), H200, 64, 256).d_halves  # 4 stages
    assert not make_bf16_config(_desc(4096, 4096, 7168), H200, 128, 128).d_halves  # 6 stages either way
    assert not make_bf16_config(_desc(4096, 576, 7168), H200, 128, 144).d_halves  # two column blocks
    staged = make_bf16_config(dataclasses.replace(_desc(4096, 4096, 7168, with_c=True), c_like_d=True), H200,
                              128, 256)
    assert staged.c_tma and not staged.d_halves


# FP32 out without C at 192 rows (D in halves, 4 stages): each the fastest of 128x128 / 64x128 / 128x256 in halves
# / 192x128 on the H100 (results/sm90-bf16-f32-out-192-h100-2026-12-06-a7697cb.json)
# (4096x576 and 8192x576 moved on to 128x144, below)
FP32_192_PICKS = [(4096, 2112, 7168), (8192, 2112, 7168), (333, 24576, 1536), (333, 7168, 16384), (333, 7168, 2048)]
# FP32 out without C at widths that are not powers of two (at most 128 rows, >= 4 stages beside the FP32 D tile):
# (M, N, K) -> (BLOCK_M, BLOCK_N), each faster than the pick before on the H100
# (results/sm90-bf16-f32-out-split-widths{,-2}-h100-2026-12-06-*.json) but 333x4096x7168 (52.2 / 51.0 us)
FP32_SPLIT_N_PICKS = {(4096, 576, 7168): (128, 144), (8192, 576, 7168): (128, 144), (577, 4096, 7168): (128, 160),
                      (577, 7168, 2048): (128, 144), (1024, 2112, 7168): (128, 144), (192, 7168, 2048): (64, 192),
                      (333, 4096, 7168): (64, 192), (192, 24576, 1536): (64, 144), (192, 7168, 16384): (64, 192),
                      (577, 2112, 7168): (64, 192), (577, 7168, 16384): (128, 144), (2048, 2112, 7168): (128, 144),
                      (2048, 576, 7168): (64, 144)}


@pytest.mark.parametrize("shape", list(FP32_SPLIT_N_PICKS), ids=[f"{m}x{n}x{k}" for m, n, k in FP32_SPLIT_N_PICKS])
def test_fp32_out_split_width_picks(shape):
    cfg = get_sm90_bf16_config(_desc(*shape, out_fp32=True), H200)
    assert (cfg.block_m, cfg.block_n) == FP32_SPLIT_N_PICKS[shape] and cfg.stages >= 4 and not cfg.d_halves, cfg
    with_c = dataclasses.replace(_desc(*shape, out_fp32=True, with_c=True), c_like_d=True)
    assert get_sm90_bf16_config(with_c, H200).block_n in (64, 128, 256)
    # 128x192 leaves 3 stages beside an FP32 D tile: never an FP32 pick (4096x2112x7168 235.1 us against 196.2)
    assert get_sm90_bf16_config(_desc(4096, 2112, 7168, out_fp32=True), H200).block_n != 192


@pytest.mark.parametrize("m,n,k", FP32_192_PICKS)
def test_fp32_out_takes_192_rows_in_halves(m, n, k):
    cfg = get_sm90_bf16_config(_desc(m, n, k, out_fp32=True), H200)
    assert (cfg.block_m, cfg.block_n, cfg.stages, cfg.d_halves) == (192, 128, 4, True), cfg
    with_c = dataclasses.replace(_desc(m, n, k, out_fp32=True, with_c=True), c_like_d=True)
    assert get_sm90_bf16_config(with_c, H200).block_m < 192


@pytest.mark.parametrize("m", [577, 4096])
def test_fp32_out_takes_wide_tile_in_halves(m):
    """FP32 out without C (the LM head at prefill) takes 128x256 with D in halves at 3 stages (H100: 4096x129280x7168
    10348.6 us against 12901.4 at 128x128); with C (an FP32 C staged beside it spills) no 256-wide FP32 tile."""
    cfg = get_sm90_bf16_config(_desc(m, 129280, 7168, out_fp32=True), H200)
    assert (cfg.block_m, cfg.block_n, cfg.stages, cfg.d_halves) == (128, 256, 3, True), cfg
    with_c = dataclasses.replace(_desc(m, 129280, 7168, out_fp32=True, with_c=True), c_like_d=True)
    assert get_sm90_bf16_config(with_c, H200).block_n < 256


D_HALVES_VARIANTS = [((4096, 4096, 7168), 128, 256, 1, False), ((4096, 2112, 7168), 192, 128, 1, False),
                     ((4096, 4096, 7168), 64, 256, 1, False), ((128, 4096, 7168), 128, 256, 2, False),
                     ((4096, 129280, 7168), 128, 256, 1, True)]


@pytest.mark.parametrize("shape,bm,bn,split,out_fp32", D_HALVES_VARIANTS,
                         ids=[f"{v[1]}x{v[2]}s{v[3]}{'-f32' if v[4] else ''}" for v in D_HALVES_VARIANTS])
def test_d_halves_compiles(shape, bm, bn, split, out_fp32, monkeypatch):
    """A half-wide D box and buffer: two TMA stores a warpgroup a tile, the accumulator's halves stored without a
    layout conversion (no ld.shared), no spills, within the shared memory (also tiles whose whole D leaves more
    stages than the rule stages in halves)."""
    monkeypatch.setattr(heuristics_sm90, "BF16_D_HALVES_MAX_STAGES", 16)
    desc = _desc(*shape, out_fp32=out_fp32)
    cfg = make_bf16_config(desc, H200, bm, bn, split)
    assert cfg.d_halves
    kernel = compile_bf16_variant(desc, cfg, "bf16")
    ptx = assert_ptx_contains(kernel, BF16_PTX_MUST_CONTAIN)
    assert len(re.findall(TMA_STORE_PTX, ptx)) == 2 * (bm // 64)
    assert not re.search(r"ld\.shared\.(?!b8)", ptx)  # (b8: the partitions' dispatch)
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert kernel.metadata.shared <= H200.smem_per_block
