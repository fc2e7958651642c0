"""sm90 k-grouped GEMMs on the H200 through the public API, against the float64 references (``pytest -m gpu``).

nt FP8 (DeepGEMM's SM90 form), tn FP8 (MN-major operands: the transposing copy; column-major ones: read
in place), tn BF16. Every case: random group order with an empty group and one giant group, ``d``
poisoned with NaN first, ``c`` random; the sm90 backend must be chosen and its k-grouped entry called;
calc_diff < 1e-3 (FP8) / 1e-5 (BF16); an empty group gives ``d[g] == c[g]`` exactly; ``c=d`` accumulates
in place; a repeat run is bitwise identical.

Group sizes come from a small set (the dense FP8 kernel compiles once per distinct K, ~1 s each).
"""

from __future__ import annotations

import random

import pytest
import torch
from generators import flatten_k_major, k_grouped_cast, replay_at_once, sm90_device

import finegemm
from finegemm.api.dispatch import choose_backend
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90 import dispatch_k_grouped as kg
from finegemm.reference import grouped as ref
from finegemm.reference.dense import calc_diff

pytestmark = pytest.mark.gpu
FP8_BOUND = 1e-3
BF16_BOUND = 1e-5
M, N = 392, 320  # neither a multiple of the 128-row / 128-column tiles
GIANT = 3072


def _ks(seed: int) -> list[int]:
    ks = [0, 128, 256, 384, GIANT]
    random.Random(seed).shuffle(ks)
    return ks


class _Spy:
    """Counts calls of a dispatch_k_grouped entry (run_sm90 looks it up by name at each call)."""

    def __init__(self, fn):
        self.fn, self.calls, self.configs = fn, 0, []

    def __call__(self, *args):
        self.calls += 1
        self.configs.append(args[1])  # (desc, config, ...): the KGroupedConfig of the call
        return self.fn(*args)


def _run_and_check(op, a, b, ks, c, expected, bound, spy, desc):
    dev = c.device
    assert choose_backend(desc, dev)[0] == "sm90"
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device=dev)
    outs = []
    for _ in range(2):  # the second run must repeat the first bit for bit
        d = torch.full_like(c, float("nan"))
        op(a, b, d, ks, ks_tensor, c=c)
        outs.append(d)
    in_place = c.clone()
    op(a, b, in_place, ks, ks_tensor, c=in_place)
    torch.cuda.synchronize()
    assert spy.calls == 3, "the sm90 k-grouped path did not run"
    for out in (outs[0], in_place):
        assert not torch.isnan(out).any(), "NaN left in d"
        diff = calc_diff(out, expected)
        assert diff < bound, diff
        for g, k in enumerate(ks):
            if k == 0:
                assert torch.equal(out[g], c[g]), "empty group: d[g] must equal c[g]"
    assert torch.equal(outs[0], outs[1]), "repeat run differs"
    assert torch.equal(outs[0], in_place), "c=d in place differs from c apart from d"


def _fp8_desc(sum_k, g, a_k_major=True, b_k_major=True):
    return GemmDesc("fp8_1d1d", M, N, sum_k, a_k_major, b_k_major, True, True, False, layout="k_grouped",
                    num_groups=g)


def _check_fp8_nt(monkeypatch, seed: int, scales: str) -> _Spy:
    """One nt call checked by :func:`_run_and_check`; returns the spy of the sm90 entry."""
    dev = sm90_device()
    torch.manual_seed(seed)
    ks = _ks(seed)
    a_q, sfa = k_grouped_cast(torch.randn(sum(ks), M, device=dev), ks)
    b_q, sfb = k_grouped_cast(torch.randn(sum(ks), N, device=dev), ks)
    # DeepGEMM's nt scales are [MN, sum K/128]: MN-major views (path B), or K-major copies (path A)
    sfa_nt, sfb_nt = sfa.T, sfb.T
    if scales == "k_major":
        sfa_nt, sfb_nt = sfa_nt.contiguous(), sfb_nt.contiguous()
    a, b = (flatten_k_major(a_q, ks), sfa_nt), (flatten_k_major(b_q, ks), sfb_nt)
    c = torch.randn(len(ks), M, N, device=dev)
    spy = _Spy(kg.k_grouped_fp8_1d1d_gemm)
    monkeypatch.setattr(kg, "k_grouped_fp8_1d1d_gemm", spy)
    expected = ref.k_grouped_fp8_gemm_nt_contiguous(a, b, ks, c)
    _run_and_check(finegemm.k_grouped_fp8_gemm_nt_contiguous, a, b, ks, c, expected, FP8_BOUND, spy,
                   _fp8_desc(sum(ks), len(ks)))
    return spy


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("scales", ["mn_major", "k_major"])
def test_fp8_nt(monkeypatch, seed, scales):
    _check_fp8_nt(monkeypatch, seed, scales)


