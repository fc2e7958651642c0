"""Float64 reference of the hyper-connection pre-norm GEMM (DeepGEMM's ``tf32_hc_prenorm_gemm``)."""

from __future__ import annotations

import torch

# K is cut into splits in units of this many columns (DeepGEMM's BLOCK_K for the op): with ``num_splits`` S and
# ``B = ceil(K / 64)`` blocks, split s takes ``B // S`` blocks, plus one for the first ``B % S`` splits, in order.
SPLIT_BLOCK_K = 64


def k_split_ranges(k: int, num_splits: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` K columns of each split (empty ranges for splits past the last block)."""
    blocks = -(-k // SPLIT_BLOCK_K)
    per, extra = divmod(blocks, num_splits)
    ranges = []
    for s in range(num_splits):
        first = s * per + min(s, extra)
        count = per + (s < extra)
        ranges.append((min(first * SPLIT_BLOCK_K, k), min((first + count) * SPLIT_BLOCK_K, k)))
    return ranges


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """FP32 values rounded to TF32's 10 mantissa bits (round to nearest, ties to even), as float32."""
    x = x.float().contiguous()
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF  # the unsigned bit pattern
    rounded = ((bits + 0x0FFF + ((bits >> 13) & 1)) >> 13) << 13
    out = torch.where(torch.isfinite(x), rounded, bits)
    return torch.where(out >= 2**31, out - 2**32, out).to(torch.int32).view(torch.float32)


def tf32_hc_prenorm_gemm(a: torch.Tensor, b: torch.Tensor, num_splits: int | None = None,
                         tf32: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d, sqr_sum)`` in float64: ``d = a @ b^T`` and ``sqr_sum = (a * a).sum(-1)`` over each K split.

    a: ``[M, K]`` (bf16 in the op), b: ``[N, K]`` (fp32). ``num_splits`` None: d ``[M, N]``, sqr_sum ``[M]``;
    an int S: d ``[S, M, N]`` and sqr_sum ``[S, M]``, split s over :func:`k_split_ranges`' s-th columns (the
    splits sum to the unsplit result). ``tf32``: round b to TF32 first (the tensor cores' input precision;
    a bf16 ``a`` is exact in TF32), the simulated-precision twin.
    """
    a64 = a.double()
    b64 = (round_to_tf32(b) if tf32 else b).double()
    if num_splits is None:
        return a64 @ b64.T, (a64 * a64).sum(-1)
    ds, ss = [], []
    for start, end in k_split_ranges(a.shape[1], num_splits):
        part = a64[:, start:end]
        ds.append(part @ b64[:, start:end].T)
        ss.append((part * part).sum(-1))
    return torch.stack(ds), torch.stack(ss)
