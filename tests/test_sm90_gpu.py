"""sm90 Gluon FP8 GEMM on the H200 against the float64 reference (``pytest -m gpu``).

Output poisoned with NaN first; calc_diff < 1e-3; a second run must be bitwise identical
(split-K reduces in a fixed order). Skipped without CUDA (tests/conftest.py) and off sm_90.
"""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device

import finegemm
from finegemm import reference
from finegemm.quant import pack_ue8m0, per_block_cast_to_fp8, per_token_cast_to_fp8

pytestmark = pytest.mark.gpu

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
CASES = [(m, n, k) for m in (64, 128, 4096) for n, k in NK]
CASES += [(m, n, k) for m in (1, 77, 333, 4095) for n in (2112, 576) for k in (128, 7168)]


def _sm90():
    sm90_device()
    from finegemm.kernels.sm90 import dispatch
    return dispatch


def _operands(m, n, k, recipe, packed):
    """Random FP8 operands: (a, sfa, sfa as the kernel reads it, b, sfb, sfb as the kernel reads it)."""
    dev = torch.device("cuda")
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=packed)
    b, sfb = per_block_cast_to_fp8(w, use_ue8m0=packed) if recipe == "1d2d" else per_token_cast_to_fp8(w, packed)
    if packed:
        sfa_k = finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfa)
        sfb_k = (pack_ue8m0(sfb).contiguous() if recipe == "1d2d"
                 else finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfb))
    else:
        sfa_k = finegemm.get_mn_major_tma_aligned_tensor(sfa)
        sfb_k = sfb.contiguous() if recipe == "1d2d" else finegemm.get_mn_major_tma_aligned_tensor(sfb)
    return a, sfa, sfa_k, b, sfb, sfb_k


def _run(m, n, k, recipe, packed, with_c, out_dtype, cfg=None):
    dispatch = _sm90()
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc

    dev = torch.device("cuda")
    a, sfa, sfa_k, b, sfb, sfb_k = _operands(m, n, k, recipe, packed)
    c = torch.randn(m, n, device=dev, dtype=torch.float32) if with_c else None
    desc = GemmDesc("fp8_1d2d" if recipe == "1d2d" else "fp8_1d1d", m, n, k, True, True,
                    out_dtype == torch.float32, with_c, packed)
    assert dispatch.unsupported_reason(desc, device_facts(dev)) is None
    cfg = cfg or dispatch.get_config(desc, device_facts(dev))
    outs = []
    for _ in range(2):
        d = torch.full((m, n), float("nan"), device=dev, dtype=out_dtype)
        dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c, recipe=(1, 128, 128) if recipe == "1d2d" else (1, 1, 128))
    diff = reference.calc_diff(outs[0], ref)
    assert diff < 1e-3, (m, n, k, cfg, diff)
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"


@pytest.mark.parametrize("m,n,k", CASES)
def test_1d2d_bf16(m, n, k):
    _run(m, n, k, "1d2d", False, False, torch.bfloat16)


@pytest.mark.parametrize("m,n,k", [(64, 2112, 7168), (333, 2112, 7168), (4096, 7168, 2048)])
def test_1d2d_packed_ue8m0(m, n, k):
    _run(m, n, k, "1d2d", True, False, torch.bfloat16)


@pytest.mark.parametrize("m,n,k", [(77, 2112, 7168), (333, 576, 7168), (2112, 4096, 7168)])
@pytest.mark.parametrize("packed", [False, True])
def test_1d1d_fp32_accumulate(m, n, k, packed):
    _run(m, n, k, "1d1d", packed, True, torch.float32)


