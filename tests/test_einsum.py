"""``einsum`` / ``fp8_einsum`` (DeepGEMM's hard-coded expressions) against float64 torch.einsum.

CPU: the portable batched kernel through Triton's interpreter, outputs poisoned with NaN, inputs also as
non-contiguous views. The ``gpu``-marked tests run MLA-sized cases on the H200.
"""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device

import finegemm
from finegemm import reference
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

B, H, R, D = 5, 3, 96, 40
SHAPES = {  # expression -> (a's shape, b's shape) at the CPU sizes
    "bmk,bnk->mn": ((3, 20, 70), (3, 30, 70)),
    "bhr,hdr->bhd": ((B, H, R), (H, D, R)),
    "bhd,hdr->bhr": ((B, H, D), (H, D, R)),
    "bhd,bhr->hdr": ((B, H, D), (B, H, R)),
}


def _bf16(shape, seed, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(device=device, dtype=torch.bfloat16)


def _poisoned(shape, dtype, device="cpu"):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


@pytest.mark.parametrize("expr", list(SHAPES))
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_bf16_expressions_match_the_reference(expr, out_dtype):
    a_shape, b_shape = SHAPES[expr]
    a, b = _bf16(a_shape, 1), _bf16(b_shape, 2)
    ref = reference.einsum.einsum(expr, a, b)
    d = _poisoned(ref.shape, out_dtype)
    finegemm.einsum(expr, a, b, d)
    assert reference.calc_diff(d, ref) < 1e-5


@pytest.mark.parametrize("expr", ["bmk,bnk->mn", "bhd,bhr->hdr"])
def test_accumulating_into_d(expr):
    """``c = d``: the weight-gradient forms add to what ``d`` holds (DeepGEMM's FP32 accumulation)."""
    a_shape, b_shape = SHAPES[expr]
    a, b = _bf16(a_shape, 3), _bf16(b_shape, 4)
    d = torch.randn(reference.einsum.einsum(expr, a, b).shape)
    ref = reference.einsum.einsum(expr, a, b, d)
    finegemm.einsum(expr, a, b, d, c=d)
    assert reference.calc_diff(d, ref) < 1e-6


def test_non_contiguous_views_and_a_separate_c():
    """Permuted storage for every operand (the kernel reads strides) and a bf16 ``c`` beside an fp32 ``d``."""
    expr = "bhr,hdr->bhd"
    a = _bf16((H, B, R), 5).transpose(0, 1)
    b = _bf16((H, R, D), 6).transpose(1, 2)
    c = _bf16((B, H, D), 7)
    d = _poisoned((H, B, D), torch.float32).transpose(0, 1)
    finegemm.einsum(expr, a, b, d, c)
    assert reference.calc_diff(d, reference.einsum.einsum(expr, a, b, c)) < 1e-5


def test_empty_sums_give_c_or_zero():
    a, b = _bf16((0, 8, 64), 1), _bf16((0, 16, 64), 2)
    d = _poisoned((8, 16), torch.float32)
    finegemm.einsum("bmk,bnk->mn", a, b, d)
    assert torch.equal(d, torch.zeros(8, 16))
    c = torch.randn(8, 16)
    finegemm.einsum("bmk,bnk->mn", a, b, d, c)
    assert torch.equal(d, c)


def _fp8_operands(expr, k, seed, device="cpu", b_=B, h=H, d_=D, r=R):
    """FP8 operands of ``expr``: a ``[b, h, k]`` cast per token, b ``[h, d, r]`` cast per 128x128 block of each head."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b_, h, k, generator=g).to(device)
    w = torch.randn(h, d_, r, generator=g).to(device)
    a_fp8, sfa = per_token_cast_to_fp8(x.reshape(-1, k))
    heads = [per_block_cast_to_fp8(w[i]) for i in range(h)]
    a = (a_fp8.view(b_, h, k), sfa.view(b_, h, -1))
    b = (torch.stack([q for q, _ in heads]), torch.stack([s for _, s in heads]))
    return a, b


@pytest.mark.parametrize("expr,k", [("bhr,hdr->bhd", R), ("bhd,hdr->bhr", D)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_fp8_expressions_match_the_reference(expr, k, out_dtype):
    a, b = _fp8_operands(expr, k, 8)
    ref = reference.einsum.fp8_einsum(expr, a, b)
    d = _poisoned(ref.shape, out_dtype)
    finegemm.fp8_einsum(expr, a, b, d)
    assert reference.calc_diff(d, ref) < 1e-3


def test_under_torch_compile_equals_eager():
    torch._dynamo.reset()
    expr = "bhd,hdr->bhr"
    a, b = _bf16((B, H, D), 9), _bf16((H, D, R), 10)
    fa, fb = _fp8_operands(expr, D, 11)
    eager, eager8 = torch.empty(B, H, R), torch.empty(B, H, R)
    finegemm.einsum(expr, a, b, eager)
    finegemm.fp8_einsum(expr, fa, fb, eager8)

    def fn(d, d8):
        finegemm.einsum(expr, a, b, d)
        finegemm.fp8_einsum(expr, fa, fb, d8)
        return d, d8

    got, got8 = torch.compile(fn, backend="aot_eager", fullgraph=True)(torch.empty(B, H, R), torch.empty(B, H, R))
    torch._dynamo.reset()
    assert torch.equal(got, eager) and torch.equal(got8, eager8)


def test_bad_arguments():
    a, b = _bf16((B, H, R), 1), _bf16((H, D, R), 2)
    d = torch.empty(B, H, D)
    with pytest.raises(ValueError, match="not supported; supported: bmk,bnk->mn"):
        finegemm.einsum("bhr,hrd->bhd", a, b, d)
    with pytest.raises(TypeError, match="a must have dtype torch.bfloat16"):
        finegemm.einsum("bhr,hdr->bhd", a.float(), b, d)
    with pytest.raises(ValueError, match=r"a must be 3-D \[b, h, r\]"):
        finegemm.einsum("bhr,hdr->bhd", a[0], b, d)
    with pytest.raises(ValueError, match="b has r=95 but a has r=96"):
        finegemm.einsum("bhr,hdr->bhd", a, b[..., :95], d)
    with pytest.raises(ValueError, match=r"d must have shape \(5, 3, 40\)"):
        finegemm.einsum("bhr,hdr->bhd", a, b, torch.empty(B, H, R))
    with pytest.raises(TypeError, match="d must have dtype"):
        finegemm.einsum("bhr,hdr->bhd", a, b, d.half())
    with pytest.raises(ValueError, match="c must have d's shape"):
        finegemm.einsum("bhr,hdr->bhd", a, b, d, torch.empty(B, H, D + 1))


def test_bad_fp8_arguments():
    expr = "bhr,hdr->bhd"
    a, b = _fp8_operands(expr, R, 3)
    d = torch.empty(B, H, D)
    with pytest.raises(ValueError, match="expression 'bmk,bnk->mn' is not supported"):
        finegemm.fp8_einsum("bmk,bnk->mn", a, b, d)
    with pytest.raises(ValueError, match="recipe"):
        finegemm.fp8_einsum(expr, a, b, d, recipe=(1, 1, 128))
    with pytest.raises(ValueError, match=r"a\[1\] must be \[b, h, ceil\(r/128\)\]"):
        finegemm.fp8_einsum(expr, (a[0], a[1][..., :0]), b, d)
    with pytest.raises(ValueError, match=r"b\[1\] must be \[h, ceil\(d/128\), ceil\(r/128\)\]"):
        finegemm.fp8_einsum(expr, a, (b[0], b[1][:, :1, :1].repeat(1, 2, 1)), d)
    with pytest.raises(TypeError, match=r"b\[1\] must have dtype torch.float32"):
        finegemm.fp8_einsum(expr, a, (b[0], b[1].view(torch.int32)), d)
    with pytest.raises(TypeError, match=r"a\[0\] must have dtype torch.float8_e4m3fn"):
        finegemm.fp8_einsum(expr, (a[0].float(), a[1]), b, d)
    with pytest.raises(TypeError, match="a must be a pair"):
        finegemm.fp8_einsum(expr, a[0], b, d)


# --------------------------------------------------------------------------------------------- H200
def _check_bf16_twice(expr, a_shape, b_shape, out_dtype, seed, tolerance):
    """Runs a BF16 einsum into a poisoned ``out_dtype`` output against the float64 reference, then again
    with new contents in the same buffers: the second call replays the recorded launch and must show them."""
    dev = sm90_device()
    a, b = _bf16(a_shape, seed, dev), _bf16(b_shape, seed + 1, dev)
    ref = reference.einsum.einsum(expr, a, b)
    d = _poisoned(ref.shape, out_dtype, dev)
    finegemm.einsum(expr, a, b, d)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, ref) < tolerance
    a.copy_(_bf16(a_shape, seed + 2, dev))
    d.fill_(float("nan"))
    finegemm.einsum(expr, a, b, d)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, reference.einsum.einsum(expr, a, b)) < tolerance


@pytest.mark.gpu
@pytest.mark.parametrize("expr,a_shape,b_shape", [
    ("bhr,hdr->bhd", (64, 128, 512), (128, 128, 512)),   # MLA: q_nope absorbed into the latent space
    ("bhd,hdr->bhr", (64, 128, 128), (128, 128, 512)),
    ("bhd,bhr->hdr", (4096, 16, 128), (4096, 16, 512)),  # its weight gradient
    ("bmk,bnk->mn", (8, 1024, 512), (8, 768, 512)),
])
def test_gpu_bf16_expressions(expr, a_shape, b_shape):
    _check_bf16_twice(expr, a_shape, b_shape, torch.float32, seed=1, tolerance=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("expr", ["bhr,hdr->bhd", "bhd,hdr->bhr"])
def test_gpu_fp8_expressions(expr):
    dev = sm90_device()
    a, b = _fp8_operands(expr, 512 if expr == "bhr,hdr->bhd" else 128, 3, dev, 64, 128, 128, 512)
    ref = reference.einsum.fp8_einsum(expr, a, b)
    d = _poisoned(ref.shape, torch.bfloat16, dev)
    finegemm.fp8_einsum(expr, a, b, d)
    torch.cuda.synchronize()
    assert reference.calc_diff(d, ref) < 1e-3


def test_each_signature_is_validated_once(monkeypatch):
    """The plan of a call signature (shapes, strides, dtypes, devices) is kept: a second call validates nothing,
    a new stride validates again."""
    from finegemm.api import einsum as einsum_api

    calls = []
    real = einsum_api._plan
    monkeypatch.setattr(einsum_api, "_plan", lambda *args: calls.append(1) or real(*args))
    einsum_api._PLANS.clear()
    a, b = _bf16((B, H, R), 1), _bf16((H, D, R), 2)
    d = torch.empty(B, H, D)
    finegemm.einsum("bhr,hdr->bhd", a, b, d)
    first = d.clone()
    finegemm.einsum("bhr,hdr->bhd", a, b, d)
    assert len(calls) == 1 and torch.equal(d, first)
    finegemm.einsum("bhr,hdr->bhd", _bf16((H, B, R), 1).transpose(0, 1), b, d)
    assert len(calls) == 2


# ------------------------------------------------------------------ the head-batched sm90 kernel (switched off)
def test_head_views_are_in_place_or_none():
    from finegemm.api.einsum import _head_views

    a, b, d = _bf16((B, H, R), 1), _bf16((H, D, R), 2), _bf16((B, H, D), 4)
    a2, b2, d2, mn_major = _head_views("bhr,hdr->bhd", a, b, d)
    assert a2.shape == (B, H * R) and a2.data_ptr() == a.data_ptr() and torch.equal(a2, a.reshape(B, H * R))
    assert b2.shape == (H * D, R) and not mn_major and torch.equal(d2, d.reshape(B, H * D))
    a2, b2, d2, mn_major = _head_views("bhd,hdr->bhr", _bf16((B, H, D), 3), b, torch.empty(B, H, R))
    assert b2.shape == (H * D, R) and mn_major and d2.shape == (B, H * R)
    padded_rows = _bf16((B, H * R + 64), 1)[:, :H * R].view(B, H, R)  # rows of a wider buffer: still in place
    assert _head_views("bhr,hdr->bhd", padded_rows, b, d)[0].stride() == (H * R + 64, 1)
    assert _head_views("bhr,hdr->bhd", _bf16((H, B, R), 1).transpose(0, 1), b, d) is None
    assert _head_views("bhr,hdr->bhd", _bf16((B, R, H), 1).transpose(1, 2), b, d) is None
    assert _head_views("bhr,hdr->bhd", a, _bf16((H, R, D), 2).transpose(1, 2), d) is None


def test_head_batched_plan_and_compile():
    from finegemm.jit.device import H200
    from finegemm.kernels.sm90 import compile_check, dispatch_bf16_grouped

    assert "K % 64" in dispatch_bf16_grouped.head_batched_plan(64, 128, 96, 128, False, H200)
    assert "N % 64" in dispatch_bf16_grouped.head_batched_plan(64, 96, 128, 128, False, H200)
    for m, n, k, mn_major in ((64, 128, 512, False), (333, 512, 128, True)):
        desc, config = dispatch_bf16_grouped.head_batched_plan(m, n, k, 128, mn_major, H200)
        assert n % config.block_n == 0
        kernel = compile_check.compile_bf16_grouped_variant(desc, config, head_batched=True)
        usage = compile_check.resource_usage(kernel)
        assert usage["STACK"] == 0 and usage["LOCAL"] == 0, usage


@pytest.mark.gpu
@pytest.mark.parametrize("expr,a_shape,b_shape", [
    ("bhr,hdr->bhd", (64, 128, 512), (128, 128, 512)),
    ("bhr,hdr->bhd", (77, 16, 512), (16, 128, 512)),     # rows not a multiple of the tile: clipped by TMA
    ("bhd,hdr->bhr", (64, 128, 128), (128, 128, 512)),
    ("bhd,hdr->bhr", (1000, 8, 128), (8, 128, 512)),
])
def test_gpu_head_batched_sm90_kernel(expr, a_shape, b_shape, monkeypatch):
    from finegemm.api import einsum as einsum_api

    monkeypatch.setattr(einsum_api, "HEAD_BATCHED_SM90", True)
    einsum_api._PLANS.clear()
    _check_bf16_twice(expr, a_shape, b_shape, torch.bfloat16, seed=5, tolerance=1e-4)
    einsum_api._PLANS.clear()


def test_fp8_head_batched_plan_and_compile():
    from finegemm.jit.device import H200
    from finegemm.kernels.sm90 import compile_check, dispatch_grouped

    assert "K % 128" in dispatch_grouped.head_batched_plan(64, 128, 96, 128, H200)
    for m in (64, 77, 4096):
        desc, config = dispatch_grouped.head_batched_plan(m, 128, 512, 128, H200)
        assert config.block_m <= 128 and 128 % config.block_n == 0
        usage = compile_check.resource_usage(compile_check.compile_grouped_variant(desc, config, head_batched=True))
        assert usage["STACK"] == 0 and usage["LOCAL"] == 0, usage


@pytest.mark.gpu
@pytest.mark.parametrize("expr,b_", [("bhr,hdr->bhd", 64), ("bhr,hdr->bhd", 77), ("bhd,hdr->bhr", 64)])
def test_gpu_fp8_head_batched_sm90_kernel(expr, b_, monkeypatch):
    """bhr,hdr->bhd on the FP8 grouped kernel's GROUPING 3; bhd,hdr->bhr (an N-major B) stays on the Triton kernel."""
    from finegemm.api import einsum as einsum_api

    dev = sm90_device()
    monkeypatch.setattr(einsum_api, "HEAD_BATCHED_SM90", True)
    einsum_api._PLANS.clear()
    a, b = _fp8_operands(expr, 512 if expr == "bhr,hdr->bhd" else 128, b_, dev, b_, 128, 128, 512)
    ref = reference.einsum.fp8_einsum(expr, a, b)
    d = _poisoned(ref.shape, torch.bfloat16, dev)
    for _ in range(2):  # the second call replays the recorded launch into the re-poisoned d
        d.fill_(float("nan"))
        finegemm.fp8_einsum(expr, a, b, d)
        torch.cuda.synchronize()
        assert reference.calc_diff(d, ref) < 1e-3
    taken = [plan.sm90 is not None for plan in einsum_api._PLANS.values()]
    assert taken == [expr == "bhr,hdr->bhd"]
    einsum_api._PLANS.clear()


def test_head_batched_rule(monkeypatch):
    """BF16 bhd,hdr->bhr always takes the head-batched sm90 kernel, bhr,hdr->bhd (BF16 and FP8) from
    HEAD_BATCHED_MIN_TOKENS tokens (the H200 measurements in the rule's docstring); HEAD_BATCHED_SM90 True / False
    overrides the rule."""
    from finegemm.api import einsum as einsum_api

    least = einsum_api.HEAD_BATCHED_MIN_TOKENS
    wanted = einsum_api.head_batched_wanted
    monkeypatch.setattr(einsum_api, "HEAD_BATCHED_SM90", None)
    assert all(wanted("bhd,hdr->bhr", False, t) for t in (1, 64, least, 4096))
    for fp8 in (False, True):
        assert [wanted("bhr,hdr->bhd", fp8, t) for t in (1, 64, least - 1, least, 4096)] == \
            [False, False, False, True, True]
    for forced in (True, False):
        monkeypatch.setattr(einsum_api, "HEAD_BATCHED_SM90", forced)
        assert {wanted(e, fp8, t) for e in einsum_api.HEAD_EXPRESSIONS for fp8 in (False, True)
                for t in (1, least, 4096)} == {forced}


@pytest.mark.gpu
def test_gpu_default_dispatch_follows_the_head_batched_rule(monkeypatch):
    """Without an override the API takes the Triton kernel for bhr,hdr->bhd at 64 tokens and the head-batched
    sm90 kernel at HEAD_BATCHED_MIN_TOKENS, BF16 and FP8, and the head-batched one for BF16 bhd,hdr->bhr at 64;
    each result matches float64."""
    from finegemm.api import einsum as einsum_api

    dev = sm90_device()
    monkeypatch.setattr(einsum_api, "HEAD_BATCHED_SM90", None)
    least = einsum_api.HEAD_BATCHED_MIN_TOKENS
    for expr, tokens, sm90 in (("bhr,hdr->bhd", 64, False), ("bhr,hdr->bhd", least, True),
                               ("bhd,hdr->bhr", 64, True)):
        einsum_api._PLANS.clear()
        k = 512 if expr == "bhr,hdr->bhd" else 128  # a is [b, h, r] or [b, h, d]
        _check_bf16_twice(expr, (tokens, 16, k), (16, 128, 512), torch.bfloat16, seed=9, tolerance=1e-4)
        assert [plan.sm90 is not None for plan in einsum_api._PLANS.values()] == [sm90], (expr, tokens)
    for tokens, sm90 in ((64, False), (least, True)):
        einsum_api._PLANS.clear()
        a, b = _fp8_operands("bhr,hdr->bhd", 512, tokens, dev, tokens, 16, 128, 512)
        ref = reference.einsum.fp8_einsum("bhr,hdr->bhd", a, b)
        d = _poisoned(ref.shape, torch.bfloat16, dev)
        finegemm.fp8_einsum("bhr,hdr->bhd", a, b, d)
        torch.cuda.synchronize()
        assert reference.calc_diff(d, ref) < 1e-3
        assert [plan.sm90 is not None for plan in einsum_api._PLANS.values()] == [sm90], tokens
    einsum_api._PLANS.clear()