def test_fp8_nt_compile_time_k(monkeypatch):
    """The compile-time-K dense kernel (``KGroupedConfig.k_dynamic`` off; the default reads K at run time,
    which the other tests run): the same checks as :func:`test_fp8_nt`, one compiled kernel per group K."""
    from finegemm.api import dispatch as api_dispatch
    from finegemm.api import grouped as api_grouped

    sm90_device()
    monkeypatch.setattr(kg, "K_DYNAMIC_DEFAULT", False)
    # the backend choice caches get_config's answer per desc, the API its plans per tensor signature
    monkeypatch.setattr(api_grouped, "_K_GROUPED_PLANS", api_grouped.new_cache())
    api_dispatch._choose.cache_clear()
    try:
        spy = _check_fp8_nt(monkeypatch, 5, "mn_major")
        assert not any(cfg.k_dynamic for cfg in spy.configs)
    finally:
        api_dispatch._choose.cache_clear()


def test_fp8_chain_finishes_before_the_next_kernel():
    """The groups' GEMMs run as a chain of programmatic dependent launches whose later links start without
    waiting (``PDL_CHAIN``): a long group first, short ones after. A kernel enqueued right after the call
    (a copy, no synchronization between) must still see every group's finished result, and a CUDA graph
    of call + copy likewise."""
    dev = sm90_device()
    torch.manual_seed(7)
    m, n, ks = 2048, 4096, [8192, 128, 256]
    a_q, sfa = k_grouped_cast(torch.randn(sum(ks), m, device=dev), ks)
    b_q, sfb = k_grouped_cast(torch.randn(sum(ks), n, device=dev), ks)
    a, b = (flatten_k_major(a_q, ks), sfa.T), (flatten_k_major(b_q, ks), sfb.T)
    c = torch.randn(len(ks), m, n, device=dev)
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device=dev)
    expected = ref.k_grouped_fp8_gemm_nt_contiguous(a, b, ks, c)
    d = torch.full_like(c, float("nan"))
    seen = torch.empty_like(c)

    def call_and_copy():
        finegemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=c)
        seen.copy_(d)

    for _ in range(3):
        d.fill_(float("nan"))
        seen.fill_(float("nan"))
        call_and_copy()
        torch.cuda.synchronize()
        assert not torch.isnan(seen).any(), "the copy ran before every group had finished"
        assert torch.equal(seen, d)
        assert calc_diff(seen, expected) < FP8_BOUND
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call_and_copy()
    d.fill_(float("nan"))
    seen.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert not torch.isnan(seen).any() and calc_diff(seen, expected) < FP8_BOUND


@pytest.mark.parametrize("major", ["mn_major", "k_major"])
def test_fp8_tn(monkeypatch, major):
    dev = sm90_device()
    torch.manual_seed(2)
    ks = _ks(2)
    a_q, sfa = k_grouped_cast(torch.randn(sum(ks), M, device=dev), ks)
    b_q, sfb = k_grouped_cast(torch.randn(sum(ks), N, device=dev), ks)
    if major == "k_major":  # column-major [sum K, MN]: read in place, no copy
        a_q, b_q = a_q.T.contiguous().T, b_q.T.contiguous().T
    a, b = (a_q, sfa), (b_q, sfb)
    c = torch.randn(len(ks), M, N, device=dev)
    spy = _Spy(kg.k_grouped_fp8_1d1d_gemm)
    monkeypatch.setattr(kg, "k_grouped_fp8_1d1d_gemm", spy)
    expected = ref.k_grouped_fp8_gemm_tn_contiguous(a, b, ks, c)
    km = major == "k_major"
    _run_and_check(finegemm.k_grouped_fp8_gemm_tn_contiguous, a, b, ks, c, expected, FP8_BOUND, spy,
                   _fp8_desc(sum(ks), len(ks), km, km))


