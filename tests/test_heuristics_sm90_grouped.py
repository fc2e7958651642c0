"""The sm90 m-grouped config heuristic and support rule: pure functions of desc and device facts (CPU)."""

from __future__ import annotations

import dataclasses

import pytest

from finegemm.api.dispatch import BackendError, _choose
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90_grouped import get_sm90_grouped_config, make_grouped_config
from finegemm.kernels.sm90 import dispatch_grouped, layouts


def _contig(m, n, k, g, **kw):
    return GemmDesc("fp8_1d2d", m, n, k, layout="m_grouped_contiguous", num_groups=g, **kw)


def _masked(max_m, n, k, g, expected_m, **kw):
    return GemmDesc("fp8_1d2d", max_m, n, k, layout="m_grouped_masked", num_groups=g, expected_m=expected_m, **kw)


@pytest.mark.parametrize("desc", [_contig(4 * 8192, 4096, 7168, 4), _contig(8 * 4096, 7168, 2048, 8),
                                  _masked(1024, 7168, 2048, 16, 64), _masked(1024, 4096, 7168, 32, 256),
                                  _masked(64, 576, 7168, 1, 1), _contig(256, 64, 128, 2)])
def test_configs_are_legal_for_the_grouped_kernel(desc):
    cfg = get_sm90_grouped_config(desc, H200)
    # fp8_gemm_kernel's grouped static asserts (256-row tiles: contiguous, as two 128-row halves, one partial)
    assert cfg.block_m in (64, 128, 256) and (cfg.block_m < 256 or not cfg.pipe_mma)
    assert cfg.split_k == 1 and not cfg.small_epi
    assert cfg.block_n % 8 == 0 and cfg.block_n <= 128
    assert 2 <= cfg.stages <= layouts.max_stages(cfg.block_m, cfg.block_n, False, H200.smem_per_block, False,
                                                 cfg.sfa_tma)
    assert cfg.num_sms == H200.num_sms


def test_tile_rules():
    # contiguous: 256-row tiles from 512 rows a group, when they fill the SMs about as well as 128-row ones
    big = get_sm90_grouped_config(_contig(32768, 4096, 7168, 4), H200)
    assert (big.block_m, big.block_n, big.sfa_tma, big.pipe_mma, big.stages) == (256, 128, True, False, 3)
    assert get_sm90_grouped_config(_contig(32768, 4096, 7168, 4, sf_packed=True), H200).sfa_tma
    assert get_sm90_grouped_config(_contig(8 * 384, 4096, 7168, 8), H200).block_m == 128  # 384 rows a group
    assert get_sm90_grouped_config(_contig(32768, 4096, 7168, 4, expected_m=256), H200).block_m == 128
    # 2 x 2 tiles of 128 rows leave SMs idle: 64-row tiles
    assert get_sm90_grouped_config(_contig(256, 256, 128, 2), H200).block_m == 64
    decode = get_sm90_grouped_config(_masked(1024, 7168, 2048, 16, 64), H200)
    assert (decode.block_m, decode.block_n, decode.pipe_mma, decode.sfa_tma) == (64, 64, True, True)
    assert decode.stages == 13  # the shared memory of 64x64 stages beside the D tile
    assert not get_sm90_grouped_config(_contig(32768, 4096, 7168, 4), H200).pipe_mma
    # 256-row masked tiles from 256 rows a group when all groups' 256-row tiles fill ~a wave; packed scales then
    # from global memory
    for g, m, n, k in ((4, 256, 4096, 7168), (2, 512, 4096, 7168), (4, 256, 7168, 2048), (2, 512, 7168, 2048),
                       (1, 1024, 4096, 7168), (16, 512, 7168, 2048)):
        cfg = get_sm90_grouped_config(_masked(1024, n, k, g, m), H200)
        assert (cfg.block_m, cfg.block_n, cfg.pipe_mma, cfg.sfa_tma) == (256, 128, False, True), (g, m, n, k)
    assert not get_sm90_grouped_config(_masked(1024, 4096, 7168, 1, 1024, sf_packed=True), H200).sfa_tma
    # too few 256-row tiles to fill the SMs (1 x 256 x 4096: 32): K >= 4096 64x128 pipelined, else 128x128
    mid = get_sm90_grouped_config(_masked(256, 4096, 7168, 1, 256), H200)
    assert (mid.block_m, mid.block_n, mid.pipe_mma) == (64, 128, True)
    assert get_sm90_grouped_config(_masked(256, 7168, 2048, 1, 256), H200).block_m == 128
    # 65-255 rows a group: K >= 4096 64x128 pipelined, else 128x128 plain
    mid = get_sm90_grouped_config(_masked(256, 4096, 7168, 8, 128), H200)
    assert (mid.block_m, mid.block_n, mid.pipe_mma) == (64, 128, True)
    small = get_sm90_grouped_config(_masked(1024, 7168, 2048, 8, 192), H200)
    assert (small.block_m, small.pipe_mma) == (128, False)
    assert get_sm90_grouped_config(_masked(256, 64, 2048, 4, 256), H200).block_n == 64
    few = dataclasses.replace(H200, num_sms=8)
    assert get_sm90_grouped_config(_contig(32768, 4096, 7168, 4), few).num_sms == 8


