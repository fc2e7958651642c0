"""finegemm under torch.compile on the CPU, through Triton's interpreter (api/torch_ops.py registers the operators,
api/traced.py calls them).

Every public entry, called inside a function compiled with ``fullgraph=True`` (no graph break allowed),
must trace to one opaque ``torch.ops.finegemm`` node and give the eager result against the float64
reference: the harness's smoke case of each kind (dense FP8 and its in-place FP32 ``c = d`` form, BF16, m-grouped
contiguous and masked, k-grouped with ``c = d``, MQA prefill and paged logits). ``aot_eager`` also
functionalizes the declared mutation of ``d``.
"""

from __future__ import annotations

import pytest
import torch

import finegemm
from finegemm.bench import suites
from finegemm.bench.inputs import make_inputs
from finegemm.bench.peers import FinegemmPeer

CPU = torch.device("cpu")
SMOKE = [c for s in ("dense", "weight-grad", "bf16", "grouped", "k-grouped", "mqa", "paged-mqa")
         for c in suites.suite_cases(s, smoke=True)]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("case", SMOKE, ids=[c.name for c in SMOKE])
@pytest.mark.parametrize("backend", ["aot_eager"])
def test_every_entry_compiles_to_one_node_and_matches_the_reference(case, backend):
    inp = make_inputs(case, CPU, seed=5)
    prepared = FinegemmPeer("portable").prepare(case, inp)
    counts = torch._dynamo.utils.counters
    with prepared.context():
        prepared.reset()
        torch.compile(prepared.fn, backend=backend, fullgraph=True)()
        diff = inp.check(prepared.output(), prepared.family, prepared.with_c)
    assert diff < case.tolerance, (case.name, diff)
    assert not counts["graph_break"], dict(counts["graph_break"])


def test_the_traced_graph_holds_the_operator_and_eager_calls_do_not():
    """The compiled graph calls ``torch.ops.finegemm.fp8_gemm_nt`` (found in the FX graph), and an eager call
    never reaches the operator (its dispatch costs microseconds of the hot path)."""
    a = finegemm.per_token_cast_to_fp8(torch.randn(16, 128))
    b = finegemm.per_block_cast_to_fp8(torch.randn(64, 128))
    d = torch.empty(16, 64, dtype=torch.bfloat16)
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(a0, a1, b0, b1, out):
        finegemm.fp8_gemm_nn((a0, a1), (b0.T, b1.T), out)  # the nn form: transposes, then the nt entry
        return out.float().sum()

    total = torch.compile(f, backend=capture, fullgraph=True)(a[0], a[1], b[0], b[1], d)
    ops = [n.target for gm in graphs for n in gm.graph.nodes if n.op == "call_function"]
    op = torch.ops.finegemm.fp8_gemm_nt
    assert sum(t in (op, op.default) for t in ops) == 1, ops
    assert torch.isclose(total, d.float().sum())
    ref = finegemm.reference.fp8_gemm_nt(a, b, None, (1, 128, 128))
    assert finegemm.calc_diff(d, ref) < 1e-3

    calls = []
    real = torch.ops.finegemm.fp8_gemm_nt
    try:
        torch.ops.finegemm.fp8_gemm_nt = lambda *args: calls.append(args)  # type: ignore[attr-defined]
        finegemm.fp8_gemm_nt(a, (b[0], b[1]), d)
    finally:
        torch.ops.finegemm.fp8_gemm_nt = real  # type: ignore[attr-defined]
    assert calls == []


