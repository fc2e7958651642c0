"""DeepGEMM's cuBLASLt peers under its names: ``cublaslt_gemm_{nt,nn,tn,tt}(a, b, d, c=None)``.

DeepGEMM ships them as the reference its tests and benchmarks compare against; code written for it calls them
too. Here they run torch's own GEMM (cuBLAS / cuBLASLt on a GPU), so a call gives the vendor library's result and
speed, not a finegemm kernel's. ``d = c + a @ b^T`` with the ``nt`` letters of :mod:`finegemm.api.gemm`: the first
for A, the second for B.
"""

from __future__ import annotations

import torch

from .checks import check_dim, check_dtype, check_no_overlap, check_output, check_same_device, check_tensor

IN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def cublaslt_gemm_nt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None = None) -> None:
    """``d = c + a @ b^T`` through torch's GEMM (cuBLAS / cuBLASLt on CUDA).

    a: ``[M, K]``, b: ``[N, K]``, one dtype of bf16, fp16 or fp32 (any strides); d: ``[M, N]`` row-major, the
    operands' dtype or fp32 (FP32 accumulation either way); c: optional ``[M, N]`` (may be ``d``), added in FP32.
    """
    for name, t in (("a", a), ("b", b)):
        check_tensor(name, t)
        check_dtype(name, t, IN_DTYPES)
        check_dim(name, t, 2, "[M, K]" if name == "a" else "[N, K]")
    if b.dtype != a.dtype:
        raise TypeError(f"a and b must have one dtype; got {a.dtype} and {b.dtype}")
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise ValueError(f"b must be [N, K] with a's K={k}; got shape {tuple(b.shape)}")
    check_output("d", d, (m, n), tuple(dict.fromkeys((a.dtype, torch.float32))))
    if c is not None:
        check_tensor("c", c)
        if tuple(c.shape) != (m, n):
            raise ValueError(f"c must have d's shape {(m, n)}; got {tuple(c.shape)}")
    check_same_device([("a", a), ("b", b), ("d", d), ("c", c)])
    check_no_overlap("d", d, (("a", a), ("b", b), ("c", c)), may_be_out=("c",))
    if d.numel() == 0:
        return
    if c is None and d.dtype == a.dtype:
        torch.mm(a, b.t(), out=d)
        return
    total = _mm_fp32(a, b.t())
    if c is not None:
        total += c.float()
    d.copy_(total)


def _mm_fp32(a: torch.Tensor, bt: torch.Tensor) -> torch.Tensor:
    """``a @ bt`` as FP32: torch's mixed-precision ``mm(..., out_dtype=float32)`` where the device has it, else the
    operands widened (exact for bf16 / fp16)."""
    if a.dtype == torch.float32:
        return torch.mm(a, bt)
    try:
        return torch.mm(a, bt, out_dtype=torch.float32)
    except (RuntimeError, TypeError, NotImplementedError):
        return torch.mm(a.float(), bt.float())


def _t(name: str, x: object, shape: str) -> torch.Tensor:
    check_dim(name, check_tensor(name, x), 2, shape)
    return x.t()


def cublaslt_gemm_nn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None = None) -> None:
    """``d = c + a @ b`` with b ``[K, N]``."""
    cublaslt_gemm_nt(a, _t("b", b, "[K, N]"), d, c)


def cublaslt_gemm_tn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None = None) -> None:
    """``d = c + a^T @ b`` with a ``[K, M]`` and b ``[K, N]``."""
    cublaslt_gemm_nt(_t("a", a, "[K, M]"), _t("b", b, "[K, N]"), d, c)


def cublaslt_gemm_tt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None = None) -> None:
    """``d = c + a^T @ b^T`` with a ``[K, M]`` and b ``[N, K]``."""
    cublaslt_gemm_nt(_t("a", a, "[K, M]"), b, d, c)
