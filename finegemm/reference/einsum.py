"""Float64 references of ``einsum`` and ``fp8_einsum`` (DeepGEMM's hard-coded expressions), from torch.einsum."""

from __future__ import annotations

import torch

from .dense import BLOCK, dequantize_rows


def einsum(expr: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
    """Float64 ``c + einsum(expr, a, b)``."""
    out = torch.einsum(expr, a.double(), b.double())
    return out + c.double() if c is not None else out


def dequantize_tokens(x_fp8: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """``x_fp8 [..., K]`` with one scale per row and 128 of K (``sf [..., ceil(K/128)]``) → float64."""
    k = x_fp8.shape[-1]
    return dequantize_rows(x_fp8.reshape(-1, k), sf.reshape(-1, sf.shape[-1]), 1).view(x_fp8.shape)


def dequantize_blocks(x_fp8: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """``x_fp8 [G, R, C]`` scaled per 128x128 block of each ``[R, C]`` (``sf [G, ceil(R/128), ceil(C/128)]``)."""
    return torch.stack([dequantize_rows(x, s, BLOCK) for x, s in zip(x_fp8, sf)]) if len(x_fp8) else x_fp8.double()


def fp8_einsum(expr: str, a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
               c: torch.Tensor | None = None) -> torch.Tensor:
    """Float64 reference of ``fp8_einsum``: ``a`` scaled per token and 128 of its last dim, ``b`` per 128x128
    block of each head's matrix (its last two dims)."""
    return einsum(expr, dequantize_tokens(*a), dequantize_blocks(*b), c)
