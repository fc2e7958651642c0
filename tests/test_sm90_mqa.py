"""The Gluon MQA-logits kernel (finegemm/kernels/sm90/mqa_logits.py, what the API runs on sm_90).

CPU: it compiles for sm_90 for each supported (heads, head dim) and logits dtype, with the async WGMMA
pipeline it exists for (one WGMMA left in flight while the previous tile is reduced), TMA loads,
mbarriers and no spills. GPU (``-m gpu``): against the float64 reference on DeepSeek V3.2 sizes, exact
``-inf`` positions, bitwise repeat; clean and unclean; the full and the compact form.
"""

from __future__ import annotations

import re

import pytest
import torch
from generators import sm90_device
from test_mqa import MqaCase, assert_logits_match, generate_mqa

from finegemm.kernels.sm90.compile_check import (
    PTX_MUST_CONTAIN,
    TARGET,
    _desc_sig,
    assert_async_wgmma_kernel,
    assert_ptx_contains,
)
from finegemm.reference import mqa as ref

CASES = [(64, 128), (32, 128), (16, 128), (128, 128), (64, 64), (32, 64), (64, 32)]


def _compile(heads, head_dim, out, clean, overlap=True, sf_after_sum=True, head_sum_mma=False, block_q=None,
             maxnreg=None, compressed=False, wide_clean=False):
    import triton
    from triton.experimental.gluon import language as gl

    from finegemm.jit.interpret import restore_language
    from finegemm.kernels.sm90 import mqa_logits as m
    from finegemm.kernels.sm90.gluon_compat import ast_source

    bq = block_q or m.block_q_for(heads)
    sig = {"q_desc": _desc_sig("fp8e4nv", [bq * heads, head_dim], gl.float8e4nv),
           "kv_desc": _desc_sig("fp8e4nv", [m.BLOCK_KV, head_dim], gl.float8e4nv),
           "kv_sf_ptr": "*fp32", "w_ptr": "*fp32", "start_ptr": "*i32", "end_ptr": "*i32", "out_ptr": f"*{out}",
           "seq_len": "i32", "seq_len_kv": "i32", "tiles_per_split": "i32", "stride_ws": "i32", "stride_out": "i32",
           "max_seqlen_k": "i32", "HEADS": "constexpr", "BLOCK_Q": "constexpr", "STAGES_": "constexpr",
           "CLEAN": "constexpr", "OVERLAP": "constexpr", "SF_AFTER_SUM": "constexpr", "HEAD_SUM_MMA": "constexpr",
           "COMPRESSED": "constexpr", "WIDE_CLEAN": "constexpr"}
    consts = dict(HEADS=heads, BLOCK_Q=bq, STAGES_=m.STAGES, CLEAN=clean, OVERLAP=overlap, SF_AFTER_SUM=sf_after_sum,
                  HEAD_SUM_MMA=head_sum_mma, COMPRESSED=compressed, WIDE_CLEAN=wide_clean)
    restore_language()  # interpreted CPU tests earlier in this process may have left tl patched
    options = {"num_warps": 4, **({"maxnreg": maxnreg} if maxnreg else {})}
    # ast_source: the parameters left out (LAST_FIRST) at their defaults, which Triton 3.9 no longer fills in
    return triton.compile(ast_source(m.mqa_logits_kernel, sig, consts), target=TARGET, options=options)


def mqa_ptx_must_contain(wgmma_n: int) -> dict[str, str]:
    """What an MQA-logits kernel's PTX must show (for :func:`assert_async_wgmma_kernel`): e4m3 WGMMAs of
    N = ``wgmma_n`` (query-head rows), TMA loads and mbarrier waits."""
    return {f"wgmma e4m3 m64n{wgmma_n}": rf"wgmma\.mma_async\.sync\.aligned\.m64n{wgmma_n}k32\.f32\.e4m3\.e4m3",
            "TMA load": PTX_MUST_CONTAIN["TMA load"], "mbarrier": PTX_MUST_CONTAIN["mbarrier"]}


