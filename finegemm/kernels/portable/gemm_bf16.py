"""Portable BF16 GEMM: ``D = C + A @ B^T`` with FP32 accumulation, any operand majors, BF16 or FP32 D."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...jit.heuristics import PortableConfig
from .gemm_fp8 import swizzled_tile


@triton.jit
def _bf16_gemm_kernel(
    a_ptr, b_ptr, d_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk,
    stride_dm, stride_dn, stride_cm, stride_cn,
    HAS_C: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = swizzled_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    a_rows = a_ptr + rm.to(tl.int64)[:, None] * stride_am
    b_cols = b_ptr + rn.to(tl.int64)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_mask = rk < K
        a = tl.load(a_rows + rk.to(tl.int64)[None, :] * stride_ak, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_cols + rk.to(tl.int64)[:, None] * stride_bk, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        if UPCAST:
            # Triton's interpreter (3.6-3.9) multiplies bf16 tiles as their raw bits; fp32 (exact for bf16) is right.
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.float32)
    out_mask = m_mask[:, None] & n_mask[None, :]
    if HAS_C:
        c = tl.load(c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn, mask=out_mask, other=0.0)
        acc += c.to(tl.float32)
    d_ptrs = d_ptr + rm.to(tl.int64)[:, None] * stride_dm + rn[None, :] * stride_dn
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=out_mask)


def launch_bf16_gemm(
    a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None, config: PortableConfig
) -> None:
    """a: bf16 ``[M, K]``, b: bf16 ``[N, K]`` (any strides); d: bf16/fp32 ``[M, N]``; c: optional ``[M, N]``."""
    m, k = a.shape
    n = b.shape[0]
    c_arg = c if c is not None else d
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
    _bf16_gemm_kernel[grid](
        a, b, d, c_arg,
        m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        d.stride(0), d.stride(1), c_arg.stride(0), c_arg.stride(1),
        HAS_C=c is not None, UPCAST=a.device.type == "cpu",
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