def test_public_api_routes_to_sm90():
    _sm90()
    dev = torch.device("cuda")
    x = torch.randn(128, 7168, device=dev, dtype=torch.bfloat16)
    w = torch.randn(2112, 7168, device=dev, dtype=torch.bfloat16)
    a, b = per_token_cast_to_fp8(x), per_block_cast_to_fp8(w)
    d = torch.full((128, 2112), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt(a, b, d)
    assert reference.calc_diff(d, reference.fp8_gemm_nt(a, b)) < 1e-3


def _run_cfg(m, n, k, packed, with_c, recipe="1d2d", pipe_mma=None, **overrides):
    """As :func:`_run`, but with a forced config (e7bde22 tiles and scale paths; recipe 1d1d: FP32 out)."""
    import dataclasses

    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import make_config

    _sm90()
    out_fp32 = with_c or recipe == "1d1d"
    desc = GemmDesc(f"fp8_{recipe}", m, n, k, True, True, out_fp32, with_c, packed)
    bm, bn, split = overrides.pop("tile", (256, 128, 1))
    cfg = make_config(desc, device_facts(torch.device("cuda")), bm, bn, split, **overrides)
    if bm == 256:
        pipe_mma = False
    if pipe_mma is not None:
        cfg = dataclasses.replace(cfg, pipe_mma=pipe_mma)
    if "sfb_tma" in overrides:  # the per-channel ring scales must really be on (make_config drops them off 1d1d)
        assert cfg.sfb_tma, cfg
    _run(m, n, k, recipe, packed, with_c, torch.float32 if out_fp32 else torch.bfloat16, cfg=cfg)


V3_CASES = [(4095, 2112, 7168, False, False), (333, 576, 128, False, False), (77, 2112, 7168, True, False),
            (4096, 7168, 2048, False, True)]


@pytest.mark.parametrize("m,n,k,packed,with_c", V3_CASES)
@pytest.mark.parametrize("variant", [{}, {"small_epi": True}, {"sfa_tma": True}], ids=["plain", "small_epi", "sfa_tma"])
def test_block_m_256(m, n, k, packed, with_c, variant):
    _run_cfg(m, n, k, packed, with_c, **variant)


@pytest.mark.parametrize("m,n,k,packed,with_c", V3_CASES)
@pytest.mark.parametrize("variant", [{}, {"sfa_tma": True}], ids=["plain", "sfa_tma"])
def test_block_m_192(m, n, k, packed, with_c, variant):
    """Three math warpgroups (one 64-row wave each; A and its ring scales in three 64-row TMA boxes a stage):
    M not a multiple of 192, packed scales, FP32 out with C."""
    _run_cfg(m, n, k, packed, with_c, tile=(192, 128, 1), **variant)


# (m, n, k, packed, with C, tile, scales by TMA): tiles of two column blocks (BLOCK_N1), incl. the last tile's second
# block wholly past N (1000 = 6 x 160 + 40), M not a multiple of BLOCK_M, packed UE8M0, FP32 out with C, scales from
# global memory
SPLIT_N_CASES = [(4096, 2112, 7168, False, False, (128, 192, 1), True),
                 (333, 1000, 1536, False, False, (128, 160, 1), True),
                 (128, 7168, 2048, False, False, (64, 96, 1), True),
                 (77, 2112, 7168, True, False, (64, 144, 1), True),
                 (4095, 4096, 1536, False, True, (128, 160, 1), True),
                 (4096, 2112, 2048, False, False, (128, 192, 1), False),
                 # pipelined (64x96 has the registers): K blocks in pairs, and an odd count (9) with its single tail
                 (64, 24576, 1536, False, False, (64, 96, 1), True),
                 (77, 2112, 1152, True, True, (64, 96, 1), True)]


@pytest.mark.parametrize("m,n,k,packed,with_c,tile,sfa_tma", SPLIT_N_CASES,
                         ids=[f"{v[0]}x{v[1]}x{v[2]}-{v[5][0]}x{v[5][1]}{'-ue8m0' if v[3] else ''}"
                              f"{'-c' if v[4] else ''}{'' if v[6] else '-global-sfa'}" for v in SPLIT_N_CASES])
def test_split_n_tiles(m, n, k, packed, with_c, tile, sfa_tma):
    """Recipe (1, 128, 128) tiles BLOCK_N + BLOCK_N1 wide (two WGMMAs, two B boxes and two D boxes; the first block
    straddles two 128-column scale blocks on every other tile; 64x96 pipelined): right against the reference, the
    same on a repeat."""
    _run_cfg(m, n, k, packed, with_c, tile=tile, sfa_tma=sfa_tma)


@pytest.mark.parametrize("tile", [(128, 128, 1), (64, 64, 4)])
@pytest.mark.parametrize("packed", [False, True])
def test_sfa_tma_small_tiles(tile, packed):
    _run_cfg(333 if tile[0] == 128 else 64, 2112, 7168, packed, False, tile=tile, sfa_tma=True)


SFB_TMA_CASES = [(333, 576, 7168), (4095, 2112, 512), (2112, 4096, 1536)]


@pytest.mark.parametrize("m,n,k", SFB_TMA_CASES)
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("variant", [
    dict(tile=(128, 128, 1)), dict(tile=(128, 128, 1), sfa_tma=True, pipe_mma=True),
    dict(tile=(256, 128, 1), small_epi=True), dict(tile=(256, 128, 1), small_epi=True, sfa_tma=True),
    dict(tile=(64, 128, 4), sfa_tma=True), dict(tile=(128, 64, 1), sfa_tma=True, pipe_mma=True)],
    ids=["128", "128-sfa-pipe", "256-se", "256-se-sfa", "64-split4-sfa", "128x64-sfa-pipe"])
def test_1d1d_sfb_tma(m, n, k, packed, variant):
    """Recipe (1, 1, 128) with the per-channel RHS scales riding in the ring (``sfb_tma``), C added."""
    variant = dict(variant)
    if packed and variant["tile"][0] == 256:
        variant.pop("sfa_tma", None)  # packed per-token scales stay on global loads at 256 rows
    _run_cfg(m, n, k, packed, True, recipe="1d1d", sfb_tma=True, **variant)


C_TMA_VARIANTS = [dict(tile=(128, 128, 1), sfa_tma=True, sfb_tma=True, pipe_mma=True),
                  dict(tile=(256, 128, 1), small_epi=True, sfa_tma=True, sfb_tma=True),
                  dict(tile=(128, 64, 1), sfa_tma=True, sfb_tma=True, pipe_mma=True),
                  dict(tile=(64, 128, 1), sfa_tma=True),
                  dict(tile=(128, 128, 1), sfa_tma=True, sfb_tma=True, pipe_mma=True, c_tma_late=True),
                  dict(tile=(64, 128, 1), sfa_tma=True, sfb_tma=True, pipe_mma=True, c_tma_late=True)]


def _wgrad_case(m, n, k, variant):
    """Recipe (1, 1, 128) operands with FP32 C, and the config ``variant`` (a ``C_TMA_VARIANTS`` entry) names:
    (dispatch, (a, sfa), (b, sfb), sfa_k, sfb_k, c, desc, config)."""
    import dataclasses

    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import make_config

    dispatch = _sm90()
    dev = torch.device("cuda")
    a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
    b, sfb = per_token_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16), use_ue8m0=False)
    sfa_k, sfb_k = finegemm.get_mn_major_tma_aligned_tensor(sfa), finegemm.get_mn_major_tma_aligned_tensor(sfb)
    c = torch.randn(m, n, device=dev, dtype=torch.float32)
    desc = GemmDesc("fp8_1d1d", m, n, k, True, True, True, True, False)
    variant = dict(variant)
    pipe = variant.pop("pipe_mma", False)
    late = variant.pop("c_tma_late", False)
    bm, bn, split = variant.pop("tile")
    config = dataclasses.replace(make_config(desc, device_facts(dev), bm, bn, split, **variant), pipe_mma=pipe,
                                 c_tma_late=late)
    return dispatch, (a, sfa), (b, sfb), sfa_k, sfb_k, c, desc, config