@pytest.mark.parametrize("heads,head_dim", CASES)
@pytest.mark.parametrize("out,clean", [("fp32", True), ("bf16", False)])
def test_compiles_with_the_overlapped_pipeline(heads, head_dim, out, clean):
    ptx, _ = assert_async_wgmma_kernel(_compile(heads, head_dim, out, clean), mqa_ptx_must_contain(128))
    # the previous tile's epilogue runs while exactly one WGMMA group (the current tile's) is in flight
    assert re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", ptx)


@pytest.mark.parametrize("heads", [16, 32, 64, 128])
def test_dispatched_schedule_compiles(heads):
    """What the API launches (D=128, one key tile at a time): WGMMA, TMA, <= 128 registers (4 CTAs an SM;
    H=16's 8-query epilogue: <= 168, 3 CTAs)."""
    _, usage = assert_async_wgmma_kernel(_compile(heads, 128, "fp32", True, overlap=False), mqa_ptx_must_contain(128))
    assert usage["REG"] <= (128 if heads >= 32 else 168), usage


@pytest.mark.parametrize("heads,head_dim", [(64, 128), (32, 64), (64, 32), (128, 128)])
def test_scale_after_head_sum_compiles_to_fewer_multiplies(heads, head_dim):
    """``SF_AFTER_SUM`` (the default): the per-score FMUL by kv_sf and the half-rate FMNMX of the ReLU leave
    the epilogue for one FFMA (SASS at H=64: 66 FMUL + 64 FMNMX + 62 FFMA -> 6 + 0 + 126 a thread and key
    tile), no spills, WGMMAs still asynchronous."""
    import collections

    from finegemm.kernels.sm90.compile_check import sass

    def ops(kernel):
        return collections.Counter(re.findall(r"\b(FMUL|FMNMX|FFMA|FADD)\b", sass(kernel)))

    before, after = (_compile(heads, head_dim, "fp32", True, overlap=False, sf_after_sum=x) for x in (False, True))
    a, b = ops(before), ops(after)
    assert b["FMUL"] + 32 <= a["FMUL"] and b["FMNMX"] + 32 <= a["FMNMX"], (a, b)
    assert b["FMUL"] + b["FMNMX"] + b["FFMA"] + 32 <= a["FMUL"] + a["FMNMX"] + a["FFMA"], (a, b)
    assert_async_wgmma_kernel(after, mqa_ptx_must_contain(128))  # block_q_for: 128 query-head rows


def head_sum_ptx_must_contain(rows: int, sum_n: int) -> dict[str, str]:
    """:func:`mqa_ptx_must_contain` plus the tensor-core head sum's instructions: the ReLU fused into the
    bf16 rounding, and bf16 WGMMAs of N = ``sum_n`` (the queries)."""
    return {**mqa_ptx_must_contain(rows), "cvt.rn.relu.bf16x2": r"cvt\.rn\.relu\.bf16x2\.f32",
            f"wgmma bf16 m64n{sum_n}": rf"wgmma\.mma_async\.sync\.aligned\.m64n{sum_n}k16\.f32\.bf16\.bf16"}


