"""DeepGEMM's ``fp8_fp4_*`` GEMM names: on SM90 they are its FP8 GEMMs, and FP4 operands are refused.

DeepGEMM binds ``fp8_gemm_nt`` and ``fp8_fp4_gemm_nt`` to one function; its SM90 build accepts only FP8
operands there (packed E2M1 needs SM100's block-scaled MMA). finegemm does the same: each name below checks that
no operand is packed FP4 (int8 ``[MN, K/2]``, or torch's ``float4_e2m1fn_x2``) and calls the FP8 GEMM of the
same layout, whose signature and semantics it shares.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from . import gemm, grouped

_FP4_DTYPES = tuple(d for d in (torch.int8, getattr(torch, "float4_e2m1fn_x2", None)) if d is not None)


def check_not_fp4(name: str, pair: object) -> None:
    """TypeError when ``pair`` is ``(values, scales)`` whose values are packed FP4."""
    values = pair[0] if isinstance(pair, (tuple, list)) and pair else None
    if isinstance(values, torch.Tensor) and values.dtype in _FP4_DTYPES:
        raise TypeError(f"{name}[0] has dtype {values.dtype} (packed FP4 E2M1); FP4 operands need SM100's "
                        "block-scaled MMA, which finegemm does not target (DeepGEMM's SM90 build refuses them too): "
                        "pass float8_e4m3fn values with per_token_cast_to_fp8 / per_block_cast_to_fp8 scales")


def _fp8_only(fp8_fn: Callable, name: str) -> Callable:
    """``fp8_fn`` under DeepGEMM's ``fp8_fp4`` name, refusing FP4 ``a`` / ``b``; its signature is ``fp8_fn``'s."""

    @functools.wraps(fp8_fn)
    def fn(a, b, *args, **kwargs):
        check_not_fp4("a", a)
        check_not_fp4("b", b)
        return fp8_fn(a, b, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"DeepGEMM's ``{name}`` on SM90: :func:`{fp8_fn.__name__}` with FP8 operands only.\n\n" + (
        fp8_fn.__doc__ or "")
    return fn


fp8_fp4_gemm_nt = _fp8_only(gemm.fp8_gemm_nt, "fp8_fp4_gemm_nt")
fp8_fp4_gemm_nn = _fp8_only(gemm.fp8_gemm_nn, "fp8_fp4_gemm_nn")
fp8_fp4_gemm_tn = _fp8_only(gemm.fp8_gemm_tn, "fp8_fp4_gemm_tn")
fp8_fp4_gemm_tt = _fp8_only(gemm.fp8_gemm_tt, "fp8_fp4_gemm_tt")
m_grouped_fp8_fp4_gemm_nt_contiguous = _fp8_only(grouped.m_grouped_fp8_gemm_nt_contiguous,
                                                 "m_grouped_fp8_fp4_gemm_nt_contiguous")
m_grouped_fp8_fp4_gemm_nn_contiguous = _fp8_only(grouped.m_grouped_fp8_gemm_nn_contiguous,
                                                 "m_grouped_fp8_fp4_gemm_nn_contiguous")
m_grouped_fp8_fp4_gemm_nt_masked = _fp8_only(grouped.m_grouped_fp8_gemm_nt_masked, "m_grouped_fp8_fp4_gemm_nt_masked")

__all__ = [
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
]
