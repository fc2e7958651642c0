"""Hyper-connection pre-norm GEMM (Triton, any CUDA GPU and the CPU interpreter).

``d[s] = a[:, K_s] @ b[:, K_s]^T`` and ``sqr_sum[s] = sum(a[:, K_s]^2, -1)`` for each K split s
(:func:`finegemm.reference.hyperconnection.k_split_ranges`), with a bf16 and b fp32: the products run on the
tensor cores in TF32 with FP32 accumulation, and the squares are summed in FP32 from the same loaded ``a`` tile.
A bf16 ``a`` is exact in TF32; ``b`` is rounded to TF32 (10 mantissa bits, to nearest, ties to even) in the kernel
before the dot, so every device (and the interpreter) multiplies the same TF32 values as the reference's TF32 twin
(:func:`finegemm.reference.hyperconnection.round_to_tf32`). DeepGEMM's SM90 kernel hands its fp32 B to the TF32
WGMMA as stored, and so did this one: on an H100 that gave calc_diff 1.4-1.6e-7 against the twin and 1.58e-7
against DeepGEMM's test reference (cuBLAS with TF32 allowed) at m=13, n=24, k=28672, whose bound is 1e-8 (results
at 2a6c9ab) -- the tensor cores drop the low bits rather than round them, which the simulated gap (1.2e-7 between
truncated and rounded b at that size) matches. The rounding costs a few integer operations per element of the
b tile (b is the small operand: N x K against a's M x K); its speed cost is not measured.

One program per (M tile, N tile, split); the N-tile-0 programs also write the squared sums. N is the
hyper-connection width (a few dozen at most), so usually one N tile.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from ...reference.hyperconnection import SPLIT_BLOCK_K

MAX_BLOCK_N = 64


class HcTile(NamedTuple):
    """A launch of the kernel: ``block_m`` rows a program, ``k_blocks`` split blocks (of SPLIT_BLOCK_K columns) a
    loop step (powers of two both), ``num_warps``, ``num_stages``."""

    block_m: int = 64
    k_blocks: int = 1
    num_warps: int = 4
    num_stages: int = 3


TILE = HcTile()


@triton.jit
def _round_to_tf32(x):
    """FP32 ``x`` rounded to TF32's 10 mantissa bits (to nearest, ties to even; NaN and Inf kept), still FP32."""
    bits = x.to(tl.uint32, bitcast=True)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).to(tl.float32, bitcast=True)
    return tl.where(tl.abs(x) < float("inf"), rounded, x)


@triton.jit
def _hc_prenorm_kernel(a_ptr, b_ptr, d_ptr, s_ptr, M, N, K, blocks_per_split, extra_blocks,
                       stride_am, stride_ak, stride_bn, stride_bk, stride_ds, stride_dm, stride_dn,
                       stride_ss, stride_sm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       K_BLOCKS: tl.constexpr, SUB: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    z = tl.program_id(2)  # the output slice: split z // SUB, its part z % SUB
    split = z // SUB
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    # the split's K blocks: blocks_per_split each, one more for the first extra_blocks splits
    first = split * blocks_per_split + tl.minimum(split, extra_blocks)
    count = blocks_per_split + (split < extra_blocks).to(tl.int32)
    if SUB > 1:  # the split's blocks cut again into SUB parts the same way
        part = z % SUB
        first += part * (count // SUB) + tl.minimum(part, count % SUB)
        count = count // SUB + (part < count % SUB).to(tl.int32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    sq = tl.zeros((BLOCK_M,), dtype=tl.float32)
    STEP: tl.constexpr = K_BLOCKS * BLOCK_K
    k_end = tl.minimum((first + count) * BLOCK_K, K)
    for k0 in range(first * BLOCK_K, (first + count) * BLOCK_K, STEP):
        ks = k0 + tl.arange(0, STEP)
        k_ok = ks < k_end
        a = tl.load(a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak,
                    mask=row_ok[:, None] & k_ok[None, :], other=0.0).to(tl.float32)
        b = _round_to_tf32(tl.load(b_ptr + cols[:, None].to(tl.int64) * stride_bn + ks[None, :] * stride_bk,
                                   mask=col_ok[:, None] & k_ok[None, :], other=0.0))
        acc = tl.dot(a, tl.trans(b), acc, input_precision=INPUT_PRECISION)
        sq += tl.sum(a * a, axis=1)
    tl.store(d_ptr + z * stride_ds + rows[:, None].to(tl.int64) * stride_dm + cols[None, :] * stride_dn, acc,
             mask=row_ok[:, None] & col_ok[None, :])
    if pid_n == 0:
        tl.store(s_ptr + z * stride_ss + rows.to(tl.int64) * stride_sm, sq, mask=row_ok)


def _block_n(n: int) -> int:
    """The N tile: N's next power of two, 16 to MAX_BLOCK_N."""
    return min(max(16, triton.next_power_of_2(n)), MAX_BLOCK_N)


def launch_hc_prenorm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                      num_splits: int, tile: HcTile = TILE, sub: int = 1) -> None:
    """Launch on validated tensors: a bf16 ``[M, K]``, b fp32 ``[N, K]`` (any strides), d fp32 ``[S * sub, M, N]``
    and sqr_sum fp32 ``[S * sub, M]`` (3-D / 2-D views, any strides), ``num_splits`` S >= 1, M, N, K >= 1; slice
    ``s * sub + j`` gets part ``j`` of split ``s`` (its K blocks cut into ``sub`` runs as the splits cut K)."""
    m, k = a.shape
    n = b.shape[0]
    blocks_per_split, extra_blocks = divmod(triton.cdiv(k, SPLIT_BLOCK_K), num_splits)
    block_n = _block_n(n)
    grid = (triton.cdiv(m, tile.block_m), triton.cdiv(n, block_n), num_splits * sub)
    _hc_prenorm_kernel[grid](
        a, b, d, sqr_sum, m, n, k, blocks_per_split, extra_blocks,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), d.stride(0), d.stride(1), d.stride(2),
        sqr_sum.stride(0), sqr_sum.stride(1),
        BLOCK_M=tile.block_m, BLOCK_N=block_n, BLOCK_K=SPLIT_BLOCK_K, K_BLOCKS=tile.k_blocks, SUB=sub,
        INPUT_PRECISION="tf32", num_warps=tile.num_warps, num_stages=tile.num_stages,
    )