@pytest.mark.parametrize("heads,head_dim", CASES)
def test_head_sum_on_tensor_cores_compiles(heads, head_dim):
    """``HEAD_SUM_MMA``: the epilogue's FFMAs and shuffles give way to one cvt.rn.relu.bf16x2 per two scores
    and a second (bf16) WGMMA against the weights; no spills, WGMMAs asynchronous, <= 128 registers at the
    default 128 rows (four CTAs an SM), and at 256 rows (block_q = 256 / H) <= 200, or <= 168 without
    spills but in the signed-scale loop under the API's ``maxnreg`` (three CTAs an SM)."""
    import collections

    from finegemm.kernels.sm90 import mqa_logits as m
    from finegemm.kernels.sm90.compile_check import sass

    bq = m.block_q_for(heads)
    kernel = _compile(heads, head_dim, "fp32", True, overlap=False, head_sum_mma=True)
    _, usage = assert_async_wgmma_kernel(kernel, head_sum_ptx_must_contain(bq * heads, max(8, bq)))
    assert usage["REG"] <= 128, usage
    ops = collections.Counter(re.findall(r"\b(FFMA|SHFL)\b", sass(kernel)))
    cuda_core = collections.Counter(re.findall(r"\b(FFMA|SHFL)\b", sass(
        _compile(heads, head_dim, "fp32", True, overlap=False))))
    # Every head-sum multiply-add leaves the CUDA cores: no FFMA is left, where the CUDA-core sum has them (how
    # many of its multiply-adds ptxas fuses differs by release: 126 FFMA on 3.6, 96 and 30 FMUL + FADD on 3.8 / 3.9).
    assert ops["FFMA"] == 0 and cuda_core["FFMA"] >= 64, (ops, cuda_core)
    wide = 256 // heads
    _, usage = assert_async_wgmma_kernel(_compile(heads, head_dim, "bf16", False, overlap=False, head_sum_mma=True,
                                                  block_q=wide), head_sum_ptx_must_contain(256, max(8, wide)))
    assert usage["REG"] <= 200, usage
    bq, maxnreg = m.prefill_config(heads, head_dim)
    if maxnreg:  # what the API launches: spills, if any, only in the signed-scale loop
        kernel = _compile(heads, head_dim, "fp32", True, overlap=False, head_sum_mma=True, block_q=bq, maxnreg=maxnreg)
        assert_ptx_contains(kernel, head_sum_ptx_must_contain(bq * heads, max(8, bq)))
        _spills_only_in_the_signed_loop(kernel)
        from finegemm.kernels.sm90.compile_check import resource_usage
        assert resource_usage(kernel)["REG"] <= maxnreg


def _spills_only_in_the_signed_loop(kernel) -> None:
    """The head-sum kernel's SASS has two tile loops, the nonnegative-scale one first; assert that every
    local-memory access (a spill) comes after the first loop's last head-sum HGMMA, i.e. in the loop that
    runs only for a CTA with a negative key scale (which per_token_cast_to_fp8 never gives)."""
    from finegemm.kernels.sm90.compile_check import sass, wgmma_serialization

    lines = sass(kernel).splitlines()
    sums = [i for i, line in enumerate(lines) if re.search(r"HGMMA\.64x\d+x16\.F32\.BF16", line)]
    gaps = [(sums[j + 1] - sums[j], j) for j in range(len(sums) - 1)]
    first_loop_end = sums[max(gaps)[1]]  # the two loops' HGMMA runs are separated by the largest gap
    spills = [i for i, line in enumerate(lines) if re.search(r"\b(STL|LDL)\b", line)]
    assert all(i > first_loop_end for i in spills), (first_loop_end, spills)
    assert not (notes := wgmma_serialization(kernel)), notes


@pytest.mark.parametrize("heads,head_dim", [(32, 64), (64, 128)])
def test_scale_sign_branch_is_warp_uniform(heads, head_dim):
    """The branch on "every key scale of the CTA >= 0" (a full reduction) is one ptxas knows to be warp-uniform
    on every release (``gluon_compat.warp_uniform``): the tile loops after it keep their counters and
    descriptors on the uniform datapath, with no divergence handling (``WARPSYNC``, ``BSSY``) around their
    barrier waits. Without the vote, on Triton 3.9 with ptxas 13.0: 6 WARPSYNC and 2 BSSY, 44 R2UR instead
    of 30 at H=32/D=64."""
    from finegemm.kernels.sm90 import gluon_compat
    from finegemm.kernels.sm90 import mqa_logits as m
    from finegemm.kernels.sm90.compile_check import sass

    bq, maxnreg = m.prefill_config(heads, head_dim)
    kernel = _compile(heads, head_dim, "fp32", True, overlap=False, head_sum_mma=True, block_q=bq, maxnreg=maxnreg,
                      wide_clean=m.wide_clean_for(heads, bq * heads, maxnreg))
    assert ("vote.sync.any.pred" in kernel.asm["ptx"]) == gluon_compat.REDUCE_ENDS_IN_SHUFFLES
    divergence = re.findall(r"\b(WARPSYNC|BSSY)\b", sass(kernel))
    assert not divergence, divergence


