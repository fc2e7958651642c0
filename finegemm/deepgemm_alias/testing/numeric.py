"""``deep_gemm.testing.numeric``: ``calc_diff``, ``count_bytes``, ``assert_bitwise_equal``."""

from __future__ import annotations

import torch

from ...reference import calc_diff


def count_bytes(*tensors) -> int:
    """Bytes held by the given tensors; tuples and lists are walked, None counts 0."""
    total = 0
    for t in tensors:
        if isinstance(t, (tuple, list)):
            total += count_bytes(*t)
        elif t is not None:
            total += t.numel() * t.element_size()
    return total


def assert_bitwise_equal(x: torch.Tensor, y: torch.Tensor, label: str = "") -> None:
    """AssertionError naming the first differing element unless ``x`` and ``y`` have the same shape, dtype and
    bytes."""
    where = f" ({label})" if label else ""
    assert x.shape == y.shape, f"shapes differ{where}: {tuple(x.shape)} vs {tuple(y.shape)}"
    assert x.dtype == y.dtype, f"dtypes differ{where}: {x.dtype} vs {y.dtype}"
    xb, yb = x.contiguous().view(torch.uint8).flatten(), y.contiguous().view(torch.uint8).flatten()
    if torch.equal(xb, yb):
        return
    first = int((xb != yb).nonzero()[0])
    elem = first // x.element_size()
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(elem), tuple(x.shape)))
    raise AssertionError(f"bitwise mismatch{where}: {int((xb != yb).sum())} of {xb.numel()} bytes differ; first at "
                         f"element {index}: {x.flatten()[elem].item()} vs {y.flatten()[elem].item()}")


__all__ = ["calc_diff", "count_bytes", "assert_bitwise_equal"]