@pytest.mark.parametrize("major", ["mn_major", "k_major"])
def test_bf16_tn(monkeypatch, major):
    dev = sm90_device()
    torch.manual_seed(3)
    ks = _ks(3)
    a = torch.randn(sum(ks), M, device=dev).to(torch.bfloat16)
    b = torch.randn(sum(ks), N, device=dev).to(torch.bfloat16)
    if major == "k_major":
        a, b = a.T.contiguous().T, b.T.contiguous().T
    c = torch.randn(len(ks), M, N, device=dev)
    spy = _Spy(kg.k_grouped_bf16_gemm)
    monkeypatch.setattr(kg, "k_grouped_bf16_gemm", spy)
    expected = ref.k_grouped_bf16_gemm_tn_contiguous(a, b, ks, c)
    km = major == "k_major"
    desc = GemmDesc("bf16", M, N, sum(ks), km, km, True, True, False, layout="k_grouped", num_groups=len(ks))
    _run_and_check(finegemm.k_grouped_bf16_gemm_tn_contiguous, a, b, ks, c, expected, BF16_BOUND, spy, desc)


def test_non_row_major_c_runs_portable_and_is_right():
    dev = sm90_device()
    torch.manual_seed(4)
    ks = [128, 0, 256]
    a = k_grouped_cast(torch.randn(sum(ks), M, device=dev), ks)
    b = k_grouped_cast(torch.randn(sum(ks), N, device=dev), ks)
    c = torch.randn(len(ks), N, M, device=dev).transpose(1, 2)  # column-major groups
    d = torch.full((len(ks), M, N), float("nan"), device=dev)
    finegemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, torch.tensor(ks, dtype=torch.int32, device=dev), c=c)
    torch.cuda.synchronize()
    assert calc_diff(d, ref.k_grouped_fp8_gemm_tn_contiguous(a, b, ks, c)) < FP8_BOUND


def test_fp8_tn_graphs_captured_on_one_stream():
    """The tn form's transposing copies write a per-stream workspace; one allocated while a CUDA graph is captured
    belongs to that graph (transpose.operand_workspace caches none), so two graphs captured one after another
    on torch's capture stream and replayed at once on two streams each read their own operands."""
    dev = sm90_device()
    ks = _ks(4)
    calls, expected, outs = [], [], []
    for i in range(2):
        torch.manual_seed(50 + i)
        a_q, sfa = k_grouped_cast(torch.randn(sum(ks), M, device=dev), ks)
        b_q, sfb = k_grouped_cast(torch.randn(sum(ks), N, device=dev), ks)
        c = torch.randn(len(ks), M, N, device=dev)
        d = torch.empty_like(c)
        expected.append(ref.k_grouped_fp8_gemm_tn_contiguous((a_q, sfa), (b_q, sfb), ks, c))
        ks_tensor = torch.tensor(ks, dtype=torch.int32, device=dev)
        calls.append(lambda a=(a_q, sfa), b=(b_q, sfb), c=c, d=d, kt=ks_tensor:
                     finegemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, kt, c=c))
        outs.append(d)
    calls[0]()  # compiled outside the capture
    torch.cuda.synchronize()
    graphs = [torch.cuda.CUDAGraph() for _ in calls]
    for graph, call in zip(graphs, calls):
        with torch.cuda.graph(graph):
            call()
    for _ in range(3):
        for d in outs:
            d.fill_(float("nan"))
        replay_at_once(graphs)
        torch.cuda.synchronize()
        for d, want in zip(outs, expected):
            assert not torch.isnan(d).any() and calc_diff(d, want) < FP8_BOUND
