"""sm90 Gluon BF16 GEMM on the H200 against the float64 reference (``pytest -m gpu``).

Output poisoned with NaN first; calc_diff < 1e-5; the 18 DeepSeek-V3 shapes (nt) through the sm90
launch with the heuristic's config, awkward sizes with C and FP32 output, all four layouts through
the public API (which must route to sm90). Skipped without CUDA (tests/conftest.py) and off sm_90.
"""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device

import finegemm
from finegemm import reference

pytestmark = pytest.mark.gpu

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DSV3 = [(m, n, k) for m in (64, 128, 4096) for n, k in NK]
AWKWARD = [(m, n, 7168) for m in (1, 77, 333) for n in (2112, 576)]


def _sm90():
    sm90_device()
    from finegemm.kernels.sm90 import dispatch_bf16
    return dispatch_bf16


def _run_direct(m, n, k, out_dtype=torch.bfloat16, c_dtype=None, seed=0):
    mod = _sm90()
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g)
    c = torch.randn(m, n, device=dev, dtype=c_dtype, generator=g) if c_dtype is not None else None
    desc = GemmDesc("bf16", m, n, k, True, True, out_dtype == torch.float32, c is not None)
    facts = device_facts(dev)
    assert mod.unsupported_reason(desc, facts) is None
    cfg = mod.get_config(desc, facts)
    d = torch.full((m, n), float("nan"), device=dev, dtype=out_dtype)
    mod.bf16_gemm(desc, cfg, a, b, d, c)
    torch.cuda.synchronize()
    diff = reference.calc_diff(d, reference.bf16_gemm("nt", a, b, c))
    assert not torch.isnan(d).any(), ("unwritten output", cfg)
    assert diff < 1e-5, (m, n, k, cfg, diff)


@pytest.mark.parametrize("m,n,k", DSV3, ids=lambda v: str(v))
def test_deepseek_v3_shapes(m, n, k):
    _run_direct(m, n, k, seed=m + n + k)


@pytest.mark.parametrize("m,n,k", AWKWARD, ids=lambda v: str(v))
@pytest.mark.parametrize("out_dtype,c_dtype", [(torch.bfloat16, None), (torch.float32, torch.float32),
                                               (torch.bfloat16, torch.bfloat16)])
def test_awkward_sizes_with_c(m, n, k, out_dtype, c_dtype):
    _run_direct(m, n, k, out_dtype, c_dtype, seed=m * 7 + n)


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
@pytest.mark.parametrize("m,n,k", [(128, 2112, 7168), (4096, 576, 1536), (336, 2112, 7168)])
def test_public_api_layouts_route_to_sm90(layout, m, n, k, monkeypatch):
    _sm90()
    monkeypatch.setenv("FINEGEMM_BACKEND", "sm90")  # an unsupported case would raise, not fall back
    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    a_arg = a.T.contiguous() if layout[0] == "t" else a
    b_arg = b.T.contiguous() if layout[1] == "n" else b
    c = torch.randn(m, n, device=dev, dtype=torch.float32)
    d = torch.full((m, n), float("nan"), device=dev, dtype=torch.float32)
    getattr(finegemm, f"bf16_gemm_{layout}")(a_arg, b_arg, d, c)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, reference.bf16_gemm(layout, a_arg, b_arg, c)) < 1e-5