def test_make_grouped_config_rejects_pipelined_256_rows():
    with pytest.raises(ValueError, match="BLOCK_M"):
        make_grouped_config(H200, 192, 128, False)
    with pytest.raises(ValueError, match="one WGMMA partial"):
        make_grouped_config(H200, 256, 128, True, pipe_mma=True)
    assert make_grouped_config(H200, 256, 128, True).block_m == 256
    with pytest.raises(ValueError, match="m-grouped"):
        get_sm90_grouped_config(GemmDesc("fp8_1d2d", 128, 128, 128), H200)


def test_support_rule():
    assert dispatch_grouped.unsupported_reason(_contig(32768, 4096, 7168, 4), H200) is None
    assert dispatch_grouped.unsupported_reason(_masked(64, 7168, 2048, 16, 64), H200) is None
    bf16 = GemmDesc("bf16", 256, 256, 256, layout="m_grouped_contiguous", num_groups=2)
    assert "bf16" in dispatch_grouped.unsupported_reason(bf16, H200)
    assert "K-major" in dispatch_grouped.unsupported_reason(_contig(256, 256, 256, 2, a_k_major=False), H200)
    assert "multiple of 128" in dispatch_grouped.unsupported_reason(_contig(256, 256, 200, 2), H200)
    assert "16-byte" in dispatch_grouped.unsupported_reason(_contig(256, 36, 256, 2), H200)


def test_backend_choice_routes_grouped_layouts():
    backend, cfg = _choose(_contig(32768, 4096, 7168, 4), H200, "auto")
    assert backend == "sm90" and cfg == get_sm90_grouped_config(_contig(32768, 4096, 7168, 4), H200)
    assert _choose(_masked(64, 7168, 2048, 16, 64), H200, "auto")[0] == "sm90"
    # a BF16 case the sm90 BF16 grouped kernel (dispatch_bf16_grouped) declines too: K % 8 != 0
    bf16 = GemmDesc("bf16", 256, 256, 100, layout="m_grouped_masked", num_groups=2, expected_m=64)
    assert _choose(bf16, H200, "auto")[0] == "portable"
    with pytest.raises(BackendError, match="FINEGEMM_BACKEND=sm90.*bf16"):
        _choose(bf16, H200, "sm90")


def test_grouped_constexprs_follow_the_scale_layout():
    c = dispatch_grouped.grouped_constexprs(_contig(32768, 4096, 7168, 4), use_psum=True)
    assert c == dict(GROUPING=1, NUM_GROUPS=4, GROUP_ROWS=0, SFK_ROWS=0, SFA_STRIDE_G=0,
                     SFB_STRIDE_G=32 * 56, USE_PSUM=True, ALIGN=128)
    m = dispatch_grouped.grouped_constexprs(_masked(62, 7168, 2048, 16, 64, sf_packed=True))
    # 16 K blocks -> 4 packed words; max_m 62 padded to 64 (16 bytes)
    assert m["GROUPING"] == 2 and m["GROUP_ROWS"] == 62 and m["SFK_ROWS"] == 4
    assert m["SFA_STRIDE_G"] == 4 * 64 and m["SFB_STRIDE_G"] == 56 * 4


