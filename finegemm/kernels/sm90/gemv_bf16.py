"""BF16 GEMV for one-row GEMMs (decode: ``d[0, :] = c[0, :] + a[0, :] @ b^T``), a plain Triton kernel.

At M = 1 a GEMM is a stream of B: every byte of the weight is read once and used for one multiply-add, so the
tensor-core kernel's 64-row tiles (63 rows of zeros) buy nothing and its TMA boxes read 128 bytes of each of
``BLOCK_N`` rows per request. Here each program streams ``BLOCK_N`` whole rows of B along K with 16-byte vector
loads (``BLOCK_K`` elements of every row an iteration), multiplies by A's slice in FP32 and sums along K once at
the end; with ``SPLIT_K`` > 1 the programs of one row block take K ranges of ``K_SPLIT`` and the one that arrives
last adds the partials in split order (deterministic; the arrival counter is left 0 for the next call).

Operands as :mod:`.dispatch_bf16` hands them over: A bf16 ``[1, K]`` (any K stride), B bf16 ``[N, K]`` K-major
(``stride(1) == 1``), D bf16 / fp32 ``[1, N]`` with unit column stride, C optional ``[1, N]`` bf16 / fp32 (any
column stride). Not Hopper-specific; dispatched from the sm90 BF16 route (``heuristics_sm90.get_sm90_gemv_config``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...jit.heuristics_sm90 import Sm90GemvConfig
from . import launcher


@triton.jit
def _finish(out, rows, row_ok, d_ptr, c_ptr, stride_cn, HAS_C: tl.constexpr):
    if HAS_C:
        out += tl.load(c_ptr + rows.to(tl.int64) * stride_cn, mask=row_ok, other=0.0).to(tl.float32)
    tl.store(d_ptr + rows, out.to(d_ptr.dtype.element_ty), mask=row_ok)


@triton.jit
def _slice(b_rows, a_ptr, k0, k_hi, stride_ak, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """B's ``[BLOCK_N, BLOCK_K]`` and A's ``[BLOCK_K]`` from K offset ``k0`` (masked to ``k_hi`` unless
    ``EVEN_K``)."""
    ks = k0 + tl.arange(0, BLOCK_K)
    if EVEN_K:
        b = tl.load(b_rows + ks[None, :])
        a = tl.load(a_ptr + ks.to(tl.int64) * stride_ak)
    else:
        k_ok = ks < k_hi
        b = tl.load(b_rows + ks[None, :], mask=k_ok[None, :], other=0.0)
        a = tl.load(a_ptr + ks.to(tl.int64) * stride_ak, mask=k_ok, other=0.0)
    return b, a


@triton.jit
def gemv_bf16_kernel(a_ptr, b_ptr, d_ptr, c_ptr, ws_ptr, cnt_ptr, N, K, K_SPLIT, stride_ak, stride_bn, stride_cn,
                     HAS_C: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     EVEN_K: tl.constexpr):
    """Grid ``(cdiv(N, BLOCK_N), SPLIT_K)``. ``EVEN_K``: every K range is whole ``BLOCK_K`` slices (no K mask).
    ``ws_ptr``: FP32 ``[SPLIT_K, N]`` partials, ``cnt_ptr``: int32 ``[cdiv(N, BLOCK_N)]`` zeros (SPLIT_K > 1)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    # rows past N read row N - 1 (never stored): loads without a mask keep their 16-byte vectors
    b_rows = b_ptr + tl.minimum(rows, N - 1).to(tl.int64)[:, None] * stride_bn
    k_lo = pid_k * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    # one slice loaded ahead of the one multiplied (Triton does not pipeline loads that feed no dot): two slices
    # of loads in flight a thread; every K range holds at least one slice (the launch drops empty ones)
    b, a = _slice(b_rows, a_ptr, k_lo, k_hi, stride_ak, BLOCK_K, EVEN_K)
    for k0 in range(k_lo + BLOCK_K, k_hi, BLOCK_K):
        nb, na = _slice(b_rows, a_ptr, k0, k_hi, stride_ak, BLOCK_K, EVEN_K)
        acc += b.to(tl.float32) * a.to(tl.float32)[None, :]
        b = nb
        a = na
    acc += b.to(tl.float32) * a.to(tl.float32)[None, :]
    store_row_block(tl.sum(acc, axis=1), rows, row_ok, pid_n, pid_k, N, ws_ptr, cnt_ptr, d_ptr, c_ptr, stride_cn,
                    HAS_C, SPLIT_K)


@triton.jit
def store_row_block(part, rows, row_ok, pid_n, pid_k, N, ws_ptr, cnt_ptr, d_ptr, c_ptr, stride_cn,
                    HAS_C: tl.constexpr, SPLIT_K: tl.constexpr):
    """D's ``rows`` from this program's FP32 ``part`` (+ C): at once without split-K; else the partial goes to
    ``ws_ptr[pid_k, rows]`` and the program of row block ``pid_n`` that arrives last adds the ``SPLIT_K`` partials
    in split order, stores D and leaves the counter 0."""
    if SPLIT_K == 1:
        _finish(part, rows, row_ok, d_ptr, c_ptr, stride_cn, HAS_C)
    else:
        tl.store(ws_ptr + pid_k * N + rows, part, mask=row_ok)
        tl.debug_barrier()  # every thread's partial is written before the arrival is counted
        arrived = tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            # L2 reads (.cg): the other splits' partials were written by other SMs
            out = tl.load(ws_ptr + rows, mask=row_ok, other=0.0, cache_modifier=".cg")
            for s in tl.static_range(1, SPLIT_K):
                out += tl.load(ws_ptr + s * N + rows, mask=row_ok, other=0.0, cache_modifier=".cg")
            tl.store(cnt_ptr + pid_n, 0)
            _finish(out, rows, row_ok, d_ptr, c_ptr, stride_cn, HAS_C)


_workspaces: dict[tuple, torch.Tensor] = {}
_counters: dict[tuple, torch.Tensor] = {}


def split_plan(config: Sm90GemvConfig, n: int, k: int, d: torch.Tensor) -> tuple[int, int, int, torch.Tensor,
                                                                                  torch.Tensor]:
    """(K per range, ranges, row blocks, FP32 partials, arrival counters) of a GEMV launch: ``config.split_k``
    ranges of whole ``block_k`` slices at most, none empty; the buffers of the current stream (``d`` stands in
    for both without split-K)."""
    k_split = triton.cdiv(triton.cdiv(k, config.block_k), config.split_k) * config.block_k
    split = triton.cdiv(k, k_split)
    blocks = triton.cdiv(n, config.block_n)
    if split == 1:
        return k_split, split, blocks, d, d
    ws = launcher.stream_scratch(_workspaces, d.device, split * n, torch.float32)
    cnt = launcher.stream_scratch(_counters, d.device, blocks, torch.int32, zeroed=True)
    return k_split, split, blocks, ws, cnt


def build_plan(config: Sm90GemvConfig, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
               c: torch.Tensor | None) -> list:
    """The one launch ``(kernel, grid, args, meta)`` of ``d = c + a @ b^T`` at M = 1 (module docstring)."""
    n, k = b.shape
    k_split, split, blocks, ws, cnt = split_plan(config, n, k, d)
    c_arg = c if c is not None else d
    args = (a, b, d, c_arg, ws, cnt, n, k, k_split, a.stride(1), b.stride(0), c_arg.stride(1))
    meta = dict(HAS_C=c is not None, SPLIT_K=split, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                EVEN_K=k % config.block_k == 0, num_warps=config.num_warps)
    return [(gemv_bf16_kernel, (blocks, split), args, meta)]
