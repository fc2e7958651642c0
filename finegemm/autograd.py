"""Autograd for the FP8 GEMMs: a linear layer trained with DeepSeek-V3's fine-grained FP8 recipe.

``fp8_linear(x, weight)`` is ``x @ weight^T`` computed by :func:`finegemm.fp8_gemm_nt` in all three GEMMs of a
training step, each operand quantized where it is used (DeepSeek-V3's recipe, the one DeepGEMM's kernels are
built for):

- forward, ``y = x @ W^T``: activations per token (1x128 along K), weights per 128x128 block, BF16 out
  (FP32 for FP32 inputs): the ``1d2d`` kernel;
- input gradient, ``dx = dy @ W``: ``dy`` per token (1x128 along N), the forward's quantized weights
  transposed (the same 128x128 blocks): the ``1d2d`` kernel again;
- weight gradient, ``dW = dy^T @ x``: both operands 1x128 along the tokens, FP32 accumulation: the ``1d1d``
  kernel (the weight-gradient one). The tokens are padded with zeros to a multiple of 128 (zero rows add
  nothing) so that this GEMM's K takes the fast path.

Quantization runs as one Triton pass per operand on a GPU (:mod:`.kernels.portable.quant`, built to equal
:mod:`finegemm.quant`'s torch casts bit for bit, which it uses elsewhere). The backward keeps ``x`` as given (for the
weight gradient, which quantizes it along the tokens) and the forward's FP8 weights. Gradients come back in
the dtypes of ``x`` and ``weight``; ``bias`` is ordinary torch autograd. Every GEMM runs wherever
:func:`finegemm.fp8_gemm_nt` does (sm90, the portable kernels, the CPU interpreter), and under
``torch.compile`` as its custom operator.

``fp8_grouped_linear(x, weight, group_sizes)`` is the same for a mixture of experts in DeepGEMM's contiguous
layout: forward and input gradient as m-grouped contiguous GEMMs, the weight gradient as a k-grouped one (the
experts' tokens are its groups along K).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .api.checks import check_dtype, check_same_device, check_tensor
from .api.gemm import RECIPE_1D1D, fp8_gemm_nt
from .api.grouped import (
    k_grouped_fp8_gemm_tn_contiguous,
    m_grouped_fp8_gemm_nt_contiguous,
)
from .kernels.portable.quant import cast_to_fp8
from .kernels.sm90.transpose import transpose_into
from .layout import get_k_alignment_for_k_grouped
from .quant import align, per_block_cast_to_fp8, per_token_cast_to_fp8

FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
TOKEN_BLOCK = 128


def _out_dtype(dtype: torch.dtype) -> torch.dtype:
    """The GEMM's output dtype for inputs of ``dtype``: FP32 for FP32, BF16 otherwise."""
    return torch.float32 if dtype == torch.float32 else torch.bfloat16


def _cast(x: torch.Tensor, group_rows: int, use_ue8m0: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 [R, C], fp32 scales) of 2-D ``x`` (any strides) per 1x128 (``group_rows`` 1) or 128x128 group: the
    one-pass Triton cast on a GPU (:mod:`.kernels.portable.quant`), :mod:`finegemm.quant`'s torch casts
    elsewhere (the CPU interpreter rounds E4M3 wrongly) and while torch.compile traces (they trace)."""
    if x.is_cuda and not torch.compiler.is_compiling():
        return cast_to_fp8(x, group_rows, use_ue8m0)
    return (per_token_cast_to_fp8 if group_rows == 1 else per_block_cast_to_fp8)(x, use_ue8m0)


def _transposed(w: torch.Tensor) -> torch.Tensor:
    """``w.transpose(-2, -1)`` contiguous for FP8 ``w`` ``[N, K]`` or ``[G, N, K]``: the tiled Triton byte
    transpose on a GPU (coalesced both ways; torch's strided copy of a 7168 x 16384 e4m3 weight took 662 us of an
    H200 training step, commit 38dd6d8), torch's copy elsewhere and while torch.compile traces."""
    if w.is_cuda and not torch.compiler.is_compiling():
        out = torch.empty((*w.shape[:-2], w.shape[-1], w.shape[-2]), device=w.device, dtype=w.dtype)
        transpose_into(w, out)
        return out
    return w.transpose(-2, -1).contiguous()


