"""The sm90 replay path (kernels/sm90/launcher.py) on the H200 (``pytest -m gpu``).

A replayed launch must give bit-identical output to the normal ``kernel[grid](...)`` launch, replay
correctly from a CUDA graph (reading the buffers' current contents), and follow the current stream.
Shapes: one split-K (two replayed launches) and one single-launch config.
"""

from __future__ import annotations

import pytest
import torch
from generators import replay_at_once, sm90_device

import finegemm
from finegemm import reference
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

pytestmark = pytest.mark.gpu

SHAPES = [(64, 2112, 7168), (128, 7168, 2048)]


def _sm90():
    sm90_device()
    from finegemm.jit.device import device_facts
    from finegemm.kernels.sm90 import dispatch, gemm_1d2d

    return dispatch, gemm_1d2d, device_facts


def _inputs(m, n, k, seed=0):
    torch.manual_seed(seed)
    dev = torch.device("cuda")
    a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16))
    b, sfb = per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16))
    return a, sfa, finegemm.get_mn_major_tma_aligned_tensor(sfa), b, sfb, sfb.contiguous()


def _setup(m, n, k):
    dispatch, gemm_1d2d, device_facts = _sm90()
    from finegemm.jit.heuristics import GemmDesc

    desc = GemmDesc("fp8_1d2d", m, n, k)
    cfg = dispatch.get_config(desc, device_facts(torch.device("cuda")))
    return dispatch, gemm_1d2d, desc, cfg


def _normal(dispatch, gemm_1d2d, desc, cfg, a, sfa_k, b, sfb_k, d):
    """The pre-replay launch: the plan's kernel(s) through ``kernel[grid](...)``."""
    grid, args, meta, reduce = dispatch._build_plan(desc, cfg, a, sfa_k, b, sfb_k, d, None)
    gemm_1d2d.fp8_gemm_kernel[grid](*args, **meta)
    if reduce is not None:
        rgrid, rargs, rmeta = reduce
        gemm_1d2d._splitk_reduce_kernel[rgrid](*rargs, **rmeta)


def _bits(t):
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32)


