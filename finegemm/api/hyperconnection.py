"""DeepGEMM's hyper-connection pre-norm GEMM: ``tf32_hc_prenorm_gemm(a, b, d, sqr_sum, num_splits=None)``.

The pre-norm step of hyper-connections needs each token's projection ``a @ b^T`` onto a few (``N``) mixing
weights and its sum of squares (for the RMS norm); this op gives both in one pass over the activations. Runs the
portable Triton kernel
(:mod:`finegemm.kernels.portable.hc_prenorm`) on every device.
"""

from __future__ import annotations

import torch

from ..jit.device import get_num_sms
from ..kernels.portable.hc_prenorm import launch_hc_prenorm_parts, launch_hc_prenorm_unsplit
from .checks import check_dtype, check_same_device, check_shape, check_tensor


def _check_num_splits(num_splits: object) -> int | None:
    if num_splits is None:
        return None
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1:
        raise ValueError(f"num_splits must be None or an int >= 1; got {num_splits!r}")
    return num_splits


def tf32_hc_prenorm_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                         num_splits: int | None = None) -> None:
    """``d = a @ b^T`` (TF32 products, FP32 accumulation) and ``sqr_sum = (a * a).sum(-1)`` (FP32), in place.

    Args:
        a: bf16 ``[M, K]`` (any strides; DeepGEMM needs K-major).
        b: fp32 ``[N, K]`` (any strides; DeepGEMM needs K-major). Rounded to TF32 (10 mantissa bits, to nearest)
            in the kernel, on every device: the products are exact products of TF32 values
            (:func:`finegemm.reference.hyperconnection.tf32_hc_prenorm_gemm` with ``tf32=True``); why, and the
            speed cost (not measured), in :mod:`finegemm.kernels.portable.hc_prenorm`.
        d: fp32 ``[M, N]``, or ``[num_splits, M, N]`` with ``num_splits``.
        sqr_sum: fp32 ``[M]``, or ``[num_splits, M]`` with ``num_splits``.
        num_splits: None: d and sqr_sum the whole sums. Or S >= 1: K is cut into S consecutive
            ranges of 64-column blocks (``ceil(K/64) // S`` blocks each, one more for the first ``ceil(K/64) % S``;
            :func:`finegemm.reference.hyperconnection.k_split_ranges`) and ``d[s]``, ``sqr_sum[s]`` get range s's
            partial results (zeros for an empty range),
            to be summed over dim 0 by the caller, as DeepGEMM's split form does. Either way, where too few
            programs would leave SMs idle the kernel cuts the whole K, or each range, further into parts in fp32
            scratch and sums them in a fixed order, deterministically
            (:func:`finegemm.kernels.portable.hc_prenorm.sub_splits`).

    Sizes: any M >= 0 (M = 0 returns at once), N >= 1, K >= 1 (DeepGEMM's SM90 kernel needs N <= 32 with
    N % 8 == 0 and K % 64 == 0; this one does not).
    """
    for name, t, dtype in (("a", a, torch.bfloat16), ("b", b, torch.float32), ("d", d, torch.float32),
                           ("sqr_sum", sqr_sum, torch.float32)):
        check_tensor(name, t)
        check_dtype(name, t, (dtype,))
    splits = _check_num_splits(num_splits)
    if a.dim() != 2 or b.dim() != 2 or b.shape[1] != a.shape[1]:
        raise ValueError(f"a must be [M, K] and b [N, K] with the same K; got shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    m, k = a.shape
    n = b.shape[0]
    if n == 0 or k == 0:
        raise ValueError(f"N and K must be >= 1; got N={n}, K={k}")
    lead = () if splits is None else (splits,)
    check_shape("d", d, (*lead, m, n))
    check_shape("sqr_sum", sqr_sum, (*lead, m))
    check_same_device([("a", a), ("b", b), ("d", d), ("sqr_sum", sqr_sum)])
    if m == 0:
        return
    if splits is None:
        launch_hc_prenorm_unsplit(a, b, d, sqr_sum, get_num_sms())
    else:
        launch_hc_prenorm_parts(a, b, d, sqr_sum, splits, get_num_sms())


__all__ = ["tf32_hc_prenorm_gemm"]
