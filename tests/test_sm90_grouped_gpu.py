"""sm90 m-grouped FP8 GEMMs (contiguous, masked) on the H200 against the float64 references (``pytest -m gpu``).

Through the public API (which must route these cases to the sm90 kernel) and, for configs the heuristic
does not pick, through ``dispatch_grouped`` directly. Output poisoned with NaN first; calc_diff < 1e-3 on
the rows that have a group; contiguous padding rows exactly 0 (the documented contract); masked rows at
or past ``masked_m[g]`` still NaN (never written); a repeat run bitwise identical. Fresh random data.
"""

from __future__ import annotations

import pytest
import torch
from generators import capture_graph, contiguous_row_groups, random_group_rows, sm90_device

import finegemm
from finegemm.api.dispatch import BackendError, choose_backend
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90_grouped import make_grouped_config
from finegemm.quant import pack_ue8m0, per_block_cast_to_fp8, per_token_cast_to_fp8
from finegemm.reference import grouped as ref
from finegemm.reference.dense import calc_diff

pytestmark = pytest.mark.gpu
ALIGN = 128
BOUND = 1e-3


def _weights(g, n, k, dev, ue8m0):
    w = torch.randn(g, n, k, device=dev, dtype=torch.bfloat16)
    parts = [per_block_cast_to_fp8(w[i], use_ue8m0=ue8m0) for i in range(g)]
    b, sfb = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    return b, sfb


def _contiguous_inputs(rows, n, k, dev, ue8m0=False, psum=False):
    """Segments of ``rows[g]`` tokens each padded to 128; padding rows of ``a`` hold NaN (0x7F)."""
    row_groups, ends, m = contiguous_row_groups(rows, ALIGN)
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=ue8m0)
    pad = (row_groups < 0).to(dev)
    a.view(torch.uint8)[pad] = 0x7F
    b, sfb = _weights(len(rows), n, k, dev, ue8m0)
    layout = (torch.tensor(ends, dtype=torch.int32) if psum else row_groups).to(dev)
    return (a, sfa), (b, sfb), layout, row_groups.to(dev)


def _kernel_scales(sfa, sfb, ue8m0):
    """Scales in the required layout (what api/grouped.py hands the kernel)."""
    if ue8m0:
        return finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfa), pack_ue8m0(sfb).contiguous()
    return finegemm.get_mn_major_tma_aligned_tensor(sfa), sfb.contiguous()


def _check_contiguous(d, expected, row_groups):
    valid = row_groups >= 0
    assert not torch.isnan(d.float()).any(), "NaN left in d (rows not written, or padding read)"
    if bool(valid.any()):
        diff = calc_diff(d[valid], expected[valid])
        assert diff < BOUND, diff
    assert bool((d[~valid] == 0).all()), "padding rows of d must be 0"


def _run_contiguous(rows, n, k, psum=False, ue8m0=False, cfg=None):
    dev = sm90_device()
    a, b, layout, row_groups = _contiguous_inputs(rows, n, k, dev, ue8m0, psum)
    m = a[0].shape[0]
    outs = []
    for _ in range(2):
        d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        if cfg is None:
            packed = ue8m0
            desc = GemmDesc("fp8_1d2d", m, n, k, sf_packed=packed, layout="m_grouped_contiguous",
                            num_groups=len(rows))
            assert choose_backend(desc, dev)[0] == "sm90"
            pa = (a[0], finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(a[1])) if ue8m0 else a
            pb = (b[0], pack_ue8m0(b[1]).contiguous()) if ue8m0 else b
            finegemm.m_grouped_fp8_gemm_nt_contiguous(pa, pb, d, layout, use_psum_layout=psum)
        else:
            from finegemm.kernels.sm90 import dispatch_grouped
            desc = GemmDesc("fp8_1d2d", m, n, k, sf_packed=ue8m0, layout="m_grouped_contiguous", num_groups=len(rows))
            sfa_k, sfb_k = _kernel_scales(a[1], b[1], ue8m0)
            dispatch_grouped.m_grouped_fp8_1d2d_gemm_contiguous(desc, cfg, a[0], sfa_k, b[0], sfb_k, d, layout, psum)
        outs.append(d)
    torch.cuda.synchronize()
    expected = ref.m_grouped_fp8_gemm_nt_contiguous(a, b, layout, psum)
    _check_contiguous(outs[0], expected, row_groups)
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"


@pytest.mark.gpu_memory
@pytest.mark.parametrize("g,mpg,n,k", [(4, 8192, 4096, 7168), (8, 4096, 7168, 2048)])
def test_contiguous_uniform(g, mpg, n, k):
    _run_contiguous([mpg] * g, n, k)


