"""sm90 m-grouped BF16 GEMMs on the CPU: the config rules, the support rule, backend routing, and sm_90
compiles of the grouped kernel (GROUPING 1 contiguous, 2 masked) for every config the rules pick for the
grouped suite's shapes plus the forms the GPU tests force (PTX has bf16 WGMMA, TMA load/store, mbarriers,
setmaxnreg; no spills; masked partial waves stored from registers)."""

from __future__ import annotations

import re

import pytest

from finegemm.api.dispatch import BackendError, _choose
from finegemm.jit.device import H200, DeviceFacts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import Sm90Bf16Config, bf16_stage_bytes
from finegemm.jit.heuristics_sm90_bf16_grouped import (
    get_sm90_bf16_grouped_config,
    grouped_candidates,
    grouped_estimate_us,
    grouped_hbm_tbps,
    grouped_units,
    make_bf16_grouped_config,
)
from finegemm.kernels.sm90 import dispatch_bf16_grouped
from finegemm.kernels.sm90.compile_check import (
    BF16_PTX_MUST_CONTAIN,
    assert_fast_path_kernel,
    assert_group_walk_carried,
    compile_bf16_grouped_variant,
    lowered_arg_names,
)

NK = [(4096, 7168), (7168, 2048)]
CONTIGUOUS = [(4, 8192), (8, 4096)]
MASKED = [(1, 1024), (2, 512), (4, 256), (16, 64)]


def _contig(m, n, k, g, a_k_major=True, b_k_major=True, expected_m=None):
    return GemmDesc("bf16", m, n, k, a_k_major, b_k_major, layout="m_grouped_contiguous", num_groups=g,
                    expected_m=expected_m)


def _masked(max_m, n, k, g, expected_m, b_k_major=True, a_k_major=True):
    return GemmDesc("bf16", max_m, n, k, a_k_major, b_k_major, layout="m_grouped_masked", num_groups=g,
                    expected_m=expected_m)


def _issue_descs():
    out = []
    for n, k in NK:
        for g, mpg in CONTIGUOUS:
            out.append(_contig(g * mpg, n, k, g))
        for g, m in MASKED:
            out.append(_masked(m, n, k, g, m))
    return out


# ------------------------------------------------------------------------------------ heuristic
@pytest.mark.parametrize("desc", _issue_descs(), ids=lambda d: f"{d.layout[10:]}-g{d.num_groups}-m{d.m}-n{d.n}-k{d.k}")
def test_config_is_legal_and_fits(desc):
    cfg = get_sm90_bf16_grouped_config(desc, H200)
    assert isinstance(cfg, Sm90Bf16Config)
    assert cfg.block_m in (64, 128) and 128 % cfg.block_m == 0 and cfg.block_n in (64, 128, 256)
    assert cfg.split_k == 1 and cfg.block_k == 64 and cfg.stages >= 2
    assert cfg.stages * bf16_stage_bytes(cfg.block_m, cfg.block_n) + cfg.block_m * cfg.block_n * 2 \
        <= H200.smem_per_block
    # the pick is the cheapest candidate of the model
    best = min(grouped_estimate_us(desc, H200, *t) for t in grouped_candidates(desc))
    assert grouped_estimate_us(desc, H200, cfg.block_m, cfg.block_n) == best


def test_large_problems_take_the_widest_tile():
    for n, k in NK:
        for g, mpg in CONTIGUOUS:
            cfg = get_sm90_bf16_grouped_config(_contig(g * mpg, n, k, g), H200)
            assert (cfg.block_m, cfg.block_n, cfg.stages, cfg.group_m) == (128, 256, 3, 16)
        # one group of 1024 rows: 128 tiles of 128x256 fill 128 of 132 SMs in one round, B in L2
        cfg = get_sm90_bf16_grouped_config(_masked(1024, n, k, 1, 1024), H200)
        assert (cfg.block_m, cfg.block_n) == (128, 256)


@pytest.mark.parametrize("g,m,n,k,tile", [
    # the measured best after the masked walk fix (H100, benchmarks/results/
    # bf16-grouped-sweep-masked-h100-2026-12-05-f03df06.json), as before it on the H200 except 4 x 256 x (4096, 7168)
    (16, 64, 4096, 7168, (64, 64)), (16, 64, 7168, 2048, (64, 64)),
    (4, 256, 4096, 7168, (128, 128)),  # 108.8 us against 117.2 for 64x128 (the pick under the walk bug)
    (2, 512, 4096, 7168, (128, 128)), (2, 512, 7168, 2048, (128, 128)),
    # 66.6 us against 66.0 for 64x128 on the H100; the H200 under the bug: 53.8 against 61.9
    (4, 256, 7168, 2048, (128, 128)),
])
def test_memory_bound_masked_shapes_take_the_swept_tiles(g, m, n, k, tile):
    cfg = get_sm90_bf16_grouped_config(_masked(m, n, k, g, m), H200)
    assert (cfg.block_m, cfg.block_n) == tile
    assert cfg.stages == (8 if tile != (128, 128) else 6) and cfg.group_m == 8