def _warm_recording(dispatch, desc, cfg, a, sfa_k, b, sfb_k, d):
    """First call (normal launch, recorded); returns the recording replayed from now on."""
    # fp8_gemm returns the recording it used: the cache's last entry need not be it (the allocator may
    # hand these tensors the addresses of an earlier test's, whose recording is then replayed)
    recording = dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)
    assert recording is not None and recording.replayable, recording
    assert recording.modes == ("raw",) * (2 if cfg.split_k > 1 else 1), recording
    return recording


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_replay_is_bit_identical_to_the_normal_launch(m, n, k):
    dispatch, gemm_1d2d, desc, cfg = _setup(m, n, k)
    a, sfa, sfa_k, b, sfb, sfb_k = _inputs(m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    _warm_recording(dispatch, desc, cfg, a, sfa_k, b, sfb_k, d)
    d.fill_(float("nan"))
    dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)  # replayed
    want = torch.full_like(d, float("nan"))
    _normal(dispatch, gemm_1d2d, desc, cfg, a, sfa_k, b, sfb_k, want)
    torch.cuda.synchronize()
    assert torch.equal(_bits(d), _bits(want))
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), None, recipe=(1, 128, 128))
    assert reference.calc_diff(d, ref) < 1e-3


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_public_api_replays(m, n, k, monkeypatch):
    """fp8_gemm_nt's hot path (api/gemm.py's recording per pointers + signature): after the first
    call, new contents and new tensor objects at the same addresses replay without reaching the
    sm90 dispatch, bit-identical to the normal launch, also from a CUDA graph and on a side stream.
    A split-K launch replays only on its own stream (its split-K buffers): captured in a graph or on a
    side stream it goes through the dispatch once, then the side stream's calls replay."""
    dispatch, gemm_1d2d, desc, cfg = _setup(m, n, k)
    from finegemm.api import gemm as api_gemm

    a, sfa, sfa_k, b, sfb, sfb_k = _inputs(m, n, k, seed=1)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d)
    n_api, n_sm90 = len(api_gemm._FP8_RECORDINGS), len(dispatch._recordings)

    def no_dispatch():
        raise AssertionError("a repeated call left the hot path")

    monkeypatch.setattr(api_gemm, "_sm90_module", no_dispatch)

    def view(t):
        return torch.as_strided(t, t.shape, t.stride())  # a new tensor object at the same address

    def check(run, seed):
        a2, _, sfa2, b2, _, sfb2 = _inputs(m, n, k, seed=seed)
        a.copy_(a2)
        sfa_k.copy_(sfa2)
        b.copy_(b2)
        sfb_k.copy_(sfb2)
        d.fill_(float("nan"))
        run()
        want = torch.full_like(d, float("nan"))
        _normal(dispatch, gemm_1d2d, desc, cfg, a, sfa_k, b, sfb_k, want)
        torch.cuda.synchronize()
        assert torch.equal(_bits(d), _bits(want)), seed

    check(lambda: finegemm.fp8_gemm_nt((view(a), view(sfa_k)), (view(b), view(sfb_k)), view(d)), 7)
    if cfg.split_k > 1:  # bound to its stream's split-K buffers: another stream takes the dispatch once
        monkeypatch.undo()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d)
    check(graph.replay, 8)
    side = torch.cuda.Stream()

    def on_side():
        side.wait_stream(torch.cuda.current_stream())  # the new inputs are written
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)  # a launch on the wrong stream would run before this fill
            d.fill_(float("nan"))
            finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d)
        torch.cuda.synchronize()

    check(on_side, 9)
    assert len(api_gemm._FP8_RECORDINGS) == n_api
    if cfg.split_k > 1:
        # the side stream's launches were recorded (the capture's were not: launcher.stream_scratch) and the
        # API's entry now replays them on the side stream without the dispatch
        assert len(dispatch._recordings) <= n_sm90 + 1
        monkeypatch.setattr(api_gemm, "_sm90_module", no_dispatch)
        check(on_side, 10)
    else:
        assert len(dispatch._recordings) == n_sm90


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_replay_under_cuda_graph_capture(m, n, k):
    dispatch, gemm_1d2d, desc, cfg = _setup(m, n, k)
    a, sfa, sfa_k, b, sfb, sfb_k = _inputs(m, n, k, seed=2)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    _warm_recording(dispatch, desc, cfg, a, sfa_k, b, sfb_k, d)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)
    for seed in (3, 4):  # new contents in the same buffers: the graph must compute on them
        a2, _, sfa2, b2, _, sfb2 = _inputs(m, n, k, seed=seed)
        a.copy_(a2)
        sfa_k.copy_(sfa2)
        b.copy_(b2)
        sfb_k.copy_(sfb2)
        d.fill_(float("nan"))
        graph.replay()
        want = torch.full_like(d, float("nan"))
        _normal(dispatch, gemm_1d2d, desc, cfg, a, sfa_k, b, sfb_k, want)
        torch.cuda.synchronize()
        assert torch.equal(_bits(d), _bits(want)), seed


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_replay_on_a_side_stream(m, n, k):
    dispatch, gemm_1d2d, desc, cfg = _setup(m, n, k)
    a, sfa, sfa_k, b, sfb, sfb_k = _inputs(m, n, k, seed=5)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    _warm_recording(dispatch, desc, cfg, a, sfa_k, b, sfb_k, d)  # recorded on the default stream
    want = torch.full_like(d, float("nan"))
    _normal(dispatch, gemm_1d2d, desc, cfg, a, sfa_k, b, sfb_k, want)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # tens of ms: a launch on the wrong stream would run before the fill
        d.fill_(float("nan"))
        dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)
    torch.cuda.synchronize()
    assert torch.equal(_bits(d), _bits(want))


def test_new_tensor_objects_at_recorded_addresses_replay():
    """Recordings hold no tensor: new tensor objects over the recorded memory (what the caching
    allocator hands a decode loop that frees and re-allocates its activations) replay, and the old
    objects are freed."""
    import gc
    import weakref

    m, n, k = SHAPES[0]
    dispatch, gemm_1d2d, desc, cfg = _setup(m, n, k)
    a0, _, sfa0, b, _, sfb_k = _inputs(m, n, k, seed=6)
    a_mem, sfa_mem = a0.clone(), sfa0.clone()  # the "allocator's" memory for A and its scales
    d_mem = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    recorded, old = [], None
    for step in range(3):
        a_new, _, sfa_new, _, _, _ = _inputs(m, n, k, seed=10 + step)
        a = torch.as_strided(a_mem, a_mem.shape, a_mem.stride())  # a new tensor object, same address
        sfa_k = torch.as_strided(sfa_mem, sfa_mem.shape, sfa_mem.stride())
        d = torch.as_strided(d_mem, d_mem.shape, d_mem.stride())
        a.copy_(a_new)
        sfa_k.copy_(sfa_new)
        d.fill_(float("nan"))
        dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)
        want = torch.full_like(d, float("nan"))
        _normal(dispatch, gemm_1d2d, desc, cfg, a, sfa_k, b, sfb_k, want)
        torch.cuda.synchronize()
        assert torch.equal(_bits(d), _bits(want)), step
        recorded.append(len(dispatch._recordings))
        old = weakref.ref(a)
        del a, sfa_k, d, want
        gc.collect()
        assert old() is None, "a recording kept the caller's tensor alive"
    assert recorded[0] == recorded[1] == recorded[2], recorded