def test_bad_input_still_raises_the_clear_error_when_compiled():
    """Argument checks run in the operator at call time: the same ValueError as eager code."""
    a = finegemm.per_token_cast_to_fp8(torch.randn(16, 128))
    b = finegemm.per_block_cast_to_fp8(torch.randn(64, 128))
    d = torch.empty(16, 32, dtype=torch.bfloat16)  # wrong N

    def f(a0, a1, b0, b1, out):
        finegemm.fp8_gemm_nt((a0, a1), (b0, b1), out)
        return out

    with pytest.raises(ValueError, match="d"):
        torch.compile(f, backend="aot_eager", fullgraph=True)(a[0], a[1], b[0], b[1], d)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_inductor_on_the_gpu_with_and_without_cuda_graphs(mode):
    """Inductor around a decode step (FP8 64x2112x7168, split-K, into a fresh output; then a bf16 op on it):
    right against the reference on every call, also when inductor replays it as a CUDA graph with new
    inputs copied into the same buffers."""
    from generators import sm90_device

    dev = sm90_device()
    m, n, k = 64, 2112, 7168
    b = finegemm.per_block_cast_to_fp8(torch.randn(n, k, device=dev))

    def step(a0, a1, b0, b1):
        out = torch.empty(a0.shape[0], b0.shape[0], device=a0.device, dtype=torch.bfloat16)
        finegemm.fp8_gemm_nt((a0, a1), (b0, b1), out)
        return out * 2

    compiled = torch.compile(step, mode=None if mode == "default" else mode, fullgraph=True)
    for seed in range(4):
        torch.manual_seed(seed)
        a = finegemm.per_token_cast_to_fp8(torch.randn(m, k, device=dev))
        sfa = finegemm.get_mn_major_tma_aligned_tensor(a[1])
        got = compiled(a[0], sfa, b[0], b[1]).clone()
        torch.cuda.synchronize()
        ref = finegemm.reference.fp8_gemm_nt(a, b, None, (1, 128, 128)) * 2
        assert finegemm.calc_diff(got, ref) < 1e-3, seed


def _op_calls(case, t) -> list:
    """(operator, arguments) of ``case``'s public call as api/traced.py passes them (d a fresh tensor)."""
    ops = torch.ops.finegemm
    if case.kind in ("fp8_gemm", "fp8_gemm_wgrad"):
        wgrad = case.kind == "fp8_gemm_wgrad"
        d = t["c"].clone() if wgrad else torch.empty(case.m, case.n, dtype=torch.bfloat16)
        return [(ops.fp8_gemm_nt.default, (t["a"][0], t["sfa_mn"], *t["b"], d, None, wgrad,
                                          [1, 1, 128] if wgrad else None))]
    if case.kind == "bf16_gemm":
        d = torch.empty(case.m, case.n, dtype=torch.float32 if case.out == "fp32" else torch.bfloat16)
        return [(ops.bf16_gemm_nt.default, (t["a_bf"], t["b_bf"], d, t["c"], False))]
    if case.kind == "m_grouped_contiguous":
        d = torch.empty(case.m, case.n, dtype=torch.bfloat16)
        return [(ops.m_grouped_contiguous.default, (t["a"][0], t["sfa_mn"], *t["b"], d, t["layout"], False, None,
                                                    None))]
    if case.kind == "m_grouped_masked":
        d = torch.empty(case.groups, case.m, case.n, dtype=torch.bfloat16)
        return [(ops.m_grouped_masked.default, (t["a"][0], t["sfa_mn"], *t["b"], d, t["masked_m"], t["expected_m"],
                                                None))]
    if case.kind == "k_grouped":
        return [(ops.k_grouped.default, (*t["a"], *t["b"], t["c"].clone(), list(case.ks), t["ks_tensor"], None,
                                         True, "tn", None))]
    logits = torch.float32 if case.out == "fp32" else torch.bfloat16
    if case.kind == "mqa_logits":
        return [(ops.fp8_mqa_logits.default, (t["q"], *t["kv"], t["weights"], t["ks"], t["ke"], not case.compressed,
                                              t["max_seqlen_k"], logits))]
    return [(ops.fp8_paged_mqa_logits.default, (t["q"], t["cache"], t["weights"], t["ctx"], t["table"], t["meta"],
                                                t["max_len"], False, logits))]


@pytest.mark.parametrize("case", SMOKE, ids=[c.name for c in SMOKE])
def test_operators_fake_tensors_match_the_real_outputs(case):
    """torch.library.opcheck's fake-tensor test on every operator: the fake implementation gives the real
    outputs' shapes, strides (the logits' row padding) and dtypes, and the declared mutation of ``d`` holds.
    (Its other tests compare FP8 tensors with allclose, which CPU torch does not implement for e4m3.)"""
    t = make_inputs(case, CPU, seed=6).t
    for op, args in _op_calls(case, t):
        assert torch.library.opcheck(op, args, test_utils=("test_faketensor",)) == {"test_faketensor": "SUCCESS"}
