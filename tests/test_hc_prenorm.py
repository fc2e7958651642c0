"""tf32_hc_prenorm_gemm against its float64 reference: CPU (Triton's interpreter) and, marked gpu, CUDA."""

from __future__ import annotations

import pytest
import torch

import finegemm
from finegemm.kernels.portable.hc_prenorm import HcTile, launch_hc_prenorm, sub_splits
from finegemm.reference import calc_diff
from finegemm.reference import hyperconnection as ref


def _inputs(m, n, k, splits, device="cpu", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, generator=g, device=device).bfloat16()
    b = torch.randn(n, k, generator=g, device=device)
    lead = () if splits is None else (splits,)
    d = torch.full((*lead, m, n), float("nan"), device=device)
    s = torch.full((*lead, m), float("nan"), device=device)
    return a, b, d, s


def test_split_ranges_cover_k_in_order():
    assert ref.k_split_ranges(448, 3) == [(0, 192), (192, 320), (320, 448)]  # 7 blocks: 3, 2, 2
    assert ref.k_split_ranges(100, 4) == [(0, 64), (64, 100), (100, 100), (100, 100)]
    assert ref.k_split_ranges(7168, 16)[-1] == (6720, 7168)


@pytest.mark.parametrize("m,n,k,splits", [
    (13, 24, 256, None), (137, 24, 448, None), (1, 8, 64, 2),
    (70, 24, 200, 3),     # K not a multiple of 64: a partial last block
    (5, 40, 64, 4),       # more splits than K blocks: the empty ones are zeros
    (65, 72, 130, None),  # N past one 64-wide tile
    (3, 1, 1, None),
])
def test_matches_reference(m, n, k, splits):
    a, b, d, s = _inputs(m, n, k, splits)
    finegemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=splits)
    want_d, want_s = ref.tf32_hc_prenorm_gemm(a, b, splits, tf32=True)
    # the kernel rounds b to TF32 itself, so the interpreter (FP32 products) multiplies the twin's values: only the
    # FP32 accumulation over <= 448 terms differs
    assert calc_diff(d, want_d) < 1e-10 and calc_diff(s, want_s) < 1e-12
    if splits is not None:
        for i, (start, end) in enumerate(ref.k_split_ranges(k, splits)):
            if start == end:
                assert not d[i].any() and not s[i].any()
        full_d, full_s = ref.tf32_hc_prenorm_gemm(a, b, tf32=True)
        assert calc_diff(d.sum(0), full_d) < 1e-10 and calc_diff(s.sum(0), full_s) < 1e-12


@pytest.mark.parametrize("tile", [HcTile(128, 2, 8, 4), HcTile(64, 4, 4, 2), HcTile(32, 8, 4, 3)])
@pytest.mark.parametrize("m,n,k,splits", [(70, 24, 200, 3), (150, 24, 1000, 2), (5, 40, 64, 4), (33, 9, 900, 1)])
def test_other_tiles_match_reference(tile, m, n, k, splits):
    """Wider loop steps (``k_blocks`` split blocks, masked at a split's end and at K) and other row tiles give the
    split sums the reference's splits do."""
    a, b, d, s = _inputs(m, n, k, splits)
    launch_hc_prenorm(a, b, d, s, splits, tile)
    want_d, want_s = ref.tf32_hc_prenorm_gemm(a, b, splits, tf32=True)
    assert calc_diff(d, want_d) < 1e-10 and calc_diff(s, want_s) < 1e-12


@pytest.mark.parametrize("m,n,k,splits,sms", [(13, 24, 14336, 16, 132), (70, 24, 3000, 3, 8), (5, 40, 2000, 2, 4)])
def test_split_parts_match_reference(m, n, k, splits, sms):
    """Each requested split cut again into parts (few programs for the SMs) sums to the split's own range."""
    from finegemm.kernels.portable.hc_prenorm import launch_hc_prenorm_parts

    assert sub_splits(m, n, k, splits, sms) > 1
    a, b, d, s = _inputs(m, n, k, splits)
    launch_hc_prenorm_parts(a, b, d, s, splits, sms)
    want_d, want_s = ref.tf32_hc_prenorm_gemm(a, b, splits, tf32=True)
    assert calc_diff(d, want_d) < 1e-10 and calc_diff(s, want_s) < 1e-12


@pytest.mark.parametrize("m,n,k,splits,sms,want", [
    (13, 24, 28672, 16, 132, 7),  # 16 programs: 7 parts of the 28 blocks of each split
    (13, 24, 7168, 16, 132, 1),   # 7 blocks a split: too few to cut
    (4096, 24, 7168, 16, 132, 1),  # 1024 programs already
])
def test_sub_splits(m, n, k, splits, sms, want):
    assert sub_splits(m, n, k, splits, sms) == want


@pytest.mark.parametrize("m,n,k,sms,want", [
    (13, 24, 28672, 132, 112),  # one M tile: as many splits as 4 K blocks each allow, under 264 programs
    (4096, 24, 28672, 132, 5),  # 64 M tiles: 5 splits give >= 2 programs an SM
    (8192, 24, 7168, 132, 3),
    (13, 24, 256, 132, 1),  # 4 K blocks: no split
    (13, 100, 64 * 40, 8, 8),  # two N tiles
])
def test_unsplit_call_parts(m, n, k, sms, want):
    """An unsplit call is one split, cut into as many parts as the rule gives."""
    assert sub_splits(m, n, k, 1, sms) == want


