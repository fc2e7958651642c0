"""The BF16 GEMV route on the GPU: one-row ``bf16_gemm_nt`` calls through the public API with the GEMV rule on,
against the float64 reference; repeats (split-K counters), C aliasing D, CUDA-graph replay."""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device

import finegemm
from finegemm import reference

pytestmark = pytest.mark.gpu

SHAPES = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048),
          (256, 7168), (129280, 7168), (1000, 1000), (8, 64), (33, 8), (4097, 7100), (3, 5)]  # last two: no TMA


@pytest.fixture
def gemv_on():
    sm90_device()
    from finegemm.kernels.sm90 import dispatch_bf16

    return dispatch_bf16


@pytest.mark.parametrize("n,k", SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("out_dtype,c_dtype", [(torch.bfloat16, None), (torch.bfloat16, torch.bfloat16),
                                               (torch.float32, None), (torch.float32, torch.float32)])
def test_one_row_gemm_through_the_api(n, k, out_dtype, c_dtype, gemv_on):
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import Sm90GemvConfig

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(n + k)
    a = torch.randn(1, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g)
    c = torch.randn(1, n, device=dev, dtype=c_dtype, generator=g) if c_dtype is not None else None
    desc = GemmDesc("bf16", 1, n, k, True, True, out_dtype == torch.float32, c is not None)
    assert isinstance(gemv_on.get_config(desc, device_facts(dev)), Sm90GemvConfig)
    ref = reference.bf16_gemm("nt", a, b, c)
    outs = []
    for _ in range(2):
        d = torch.full((1, n), float("nan"), device=dev, dtype=out_dtype)
        finegemm.bf16_gemm_nt(a, b, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    assert not torch.isnan(outs[0]).any()
    assert reference.calc_diff(outs[0], ref) < 1e-5
    assert torch.equal(outs[0], outs[1])  # split-K sums in split order whichever program arrives last


def test_one_row_with_a_transposed_a(gemv_on):
    """``bf16_gemm_tt`` at M = 1: A is a ``[K, 1]`` tensor's transpose (M-major, rows TMA could not address) and B
    K-major: the GEMV reads A through its strides."""
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(3)
    a_t = torch.randn(7168, 1, device=dev, dtype=torch.bfloat16, generator=g)  # tt: A given as [K, M]
    b = torch.randn(2112, 7168, device=dev, dtype=torch.bfloat16, generator=g)  # and B as [N, K]
    d = torch.full((1, 2112), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_tt(a_t, b, d)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, reference.bf16_gemm("nt", a_t.T, b)) < 1e-5


def test_c_is_d_and_graph_replay(gemv_on):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(7)
    a = torch.randn(1, 7168, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(576, 7168, device=dev, dtype=torch.bfloat16, generator=g)  # split-K
    d = torch.randn(1, 576, device=dev, dtype=torch.float32, generator=g)
    ref = reference.bf16_gemm("nt", a, b, d.clone())
    finegemm.bf16_gemm_nt(a, b, d, d)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, ref) < 1e-9
    out = torch.empty(1, 576, device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_nt(a, b, out)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        finegemm.bf16_gemm_nt(a, b, out)
    for seed in (1, 2):
        a.copy_(torch.randn(1, 7168, device=dev, generator=torch.Generator(device=dev).manual_seed(seed)))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert reference.calc_diff(out, reference.bf16_gemm("nt", a, b)) < 1e-5