@pytest.mark.parametrize("with_c", [False, True], ids=["no-c", "bf16-c"])
@pytest.mark.parametrize("a_k_major", [True, False], ids=["a-k-major", "a-m-major"])
@pytest.mark.parametrize("m,n,k", [(4095, 2112, 7168), (333, 576, 1536), (4096, 576, 7168)], ids=str)
def test_block_m_192(a_k_major, m, n, k, with_c):
    """Three math warpgroups (BLOCK_M 192, BF16 out, one A box per warpgroup): M not a multiple of 192, A
    K-major or M-major (the ``tn`` layouts' in-place view), with and without a bf16 C."""
    mod = _sm90()
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import make_bf16_config

    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    a_view = a if a_k_major else a.T.contiguous().T  # [M, K] with stride (1, M)
    c = torch.randn(m, n, device=dev, dtype=torch.bfloat16) if with_c else None
    desc = GemmDesc("bf16", m, n, k, a_k_major, True, False, with_c)
    cfg = make_bf16_config(desc, device_facts(dev), 192, 128)
    outs = []
    for _ in range(2):
        d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        mod.bf16_gemm(desc, cfg, a_view, b, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    assert reference.calc_diff(outs[0], reference.bf16_gemm("nt", a, b, c)) < 1e-5, cfg
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("m,n,k", [(1, 7168, 2048), (64, 2112, 7168)])
def test_public_api_replays_recorded_launch(m, n, k, monkeypatch):
    """bf16_gemm_nt's hot path (api/gemm.py's recording per pointers + signature, replayed through Triton's C
    launcher): new contents and new tensor objects at the same addresses, a CUDA graph of the call and a call
    on a side stream all give the result of a fresh kernel[grid] launch bit for bit (64x2112x7168 splits K,
    so the recording holds the reduction too) without reaching the sm90 dispatch again; a split-K recording
    replays only on its own stream (its workspace), so the graph's capture and the side stream's first call go
    through the dispatch once."""
    mod = _sm90()
    from finegemm.api import gemm as api_gemm
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import Sm90GemvConfig
    from finegemm.kernels.sm90 import gemm_bf16, gemv_bf16

    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_nt(a, b, d)
    desc = GemmDesc("bf16", m, n, k)
    cfg = mod.get_config(desc, device_facts(dev))

    def no_dispatch():
        raise AssertionError("a repeated call left the hot path")

    monkeypatch.setattr(api_gemm, "_sm90_module", no_dispatch)

    def view(t):
        return torch.as_strided(t, t.shape, t.stride())

    def check(run, seed):
        g = torch.Generator(device=dev).manual_seed(seed)
        a.copy_(torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g))
        b.copy_(torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g))
        d.fill_(float("nan"))
        run()
        want = torch.full_like(d, float("nan"))
        if isinstance(cfg, Sm90GemvConfig):  # M = 1: the GEMV route
            for kernel, grid, args, meta in gemv_bf16.build_plan(cfg, a, b, want, None):
                kernel[grid](*args, **meta)
        else:
            grid, args, meta, reduce = mod._build_plan(desc, cfg, a, b, want, None)
            gemm_bf16.bf16_gemm_kernel[grid](*args, **meta)
            if reduce is not None:
                gemm_bf16.splitk_reduce_kernel[reduce[0]](*reduce[1], **reduce[2])
        torch.cuda.synchronize()
        assert torch.equal(d.view(torch.int16), want.view(torch.int16)), seed
        assert reference.calc_diff(d, reference.bf16_gemm("nt", a, b, None)) < 1e-5

    check(lambda: finegemm.bf16_gemm_nt(view(a), view(b), view(d)), 1)
    if cfg.split_k > 1:  # bound to its stream's split-K workspace: another stream takes the dispatch once
        monkeypatch.undo()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        finegemm.bf16_gemm_nt(a, b, d)
    check(graph.replay, 2)
    side = torch.cuda.Stream()

    def on_side():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)  # a launch on the wrong stream would run before this fill
            d.fill_(float("nan"))
            finegemm.bf16_gemm_nt(a, b, d)
        torch.cuda.synchronize()

    check(on_side, 3)
    if cfg.split_k > 1:  # the API's entry now replays the side stream's recording without the dispatch
        monkeypatch.setattr(api_gemm, "_sm90_module", no_dispatch)
        check(on_side, 4)


@pytest.mark.parametrize("m,n,k,b_k_major", [(1, 7168, 16384, True), (128, 2112, 7168, True), (64, 576, 7168, False)])
def test_b_prefetch_changes_nothing(m, n, k, b_k_major):
    """``b_prefetch`` (B's box 8 K slices ahead into L2), B K-major or MN-major: right against the reference and
    bitwise the result without it."""
    import dataclasses

    mod = _sm90()
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import get_sm90_bf16_config

    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    b_view = b if b_k_major else b.T.contiguous().T  # [N, K] with stride (1, N)
    desc = GemmDesc("bf16", m, n, k, True, b_k_major)
    base = get_sm90_bf16_config(desc, device_facts(dev))  # the tensor-core kernel's (M = 1 routes to the GEMV)
    outs = []
    for cfg in (base, dataclasses.replace(base, b_prefetch=8)):
        d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        mod.bf16_gemm(desc, cfg, a, b_view, d, None)
        outs.append(d)
    torch.cuda.synchronize()
    assert reference.calc_diff(outs[1], reference.bf16_gemm("nt", a, b, None)) < 1e-5
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))


# (m, n, k, BLOCK_M, BLOCK_N, C and D dtype); FP32 D takes no 64x256 accumulator (the rules never pick it)
STAGED_C = [(4096, 576, 7168, 192, 128, torch.bfloat16), (333, 2112, 7168, 128, 256, torch.bfloat16),
            (4095, 4096, 1536, 128, 256, torch.bfloat16), (1, 24576, 1536, 64, 256, torch.bfloat16),
            (77, 576, 7168, 64, 128, torch.bfloat16), (77, 576, 7168, 64, 128, torch.float32),
            (4095, 4096, 1536, 128, 128, torch.float32), (4096, 2112, 2048, 192, 128, torch.float32),
            # two column blocks (the second C box wholly past N at 584)
            (4096, 576, 7168, 128, 144, torch.bfloat16), (333, 584, 1536, 128, 144, torch.bfloat16),
            (777, 1000, 2048, 128, 160, torch.float32), (4095, 2112, 2048, 192, 192, torch.bfloat16)]