# Few programs would leave the GPU idle: one program per 64 rows over the whole K took 553 us at 13 x 24 x 28672 on an
# H100 (Triton 3.9) where a 16-way split took 37 us (benchmarks/results/bench-hc-mqa-t39-h100-2026-12-07-91e4eee.json),
# and DeepGEMM's own 16 splits at M = 13 ran 10 us where one program per split ran 36 us (...-dc1f84c.json). So each
# split (the whole K for an unsplit call) is cut again into parts, enough for TARGET_PROGRAMS_PER_SM programs an SM
# but at least MIN_BLOCKS_PER_SPLIT K blocks each, and the parts are summed in a fixed order (deterministic).
TARGET_PROGRAMS_PER_SM = 2
MIN_BLOCKS_PER_SPLIT = 4


def sub_splits(m: int, n: int, k: int, num_splits: int, num_sms: int, tile: HcTile = TILE) -> int:
    """Parts per split for ``num_splits`` splits of ``[M, K] x [N, K]`` on ``num_sms`` SMs (1: none)."""
    programs = triton.cdiv(m, tile.block_m) * triton.cdiv(n, _block_n(n)) * num_splits
    wanted = triton.cdiv(TARGET_PROGRAMS_PER_SM * num_sms, programs)
    return max(1, min(wanted, triton.cdiv(k, SPLIT_BLOCK_K) // num_splits // MIN_BLOCKS_PER_SPLIT))


def launch_hc_prenorm_parts(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                            num_splits: int, num_sms: int, tile: HcTile = TILE) -> None:
    """``num_splits`` splits on validated tensors (d ``[S, M, N]``, sqr_sum ``[S, M]``), each cut into
    :func:`sub_splits` parts in fp32 scratch and summed (over the part axis, in order) into ``d`` and ``sqr_sum``."""
    m, k = a.shape
    n = b.shape[0]
    sub = sub_splits(m, n, k, num_splits, num_sms, tile)
    if sub == 1:
        launch_hc_prenorm(a, b, d, sqr_sum, num_splits, tile)
        return
    part_d = torch.empty((num_splits * sub, m, n), dtype=torch.float32, device=a.device)
    part_s = torch.empty((num_splits * sub, m), dtype=torch.float32, device=a.device)
    launch_hc_prenorm(a, b, part_d, part_s, num_splits, tile, sub)
    torch.sum(part_d.view(num_splits, sub, m, n), dim=1, out=d)
    torch.sum(part_s.view(num_splits, sub, m), dim=1, out=sqr_sum)


def launch_hc_prenorm_unsplit(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                              num_sms: int, tile: HcTile = TILE) -> None:
    """``num_splits=None`` on validated tensors (d ``[M, N]``, sqr_sum ``[M]``): one split cut into parts."""
    launch_hc_prenorm_parts(a, b, d.unsqueeze(0), sqr_sum.unsqueeze(0), 1, num_sms, tile)
