"""finegemm.fp8_linear / FP8Linear: forward and both gradients against float64 references, on the CPU (the
portable kernels through Triton's interpreter) and, marked ``gpu``, on the GPU (sm90 where it runs).

Two references per result: the float64 product of the operands quantized as the recipe says (the GEMMs' own
contract, calc_diff < 1e-3, in practice ~1e-5), and the exact float64 product of the unquantized tensors (what
E4M3 quantization of both operands allows: calc_diff < 2e-3).
"""

from __future__ import annotations

import pytest
import torch

import finegemm
from finegemm import reference
from finegemm.quant import align, per_block_cast_to_fp8, per_token_cast_to_fp8


def _pad_rows(t: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, 0, 0, -t.shape[0] % 128))


def _quantized_references(x2d, w, dy2d):
    """float64 (y, dx, dW) of the operands quantized as DeepSeek-V3's recipe says: written from the recipe with
    the quantization helpers and the float64 GEMM reference, not from finegemm.autograd."""
    x2d, w, dy2d = x2d.detach().float(), w.detach().float(), dy2d.float()
    wq, sw = per_block_cast_to_fp8(w)
    y = reference.fp8_gemm_nt(per_token_cast_to_fp8(x2d), (wq, sw), None, (1, 128, 128))
    dx = reference.fp8_gemm_nt(per_token_cast_to_fp8(dy2d), (wq.t(), sw.t()), None, (1, 128, 128))
    zero = torch.zeros(w.shape, dtype=torch.float64, device=w.device)
    dw = reference.fp8_gemm_nt(per_token_cast_to_fp8(_pad_rows(dy2d).t()), per_token_cast_to_fp8(_pad_rows(x2d).t()),
                               zero, (1, 1, 128))
    return y, dx, dw


def _check(x, w, bias, dy, y, exact_tol=2e-3):
    k, n = w.shape[1], w.shape[0]
    x2d, dy2d = x.detach().reshape(-1, k), dy.reshape(-1, n)
    ref_y, ref_dx, ref_dw = _quantized_references(x2d, w, dy2d)
    if bias is not None:
        ref_y = ref_y + bias.detach().double()
    exact_y = x2d.double() @ w.detach().double().t() + (0 if bias is None else bias.detach().double())
    exact_dx = dy2d.double() @ w.detach().double()
    exact_dw = dy2d.double().t() @ x2d.double()
    got = {"y": y.detach().reshape(-1, n), "dx": x.grad.reshape(-1, k), "dW": w.grad}
    for name, ref, exact in (("y", ref_y, exact_y), ("dx", ref_dx, exact_dx), ("dW", ref_dw, exact_dw)):
        assert torch.isfinite(got[name]).all(), name
        assert reference.calc_diff(got[name], ref) < 1e-3, (name, reference.calc_diff(got[name], ref))
        assert reference.calc_diff(got[name], exact) < exact_tol, (name, reference.calc_diff(got[name], exact))
    if bias is not None:
        assert torch.allclose(bias.grad.double(), dy2d.double().sum(0), rtol=1e-2, atol=1e-2)