@pytest.mark.parametrize("heads,head_dim", CASES)
def test_compact_form_compiles_as_the_full_form(heads, head_dim):
    """``COMPRESSED`` (``max_seqlen_k > 0``) at the API's config: the same WGMMAs and head-sum instructions,
    about the full form's registers (it changes only the store's column), and no spill in the loop that runs
    (at 168 registers, 256 rows, ptxas spills 8-16 bytes in the signed-scale loop, with bf16 logits also in
    the full form)."""
    from finegemm.kernels.sm90 import mqa_logits as m
    from finegemm.kernels.sm90.compile_check import resource_usage

    bq, maxnreg = m.prefill_config(heads, head_dim)
    must = head_sum_ptx_must_contain(bq * heads, max(8, bq))
    usage = {}
    for compressed in (False, True):
        kernel = _compile(heads, head_dim, "bf16", False, overlap=False, head_sum_mma=True, block_q=bq,
                          maxnreg=maxnreg, compressed=compressed)
        assert_ptx_contains(kernel, must)
        usage[compressed] = resource_usage(kernel)
        assert usage[compressed]["STACK"] <= 16, usage
        _spills_only_in_the_signed_loop(kernel)
    assert usage[True]["REG"] <= usage[False]["REG"] + 8, usage


@pytest.mark.parametrize("heads,head_dim", CASES)
def test_dispatched_clean_form_compiles(heads, head_dim):
    """What the API launches for clean full-form logits: its CTA shape and its form of the ``-inf`` stores
    (``wide_clean_for``), with the head-sum instructions, asynchronous WGMMAs and no spill in the loop that
    runs."""
    from finegemm.kernels.sm90 import mqa_logits as m

    bq, maxnreg = m.prefill_config(heads, head_dim)
    wide = m.wide_clean_for(heads, bq * heads, maxnreg)
    kernel = _compile(heads, head_dim, "fp32", True, overlap=False, head_sum_mma=True, block_q=bq, maxnreg=maxnreg,
                      wide_clean=wide)
    assert_ptx_contains(kernel, head_sum_ptx_must_contain(bq * heads, max(8, bq)))
    _spills_only_in_the_signed_loop(kernel)


def test_compact_form_launch_rejects_what_it_cannot_run():
    """The compact form runs the tensor-core sum without in-kernel cleaning; asking otherwise is an error
    before anything is launched (CPU tensors: the checks precede every device use)."""
    from finegemm.kernels.sm90 import mqa_logits as m

    q = torch.zeros(4, 64, 128).to(torch.float8_e4m3fn)
    kv = torch.zeros(64, 128).to(torch.float8_e4m3fn)
    sf, w = torch.ones(64), torch.ones(4, 64)
    st, en = torch.zeros(4, dtype=torch.int32), torch.full((4,), 64, dtype=torch.int32)
    out = torch.empty(4, 64)
    with pytest.raises(ValueError, match="compact form"):
        m.launch(q, kv, sf, w, st, en, out, clean_logits=True, max_seqlen_k=64)
    with pytest.raises(ValueError, match="compact form"):
        m.launch(q, kv, sf, w, st, en, out, clean_logits=False, head_sum_mma=False, max_seqlen_k=64)


@pytest.mark.gpu
@pytest.mark.parametrize("heads,head_dim,ranges,dtype,cap", [
    (64, 128, "cp", torch.float32, None), (64, 32, "causal", torch.bfloat16, None),
    (32, 64, "ragged", torch.float32, None), (32, 128, "ragged", torch.float32, 1000),
    (16, 64, "cp", torch.bfloat16, 3000), (128, 128, "causal", torch.float32, 700)])