def test_split_k_on_two_streams_at_once():
    """Two streams run the same split-K shapes at once with different inputs (FP8 64x2112x7168, split 4, and the
    BF16 one, split too): each stream's launches own their split-K workspace and arrival counters
    (launcher.stream_scratch), so both streams' results are right after every round."""
    _sm90()
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.kernels.sm90 import dispatch_bf16

    m, n, k = SHAPES[0]
    dev = torch.device("cuda")
    assert dispatch_bf16.get_config(GemmDesc("bf16", m, n, k), device_facts(dev)).split_k > 1
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    fp8 = [_inputs(m, n, k, seed=20 + i) for i in range(2)]
    bf16 = [(torch.randn(m, k, device=dev, dtype=torch.bfloat16), torch.randn(n, k, device=dev, dtype=torch.bfloat16))
            for _ in range(2)]
    d8 = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(2)]
    d16 = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(2)]
    want8 = [reference.fp8_gemm_nt((x[0], x[1]), (x[3], x[4]), None, recipe=(1, 128, 128)) for x in fp8]
    want16 = [reference.bf16_gemm("nt", a, b) for a, b in bf16]
    for _ in range(3):
        for i, s in enumerate(streams):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                d8[i].fill_(float("nan"))
                d16[i].fill_(float("nan"))
        for _ in range(20):  # both streams keep the GPU busy at once
            for i, s in enumerate(streams):
                with torch.cuda.stream(s):
                    a, _, sfa_k, b, _, sfb_k = fp8[i]
                    finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d8[i])
                    finegemm.bf16_gemm_nt(bf16[i][0], bf16[i][1], d16[i])
        torch.cuda.synchronize()
        for i in range(2):
            assert reference.calc_diff(d8[i], want8[i]) < 1e-3, i
            assert reference.calc_diff(d16[i], want16[i]) < 1e-5, i


def test_split_k_graphs_captured_on_one_stream():
    """CUDA graphs captured one after another on torch's capture stream each own the split-K partials and arrival
    counters their capture allocated (launcher.stream_scratch caches no buffer allocated while capturing): FP32
    576x4096x7168 with C (fused split tail: the kernel counts arrivals and leaves the counters 0) and BF16
    64x2112x7168 (split K, reduction launch). The graph captured last, replayed first, is right; both graphs
    replayed at once on two streams are right."""
    dispatch, _, device_facts = _sm90()
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.quant import per_token_cast_to_fp8

    dev = torch.device("cuda")
    m, n, k = 576, 4096, 7168
    cfg = dispatch.get_config(GemmDesc("fp8_1d1d", m, n, k, True, True, True, True, False), device_facts(dev))
    assert cfg.splitk_fused and cfg.split_tail, cfg
    fp8, c, d8, want8 = [], [], [], []
    for i in range(2):
        torch.manual_seed(40 + i)
        a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16))
        b, sfb = per_token_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16))
        fp8.append((a, sfa, b, sfb))
        c.append(torch.randn(m, n, device=dev))
        d8.append(torch.empty(m, n, device=dev))
        want8.append(reference.fp8_gemm_nt((a, sfa), (b, sfb), c[i], recipe=(1, 1, 128)))
    bm, bn, bk = SHAPES[0]
    bf16 = [(torch.randn(bm, bk, device=dev, dtype=torch.bfloat16), torch.randn(bn, bk, device=dev,
                                                                               dtype=torch.bfloat16))
            for _ in range(2)]
    d16 = [torch.empty(bm, bn, device=dev, dtype=torch.bfloat16) for _ in range(2)]
    want16 = [reference.bf16_gemm("nt", x, w) for x, w in bf16]

    def call(i):
        a, sfa, b, sfb = fp8[i]
        finegemm.fp8_gemm_nt((a, sfa), (b, sfb), d8[i], c=c[i], recipe=(1, 1, 128))
        finegemm.bf16_gemm_nt(bf16[i][0], bf16[i][1], d16[i])

    call(0)  # compiled and warm outside the capture
    torch.cuda.synchronize()
    graphs = [torch.cuda.CUDAGraph() for _ in range(2)]
    for i, graph in enumerate(graphs):
        with torch.cuda.graph(graph):
            call(i)

    def poison():
        for t in d8 + d16:
            t.fill_(float("nan"))

    def check():
        torch.cuda.synchronize()
        for i in range(2):
            assert reference.calc_diff(d8[i], want8[i]) < 1e-3, i
            assert reference.calc_diff(d16[i], want16[i]) < 1e-5, i

    poison()
    graphs[1].replay()
    graphs[0].replay()
    check()
    for _ in range(3):
        poison()
        replay_at_once(graphs)
        check()