@pytest.mark.parametrize("m,n,k", [(333, 576, 7168), (4095, 2112, 512), (77, 2112, 1536), (2112, 4096, 2048)])
@pytest.mark.parametrize("variant", C_TMA_VARIANTS,
                         ids=["128-pipe", "256-se", "128x64-pipe", "64", "128-pipe-late", "64-pipe-late"])
@pytest.mark.parametrize("in_place", [False, True])
def test_1d1d_c_by_tma(m, n, k, variant, in_place):
    """C staged by TMA in the D buffer (``c_tma``): right against the reference, bitwise the result of the
    epilogue's global C loads, with C a separate tensor or D itself (the weight-gradient accumulate)."""
    import dataclasses

    dispatch, (a, sfa), (b, sfb), sfa_k, sfb_k, c, desc, base = _wgrad_case(m, n, k, variant)
    outs = {}
    for c_tma in (False, True):
        cfg = dataclasses.replace(base, c_tma=c_tma)
        if in_place:
            d = c.clone()
            dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, d)
        else:
            d = torch.full((m, n), float("nan"), device=c.device, dtype=torch.float32)
            dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, c)
        outs[c_tma] = d
    torch.cuda.synchronize()
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c, recipe=(1, 1, 128))
    assert reference.calc_diff(outs[True], ref) < 1e-3, (m, n, k, base)
    assert torch.equal(outs[True], outs[False]), "C by TMA differs from C by global loads"


@pytest.mark.parametrize("m,n,k", [(333, 576, 7168), (4095, 2112, 512), (2112, 4096, 2048), (4096, 4096, 1024)])
@pytest.mark.parametrize("variant", C_TMA_VARIANTS,
                         ids=["128-pipe", "256-se", "128x64-pipe", "64", "128-pipe-late", "64-pipe-late"])