def _run(m, n, k, x_dtype, w_dtype, lead=(), with_bias=False, device="cpu", seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(*lead, m, k, generator=gen, device=device).to(x_dtype).requires_grad_()
    w = (torch.randn(n, k, generator=gen, device=device) * 0.05).to(w_dtype).requires_grad_()
    bias = torch.randn(n, generator=gen, device=device).to(x_dtype).requires_grad_() if with_bias else None
    y = finegemm.fp8_linear(x, w, bias)
    assert y.shape == (*lead, m, n) and y.dtype == x_dtype
    dy = torch.randn(y.shape, generator=gen, device=device).to(x_dtype)
    y.backward(dy)
    assert x.grad.dtype == x_dtype and x.grad.shape == x.shape
    assert w.grad.dtype == w_dtype and w.grad.shape == w.shape
    _check(x, w, bias, dy, y)


@pytest.mark.parametrize("m,n,k", [(128, 256, 256), (100, 192, 320), (1, 64, 128), (257, 128, 136)])
def test_forward_and_both_gradients(m, n, k):
    """Tokens and features on and off the 128 blocks (the weight gradient pads the tokens to 128)."""
    _run(m, n, k, torch.bfloat16, torch.float32)


@pytest.mark.parametrize("x_dtype,w_dtype", [(torch.float32, torch.float32), (torch.float16, torch.bfloat16),
                                             (torch.bfloat16, torch.bfloat16)])
def test_dtypes(x_dtype, w_dtype):
    """Output and input gradient in x's dtype (FP32 GEMM output for FP32 x), weight gradient in weight's."""
    _run(64, 128, 256, x_dtype, w_dtype)


def test_batched_input_and_bias():
    _run(48, 128, 256, torch.bfloat16, torch.float32, lead=(2, 3), with_bias=True)


@pytest.mark.parametrize("which", ["x", "weight"])
def test_gradient_of_one_input_only(which):
    """Only the requested gradient is computed; it equals the one computed with both."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(96, 256, generator=gen).bfloat16()
    w = torch.randn(128, 256, generator=gen) * 0.05
    dy = torch.randn(96, 128, generator=gen).bfloat16()
    both_x, both_w = x.clone().requires_grad_(), w.clone().requires_grad_()
    finegemm.fp8_linear(both_x, both_w).backward(dy)
    one_x, one_w = x.clone().requires_grad_(which == "x"), w.clone().requires_grad_(which == "weight")
    finegemm.fp8_linear(one_x, one_w).backward(dy)
    if which == "x":
        assert one_w.grad is None and torch.equal(one_x.grad, both_x.grad)
    else:
        assert one_x.grad is None and torch.equal(one_w.grad, both_w.grad)


def test_module_matches_the_function_and_trains_like_nn_linear():
    """FP8Linear's forward and gradients are fp8_linear's; SGD steps on a least-squares fit lower the loss as an
    FP32 nn.Linear from the same start does (within 1 % a step)."""
    torch.manual_seed(7)
    layer = finegemm.FP8Linear(256, 128)
    assert "use_ue8m0=False" in repr(layer)
    x = torch.randn(64, 256)
    y = layer(x)
    twin = layer.weight.detach().clone().requires_grad_()
    ref = finegemm.fp8_linear(x, twin, layer.bias.detach())
    assert torch.equal(y.detach(), ref.detach())
    plain = torch.nn.Linear(256, 128)
    plain.load_state_dict(layer.state_dict())
    target = torch.randn(64, 128)
    losses = {}
    for name, module in (("fp8", layer), ("fp32", plain)):
        opt = torch.optim.SGD(module.parameters(), lr=0.5)
        losses[name] = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(module(x), target)
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    assert all(b < a for a, b in zip(losses["fp8"], losses["fp8"][1:])), losses
    assert all(abs(a - b) < 0.01 * b for a, b in zip(losses["fp8"], losses["fp32"])), losses


def test_ue8m0_scales():
    """``use_ue8m0``: every GEMM on power-of-two scales; the result still within the exact tolerance."""
    x = torch.randn(64, 256).bfloat16().requires_grad_()
    w = (torch.randn(128, 256) * 0.05).requires_grad_()
    y = finegemm.fp8_linear(x, w, use_ue8m0=True)
    dy = torch.randn_like(y)
    y.backward(dy)
    exact = x.detach().double() @ w.detach().double().t()
    assert reference.calc_diff(y.detach(), exact) < 3e-3
    assert reference.calc_diff(x.grad, dy.double() @ w.detach().double()) < 3e-3
    assert reference.calc_diff(w.grad, dy.double().t() @ x.detach().double()) < 3e-3


def test_zero_tokens():
    x = torch.zeros(0, 256, requires_grad=True)
    w = torch.randn(128, 256, requires_grad=True)
    y = finegemm.fp8_linear(x, w)
    assert y.shape == (0, 128)
    y.sum().backward()
    assert x.grad.shape == (0, 256) and torch.equal(w.grad, torch.zeros_like(w))


def _compiled_matches_eager(fn, x, w, dy, *args):
    """``fn(x, w, *args)`` forward and backward, eager and under ``torch.compile(fullgraph=True)``: equal y, dx, dW."""
    results = []
    for run in (fn, torch.compile(fn, backend="aot_eager", fullgraph=True)):
        xi, wi = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = run(xi, wi, *args)
        y.backward(dy)
        results.append((y.detach(), xi.grad, wi.grad))
    torch._dynamo.reset()
    for eager, compiled in zip(*results):
        assert torch.equal(eager, compiled)


def test_compiles_with_fullgraph_and_matches_eager():
    """Forward and backward under ``torch.compile(fullgraph=True)`` (the GEMMs as torch.ops.finegemm nodes):
    the eager results."""
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(64, 256, generator=gen).bfloat16()
    w = torch.randn(128, 256, generator=gen) * 0.05
    dy = torch.randn(64, 128, generator=gen).bfloat16()
    _compiled_matches_eager(finegemm.fp8_linear, x, w, dy)


@pytest.mark.parametrize("args,err,match", [
    ((torch.randn(4, 256).int(), torch.randn(128, 256)), TypeError, "x must have dtype"),
    ((torch.randn(4, 256), torch.randn(128, 256).to(torch.float8_e4m3fn)), TypeError, "weight must have dtype"),
    ((torch.randn(4, 256), torch.randn(2, 128, 256)), ValueError, "weight must be 2-D"),
    ((torch.randn(4, 200), torch.randn(128, 256)), ValueError, "x must be \\[..., K\\] with weight's K=256"),
    ((torch.randn(4, 256), torch.randn(128, 256), torch.randn(64)), ValueError, "bias must have shape \\(128,\\)"),
    ((torch.randn(4, 256), torch.randn(128, 256, device="meta")), ValueError, "weight is on meta"),
    (("x", torch.randn(128, 256)), TypeError, "x must be a torch.Tensor"),
])
def test_bad_input(args, err, match):
    with pytest.raises(err, match=match):
        finegemm.fp8_linear(*args)


def _weight_grad_forms(m, n, k, device):
    """fp8_linear's weight gradient both ways from the same operands: ``fp8_gemm_nt_1d1d_no_c`` into an uninitialized
    (NaN-filled) buffer, and ``fp8_gemm_nt(..., c=d)`` into a zeroed one; with the float64 reference."""
    from finegemm.api.gemm import fp8_gemm_nt_1d1d_no_c

    gen = torch.Generator(device=device).manual_seed(5)
    a = per_token_cast_to_fp8(torch.randn(m, k, generator=gen, device=device))
    b = per_token_cast_to_fp8(torch.randn(n, k, generator=gen, device=device))
    no_c = torch.full((m, n), float("nan"), device=device)
    fp8_gemm_nt_1d1d_no_c(a, b, no_c)
    in_place = torch.zeros(m, n, device=device)
    finegemm.fp8_gemm_nt(a, b, in_place, c=in_place, recipe=(1, 1, 128))
    ref = reference.fp8_gemm_nt(a, b, torch.zeros(m, n, dtype=torch.float64, device=device), (1, 1, 128))
    return no_c, in_place, ref


@pytest.mark.parametrize("m,n,k", [(128, 256, 256), (100, 192, 384)])
def test_weight_gradient_without_c(m, n, k):
    """The no-C recipe (1, 1, 128) entry (a weight gradient into a fresh buffer): right against float64, equal
    to the zero-filled in-place form, and it validates like fp8_gemm_nt (d must be FP32)."""
    from finegemm.api.gemm import fp8_gemm_nt_1d1d_no_c

    no_c, in_place, ref = _weight_grad_forms(m, n, k, "cpu")
    assert reference.calc_diff(no_c, ref) < 1e-3
    assert torch.equal(no_c, in_place)
    a = per_token_cast_to_fp8(torch.randn(m, k))
    b = per_token_cast_to_fp8(torch.randn(n, k))
    with pytest.raises(TypeError, match="d"):
        fp8_gemm_nt_1d1d_no_c(a, b, torch.empty(m, n, dtype=torch.bfloat16))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 7168), (2112, 4096, 1024), (576, 4096, 7168), (333, 576, 1536)])
def test_gpu_weight_gradient_without_c(m, n, k):
    """The no-C entry on the GPU (sm90 on Hopper: the rules' 128-row, split-tail and 64-row picks without C): right
    against float64 and bitwise the zero-filled in-place form (the TMA's FP32 add of 0 changes no value)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    no_c, in_place, ref = _weight_grad_forms(m, n, k, "cuda")
    torch.cuda.synchronize()
    assert reference.calc_diff(no_c, ref) < 1e-3
    assert torch.equal(no_c, in_place)


def _k_grouped_weight_grad_forms(ks, m, n, device):
    """fp8_grouped_linear's expert weight gradient both ways from the same tn operands (``[sum(ks), M]`` and
    ``[sum(ks), N]``, quantized per channel in blocks of 128 along K): ``k_grouped_fp8_gemm_tn_contiguous_no_c``
    into a NaN-filled buffer and ``k_grouped_fp8_gemm_tn_contiguous(..., c=d)`` into a zeroed one; with the float64
    reference (``finegemm.reference.grouped``)."""
    from finegemm.api.grouped import k_grouped_fp8_gemm_tn_contiguous_no_c

    gen = torch.Generator(device=device).manual_seed(11)
    sum_k = sum(ks)
    a = finegemm.per_channel_cast_to_fp8(torch.randn(sum_k, m, generator=gen, device=device))
    b = finegemm.per_channel_cast_to_fp8(torch.randn(sum_k, n, generator=gen, device=device))
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device=device)
    no_c = torch.full((len(ks), m, n), float("nan"), device=device)
    k_grouped_fp8_gemm_tn_contiguous_no_c(a, b, no_c, ks, ks_tensor)
    in_place = torch.zeros(len(ks), m, n, device=device)
    finegemm.k_grouped_fp8_gemm_tn_contiguous(a, b, in_place, ks, ks_tensor, c=in_place)
    ref = reference.grouped.k_grouped_fp8_gemm_tn_contiguous(a, b, ks, torch.zeros_like(in_place))
    return no_c, in_place, ref


def _check_k_grouped_weight_grad(ks, m, n, device):
    """Both forms of :func:`_k_grouped_weight_grad_forms`: every group right (an empty one 0 over the NaN), and
    the no-C form bitwise the in-place one."""
    no_c, in_place, ref = _k_grouped_weight_grad_forms(ks, m, n, device)
    for g, k in enumerate(ks):
        if k == 0:
            assert torch.equal(no_c[g], torch.zeros_like(no_c[g])), g
        else:
            assert reference.calc_diff(no_c[g], ref[g]) < 1e-3, g
    assert torch.equal(no_c, in_place)


@pytest.mark.parametrize("ks,m,n", [([256, 0, 384], 128, 192), ([128], 100, 64), ([0, 0], 64, 128)])
def test_k_grouped_weight_gradient_without_c(ks, m, n):
    """The no-C k-grouped entry (an expert weight gradient into a fresh buffer): every group right against
    float64, an empty group (or all of them) 0 though d held NaN, equal to the zero-filled in-place form; it
    validates like the public entry (FP32 d, ks against the operands)."""
    from finegemm.api.grouped import k_grouped_fp8_gemm_tn_contiguous_no_c

    _check_k_grouped_weight_grad(ks, m, n, "cpu")
    a = finegemm.per_channel_cast_to_fp8(torch.randn(256, m))
    b = finegemm.per_channel_cast_to_fp8(torch.randn(256, n))
    ks_tensor = torch.tensor([128, 128], dtype=torch.int32)
    with pytest.raises(TypeError, match="d"):
        k_grouped_fp8_gemm_tn_contiguous_no_c(a, b, torch.empty(2, m, n, dtype=torch.bfloat16), [128, 128],
                                              ks_tensor)
    with pytest.raises(ValueError, match="ks"):
        k_grouped_fp8_gemm_tn_contiguous_no_c(a, b, torch.empty(2, m, n), [128, 256], ks_tensor)


@pytest.mark.gpu
@pytest.mark.parametrize("ks,m,n", [([2048, 0, 4096, 1408], 2048, 7168), ([1024, 384], 576, 2112)])
def test_gpu_k_grouped_weight_gradient_without_c(ks, m, n):
    """The no-C k-grouped entry on the GPU (sm90's per-group dense launches without C, an empty group zeroed):
    right against float64 and bitwise the zero-filled in-place form."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _check_k_grouped_weight_grad(ks, m, n, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(4096, 7168, 2048), (333, 2112, 7168), (64, 576, 7168)])
def test_gpu_forward_and_both_gradients(m, n, k):
    """On the GPU (sm90 on Hopper): the DeepSeek-V3 shapes, tokens on and off the 128 blocks."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _run(m, n, k, torch.bfloat16, torch.float32, device="cuda")


# ------------------------------------------------------------------------------------------ mixture of experts
def _grouped_case(sizes, n, k, seed=0, device="cpu", pad_value=float("nan")):
    """x [M_total, K] in the contiguous layout (padding rows ``pad_value``), weight [G, N, K], the segments'
    starts."""
    gen = torch.Generator(device=device).manual_seed(seed)
    segments = [align(v, 128) for v in sizes]
    starts = [sum(segments[:g]) for g in range(len(sizes))]
    x = torch.full((sum(segments), k), pad_value, device=device)
    for start, size in zip(starts, sizes):
        x[start:start + size] = torch.randn(size, k, generator=gen, device=device)
    w = torch.randn(len(sizes), n, k, generator=gen, device=device) * 0.05
    return x, w, starts, gen


def _check_grouped(x, w, dy, y, sizes, starts):
    """Per expert: y, dx and dW against float64 products of the recipe's quantized operands (< 1e-3) and of the
    exact ones (< 2e-3); padding rows of y and dx are 0; an empty expert's dW is 0."""
    for g, (start, size) in enumerate(zip(starts, sizes)):
        if size == 0:
            assert torch.equal(w.grad[g], torch.zeros_like(w.grad[g])), g
            continue
        rows = slice(start, start + size)
        # the weight gradient quantizes along the tokens in blocks of 128 from the segment's start, padded with 0
        xs = torch.nn.functional.pad(x.detach()[rows].float(), (0, 0, 0, -size % 128))
        dys = torch.nn.functional.pad(dy[rows].float(), (0, 0, 0, -size % 128))
        ref_y, ref_dx, ref_dw = _quantized_references(xs, w.detach()[g], dys)
        exact = (xs.double() @ w.detach()[g].double().t(), dys.double() @ w.detach()[g].double(),
                 dys.double().t() @ xs.double())
        got = (y.detach()[rows], x.grad[rows], w.grad[g])
        for name, value, ref, ex in zip(("y", "dx", "dW"), got, (ref_y[:size], ref_dx[:size], ref_dw),
                                        (exact[0][:size], exact[1][:size], exact[2])):
            assert torch.isfinite(value).all(), (g, name)
            assert reference.calc_diff(value, ref) < 1e-3, (g, name, reference.calc_diff(value, ref))
            assert reference.calc_diff(value, ex) < 2e-3, (g, name, reference.calc_diff(value, ex))
    valid = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    for start, size in zip(starts, sizes):
        valid[start:start + size] = True
    assert torch.equal(y.detach()[~valid], torch.zeros_like(y.detach()[~valid]))
    assert torch.equal(x.grad[~valid], torch.zeros_like(x.grad[~valid]))


@pytest.mark.parametrize("sizes,n", [([100, 0, 200], 128), ([128, 256], 256), ([1, 127, 129, 0], 128),
                                     ([100, 0, 200], 192)])
def test_grouped_forward_and_both_gradients(sizes, n):
    """Experts of any size (empty ones, segments padded to 128), NaN in the padding rows of x and large values
    in the padding rows of the output gradient: neither reaches any result. N = 192: the experts' weights are
    quantized one by one (a 128-row block would straddle two experts)."""
    x, w, starts, gen = _grouped_case(sizes, n, 256)
    x = x.bfloat16().requires_grad_()
    w.requires_grad_()
    y = finegemm.fp8_grouped_linear(x, w, sizes)
    assert y.shape == (x.shape[0], n) and y.dtype == torch.bfloat16
    dy = torch.randn(y.shape, generator=gen).bfloat16()
    valid = torch.zeros(x.shape[0], dtype=torch.bool)
    for start, size in zip(starts, sizes):
        valid[start:start + size] = True
    dy[~valid] = 1e4
    y.backward(dy)
    assert x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32
    _check_grouped(x, w, dy, y, sizes, starts)


def test_grouped_compiles_with_fullgraph_and_matches_eager():
    torch._dynamo.reset()
    sizes = [100, 0, 140]
    x, w, _, gen = _grouped_case(sizes, 128, 256, pad_value=0.0)
    x = x.bfloat16()
    dy = torch.randn(x.shape[0], 128, generator=gen).bfloat16()
    _compiled_matches_eager(finegemm.fp8_grouped_linear, x, w, dy, sizes)


def test_grouped_no_tokens():
    x = torch.zeros(0, 256, requires_grad=True)
    w = torch.randn(2, 128, 256, requires_grad=True)
    y = finegemm.fp8_grouped_linear(x, w, [0, 0])
    assert y.shape == (0, 128)
    y.sum().backward()
    assert x.grad.shape == (0, 256) and torch.equal(w.grad, torch.zeros_like(w))


@pytest.mark.parametrize("args,err,match", [
    ((torch.randn(256, 256), torch.randn(2, 128, 256), [100]), ValueError, "group_sizes must hold weight's G=2"),
    ((torch.randn(256, 256), torch.randn(2, 128, 256), [100, -1]), ValueError, "non-negative"),
    ((torch.randn(200, 256), torch.randn(2, 128, 256), [100, 50]), ValueError, "x must have 256 rows"),
    ((torch.randn(256, 256), torch.randn(128, 256), [100, 50]), ValueError, "weight must be 3-D"),
    ((torch.randn(256, 64), torch.randn(2, 128, 256), [100, 50]), ValueError, "weight's K=256"),
    ((torch.randn(256, 256).int(), torch.randn(2, 128, 256), [100, 50]), TypeError, "x must have dtype"),
])
def test_grouped_bad_input(args, err, match):
    with pytest.raises(err, match=match):
        finegemm.fp8_grouped_linear(*args)


@pytest.mark.gpu
def test_gpu_grouped_forward_and_both_gradients():
    """On the GPU: 4 experts of ~1000 tokens x (N, K) = (4096, 7168) / (7168, 2048) shapes scaled down to
    (2048, 7168), one expert empty."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    sizes = [1000, 0, 1300, 777]
    x, w, starts, gen = _grouped_case(sizes, 2048, 7168, device="cuda")
    x = x.bfloat16().requires_grad_()
    w.requires_grad_()
    y = finegemm.fp8_grouped_linear(x, w, sizes)
    dy = torch.randn(y.shape, generator=gen, device="cuda").bfloat16()
    y.backward(dy)
    _check_grouped(x, w, dy, y, sizes, starts)