def test_memory_rate_falls_with_tile_width_and_long_k():
    # the 64-row and 128x256 rates are the H200's under the masked walk bug, 128x128 the H100's after the fix
    rates = [grouped_hbm_tbps(64, bn, 7168) for bn in (64, 128, 256)]
    assert rates == sorted(rates, reverse=True)
    assert grouped_hbm_tbps(128, 256, 7168) < grouped_hbm_tbps(128, 128, 7168)
    assert grouped_hbm_tbps(128, 128, 2048) > grouped_hbm_tbps(128, 128, 7168)


def test_units_count_only_valid_masked_tiles():
    assert grouped_units(_masked(1024, 4096, 7168, 16, 64), 64, 256) == 16 * 1 * 16
    assert grouped_units(_masked(1024, 4096, 7168, 16, 65), 64, 256) == 16 * 2 * 16
    assert grouped_units(_contig(32768, 7168, 2048, 4), 128, 256) == 256 * 28


def test_estimate_counts_every_groups_weights():
    # 16 experts' B (940 MB at 4096 x 7168) bound the 16 x 64 decode far above its FLOPs
    many = grouped_estimate_us(_masked(64, 4096, 7168, 16, 64), H200, 64, 256)
    one = grouped_estimate_us(_masked(1024, 4096, 7168, 1, 1024), H200, 64, 256)
    assert many > 2 * one
    assert many >= 16 * 4096 * 7168 * 2 / 4000e3


def test_make_config_rejects_illegal_tiles():
    with pytest.raises(ValueError, match="BLOCK_M"):
        make_bf16_grouped_config(H200, 256, 128)
    with pytest.raises(ValueError, match="BLOCK_N"):
        make_bf16_grouped_config(H200, 128, 96)
    small = DeviceFacts("small", 66, 101376, (9, 0))
    assert make_bf16_grouped_config(small, 64, 128).num_sms == 66
    with pytest.raises(ValueError, match="m-grouped"):
        get_sm90_bf16_grouped_config(GemmDesc("bf16", 128, 128, 128), H200)
    with pytest.raises(ValueError, match="bf16"):
        get_sm90_bf16_grouped_config(GemmDesc("fp8_1d2d", 128, 128, 128, layout="m_grouped_masked"), H200)


# ------------------------------------------------------------------------------------ support rule
def test_supported_forms():
    for desc in _issue_descs():
        assert dispatch_bf16_grouped.unsupported_reason(desc, H200) is None
    assert dispatch_bf16_grouped.unsupported_reason(_contig(32768, 4096, 7168, 4, b_k_major=False), H200) is None
    assert dispatch_bf16_grouped.unsupported_reason(_contig(32768, 4096, 7168, 4, a_k_major=False), H200) is None
    assert dispatch_bf16_grouped.unsupported_reason(_masked(64, 4096, 7168, 4, 64, b_k_major=False), H200) is None


@pytest.mark.parametrize("desc,fragment", [
    (_contig(256, 256, 100, 2), "K % 8"),
    (_contig(256, 36, 256, 2), "N % 8"),
    (_contig(256, 256, 200, 2, b_k_major=False), "multiple of 64"),
    (_contig(100, 256, 256, 2, a_k_major=False), "M % 8"),
    (_masked(64, 256, 256, 2, 64, a_k_major=False), "K-major A"),
    (GemmDesc("bf16", 256, 256, 256, out_fp32=True, layout="m_grouped_masked", num_groups=2), "BF16 without C"),
    (GemmDesc("fp8_1d2d", 256, 256, 256, layout="m_grouped_masked", num_groups=2), "not a BF16"),
    (GemmDesc("bf16", 256, 256, 256), "not m-grouped"),
])
def test_unsupported_reasons(desc, fragment):
    reason = dispatch_bf16_grouped.unsupported_reason(desc, H200)
    assert reason is not None and fragment in reason, reason


def test_backend_choice_routes_bf16_grouped_to_sm90():
    for desc in (_contig(32768, 4096, 7168, 4), _masked(64, 7168, 2048, 16, 64)):
        backend, cfg = _choose(desc, H200, "auto")
        assert backend == "sm90" and cfg == get_sm90_bf16_grouped_config(desc, H200)
        assert _choose(desc, H200, "portable")[0] == "portable"
    bad = _contig(256, 256, 100, 2)
    assert _choose(bad, H200, "auto")[0] == "portable"
    with pytest.raises(BackendError, match="K % 8"):
        _choose(bad, H200, "sm90")
    a100 = DeviceFacts("NVIDIA A100", 108, 166912, (8, 0))
    assert _choose(_contig(32768, 4096, 7168, 4), a100, "auto")[0] == "portable"