@pytest.mark.parametrize("in_place", [False, True], ids=["c", "c-is-d"])
@pytest.mark.parametrize("m,n,k,bm,bn,dtype", STAGED_C,
                         ids=[f"{v[0]}x{v[1]}x{v[2]}-{v[3]}x{v[4]}-{str(v[5])[6:]}" for v in STAGED_C])
def test_c_staged_by_tma(m, n, k, bm, bn, dtype, in_place):
    """C of D's dtype staged by TMA in the D tile (``Sm90Bf16Config.c_tma``): right against
    the reference, bit for bit the global-load epilogue of the same tile, the same on a repeat; with C = D (in place)
    too. Output poisoned first (except in place, where D holds C)."""
    mod = _sm90()
    import dataclasses

    from finegemm.jit import heuristics_sm90
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(m + n)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g)
    c = torch.randn(m, n, device=dev, dtype=torch.float32, generator=g).to(dtype)
    desc = GemmDesc("bf16", m, n, k, True, True, dtype == torch.float32, True, c_like_d=True)
    staged = heuristics_sm90.make_bf16_config(desc, device_facts(dev), bm, bn)
    assert staged.c_tma
    want = reference.bf16_gemm("nt", a, b, c)
    outs = []
    for cfg in (staged, staged, dataclasses.replace(staged, c_tma=False)):
        if in_place:
            d = c.clone()
            mod.bf16_gemm(desc, cfg, a, b, d, d)
        else:
            d = torch.full((m, n), float("nan"), device=dev, dtype=dtype)
            mod.bf16_gemm(desc, cfg, a, b, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    assert reference.calc_diff(outs[0], want) < 1e-5, staged
    assert torch.equal(outs[0], outs[1]), "staged C: two runs differ"
    assert torch.equal(outs[0], outs[2]), "staged C differs from the global-load epilogue"


def test_c_staged_through_the_public_api():
    """bf16_gemm_nt with a bf16 C (the harness's ``+c`` cases): the rules pick 128x256 with C staged,
    the result matches the reference, and a transposed C or one at an address TMA cannot read (both not staged, the
    second rerouted at launch to the unstaged rules' tile) give the same values; a broadcast bias row is right too."""
    _sm90()
    from finegemm.api import gemm as api_gemm

    api_gemm._BF16_PLANS.clear()
    api_gemm._BF16_RECORDINGS.clear()
    m, n, k = 4096, 4096, 1536
    dev = torch.device("cuda")
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    c = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
    d = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_nt(a, b, d, c)
    plan = next(p for key, p in api_gemm._BF16_PLANS.items() if p.desc is not None and p.desc.m == m)
    assert plan.backend == "sm90" and plan.config.c_tma and plan.config.block_n == 256, plan
    c_t = c.T.contiguous().T  # same values, column-major: read by the epilogue's global loads
    d_t = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_nt(a, b, d_t, c_t)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, reference.bf16_gemm("nt", a, b, c)) < 1e-5
    assert reference.calc_diff(d_t, d) < 1e-5
    c_odd = torch.empty(m * n + 1, device=dev, dtype=torch.bfloat16)[1:].view(m, n)  # base 2 bytes off 16
    c_odd.copy_(c)
    d_odd = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_nt(a, b, d_odd, c_odd)
    bias = torch.randn(1, n, device=dev, dtype=torch.bfloat16)
    d_bias = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    finegemm.bf16_gemm_nt(a, b, d_bias, bias.expand(m, n))  # a broadcast C: row stride 0, never staged
    torch.cuda.synchronize()
    assert torch.equal(d_odd, d_t)
    assert reference.calc_diff(d_bias, reference.bf16_gemm("nt", a, b, bias.expand(m, n))) < 1e-5
    api_gemm._BF16_PLANS.clear()
    api_gemm._BF16_RECORDINGS.clear()