@pytest.mark.gpu_memory
@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("n,k", [(4096, 7168), (7168, 2048)])
def test_contiguous_random_sizes(psum, n, k):
    _run_contiguous(random_group_rows(8, 1024, seed=n + k), n, k, psum=psum)


@pytest.mark.parametrize("psum", [False, True])
def test_contiguous_empty_groups_and_one_giant(psum):
    # empty first / middle / last groups, a 1-row group, one group with most of the tokens
    _run_contiguous([0, 300, 0, 1, 9000, 129, 0], 4096, 7168, psum=psum)


def test_contiguous_packed_ue8m0():
    _run_contiguous(random_group_rows(4, 2048, seed=1), 7168, 2048, ue8m0=True)


@pytest.mark.parametrize("bm,tma,pipe", [(64, False, False), (128, False, False), (64, True, False),
                                         (128, True, True), (64, True, True)])
def test_contiguous_other_configs(bm, tma, pipe):
    # with padding tiles (the 33-row group) that run no K block, also pipelined
    dev = sm90_device()
    cfg = make_grouped_config(device_facts(dev), bm, 128, tma, pipe_mma=pipe)
    _run_contiguous([700, 0, 1500, 33], 7168, 2048, psum=bm == 64, cfg=cfg)


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("n,k", [(7168, 2048), (4096, 7168)])
def test_contiguous_256_row_tiles_across_group_boundaries(psum, n, k):
    # segments of 768, 0, 1408, 128, 384 rows start at 0, 768, 768, 2176, 2304: the tile at 2048 holds two
    # groups (run twice, once per group's B), the last tile's second half starts past M (2688), padding rows
    # inside halves, an empty group
    dev = sm90_device()
    cfg = make_grouped_config(device_facts(dev), 256, 128, True)
    _run_contiguous([700, 0, 1400, 33, 257], n, k, psum=psum, cfg=cfg)


def test_contiguous_256_row_tiles_packed_ue8m0():
    dev = sm90_device()
    cfg = make_grouped_config(device_facts(dev), 256, 128, True)
    _run_contiguous([100, 1000, 300], 7168, 2048, ue8m0=True, cfg=cfg)  # the tile at 1024 holds two groups


# ---------------------------------------------------------------------------------------------
# masked
# ---------------------------------------------------------------------------------------------

def _masked_inputs(g, max_m, n, k, dev, ue8m0=False):
    x = torch.randn(g, max_m, k, device=dev, dtype=torch.bfloat16)
    parts = [per_token_cast_to_fp8(x[i], use_ue8m0=ue8m0) for i in range(g)]
    a, sfa = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    return (a, sfa), _weights(g, n, k, dev, ue8m0)


def _poison_rows(a, masked):
    """NaN (0x7F) in every row of ``a`` at or past ``masked[g]``: a kernel reading them into a result fails."""
    max_m = a.shape[1]
    for g, r in enumerate(ref.masked_rows(torch.tensor(masked), max_m)):
        a.view(torch.uint8)[g, r:] = 0x7F


def _check_masked(d, expected, masked):
    max_m = d.shape[1]
    for g, rows in enumerate(ref.masked_rows(torch.tensor(masked), max_m)):
        if rows:
            assert not torch.isnan(d[g, :rows].float()).any(), f"group {g}: NaN in valid rows"
            diff = calc_diff(d[g, :rows], expected[g, :rows])
            assert diff < BOUND, (g, diff)
        assert bool(torch.isnan(d[g, rows:].float()).all()), f"group {g}: rows >= {rows} were written"


def _masked_call(a, b, d, masked_m, expected_m, cfg=None, ue8m0=False):
    if cfg is None:
        finegemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)
        return
    from finegemm.kernels.sm90 import dispatch_grouped
    g, max_m, k = a[0].shape
    desc = GemmDesc("fp8_1d2d", max_m, b[0].shape[1], k, sf_packed=ue8m0, layout="m_grouped_masked", num_groups=g,
                    expected_m=expected_m)
    sfa_k, sfb_k = _kernel_scales(a[1], b[1], ue8m0)
    dispatch_grouped.m_grouped_fp8_1d2d_gemm_masked(desc, cfg, a[0], sfa_k, b[0], sfb_k, d, masked_m, expected_m)


