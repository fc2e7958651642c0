"""sm90 m-grouped BF16 GEMMs (contiguous nt/nn, masked) on the H200 against the float64 references (``pytest -m gpu``).

Through the public API, which must route these cases to the sm90 kernel (asserted), and, for configs the
rules do not pick, through ``dispatch_bf16_grouped`` directly. ``d`` poisoned with NaN first; rows of
``a`` that no result may read (contiguous padding, masked rows at or past ``masked_m``) hold NaN too;
calc_diff < 1e-5 on the rows that have a group (the BF16 bound of DESIGN.md §1, as tests/test_sm90_bf16_gpu.py);
contiguous padding rows exactly 0; masked rows at or past ``masked_m[g]`` still NaN (never written); a
repeat run bitwise identical; CUDA-graph capture of the masked form replayed with new ``masked_m`` contents.
Fresh random data per test; shapes kept small enough for the float64 reference.
"""

from __future__ import annotations

import random

import pytest
import torch
from generators import capture_graph, contiguous_row_groups, random_group_rows, sm90_device

import finegemm
from finegemm.api.dispatch import choose_backend
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90_bf16_grouped import make_bf16_grouped_config
from finegemm.reference import grouped as ref
from finegemm.reference.dense import calc_diff

pytestmark = pytest.mark.gpu
ALIGN = 128
BOUND = 1e-5


# ---------------------------------------------------------------------------------------------
# contiguous
# ---------------------------------------------------------------------------------------------

def _contiguous_inputs(rows, n, k, dev, psum=False, nn=False, a_m_major=False, seed=0):
    """Segments of ``rows[g]`` tokens each padded to 128; padding rows of ``a`` hold NaN.

    Returns (a [M, K], b [G, N, K] or, nn, [G, K, N], grouped_layout, row groups [M])."""
    torch.manual_seed(seed)
    row_groups, ends, m = contiguous_row_groups(rows, ALIGN)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    a[(row_groups < 0).to(dev)] = float("nan")
    if a_m_major:
        a = a.T.contiguous().T  # same values, stride (1, M)
    shape = (len(rows), k, n) if nn else (len(rows), n, k)
    b = torch.randn(*shape, device=dev, dtype=torch.bfloat16)
    layout = (torch.tensor(ends, dtype=torch.int32) if psum else row_groups).to(dev)
    return a, b, layout, row_groups.to(dev)


def _check_contiguous(d, expected, row_groups):
    valid = row_groups >= 0
    assert not torch.isnan(d.float()).any(), "NaN left in d (rows not written, or padding read)"
    if bool(valid.any()):
        diff = calc_diff(d[valid], expected[valid])
        assert diff < BOUND, diff
    assert bool((d[~valid] == 0).all()), "padding rows of d must be 0"


def _run_contiguous(rows, n, k, psum=False, nn=False, a_m_major=False, cfg=None, seed=0):
    dev = sm90_device()
    a, b, layout, row_groups = _contiguous_inputs(rows, n, k, dev, psum, nn, a_m_major, seed)
    m = a.shape[0]
    b_nt = b.transpose(1, 2) if nn else b
    desc = GemmDesc("bf16", m, n, k, not a_m_major, not nn, layout="m_grouped_contiguous", num_groups=len(rows))
    if cfg is None:
        assert choose_backend(desc, dev)[0] == "sm90"
    outs = []
    for _ in range(2):
        d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        if cfg is not None:
            from finegemm.kernels.sm90 import dispatch_bf16_grouped
            dispatch_bf16_grouped.m_grouped_bf16_gemm_contiguous(desc, cfg, a, None, b_nt, None, d, layout, psum)
        elif nn:
            finegemm.m_grouped_bf16_gemm_nn_contiguous(a, b, d, layout, use_psum_layout=psum)
        else:
            finegemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=psum)
        outs.append(d)
    torch.cuda.synchronize()
    if nn:
        expected = ref.m_grouped_bf16_gemm_nn_contiguous(a.nan_to_num(0.0), b, layout, psum)
    else:
        expected = ref.m_grouped_bf16_gemm_nt_contiguous(a.nan_to_num(0.0), b, layout, psum)
    _check_contiguous(outs[0], expected, row_groups)
    assert torch.equal(outs[0], outs[1]), "repeated runs differ"


@pytest.mark.parametrize("nn", [False, True], ids=["nt", "nn"])
@pytest.mark.parametrize("psum", [False, True], ids=["ids", "psum"])
@pytest.mark.parametrize("n,k", [(4096, 7168), (7168, 2048)])
def test_contiguous_random_sizes(n, k, psum, nn):
    if nn and psum and k == 2048:
        pytest.skip("covered by the other nn cases (keeps the float64 reference time down)")
    _run_contiguous(random_group_rows(8, 256, seed=n + k + psum), n, k, psum=psum, nn=nn, seed=n + k)


@pytest.mark.parametrize("nn", [False, True], ids=["nt", "nn"])
@pytest.mark.parametrize("psum", [False, True], ids=["ids", "psum"])
def test_contiguous_empty_groups_and_one_giant(psum, nn):
    # empty first / middle / last groups, a 1-row group, one group with most of the tokens
    _run_contiguous([0, 300, 0, 1, 3000, 129, 0], 4096, 2048, psum=psum, nn=nn, seed=7)


def test_contiguous_m_major_a():
    _run_contiguous([700, 0, 250, 33], 4096, 2048, a_m_major=True, seed=3)


@pytest.mark.parametrize("bm,bn,psum,nn", [(64, 128, False, False), (64, 256, True, True), (128, 64, False, True),
                                           (128, 128, True, False)])