def test_unsplit_call_split_internally_matches_reference(monkeypatch):
    """An unsplit call that cuts K itself (here 11 splits of 4-5 blocks: 13 x 24 x 3000 on 132 SMs) writes the sums of
    the splits into d and sqr_sum."""
    import finegemm.api.hyperconnection as api

    monkeypatch.setattr(api, "get_num_sms", lambda: 132)
    m, n, k = 13, 24, 3000
    assert sub_splits(m, n, k, 1, 132) == 11
    a, b, d, s = _inputs(m, n, k, None)
    finegemm.tf32_hc_prenorm_gemm(a, b, d, s)
    want_d, want_s = ref.tf32_hc_prenorm_gemm(a, b, tf32=True)
    assert calc_diff(d, want_d) < 1e-10 and calc_diff(s, want_s) < 1e-12


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the interpreter's numpy on 0 * inf
def test_b_is_rounded_to_tf32_in_the_kernel():
    """b values halfway between TF32 neighbours, and just past: the kernel's products are those of the rounded b (ties
    to even), not of b as stored; NaN and Inf in b reach d as they are."""
    a = torch.zeros(2, 4).bfloat16()
    a[0, 0] = a[1, 3] = 1.0
    b = torch.tensor([[1.0 + 2**-11, 0.0, 0.0, 1.0 + 3 * 2**-11],
                      [-(1.0 + 2**-11 + 2**-20), 0.0, 0.0, 1.0 + 2**-12],
                      [float("inf"), 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, float("nan")]])
    d, s = torch.full((2, 4), float("nan")), torch.full((2,), float("nan"))
    finegemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert d[:, :2].tolist() == [[1.0, -(1.0 + 2**-10)], [1.0 + 2**-9, 1.0]]
    assert d[0, 2] == float("inf") and bool(d[1, 3].isnan()) and s.tolist() == [1.0, 1.0]


def test_strided_operands():
    a, b, d, s = _inputs(33, 16, 192, None, seed=2)
    a_t = a.T.contiguous().T  # column-major a, any strides are read in place
    finegemm.tf32_hc_prenorm_gemm(a_t, b[:, :].T.contiguous().T, d, s)
    want_d, want_s = ref.tf32_hc_prenorm_gemm(a, b, tf32=True)
    assert calc_diff(d, want_d) < 1e-10 and calc_diff(s, want_s) < 1e-12


def test_empty_m_returns():
    a, b, d, s = _inputs(0, 24, 128, None)
    finegemm.tf32_hc_prenorm_gemm(a, b, d, s)


@pytest.mark.parametrize("change,err,match", [
    (dict(a=torch.zeros(4, 64)), TypeError, r"a must have dtype torch.bfloat16; got torch.float32"),
    (dict(b=torch.zeros(8, 64).bfloat16()), TypeError, r"b must have dtype torch.float32"),
    (dict(d=torch.zeros(4, 9)), ValueError, r"d must have shape \(4, 8\); got \(4, 9\)"),
    (dict(s=torch.zeros(2, 4)), ValueError, r"sqr_sum must have shape \(4,\); got \(2, 4\)"),
    (dict(num_splits=0), ValueError, r"num_splits must be None or an int >= 1; got 0"),
    (dict(b=torch.zeros(8, 32)), ValueError, r"same K"),
])
def test_errors_name_the_argument(change, err, match):
    args = dict(a=torch.zeros(4, 64).bfloat16(), b=torch.zeros(8, 64), d=torch.zeros(4, 8), s=torch.zeros(4),
                num_splits=None)
    args.update(change)
    with pytest.raises(err, match=match):
        finegemm.tf32_hc_prenorm_gemm(args["a"], args["b"], args["d"], args["s"], num_splits=args["num_splits"])


def test_tf32_rounding_reference():
    x = torch.tensor([1.0 + 2**-11, 1.0 + 3 * 2**-11, -(1.0 + 2**-11), 1.0 + 2**-12, float("inf")])
    assert ref.round_to_tf32(x).tolist() == [1.0, 1.0 + 2**-9, -1.0, 1.0, float("inf")]  # ties to even


# DeepGEMM 2.6.1's tests/test_hyperconnection.py bound on max(calc_diff(d), calc_diff(sqr_sum)), against its reference
DEEPGEMM_BOUND = 1e-8


@pytest.mark.gpu
@pytest.mark.parametrize("m", [13, 137, 4096])
@pytest.mark.parametrize("n,k", [(24, 28672), (24, 7168), (40, 1000)])
@pytest.mark.parametrize("splits", [None, 16])
def test_gpu_matches_reference(m, n, k, splits, monkeypatch):
    """DeepGEMM's bound against DeepGEMM's reference (``a.float() @ b.T`` with TF32 allowed, fp32 squares, splits
    summed) and against the float64 TF32 twin; the exact float64 product within TF32's reach."""
    a, b, d, s = _inputs(m, n, k, splits, device="cuda")
    finegemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=splits)
    final_d, final_s = (d, s) if splits is None else (d.sum(0), s.sum(0))
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)  # what DeepGEMM's test sets
    dg_d, dg_s = a.float() @ b.T, a.float().square().sum(-1)
    assert max(calc_diff(final_d, dg_d), calc_diff(final_s, dg_s)) < DEEPGEMM_BOUND
    want_d, want_s = ref.tf32_hc_prenorm_gemm(a, b, splits, tf32=True)
    assert max(calc_diff(d, want_d), calc_diff(s, want_s)) < DEEPGEMM_BOUND
    exact_d, _ = ref.tf32_hc_prenorm_gemm(a, b, splits)
    assert calc_diff(d, exact_d) < 1e-6  # b's rounding to 10 mantissa bits: ~2e-8 at these sizes