def test_kernel_meta_names_every_grouped_constexpr():
    meta = dispatch_bf16_grouped.kernel_meta(_contig(32768, 4096, 7168, 4, b_k_major=False),
                                             make_bf16_grouped_config(H200, 128, 256), use_psum=True)
    assert meta["GROUPING"] == 1 and meta["USE_PSUM"] and meta["B_MN_MAJOR"] and not meta["A_MN_MAJOR"]
    assert (meta["N"], meta["K"], meta["NUM_GROUPS"], meta["ALIGN"]) == (4096, 7168, 4, 128)
    meta = dispatch_bf16_grouped.kernel_meta(_masked(192, 4096, 7168, 8, 64), make_bf16_grouped_config(H200, 64, 128))
    assert meta["GROUPING"] == 2 and meta["GROUP_ROWS"] == 192 and not meta["USE_PSUM"]


def test_b_view_is_in_place_for_nt_and_nn():
    import torch

    b = torch.empty(3, 40, 24, dtype=torch.bfloat16)  # [G, N, K]
    v, copied = dispatch_bf16_grouped.b_view(b)
    assert not copied and v.shape == (120, 24) and v.data_ptr() == b.data_ptr()
    b_nn = torch.empty(3, 24, 40, dtype=torch.bfloat16)  # [G, K, N] as the nn form passes it, transposed
    v, copied = dispatch_bf16_grouped.b_view(b_nn.transpose(1, 2))
    assert not copied and v.shape == (72, 40) and v.data_ptr() == b_nn.data_ptr()
    v, copied = dispatch_bf16_grouped.b_view(torch.empty(3, 40, 32, dtype=torch.bfloat16)[:, :, :24])
    assert copied and v.shape == (120, 24) and v.is_contiguous()


# ------------------------------------------------------------------------------------ sm_90 compiles
def _variants():
    seen = {}

    def add(desc, cfg, psum=False):
        # the kernel specializes on the constexprs only: N, K, G, majors, layout form, config
        key = (desc.layout, desc.n, desc.k, desc.num_groups, desc.m if desc.layout == "m_grouped_masked" else 0,
               desc.a_k_major, desc.b_k_major, cfg, psum)
        seen.setdefault(key, (desc, cfg, psum))

    for desc in _issue_descs():
        add(desc, get_sm90_bf16_grouped_config(desc, H200), False)
    d = _contig(32768, 4096, 7168, 4)
    add(d, get_sm90_bf16_grouped_config(d, H200), True)  # PSUM form
    d = _contig(32768, 7168, 2048, 8, b_k_major=False)  # nn form
    add(d, get_sm90_bf16_grouped_config(d, H200))
    d = _contig(4096, 4096, 7168, 4, a_k_major=False)  # M-major A
    add(d, make_bf16_grouped_config(H200, 64, 128))
    d = _masked(192, 4096, 7168, 8, 64, b_k_major=False)
    add(d, make_bf16_grouped_config(H200, 64, 64))
    return list(seen.values())


VARIANTS = _variants()


@pytest.mark.parametrize("desc,cfg,psum", VARIANTS, ids=[
    f"{d.layout[10:]}-g{d.num_groups}-m{d.m}-n{d.n}-k{d.k}-{'k' if d.a_k_major else 'm'}{'k' if d.b_k_major else 'n'}"
    f"-{c.block_m}x{c.block_n}st{c.stages}{'-psum' if p else ''}" for d, c, p in VARIANTS])
def test_grouped_bf16_compiles_with_required_instructions(desc, cfg, psum):
    kernel = compile_bf16_grouped_variant(desc, cfg, psum)
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block, BF16_PTX_MUST_CONTAIN)
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{cfg.block_n}k16\.f32\.bf16\.bf16", ptx)
    if desc.layout == "m_grouped_masked":
        # partial 64-row waves are stored from registers with a row mask, full ones by TMA
        assert "st.global" in ptx
        if desc.num_groups > 1:  # each group's walk starts after the groups before it
            assert_group_walk_carried(kernel)


def test_b_prefetch_variant():
    """``b_prefetch`` in the masked BF16 kernel: the prefetch on B's tensor map (its sixth lowered argument)."""
    import dataclasses

    d = _masked(256, 4096, 7168, 4, 256)
    kernel = compile_bf16_grouped_variant(d, dataclasses.replace(get_sm90_bf16_grouped_config(d, H200), b_prefetch=8))
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block, BF16_PTX_MUST_CONTAIN)
    assert "cp.async.bulk.prefetch.tensor.2d.L2.global.tile" in ptx and "bf16_grouped_gemm_kernel_param_5" in ptx
    assert lowered_arg_names(kernel)[5] == "b_desc"