def test_1d1d_in_place_accumulate_by_tma_reduce(m, n, k, variant, monkeypatch):
    """C is D (``d += a @ b``, the weight-gradient accumulate): the tile is added into D by TMA reduce-add
    (``D_REDUCE``, no C read in the kernel). Right against the reference, bitwise the separate-C call (C read by
    the kernel, D stored), rows past M and D outside the tile untouched."""
    dispatch, (a, sfa), (b, sfb), sfa_k, sfb_k, c, desc, cfg = _wgrad_case(m, n, k, variant)
    _any_tile_reduces(dispatch, monkeypatch)  # every tile form, not only the dense calls' 128-wide ones
    _check_in_place(dispatch, desc, cfg, (a, sfa, sfa_k), (b, sfb, sfb_k), c, runs=1)


def _any_tile_reduces(dispatch, monkeypatch):
    """Every dense call whose C is D takes ``D_REDUCE`` wherever it can run, as the groups of a k-grouped call do
    (:func:`dispatch.d_reduce_ok`'s ``k_group``)."""
    d_reduce_ok = dispatch.d_reduce_ok
    monkeypatch.setattr(dispatch, "d_reduce_ok", lambda desc, cfg, c, d, k_group=False: d_reduce_ok(desc, cfg, c, d,
                                                                                                     True))


def _check_in_place(dispatch, desc, cfg, a3, b3, c, runs):
    """``cfg`` run with C = D (``D_REDUCE``), ``runs`` times, on a D that is a view inside a bigger buffer: right
    against the reference, bitwise the separate-C call (C read, D stored) and each other, and no element of the
    buffer outside the view touched. ``a3`` / ``b3``: (FP8 values, the reference's scales, the kernel's scales)."""
    (a, sfa, sfa_k), (b, sfb, sfb_k) = a3, b3
    m, n = c.shape
    assert dispatch.d_reduce_ok(desc, cfg, c, c)
    big = torch.randn(m + 3, n + 16, device=c.device, dtype=torch.float32)
    d_in = big[1:m + 1, 8:n + 8]
    inner = torch.zeros_like(big, dtype=torch.bool)
    inner[1:m + 1, 8:n + 8] = True
    outs = []
    for _ in range(runs):
        d_in.copy_(c)
        outside = big.clone()
        dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d_in, d_in)
        torch.cuda.synchronize()
        assert torch.equal(big[~inner], outside[~inner]), "the reduce wrote outside D"
        outs.append(d_in.clone())
    d_sep = torch.full((m, n), float("nan"), device=c.device, dtype=torch.float32)
    dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d_sep, c)
    torch.cuda.synchronize()
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c, recipe=(1, 1, 128))
    assert reference.calc_diff(outs[0], ref) < 1e-3, (desc, cfg)
    assert torch.equal(outs[0], d_sep), "the TMA reduce-add differs from C read and D stored"
    assert all(torch.equal(out, outs[0]) for out in outs[1:]), "repeated launches differ"


SPLITK_FUSED_CASES = [  # (m, n, k, recipe, packed, with_c, (bm, bn, split))
    (64, 2112, 7168, "1d2d", False, False, (64, 128, 4)),
    (77, 2112, 7168, "1d2d", False, False, (128, 64, 4)),
    (128, 4096, 7168, "1d2d", True, False, (128, 128, 2)),
    (1, 576, 7168, "1d2d", False, False, (64, 64, 7)),
    (333, 576, 7168, "1d1d", False, True, (128, 64, 4)),
    (64, 2112, 1536, "1d2d", False, True, (64, 128, 3)),
]


def _split_case(m, n, k, recipe, packed, with_c):
    """A split-K case's operands (as :func:`_operands`), its C (random FP32 or None), its output dtype (FP32 for
    recipe (1, 1, 128) or with C) and its GemmDesc."""
    from finegemm.jit.heuristics import GemmDesc

    operands = _operands(m, n, k, recipe, packed)
    out_fp32 = recipe == "1d1d" or with_c
    c = torch.randn(m, n, device="cuda", dtype=torch.float32) if with_c else None
    desc = GemmDesc(f"fp8_{recipe}", m, n, k, True, True, out_fp32, with_c, packed)
    return operands, c, torch.float32 if out_fp32 else torch.bfloat16, desc