def test_gpu_compact_form_matches_reference(heads, head_dim, ranges, dtype, cap):
    """The compact form (column ``c`` = key ``start[i] + c``) against float64: every in-range logit written,
    nothing outside ``[0, end - start)`` touched (poisoned, with padding columns past ``max_seqlen_k``),
    ranges longer than ``max_seqlen_k`` (``cap``) cut at it; through the API, the clean and unclean forms;
    bitwise repeatable."""
    sm90_device()
    import finegemm
    from finegemm.kernels.sm90 import mqa_logits as m
    from finegemm.reference.dense import calc_diff

    case = MqaCase(2048, 8192, heads, head_dim, ranges, dtype)
    q, kv, sf, w, st, en = generate_mqa(case, seed=11, device="cuda")
    max_k = cap or int((en - st).max())
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k)
    inside = ~torch.isneginf(expected)
    bound = 1e-3 if dtype == torch.float32 else 5e-3
    buf = torch.full((case.seq_len, max_k + 48), float("nan"), device="cuda", dtype=dtype)
    out = buf[:, :max_k]
    m.launch(q, kv, sf, w, st, en, out, clean_logits=False, max_seqlen_k=max_k)
    torch.cuda.synchronize()
    assert torch.isnan(buf[:, max_k:]).all(), "wrote past max_seqlen_k"
    assert torch.isnan(out[~inside]).all(), "wrote outside [0, end - start)"
    assert not torch.isnan(out[inside]).any() and calc_diff(out[inside].double(), expected[inside]) < bound
    first = out.clone()
    m.launch(q, kv, sf, w, st, en, out, clean_logits=False, max_seqlen_k=max_k)
    torch.cuda.synchronize()
    assert torch.equal(first.nan_to_num(), out.nan_to_num()), "repeat run differs"
    clean = finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k, logits_dtype=dtype)
    assert_logits_match(clean, expected, None, bound)
    unclean = finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en, clean_logits=False, max_seqlen_k=max_k,
                                      logits_dtype=dtype)
    assert torch.equal(unclean[inside], clean[inside])


@pytest.mark.gpu
@pytest.mark.parametrize("heads,head_dim,ranges,dtype", [
    (64, 128, "causal", torch.float32), (64, 128, "cp", torch.bfloat16), (32, 64, "ragged", torch.float32),
    (64, 32, "causal", torch.float32), (32, 128, "cp", torch.float32), (16, 128, "ragged", torch.float32),
    (128, 128, "causal", torch.bfloat16)])
@pytest.mark.parametrize("variant", [dict(head_sum_mma=False, overlap=False), dict(head_sum_mma=False, overlap=True),
                                     dict(), dict(block_q=0), dict(block_q=0, wide=True)])
def test_gpu_matches_reference(heads, head_dim, ranges, dtype, variant):
    sm90_device()
    from finegemm.kernels.sm90 import mqa_logits as m

    case = MqaCase(2048, 8192, heads, head_dim, ranges, dtype)
    q, kv, sf, w, st, en = generate_mqa(case, seed=3, device="cuda")
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en)
    outs = []
    for _ in range(2):
        out = torch.full((case.seq_len, case.seq_len_kv), float("nan"), device="cuda", dtype=dtype)
        extra = dict(variant)  # {}: the API's config; block_q=0: 128 rows, with ``wide`` 256
        if "block_q" in extra:
            extra["block_q"] = (256 if extra.pop("wide", False) else 128) // heads
        m.launch(q, kv, sf, w, st, en, out, clean_logits=True, **extra)
        outs.append(out)
    torch.cuda.synchronize()
    assert_logits_match(outs[0], expected, None, 1e-3 if dtype == torch.float32 else 5e-3)
    assert torch.equal(outs[0].nan_to_num(), outs[1].nan_to_num()), "repeat run differs"