def _run_tile_twice(m, n, k, bm, bn, split, b_k_major, c_dtype, d_dtype):
    """An explicit ``bm x bn`` (split-K ``split``) config on random inputs, twice into poisoned outputs: every element
    written, right against the reference, the same bits on the repeat. Returns the config."""
    mod = _sm90()
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import make_bf16_config

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(m + n + bn)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g)
    b_view = b if b_k_major else b.T.contiguous().T  # [N, K] with stride (1, N)
    c = torch.randn(m, n, device=dev, dtype=torch.float32, generator=g).to(c_dtype) if c_dtype else None
    desc = GemmDesc("bf16", m, n, k, True, b_k_major, d_dtype == torch.float32, c is not None)
    cfg = make_bf16_config(desc, device_facts(dev), bm, bn, split)
    assert mod.unsupported_reason(desc, device_facts(dev)) is None
    outs = []
    for _ in range(2):
        d = torch.full((m, n), float("nan"), device=dev, dtype=d_dtype)
        mod.bf16_gemm(desc, cfg, a, b_view, d, c)
        outs.append(d)
    torch.cuda.synchronize()
    assert not torch.isnan(outs[0]).any(), ("unwritten output", cfg)
    assert reference.calc_diff(outs[0], reference.bf16_gemm("nt", a, b, c)) < 1e-5, cfg
    assert torch.equal(outs[0], outs[1])
    return cfg


# (m, n, k, BLOCK_M, BLOCK_N, split-K, B K-major, C dtype or None, D dtype): tiles whose width is not a power of two
SPLIT_N = [(4096, 576, 7168, 128, 144, 1, True, None, torch.bfloat16),
           (4096, 576, 7168, 128, 144, 1, True, torch.bfloat16, torch.bfloat16),
           (333, 584, 1536, 128, 144, 1, True, torch.bfloat16, torch.bfloat16),  # the last tile's 2nd block past N
           (4095, 2112, 2048, 192, 192, 1, True, None, torch.bfloat16),
           (64, 2112, 7168, 64, 96, 4, True, torch.bfloat16, torch.bfloat16),
           (1000, 576, 1536, 128, 160, 1, False, None, torch.bfloat16),
           (777, 1000, 2048, 128, 160, 1, True, torch.float32, torch.float32)]


@pytest.mark.parametrize("m,n,k,bm,bn,split,b_k_major,c_dtype,d_dtype", SPLIT_N,
                         ids=[f"{v[0]}x{v[1]}x{v[2]}-{v[3]}x{v[4]}s{v[5]}{'' if v[6] else '-nn'}"
                              f"{'-c' if v[7] else ''}{'-f32' if v[8] == torch.float32 else ''}" for v in SPLIT_N])
def test_split_n_tiles(m, n, k, bm, bn, split, b_k_major, c_dtype, d_dtype):
    """Tiles BLOCK_N + BLOCK_N1 wide (two WGMMAs and two B boxes a K slice, two D boxes): right against the
    reference with N not a multiple of the width (a second block wholly past N), split-K, an N-major B, a bf16 C and
    FP32 C / D; output poisoned first; the same bits on a repeat."""
    cfg = _run_tile_twice(m, n, k, bm, bn, split, b_k_major, c_dtype, d_dtype)
    assert cfg.column_blocks[1] > 0


# (m, n, k, BLOCK_M, BLOCK_N, split-K, B K-major, C dtype or None, D dtype): D staged in halves (the rule's tiles,
# and others it leaves whole)
D_HALVES = [(4096, 4096, 1536, 128, 256, 1, True, None, torch.bfloat16),
            (577, 2900, 2048, 128, 256, 1, True, None, torch.float32),
            (4095, 2112, 2048, 192, 128, 1, False, None, torch.float32),
            (4095, 2112, 2048, 192, 128, 1, True, None, torch.bfloat16),
            (333, 1000, 2048, 64, 256, 1, False, None, torch.bfloat16),
            (128, 4096, 7168, 128, 256, 2, True, torch.bfloat16, torch.bfloat16),
            (777, 1000, 2048, 128, 128, 1, True, torch.float32, torch.float32)]


@pytest.mark.parametrize("m,n,k,bm,bn,split,b_k_major,c_dtype,d_dtype", D_HALVES,
                         ids=[f"{v[0]}x{v[1]}x{v[2]}-{v[3]}x{v[4]}s{v[5]}{'' if v[6] else '-nn'}"
                              f"{'-c' if v[7] else ''}{'-f32' if v[8] == torch.float32 else ''}" for v in D_HALVES])
def test_d_halves_tiles(m, n, k, bm, bn, split, b_k_major, c_dtype, d_dtype, monkeypatch):
    """D through a half-wide buffer in two TMA stores, one more ring stage (Sm90Bf16Config.d_halves, also where the
    rule keeps the whole tile): right against the reference with partial tiles, split-K, an N-major B, C from
    global memory and FP32 C / D; output poisoned first; the same bits on a repeat."""
    from finegemm.jit import heuristics_sm90

    monkeypatch.setattr(heuristics_sm90, "BF16_D_HALVES_MAX_STAGES", 16)
    cfg = _run_tile_twice(m, n, k, bm, bn, split, b_k_major, c_dtype, d_dtype)
    assert cfg.d_halves and not cfg.c_tma, cfg