@pytest.mark.parametrize("m,n,k,recipe,packed,with_c,tile", SPLITK_FUSED_CASES)
def test_splitk_fused_matches_reference_and_the_reduce_launch(m, n, k, recipe, packed, with_c, tile):
    """Split-K summed inside the GEMM (``splitk_fused``): right against the reference, bitwise the result of
    the separate reduction launch (same split order), and repeated launches stay equal (the arrival counters
    are back at 0 after each launch)."""
    import dataclasses

    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics_sm90 import make_config

    dispatch = _sm90()
    dev = torch.device("cuda")
    (a, sfa, sfa_k, b, sfb, sfb_k), c, out_dtype, desc = _split_case(m, n, k, recipe, packed, with_c)
    bm, bn, split = tile
    base = dataclasses.replace(make_config(desc, device_facts(dev), bm, bn, split, sfa_tma=True), pipe_mma=True)
    outs = []
    for fused in (False, True, True, True):
        d = torch.full((m, n), float("nan"), device=dev, dtype=out_dtype)
        dispatch.fp8_gemm(desc, dataclasses.replace(base, splitk_fused=fused), a, sfa_k, b, sfb_k, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c, recipe=(1, 128, 128) if recipe == "1d2d" else (1, 1, 128))
    assert reference.calc_diff(outs[1], ref) < 1e-3, (m, n, k, base)
    assert torch.equal(outs[1], outs[0]), "fused split-K differs from the reduction launch"
    assert torch.equal(outs[2], outs[1]) and torch.equal(outs[3], outs[1]), "repeated fused launches differ"


SPLIT_TAIL_CASES = [  # (m, n, k, recipe, with_c, (bm, bn, split), pipe_mma, num_sms): 544, 544, 288, 27 tiles
    (4096, 2112, 7168, "1d2d", False, (128, 128, 8), False, 132),
    (2112, 4096, 7168, "1d1d", True, (128, 128, 8), True, 132),
    (576, 4096, 7168, "1d1d", True, (64, 128, 4), True, 132),
    (333, 576, 7168, "1d2d", False, (128, 64, 4), True, 16),
    (333, 576, 1536, "1d1d", True, (128, 64, 3), True, 16),
]


@pytest.mark.parametrize("m,n,k,recipe,with_c,tile,pipe,num_sms", SPLIT_TAIL_CASES)
@pytest.mark.parametrize("in_place", [False, True])
def test_split_tail(m, n, k, recipe, with_c, tile, pipe, num_sms, in_place):
    """Only the tiles of the grid's last partial round split K (``split_tail``): right against the reference,
    C (by TMA for the whole tiles where the config stages it) in a separate tensor or in D itself, several
    split units a CTA where the grid is small, repeated launches equal."""
    import dataclasses

    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics_sm90 import make_config

    if in_place and not with_c:
        pytest.skip("no C to accumulate into")
    dispatch = _sm90()
    dev = torch.device("cuda")
    (a, sfa, sfa_k, b, sfb, sfb_k), c, out_dtype, desc = _split_case(m, n, k, recipe, False, with_c)
    bm, bn, split = tile
    cfg = dataclasses.replace(
        make_config(desc, device_facts(dev), bm, bn, split, sfa_tma=True, sfb_tma=recipe == "1d1d"),
        pipe_mma=pipe, splitk_fused=True, split_tail=True, c_tma=with_c, num_sms=num_sms)
    outs = []
    for _ in range(3):
        if in_place:
            d = c.clone()
            dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, d)
        else:
            d = torch.full((m, n), float("nan"), device=dev, dtype=out_dtype)
            dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c, recipe=(1, 128, 128) if recipe == "1d2d" else (1, 1, 128))
    assert reference.calc_diff(outs[0], ref) < 1e-3, (m, n, k, cfg)
    assert torch.equal(outs[1], outs[0]) and torch.equal(outs[2], outs[0]), "repeated launches differ"


IN_PLACE_SPLIT_CASES = [  # (m, n, k, (bm, bn, split), split_tail, num_sms): the rules' 576 pick, a 128-row tail,
    # several split units a CTA on a 16-CTA grid, every tile split (no tail)
    (576, 4096, 7168, (64, 128, 4), True, 132),
    (2112, 4096, 7168, (128, 128, 8), True, 132),
    (333, 576, 1536, (128, 64, 3), True, 16),
    (333, 576, 7168, (128, 64, 4), False, 132),
]