@pytest.mark.gpu
@pytest.mark.parametrize("heads,head_dim,ranges", [(64, 128, "causal"), (32, 64, "ragged"), (128, 128, "cp")])
def test_gpu_scale_after_head_sum(heads, head_dim, ranges):
    """``sf_after_sum`` on the H200, both schedules, and the tensor-core head sum (its nonnegative fast path
    and its signed path): the contract's logits for the cast's (non-negative) scales and for negative ones
    (every third key), against the default per-score form too."""
    sm90_device()
    from finegemm.kernels.sm90 import mqa_logits as m

    case = MqaCase(2048, 8192, heads, head_dim, ranges, torch.float32)
    q, kv, sf, w, st, en = generate_mqa(case, seed=5, device="cuda")
    signed = sf * torch.where(torch.arange(sf.numel(), device="cuda") % 3 == 0, -1.0, 1.0)
    out = torch.full((case.seq_len, case.seq_len_kv), float("nan"), device="cuda")
    for scales in (sf, signed):
        want = ref.fp8_mqa_logits(q, (kv, scales), w, st, en)
        for variant in (dict(head_sum_mma=False, overlap=False), dict(head_sum_mma=False, overlap=True),
                        dict(head_sum_mma=False, overlap=False, sf_after_sum=False), dict()):
            out.fill_(float("nan"))
            m.launch(q, kv, scales, w, st, en, out, clean_logits=True, **variant)
            torch.cuda.synchronize()
            assert_logits_match(out, want, None, 1e-3)


@pytest.mark.gpu
def test_gpu_unclean_writes_every_in_range_value():
    sm90_device()
    from finegemm.kernels.sm90 import mqa_logits as m

    case = MqaCase(1024, 4096, 64, 128, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=4, device="cuda")
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en)
    out = torch.full((case.seq_len, case.seq_len_kv), float("nan"), device="cuda")
    m.launch(q, kv, sf, w, st, en, out, clean_logits=False)
    torch.cuda.synchronize()
    inside = ~torch.isneginf(expected)
    assert not torch.isnan(out[inside]).any()
    from finegemm.reference.dense import calc_diff
    assert calc_diff(out[inside].double(), expected[inside]) < 1e-3


def test_dispatch_rule():
    """The API runs the Gluon kernel for both logits forms at head_dim 32/64/128 and 16-128 heads (its
    tensor-core head sum measured faster than Triton on every such case); with the FP32 sum
    (``FINEGEMM_MQA_FP32_SUM``) only for the full form at head_dim 128 and 32-128 heads."""
    from finegemm.kernels.sm90 import mqa_logits as m

    assert all(m.prefill_supported(h, d, 0) for h in (16, 32, 64, 128) for d in (32, 64, 128))
    assert not m.prefill_supported(8, 128, 0) and not m.prefill_supported(64, 256, 0)
    assert all(m.prefill_supported(h, d, 4096) for h in (16, 32, 64, 128) for d in (32, 64, 128))  # compact form
    assert not m.prefill_supported(64, 128, 4096, fp32_sum=True)
    assert all(m.prefill_supported(h, 128, 0, fp32_sum=True) for h in (32, 64, 128))
    assert not m.prefill_supported(16, 128, 0, fp32_sum=True)  # the FP32 sum measured slower than Triton
    assert not any(m.prefill_supported(h, d, 0, fp32_sum=True) for h in (32, 64) for d in (32, 64))


def test_prefill_config_rule():
    """64 heads: 256 query-head rows at 168 registers (three CTAs an SM) at every head_dim; 128 rows at the
    compiler's register count (four) elsewhere."""
    from finegemm.kernels.sm90 import mqa_logits as m

    assert all(m.prefill_config(64, d) == (4, 168) for d in (32, 64, 128))
    assert m.prefill_config(32, 128) == (4, None) and m.prefill_config(32, 64) == (4, None)
    assert m.prefill_config(128, 64) == (1, None) and m.prefill_config(16, 128) == (8, None)
    # what launch() and the API's report take when no block_q is given: the FP32 sum keeps 128 rows
    assert m.launch_config(64, 64, True) == (4, 168) and m.launch_config(64, 64, False) == (2, None)