def _cast_tokens(t: torch.Tensor, use_ue8m0: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``t`` [M, C] quantized 1x128 along the tokens (M, a multiple of 128): e4m3 [M, C] as a column-major view
    of the ``[C, M]`` cast, which the k-grouped tn GEMM reads in place (K-major) rather than transposing a
    row-major copy back, and fp32 [M / 128, C] row-major (the small scales copied into the layout it reads)."""
    q, sf = _cast(t.t(), 1, use_ue8m0)
    return q.t(), sf.t().contiguous()


def _check_float_operands(x: object, weight: object, weight_dims: int, weight_shape: str) -> None:
    """``x`` and ``weight`` are float tensors (bf16, fp16, fp32) and ``weight`` is ``weight_dims``-D."""
    check_tensor("x", x)
    check_tensor("weight", weight)
    check_dtype("x", x, FLOAT_DTYPES)
    check_dtype("weight", weight, FLOAT_DTYPES)
    if weight.dim() != weight_dims:
        raise ValueError(f"weight must be {weight_dims}-D {weight_shape}; got shape {tuple(weight.shape)}")


def _pad_tokens(t: torch.Tensor) -> torch.Tensor:
    """``t`` [M, C] with zero rows appended up to a multiple of 128."""
    pad = -t.shape[0] % TOKEN_BLOCK
    return torch.nn.functional.pad(t, (0, 0, 0, pad)) if pad else t


class _FP8Linear(torch.autograd.Function):
    """``y = x2d @ weight^T`` on 2-D ``x2d`` [M, K] and ``weight`` [N, K] (see the module docstring)."""

    @staticmethod
    def forward(x2d: torch.Tensor, weight: torch.Tensor, use_ue8m0: bool) -> tuple[torch.Tensor, ...]:
        xq = _cast(x2d, 1, use_ue8m0)
        wq, sw = _cast(weight, 128, use_ue8m0)
        y = torch.empty(x2d.shape[0], weight.shape[0], device=x2d.device, dtype=_out_dtype(x2d.dtype))
        fp8_gemm_nt(xq, (wq, sw), y)
        return y.to(x2d.dtype), wq, sw

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        x2d, weight, use_ue8m0 = inputs
        _, wq, sw = output
        ctx.save_for_backward(x2d, wq, sw)
        ctx.use_ue8m0 = use_ue8m0
        ctx.weight_dtype = weight.dtype
        ctx.mark_non_differentiable(wq, sw)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor, *unused: Any) -> tuple[torch.Tensor | None, ...]:
        x2d, wq, sw = ctx.saved_tensors
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dyq = _cast(dy, 1, ctx.use_ue8m0)
            dx = torch.empty(x2d.shape, device=dy.device, dtype=_out_dtype(x2d.dtype))
            # B = W^T [K, N]: the forward's FP8 weights and block scales, transposed
            fp8_gemm_nt(dyq, (_transposed(wq), sw.t().contiguous()), dx)
            dx = dx.to(x2d.dtype)
        if ctx.needs_input_grad[1]:
            dyt = _cast(_pad_tokens(dy).t(), 1, ctx.use_ue8m0)  # [N, M_pad], 1x128 along the tokens
            xt = _cast(_pad_tokens(x2d).t(), 1, ctx.use_ue8m0)  # [K, M_pad], per channel
            dw = torch.zeros(wq.shape, device=dy.device, dtype=torch.float32)
            fp8_gemm_nt(dyt, xt, dw, c=dw, recipe=RECIPE_1D1D)
            dw = dw.to(ctx.weight_dtype)
        return dx, dw, None


def fp8_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
               use_ue8m0: bool = False) -> torch.Tensor:
    """``x @ weight^T + bias`` with FP8 GEMMs in forward and backward (differentiable in ``x``, ``weight`` and
    ``bias``).

    Args:
        x: ``[..., K]`` bf16, fp16 or fp32 activations (any layout; flattened to ``[M, K]`` rows).
        weight: ``[N, K]`` bf16, fp16 or fp32 (the master weights; quantized per 128x128 block each call).
        bias: optional ``[N]``, added in ``x``'s dtype.
        use_ue8m0: round every scale up to a power of two (DeepSeek-V3's UE8M0 scales).

    Returns:
        ``[..., N]`` in ``x``'s dtype (computed in BF16, or FP32 for FP32 ``x``).

    Numerics: each GEMM is one of :func:`finegemm.fp8_gemm_nt`'s (FP32 promotion every 128 of K), so the
    output and both gradients match the float64 products of the quantized operands to ``calc_diff`` < 1e-3,
    and the exact ones to what E4M3 quantization of both operands allows (about 1e-3).
    """
    _check_float_operands(x, weight, 2, "[N, K]")
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x must be [..., K] with weight's K={weight.shape[1]}; got shape {tuple(x.shape)}")
    if bias is not None:
        check_tensor("bias", bias)
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(f"bias must have shape ({weight.shape[0]},); got {tuple(bias.shape)}")
    check_same_device([("x", x), ("weight", weight), ("bias", bias)])
    lead = x.shape[:-1]
    y, _, _ = _FP8Linear.apply(x.reshape(math.prod(lead), x.shape[-1]), weight, use_ue8m0)
    y = y.reshape(*lead, weight.shape[0])
    return y if bias is None else y + bias.to(y.dtype)


class FP8Linear(torch.nn.Linear):
    """``torch.nn.Linear`` whose forward and backward GEMMs run in FP8 (:func:`fp8_linear`); the parameters stay
    in their own dtype (the master weights), quantized per call."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: torch.dtype | None = None, use_ue8m0: bool = False) -> None:
        super().__init__(in_features, out_features, bias, device, dtype)
        self.use_ue8m0 = use_ue8m0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.weight, self.bias, self.use_ue8m0)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", use_ue8m0={self.use_ue8m0}"


def _per_block_cast_experts(w: torch.Tensor, use_ue8m0: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Each expert's ``[N, K]`` of ``w`` [G, N, K] quantized per 128x128 block: (e4m3 [G, N, K], fp32
    [G, ceil(N/128), ceil(K/128)]). With N a multiple of 128 no block straddles two experts: one cast of the
    [G * N, K] rows."""
    g, n, k = w.shape
    if n % 128 == 0:
        q, sf = _cast(w.reshape(g * n, k), 128, use_ue8m0)
        return q.view(g, n, k), sf.view(g, n // 128, sf.shape[1])
    pairs = [_cast(w[e], 128, use_ue8m0) for e in range(g)]
    return torch.stack([q for q, _ in pairs]), torch.stack([sf for _, sf in pairs])


class _FP8GroupedLinear(torch.autograd.Function):
    """``y[r] = x[r] @ weight[g(r)]^T`` in the contiguous layout (see :func:`fp8_grouped_linear`)."""

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, ends: torch.Tensor, valid: torch.Tensor,
                segments: tuple[int, ...], use_ue8m0: bool) -> tuple[torch.Tensor, ...]:
        wq, sw = _per_block_cast_experts(weight, use_ue8m0)
        y = torch.empty(x.shape[0], weight.shape[1], device=x.device, dtype=torch.bfloat16)
        m_grouped_fp8_gemm_nt_contiguous(_cast(x, 1, use_ue8m0), (wq, sw), y, ends,
                                         use_psum_layout=True)
        return y.to(x.dtype), wq, sw

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        x, weight, ends, valid, segments, use_ue8m0 = inputs
        _, wq, sw = output
        ctx.save_for_backward(x, wq, sw, ends, valid)
        ctx.segments, ctx.use_ue8m0, ctx.weight_dtype = segments, use_ue8m0, weight.dtype
        ctx.mark_non_differentiable(wq, sw)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor, *unused: Any) -> tuple[torch.Tensor | None, ...]:
        x, wq, sw, ends, valid = ctx.saved_tensors
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = torch.empty(x.shape, device=dy.device, dtype=torch.bfloat16)
            # B of expert g = W_g^T [K, N]: the forward's FP8 weights and block scales, transposed per expert
            m_grouped_fp8_gemm_nt_contiguous(_cast(dy, 1, ctx.use_ue8m0),
                                             (_transposed(wq), sw.transpose(1, 2).contiguous()),
                                             dx, ends, use_psum_layout=True)
            dx = dx.to(x.dtype)
        if ctx.needs_input_grad[1]:
            # the padding rows' output is a constant 0: whatever gradient reaches them must not reach W
            keep = valid[:, None]
            dyq = _cast_tokens(torch.where(keep, dy, 0), ctx.use_ue8m0)  # [M, N], [M/128, N]
            xq = _cast_tokens(torch.where(keep, x, 0), ctx.use_ue8m0)  # [M, K], [M/128, K]
            ks_tensor = torch.tensor(ctx.segments, dtype=torch.int32).to(dy.device, non_blocking=True)
            dw = torch.zeros(wq.shape, device=dy.device, dtype=torch.float32)
            k_grouped_fp8_gemm_tn_contiguous(dyq, xq, dw, list(ctx.segments), ks_tensor, c=dw)
            dw = dw.to(ctx.weight_dtype)
        return dx, dw, None, None, None, None


def fp8_grouped_linear(x: torch.Tensor, weight: torch.Tensor, group_sizes: Sequence[int],
                       use_ue8m0: bool = False) -> torch.Tensor:
    """Mixture-of-experts linear: ``y[r] = x[r] @ weight[g]^T`` for each row ``r`` of expert ``g``'s tokens, with
    FP8 GEMMs in forward and backward (differentiable in ``x`` and ``weight``).

    Args:
        x: ``[M_total, K]`` bf16, fp16 or fp32 in DeepGEMM's contiguous layout: expert ``g``'s tokens are rows
            ``[start_g, start_g + group_sizes[g])``, each segment starting on a multiple of
            ``get_k_alignment_for_k_grouped()`` (128, or a larger contiguous alignment: the weight gradient's
            k-grouped GEMM takes these segments as its groups of K): ``start_g`` is the sum of the earlier sizes,
            each rounded up to 128, and ``M_total`` that sum over all experts. The rows between segments are
            padding (any values).
        weight: ``[G, N, K]`` bf16, fp16 or fp32, one ``[N, K]`` per expert (master weights).
        group_sizes: host sequence of ``G`` token counts (``>= 0``; no device sync is needed).
        use_ue8m0: power-of-two scales.

    Returns:
        ``[M_total, N]`` in ``x``'s dtype (computed in BF16); padding rows are 0, and no gradient flows
        through them (their rows of ``x``'s gradient are 0, and they add nothing to the weight's).

    The forward and the input gradient are :func:`finegemm.m_grouped_fp8_gemm_nt_contiguous` calls (1x128
    activations / output gradients, 128x128 expert weights), the weight gradient one
    :func:`finegemm.k_grouped_fp8_gemm_tn_contiguous` (the output gradients and inputs quantized 1x128 along
    the tokens, each expert's segment its group of K).
    """
    _check_float_operands(x, weight, 3, "[G, N, K]")
    if x.dim() != 2 or x.shape[1] != weight.shape[2]:
        raise ValueError(f"x must be [M_total, K] with weight's K={weight.shape[2]}; got shape {tuple(x.shape)}")
    check_same_device([("x", x), ("weight", weight)])
    sizes = [int(v) for v in group_sizes]
    if len(sizes) != weight.shape[0] or any(v < 0 for v in sizes):
        raise ValueError(f"group_sizes must hold weight's G={weight.shape[0]} non-negative token counts; got "
                         f"{sizes}")
    segment_rows = get_k_alignment_for_k_grouped()
    segments = tuple(align(v, segment_rows) for v in sizes)
    if sum(segments) != x.shape[0]:
        raise ValueError(f"x must have {sum(segments)} rows (group_sizes {sizes}, each segment rounded up to "
                         f"{segment_rows}); got {x.shape[0]}")
    starts = [sum(segments[:g]) for g in range(len(sizes))]
    # row r of segment g is a token iff r - start_g < size_g (built on the host: no device sync)
    seg = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(segments, dtype=torch.long),
                                  output_size=x.shape[0])
    valid = torch.arange(x.shape[0]) - torch.tensor(starts)[seg] < torch.tensor(sizes)[seg]
    ends = torch.tensor([s + v for s, v in zip(starts, sizes)], dtype=torch.int32)
    ends, valid = ends.to(x.device, non_blocking=True), valid.to(x.device, non_blocking=True)
    y, _, _ = _FP8GroupedLinear.apply(x, weight, ends, valid, segments, use_ue8m0)
    return y
