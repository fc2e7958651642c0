"""Tiled byte transpose of MN-major FP8 operands into K-major workspaces (the k-grouped ``tn`` path, the dense
``nn`` / ``tn`` / ``tt`` forms).

FP8 WGMMA reads both operands K-major from shared memory, so the MN-major ``[sum(ks), MN]`` operands
of ``k_grouped_fp8_gemm_tn_contiguous`` are first copied to ``[MN, sum(ks)]`` row-major (one launch
per operand, all groups at once); every group is then a K-major column block of that copy.

A plain Triton kernel (no Hopper feature): each program loads a ``BLOCK x BLOCK`` tile with rows
contiguous and stores its transpose (the compiler routes it through shared memory so that both
the loads and the stores are coalesced). Elements are moved as raw bytes (``uint8`` views).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import launcher

BLOCK = 128  # 16 KiB of bytes a tile; 128-byte rows on both sides of the transpose


@triton.jit
def _transpose_kernel(src_ptr, dst_ptr, R, C, stride_src, stride_dst, stride_src_g, stride_dst_g,
                      BLOCK: tl.constexpr):
    """``dst[g, c, r] = src[g, r, c]`` for ``src`` ``[G, R, C]`` (matrix stride ``stride_src_g``, row stride
    ``stride_src``, unit column stride) and ``dst`` ``[G, C, R]`` (likewise); ``G`` is the grid's third axis."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    g = tl.program_id(2).to(tl.int64)
    src_ptr += g * stride_src_g
    dst_ptr += g * stride_dst_g
    r = pid_r * BLOCK + tl.arange(0, BLOCK)
    c = pid_c * BLOCK + tl.arange(0, BLOCK)
    mask = (r[:, None] < R) & (c[None, :] < C)
    tile = tl.load(src_ptr + r.to(tl.int64)[:, None] * stride_src + c[None, :], mask=mask)
    dst = dst_ptr + c.to(tl.int64)[:, None] * stride_dst + r[None, :]
    tl.store(dst, tl.trans(tile), mask=(c[:, None] < C) & (r[None, :] < R))


_workspaces: dict[tuple, torch.Tensor] = {}


def operand_workspace(role: str, like: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """A cached ``[rows, cols]`` buffer of ``like``'s dtype (one per device, current stream and operand
    role, grown as needed).

    The K-major copies of MN-major FP8 operands (:func:`transpose_launch` fills them): k-grouped tn operands
    (roles ``"a"``, ``"b"``) and the dense ``nn`` / ``tn`` / ``tt`` ones (``"dense_a"``, ``"dense_b"``). Per
    stream, so that calls enqueued on two streams at once never share a buffer (a call's recording holds the
    workspace pointer in its key, so each stream replays its own). A grown buffer
    replaces the old one; recordings that named the old one miss, so none replays into freed memory.
    One allocated while the stream captures a CUDA graph belongs to that graph (its memory pool) and is not
    cached: graphs captured one after another on torch's capture stream, replayed at once, share none.
    """
    key = (like.device, role, launcher.current_stream(like.device))
    ws = _workspaces.get(key)
    numel = rows * cols
    if ws is None or ws.numel() < numel:
        ws = torch.empty(max(numel, 1), dtype=torch.uint8, device=like.device)
        if not launcher.capturing(like.device):
            _workspaces[key] = ws
    return ws[:numel].view(like.dtype).view(rows, cols)



def transpose_launch(src: torch.Tensor, dst: torch.Tensor) -> tuple:
    """The ``(kernel, grid, args, kwargs)`` launch (launcher.py's form) that writes ``src.T`` into ``dst``, or
    each matrix's transpose for a batch.

    ``src``: 1-byte ``[R, C]`` (or ``[G, R, C]``) with ``stride(-1) == 1``; ``dst``: same dtype ``[C, R]`` (or
    ``[G, C, R]``) with ``stride(-1) == 1``. Both are viewed as ``uint8``.
    """
    if src.dim() not in (2, 3) or dst.dim() != src.dim():
        raise ValueError(f"transpose: src and dst must both be 2-D or 3-D; got {tuple(src.shape)} and "
                         f"{tuple(dst.shape)}")
    batch = src.shape[0] if src.dim() == 3 else 1
    rows, cols = src.shape[-2:]
    if tuple(dst.shape[-2:]) != (cols, rows) or dst.shape[:-2] != src.shape[:-2] or src.element_size() != 1 \
            or dst.dtype != src.dtype:
        raise ValueError(f"transpose: src {tuple(src.shape)} {src.dtype} -> dst {tuple(dst.shape)} {dst.dtype}")
    if (rows > 1 and cols > 1 and src.stride(-1) != 1) or (rows > 1 and cols > 1 and dst.stride(-1) != 1):
        raise ValueError(f"transpose: src and dst need unit column strides; got {src.stride()} and {dst.stride()}")
    grid = (triton.cdiv(rows, BLOCK), triton.cdiv(cols, BLOCK), batch)
    batch_strides = (src.stride(0), dst.stride(0)) if src.dim() == 3 else (0, 0)
    args = (src.view(torch.uint8), dst.view(torch.uint8), rows, cols, src.stride(-2), dst.stride(-2), *batch_strides)
    return _transpose_kernel, grid, args, dict(BLOCK=BLOCK, num_warps=8)


def transpose_into(src: torch.Tensor, dst: torch.Tensor) -> None:
    """``dst.copy_(src.transpose(-2, -1))`` through :func:`_transpose_kernel` (shapes as :func:`transpose_launch`)."""
    kernel, grid, args, kwargs = transpose_launch(src, dst)
    kernel[grid](*args, **kwargs)