@pytest.mark.gpu
@pytest.mark.parametrize("ranges", ["cp", "ragged"])
def test_gpu_schedule_variants_agree(ranges):
    """The launch order (``last_first``), the key split (``tiles_per_split``) and the form of the ``-inf``
    stores (``wide_clean``) change which CTA computes a tile and how
    unreached tiles are written, not the logits: every variant bitwise equal to the default, which matches
    float64."""
    sm90_device()
    from finegemm.kernels.sm90 import mqa_logits as m

    case = MqaCase(2048, 8192, 32, 64, ranges)
    q, kv, sf, w, st, en = generate_mqa(case, seed=12, device="cuda")
    outs = []
    for extra in (dict(), dict(last_first=False), dict(tiles_per_split=7), dict(tiles_per_split=128),
                  dict(wide_clean=True), dict(wide_clean=False)):
        out = torch.full((case.seq_len, case.seq_len_kv), float("nan"), device="cuda")
        m.launch(q, kv, sf, w, st, en, out, clean_logits=True, **extra)
        outs.append(out)
    torch.cuda.synchronize()
    assert_logits_match(outs[0], ref.fp8_mqa_logits(q, (kv, sf), w, st, en), None, 1e-3)
    for other in outs[1:]:
        assert torch.equal(other, outs[0])


@pytest.mark.gpu
@pytest.mark.parametrize("fp32_sum", ["0", "1"])
def test_gpu_api_head_sum_switch(fp32_sum, monkeypatch):
    """Through the API, ``FINEGEMM_MQA_FP32_SUM`` picks the FP32 CUDA-core sum (``calc_diff`` ~1e-8 against
    float64) or the tensor-core one (~3e-6); both within the contract's 1e-3 and far inside 1e-4."""
    sm90_device()
    import finegemm
    from finegemm.reference.dense import calc_diff

    monkeypatch.setenv("FINEGEMM_MQA_FP32_SUM", fp32_sum)
    case = MqaCase(1024, 4096, 64, 128, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=7, device="cuda")
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en)
    out = finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)
    inside = ~torch.isneginf(expected)
    assert torch.equal(torch.isneginf(out), ~inside)
    diff = calc_diff(out[inside].double(), expected[inside])
    assert diff < (1e-7 if fp32_sum == "1" else 1e-4), diff


@pytest.mark.gpu
def test_gpu_repeated_call_replays_and_graph_captures():
    """A repeated launch with the same tensors replays its recording (launcher.py): new contents in the
    same tensors give the new logits, eagerly and under CUDA-graph capture and replay."""
    sm90_device()
    import finegemm
    from finegemm.kernels.sm90 import mqa_logits as m

    case = MqaCase(512, 2048, 64, 128, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=8, device="cuda")
    q2, kv2, sf2, w2, _, _ = generate_mqa(case, seed=9, device="cuda")
    out = torch.full((case.seq_len, case.seq_len_kv), float("nan"), device="cuda")
    m.launch(q, kv, sf, w, st, en, out, clean_logits=True)
    for src, dst in ((q2, q), (kv2, kv), (sf2, sf), (w2, w)):
        dst.copy_(src)
    out.fill_(float("nan"))
    m.launch(q, kv, sf, w, st, en, out, clean_logits=True)  # the recorded launch, new contents
    torch.cuda.synchronize()
    assert_logits_match(out, ref.fp8_mqa_logits(q2, (kv2, sf2), w2, st, en), None, 1e-3)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)  # warm the API's plan on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        logits = finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)
    q.copy_(generate_mqa(case, seed=10, device="cuda")[0])
    graph.replay()
    torch.cuda.synchronize()
    assert_logits_match(logits, ref.fp8_mqa_logits(q, (kv, sf), w, st, en), None, 1e-3)