def test_contiguous_forced_configs(bm, bn, psum, nn):
    cfg = make_bf16_grouped_config(device_facts(sm90_device()), bm, bn)
    _run_contiguous([700, 0, 1500, 33], 7168, 2048, psum=psum, nn=nn, cfg=cfg, seed=bm + bn)


def test_contiguous_unpacked_b_and_unaligned_a():
    """B groups not packed back to back (copied per call, not recorded) and an A whose base TMA cannot
    address (runs the portable kernel): both still right."""
    dev = sm90_device()
    rows, n, k = [200, 0, 90], 512, 256
    a, b, layout, row_groups = _contiguous_inputs(rows, n, k, dev, seed=11)
    b_pad = torch.randn(len(rows), n, k + 8, device=dev, dtype=torch.bfloat16)
    b_pad[:, :, :k] = b
    b_view = b_pad[:, :, :k]
    expected = ref.m_grouped_bf16_gemm_nt_contiguous(a.nan_to_num(0.0), b, layout)
    for _ in range(2):
        d = torch.full((a.shape[0], n), float("nan"), device=dev, dtype=torch.bfloat16)
        finegemm.m_grouped_bf16_gemm_nt_contiguous(a, b_view, d, layout)
        torch.cuda.synchronize()
        _check_contiguous(d, expected, row_groups)
    buf = torch.empty(a.numel() + 1, device=dev, dtype=torch.bfloat16)
    a_off = buf[1:].view(a.shape)
    a_off.copy_(a)
    d = torch.full((a.shape[0], n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.m_grouped_bf16_gemm_nt_contiguous(a_off, b, d, layout)
    torch.cuda.synchronize()
    _check_contiguous(d, expected, row_groups)


# ---------------------------------------------------------------------------------------------
# masked
# ---------------------------------------------------------------------------------------------

def _masked_inputs(g, max_m, n, k, dev, masked, seed=0):
    """a [G, max_m, K] with NaN in every row at or past ``masked[g]``; b [G, N, K]."""
    torch.manual_seed(seed)
    a = torch.randn(g, max_m, k, device=dev, dtype=torch.bfloat16)
    for i, r in enumerate(ref.masked_rows(torch.tensor(masked), max_m)):
        a[i, r:] = float("nan")
    return a, torch.randn(g, n, k, device=dev, dtype=torch.bfloat16)


def _check_masked(d, expected, masked):
    max_m = d.shape[1]
    for g, rows in enumerate(ref.masked_rows(torch.tensor(masked), max_m)):
        if rows:
            assert not torch.isnan(d[g, :rows].float()).any(), f"group {g}: NaN in valid rows"
            diff = calc_diff(d[g, :rows], expected[g, :rows])
            assert diff < BOUND, (g, diff)
        assert bool(torch.isnan(d[g, rows:].float()).all()), f"group {g}: rows >= {rows} were written"


def _run_masked(g, max_m, n, k, masked, expected_m, cfg=None, seed=0):
    dev = sm90_device()
    a, b = _masked_inputs(g, max_m, n, k, dev, masked, seed)
    desc = GemmDesc("bf16", max_m, n, k, layout="m_grouped_masked", num_groups=g, expected_m=expected_m)
    if cfg is None:
        assert choose_backend(desc, dev)[0] == "sm90"
    masked_m = torch.tensor(masked, dtype=torch.int32, device=dev)
    outs = []
    for _ in range(2):
        d = torch.full((g, max_m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        if cfg is None:
            finegemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m)
        else:
            from finegemm.kernels.sm90 import dispatch_bf16_grouped
            dispatch_bf16_grouped.m_grouped_bf16_gemm_masked(desc, cfg, a, None, b, None, d, masked_m, expected_m)
        outs.append(d)
    torch.cuda.synchronize()
    _check_masked(outs[0], ref.m_grouped_bf16_gemm_nt_masked(a.nan_to_num(0.0), b, masked_m), masked)
    assert torch.equal(outs[0].nan_to_num(7.0), outs[1].nan_to_num(7.0)), "repeated runs differ"


@pytest.mark.parametrize("n,k", [(7168, 2048), (4096, 7168)])
def test_masked_decode_16x64(n, k):
    rng = random.Random(n)
    masked = [rng.choice([0, 64, rng.randint(1, 64)]) for _ in range(16)]
    _run_masked(16, 64, n, k, masked, 64, seed=n)


@pytest.mark.parametrize("expected_m", [64, 192])
def test_masked_varied(expected_m):
    # 0, 1, a partial wave, exactly max_m, above max_m (clamped), negative (0)
    masked = [0, 1, 63, 65, 130, 192, 500, -3]
    _run_masked(8, 192, 4096, 7168, masked, expected_m, seed=expected_m)


@pytest.mark.parametrize("bm,bn", [(64, 64), (64, 256), (128, 128)])
def test_masked_forced_configs(bm, bn):
    cfg = make_bf16_grouped_config(device_facts(sm90_device()), bm, bn)
    _run_masked(4, 200, 7168, 2048, [200, 77, 0, 129], 64, cfg=cfg, seed=bm * bn)


def test_masked_cuda_graph_replay_with_new_masked_m():
    dev = sm90_device()
    g, max_m, n, k = 8, 128, 4096, 7168
    a, b = _masked_inputs(g, max_m, n, k, dev, [max_m] * g, seed=5)
    masked_m = torch.full((g,), max_m, dtype=torch.int32, device=dev)
    d = torch.full((g, max_m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    graph = capture_graph(lambda: finegemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 64))
    for masked in ([64] * 8, [0, 128, 1, 64, 0, 100, 300, 5], [0] * 8, [128] * 8):
        masked_m.copy_(torch.tensor(masked, dtype=torch.int32))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check_masked(d, ref.m_grouped_bf16_gemm_nt_masked(a, b, masked_m), masked)