def test_unpacked_b_is_launched_not_recorded(monkeypatch):
    """A B whose groups are not one packed [G * N, K] block is copied per call; a recording would keep
    the copy's pointer after it is freed, so such calls must launch normally every time."""
    import torch

    calls = []
    monkeypatch.setattr(dispatch_grouped, "_contiguous_plan", lambda *args: ((1,), (), {}))
    monkeypatch.setattr(dispatch_grouped.launcher, "launch_normally", lambda launches: calls.append("normal"))
    class Recording:  # launcher.Recording's interface: replayable, and a call that replays
        replayable = True

        def __call__(self):
            return True

    monkeypatch.setattr(dispatch_grouped.launcher, "record", lambda launches: calls.append("record") or Recording())
    monkeypatch.setattr(dispatch_grouped, "_recordings", {})
    desc = GemmDesc("fp8_1d2d", 256, 128, 256, layout="m_grouped_contiguous", num_groups=2)
    cfg = get_sm90_grouped_config(desc, H200)
    a, sfa = torch.zeros(256, 256), torch.zeros(256, 2)
    packed = torch.zeros(2, 128, 256)
    unpacked = torch.zeros(2, 256, 128).transpose(1, 2)  # [G, N, K] with K strided
    sfb, d, layout = torch.zeros(2, 1, 2), torch.zeros(256, 128), torch.zeros(256, dtype=torch.int32)
    for _ in range(2):
        dispatch_grouped.m_grouped_fp8_1d2d_gemm_contiguous(desc, cfg, a, sfa, unpacked, sfb, d, layout, False)
    assert calls == ["normal", "normal"] and not dispatch_grouped._recordings
    dispatch_grouped.m_grouped_fp8_1d2d_gemm_contiguous(desc, cfg, a, sfa, packed, sfb, d, layout, False)
    assert calls[-1] == "record" and len(dispatch_grouped._recordings) == 1


def test_256_row_plans_use_256_row_boxes():
    """The launch plans (CPU tensors) of the 256-row picks: A and the ring scales in 256-row TMA boxes, D staged in
    64-row boxes, one partial (no PIPE_MMA), the persistent grid capped at the SMs; contiguous and masked."""
    import torch

    import finegemm

    g, mpg, n, k = 4, 1024, 1024, 1024
    desc = _contig(g * mpg, n, k, g)
    cfg = get_sm90_grouped_config(desc, H200)
    assert cfg.block_m == 256
    a = torch.zeros(g * mpg, k, dtype=torch.float8_e4m3fn)
    sfa = finegemm.get_mn_major_tma_aligned_tensor(torch.ones(g * mpg, k // 128))
    b, sfb = torch.zeros(g, n, k, dtype=torch.float8_e4m3fn), torch.ones(g, n // 128, k // 128)
    d, layout = torch.zeros(g * mpg, n, dtype=torch.bfloat16), torch.zeros(g * mpg, dtype=torch.int32)
    grid, args, meta = dispatch_grouped._contiguous_plan(desc, cfg, a, sfa, b, sfb, d, layout, False)
    assert list(args[0].block_shape) == [256, 128] and list(args[-1].block_shape) == [1, 256]
    assert list(args[2].block_shape) == [64, 128] and grid == (128,)  # 16 x 8 tiles
    assert meta["BLOCK_M"] == 256 and not meta["PIPE_MMA"] and meta["SFA_TMA"] and meta["GROUPING"] == 1
    masked = _masked(mpg, n, k, g, mpg)
    mcfg = get_sm90_grouped_config(masked, H200)
    assert mcfg.block_m == 256
    cols, m_aligned = k // 128, mpg
    sfa3 = torch.ones(g * cols * m_aligned).as_strided((g, mpg, cols), (cols * m_aligned, 1, m_aligned))
    a3, d3 = a.view(g, mpg, k), d.view(g, mpg, n)
    masked_m = torch.full((g,), mpg, dtype=torch.int32)
    grid, args, meta = dispatch_grouped._masked_plan(masked, mcfg, a3, sfa3, b, sfb, d3, masked_m)
    assert list(args[0].block_shape) == [256, 128] and list(args[-1].block_shape) == [1, 256]
    assert grid == (128,) and meta["BLOCK_M"] == 256 and meta["GROUPING"] == 2 and not meta["PIPE_MMA"]