@pytest.mark.parametrize("m,n,k,tile,tail,num_sms", IN_PLACE_SPLIT_CASES)
def test_1d1d_in_place_split_k_by_tma_reduce(m, n, k, tile, tail, num_sms, monkeypatch):
    """C is D with split-K summed in the kernel: whole tiles and each split tile's sum (by the split that arrives
    last) are added into D by TMA reduce-add. Right against the reference, bitwise the separate-C call (the same
    sum plus C in one FP32 add), D outside its view untouched, repeated launches equal (counters back at 0)."""
    import dataclasses

    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics_sm90 import make_config

    dispatch = _sm90()
    dev = torch.device("cuda")
    (a, sfa, sfa_k, b, sfb, sfb_k), c, _, desc = _split_case(m, n, k, "1d1d", False, True)
    bm, bn, split = tile
    cfg = dataclasses.replace(make_config(desc, device_facts(dev), bm, bn, split, sfa_tma=True, sfb_tma=True),
                              pipe_mma=True, splitk_fused=True, split_tail=tail, num_sms=num_sms)
    _any_tile_reduces(dispatch, monkeypatch)  # 128x64 too, not only the dense calls' 128-wide tiles
    _check_in_place(dispatch, desc, cfg, (a, sfa, sfa_k), (b, sfb, sfb_k), c, runs=2)


@pytest.mark.parametrize("m,n,k,split", [(64, 7168, 16384, None), (128, 2112, 7168, None), (64, 2112, 7168, 4),
                                         (333, 576, 7168, None)])
def test_b_prefetch_changes_nothing(m, n, k, split):
    """``b_prefetch`` (B's tile 8 K blocks ahead into L2): right against the reference and bitwise the result
    without it (a prefetch moves no data the kernel reads; near the end of K it prefetches nothing)."""
    import dataclasses

    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc

    dispatch = _sm90()
    dev = torch.device("cuda")
    desc = GemmDesc("fp8_1d2d", m, n, k)
    base = dispatch.get_config(desc, device_facts(dev))
    if split is not None:
        base = dataclasses.replace(base, split_k=split)
    _run(m, n, k, "1d2d", False, False, torch.bfloat16, dataclasses.replace(base, b_prefetch=8))
    a, sfa, sfa_k, b, sfb, sfb_k = _operands(m, n, k, "1d2d", False)
    outs = []
    for cfg in (base, dataclasses.replace(base, b_prefetch=8)):
        d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)
        outs.append(d)
    torch.cuda.synchronize()
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))


@pytest.mark.parametrize("layout", ["nn", "tn", "tt"])
@pytest.mark.parametrize("m,n,k", [(4096, 7168, 2048), (333, 2112, 7168), (64, 576, 7168)])
def test_mn_major_layouts_through_the_transposing_copy(monkeypatch, layout, m, n, k):
    """``MN_MAJOR_VIA_TRANSPOSE``: fp8_gemm_nn / tn / tt take the sm90 path (an MN-major operand copied K-major
    first) and match the float64 reference and the nt call on the same data bit for bit; repeated calls (the
    recording) equal."""
    from finegemm.api import dispatch as api_dispatch
    from finegemm.api import plan_cache

    dispatch = _sm90()
    monkeypatch.setattr(dispatch, "MN_MAJOR_VIA_TRANSPOSE", True)
    plan_cache.clear_all()
    api_dispatch._choose.cache_clear()
    dev = torch.device("cuda")
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    (a, sfa), (b, sfb) = per_token_cast_to_fp8(x), per_block_cast_to_fp8(w)
    nt = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt((a, sfa), (b, sfb), nt)
    a_arg = (a.t().contiguous(), sfa.t()) if layout[0] == "t" else (a, sfa)  # [K, M] for a "t" A
    b_arg = (b.t().contiguous(), sfb.t()) if layout[1] == "n" else (b, sfb)  # [K, N] for an "n" B
    fn = getattr(finegemm, f"fp8_gemm_{layout}")
    outs = []
    for _ in range(2):
        d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        fn(a_arg, b_arg, d)
        outs.append(d)
    torch.cuda.synchronize()
    from finegemm.jit.heuristics import GemmDesc

    desc = GemmDesc("fp8_1d2d", m, n, k, a_k_major=layout[0] == "n", b_k_major=layout[1] == "t")
    assert api_dispatch.choose_backend(desc, dev)[0] == "sm90"
    assert reference.calc_diff(outs[0], reference.fp8_gemm_nt((a, sfa), (b, sfb))) < 1e-3
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0].view(torch.int16), nt.view(torch.int16))
    plan_cache.clear_all()
    api_dispatch._choose.cache_clear()