def _run_masked(g, max_m, n, k, masked, expected_m, cfg=None, ue8m0=False):
    dev = sm90_device()
    a, b = _masked_inputs(g, max_m, n, k, dev, ue8m0)
    _poison_rows(a[0], masked)
    if cfg is None:
        desc = GemmDesc("fp8_1d2d", max_m, n, k, sf_packed=ue8m0, layout="m_grouped_masked", num_groups=g,
                        expected_m=expected_m)
        assert choose_backend(desc, dev)[0] == "sm90"
    if ue8m0:
        a_call = (a[0], finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(a[1])) if cfg is None else a
        b_call = (b[0], pack_ue8m0(b[1]).contiguous()) if cfg is None else b
    else:
        a_call, b_call = a, b
    masked_m = torch.tensor(masked, dtype=torch.int32, device=dev)
    outs = []
    for _ in range(2):
        d = torch.full((g, max_m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        _masked_call(a_call, b_call, d, masked_m, expected_m, cfg, ue8m0)
        outs.append(d)
    torch.cuda.synchronize()
    _check_masked(outs[0], ref.m_grouped_fp8_gemm_nt_masked(a, b, masked_m), masked)
    assert torch.equal(outs[0].nan_to_num(7.0), outs[1].nan_to_num(7.0)), "repeated runs differ"


@pytest.mark.parametrize("n,k", [(7168, 2048), (4096, 7168)])
def test_masked_decode_16x64(n, k):
    _run_masked(16, 64, n, k, [64] * 16, 64)


@pytest.mark.parametrize("n,k", [(7168, 2048), (4096, 7168)])
def test_masked_half_empty(n, k):
    _run_masked(16, 64, n, k, [64 if i % 2 == 0 else 0 for i in range(16)], 64)


@pytest.mark.parametrize("expected_m", [64, 192])
def test_masked_varied(expected_m):
    # 0, 1, a partial wave, exactly max_m, above max_m (clamped), negative (0)
    masked = [0, 1, 63, 65, 130, 192, 500, -3]
    _run_masked(8, 192, 4096, 7168, masked, expected_m)


@pytest.mark.parametrize("g,max_m,masked,expected_m", [(4, 256, [256, 17, 0, 200], 256),
                                                      (8, 64, [64, 0, 33, 64, 1, 64, 63, 64], 64)])
def test_masked_packed_ue8m0(g, max_m, masked, expected_m):
    _run_masked(g, max_m, 7168, 2048, masked, expected_m, ue8m0=True)


@pytest.mark.parametrize("bm,bn,pipe", [(64, 128, False), (64, 128, True), (128, 128, True), (128, 64, True),
                                         (64, 32, True)])
def test_masked_other_config(bm, bn, pipe):
    dev = sm90_device()
    cfg = make_grouped_config(device_facts(dev), bm, bn, True, pipe_mma=pipe)
    _run_masked(4, 200, 7168, 2048, [200, 77, 0, 129], 64, cfg=cfg)


@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("n,k", [(7168, 2048), (4096, 7168)])
def test_masked_256_row_tiles(n, k, ue8m0):
    # 256-row tiles: a full tile, a partial second wave and a wave past the valid rows in one tile (300 -> 256 +
    # 44), a group of 1 row, an empty one, masked_m past max_m (clamped); packed scales from global memory
    dev = sm90_device()
    cfg = make_grouped_config(device_facts(dev), 256, 128, not ue8m0)
    _run_masked(5, 320, n, k, [300, 1, 0, 256, 999], 256, cfg=cfg, ue8m0=ue8m0)


def test_masked_cuda_graph_replay_with_new_masked_m():
    dev = sm90_device()
    g, max_m, n, k = 8, 128, 4096, 7168
    a, b = _masked_inputs(g, max_m, n, k, dev)
    masked_m = torch.full((g,), max_m, dtype=torch.int32, device=dev)
    d = torch.full((g, max_m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    graph = capture_graph(lambda: finegemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 64))
    for masked in ([64] * 8, [0, 128, 1, 64, 0, 100, 300, 5], [0] * 8, [128] * 8):
        masked_m.copy_(torch.tensor(masked, dtype=torch.int32))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check_masked(d, ref.m_grouped_fp8_gemm_nt_masked(a, b, masked_m), masked)


def test_forced_sm90_on_unsupported_grouped_case_raises(monkeypatch):
    dev = sm90_device()
    monkeypatch.setenv("FINEGEMM_BACKEND", "sm90")
    # K % 8 != 0: no sm90 kernel (BF16 m-grouped runs sm90 otherwise, dispatch_bf16_grouped)
    a = torch.randn(256, 100, device=dev, dtype=torch.bfloat16)
    b = torch.randn(2, 256, 100, device=dev, dtype=torch.bfloat16)
    d = torch.empty(256, 256, device=dev, dtype=torch.bfloat16)
    layout = torch.zeros(256, dtype=torch.int32, device=dev)
    with pytest.raises(BackendError, match="bf16"):
        finegemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout)
