"""Dense FP8/BF16 GEMMs on a GPU, both backends, against the float64 reference (run with ``-m gpu``)."""

from __future__ import annotations

import pytest
import torch
from generators import (
    LAYOUTS,
    RECIPES,
    Fp8Case,
    enumerate_awkward_gpu,
    enumerate_deepseek_v3_dense,
    generate_fp8,
    run_fp8,
)

import finegemm
from finegemm import reference

pytestmark = pytest.mark.gpu
BACKENDS = ("auto", "portable")


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setenv("FINEGEMM_BACKEND", request.param)
    return request.param


@pytest.mark.parametrize("mnk", enumerate_deepseek_v3_dense(), ids=lambda s: "x".join(map(str, s)))
def test_deepseek_v3_shapes_1d2d(mnk, backend):
    case = Fp8Case("nt", (1, 128, 128), False, *mnk)
    a, b, d, c, ref = generate_fp8(case, device="cuda", seed=sum(mnk))
    run_fp8(case, a, b, d, c)
    torch.cuda.synchronize()
    assert not torch.isnan(d).any(), "unwritten output elements"
    assert finegemm.calc_diff(d, ref) < 1e-3


@pytest.mark.parametrize("mnk", enumerate_deepseek_v3_dense()[::2], ids=lambda s: "x".join(map(str, s)))
def test_deepseek_v3_shapes_1d1d_accumulate(mnk, backend):
    case = Fp8Case("nt", (1, 1, 128), False, *mnk)
    a, b, d, c, ref = generate_fp8(case, device="cuda", seed=sum(mnk) + 1)
    run_fp8(case, a, b, d, c)
    torch.cuda.synchronize()
    assert not torch.isnan(d).any()
    assert finegemm.calc_diff(d, ref) < 1e-3


@pytest.mark.parametrize("mnk", enumerate_awkward_gpu(), ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("recipe", RECIPES, ids=["1d2d", "1d1d"])
@pytest.mark.parametrize("ue8m0", [False, True], ids=["fp32", "ue8m0"])
def test_awkward_sizes_all_layouts(mnk, layout, recipe, ue8m0):
    """FINEGEMM_BACKEND=auto: sm90 where it takes the case (nt, K % 128 == 0), portable elsewhere."""
    case = Fp8Case(layout, recipe, ue8m0, *mnk)
    a, b, d, c, ref = generate_fp8(case, device="cuda", seed=sum(mnk) + len(layout))
    run_fp8(case, a, b, d, c)
    torch.cuda.synchronize()
    assert not torch.isnan(d).any()
    assert finegemm.calc_diff(d, ref) < 1e-3


@pytest.mark.parametrize("mnk", enumerate_awkward_gpu(), ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("recipe", RECIPES, ids=["1d2d", "1d1d"])
def test_awkward_sizes_portable_nt(mnk, recipe, monkeypatch):
    monkeypatch.setenv("FINEGEMM_BACKEND", "portable")
    case = Fp8Case("nt", recipe, False, *mnk)
    a, b, d, c, ref = generate_fp8(case, device="cuda", seed=sum(mnk) + 5)
    run_fp8(case, a, b, d, c)
    torch.cuda.synchronize()
    assert not torch.isnan(d).any()
    assert finegemm.calc_diff(d, ref) < 1e-3


@pytest.mark.parametrize("mnk", [(4096, 7168, 2048), (128, 2112, 7168), (77, 576, 7168)])
def test_repeat_runs_are_bitwise_identical(mnk, backend):
    case = Fp8Case("nt", (1, 128, 128), False, *mnk)
    a, b, d, c, _ = generate_fp8(case, device="cuda", seed=11)
    outs = []
    for _ in range(3):
        d.fill_(float("nan"))
        run_fp8(case, a, b, d, c)
        outs.append(d.clone())
    assert all(torch.equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize("mnk", [(4096, 7168, 2048), (64, 2112, 7168), (77, 576, 300), (4096, 24576, 1536)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_gemm(mnk, layout, backend):
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(m, n, device="cuda")
    ref = reference.bf16_gemm("nt", a, b, c)
    a_in = a.T.contiguous() if layout[0] == "t" else a
    b_in = b.T.contiguous() if layout[1] == "n" else b
    d = torch.full((m, n), float("nan"), device="cuda")
    getattr(finegemm, f"bf16_gemm_{layout}")(a_in, b_in, d, c=c)
    torch.cuda.synchronize()
    assert finegemm.calc_diff(d, ref) < 1e-5


def test_cuda_graph_capture_of_dense_gemm(backend):
    case = Fp8Case("nt", (1, 128, 128), False, 128, 2112, 7168)
    a, b, d, c, ref = generate_fp8(case, device="cuda", seed=3)
    run_fp8(case, a, b, d, c)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_fp8(case, a, b, d, c)
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert finegemm.calc_diff(d, ref) < 1e-3
