"""Float64 references for every op, and an emulator of Hopper's limited-precision FP8 accumulation.

References dequantize the FP8 inputs exactly (``x_fp8 * scale`` in float64) and multiply in float64,
so they measure the kernel's error alone, not the quantization error. They run on whatever device
the inputs live on (float64 matmul works on CPU and CUDA).
"""

from __future__ import annotations

import torch

from ..quant import unpack_ue8m0

BLOCK = 128


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's accuracy metric ``1 - 2 sum(x y) / sum(x^2 + y^2)`` in float64 (0 = identical).

    NaN anywhere gives NaN, which fails every ``< bound`` check. Two all-zero tensors give 0.
    """
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"calc_diff: {name} must be a torch.Tensor, got {type(t).__name__}")
    try:
        torch.broadcast_shapes(x.shape, y.shape)
    except RuntimeError:
        raise ValueError(f"calc_diff: x and y must have one shape (or broadcast); got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}") from None
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    if float(denominator) == 0.0:
        return 0.0 if not (torch.isnan(x).any() or torch.isnan(y).any()) else float("nan")
    return float(1 - 2 * (x * y).sum() / denominator)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def scales_fp64(sf: torch.Tensor, k: int) -> torch.Tensor:
    """Logical FP64 scales ``[..., ceil(K/128)]`` from fp32 or packed-UE8M0 int32 scales (any strides)."""
    sfk = _ceil_div(k, BLOCK)
    if sf.dtype == torch.int32:
        return unpack_ue8m0(sf, sfk).double()
    return sf.double()


def dequantize_rows(x_fp8: torch.Tensor, sf: torch.Tensor, gran_rows: int) -> torch.Tensor:
    """``x_fp8 [R, K]`` times its scales → float64 ``[R, K]``.

    ``sf`` holds one scale per row (``gran_rows=1``: ``[R, ceil(K/128)]``) or per 128 rows
    (``gran_rows=128``: ``[ceil(R/128), ceil(K/128)]``), each for 128 columns of K.
    """
    r, k = x_fp8.shape
    s = scales_fp64(sf, k)
    s = s.repeat_interleave(gran_rows, dim=0)[:r] if gran_rows != 1 else s
    s = s.repeat_interleave(BLOCK, dim=1)[:, :k]
    return x_fp8.double() * s


def _rhs_gran(recipe: tuple[int, int, int] | None, sfb: torch.Tensor, n: int) -> int:
    if recipe is not None:
        return recipe[1]
    return 1 if sfb.shape[0] == n and n != _ceil_div(n, BLOCK) else BLOCK


def fp8_gemm_nt(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    c: torch.Tensor | None = None,
    recipe: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """Float64 ``C + A @ B^T``: a = (e4m3 ``[M, K]``, sf ``[M, SFK]``), b = (e4m3 ``[N, K]``, sf) → ``[M, N]``."""
    a_fp8, sfa = a
    b_fp8, sfb = b
    out = dequantize_rows(a_fp8, sfa, 1) @ dequantize_rows(b_fp8, sfb, _rhs_gran(recipe, sfb, b_fp8.shape[0])).T
    return out + c.double() if c is not None else out


def fp8_gemm(layout: str, a, b, c=None, recipe=None) -> torch.Tensor:
    """Reference for ``fp8_gemm_{layout}`` with the public functions' argument conventions.

    ``nt``: a ``[M, K]``, b ``[N, K]``. A ``t`` first letter: a is ``[K, M]`` with sf ``[SFK, M]``; an
    ``n`` second letter: b is ``[K, N]`` with sf ``[SFK, SFN]`` (so ``tn`` transposes both).
    """
    if layout[0] == "t":
        a = (a[0].T, a[1].T)
    if layout[1] == "n":
        b = (b[0].T, b[1].T)
    return fp8_gemm_nt(a, b, c, recipe)


def bf16_gemm(layout: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
    """Float64 reference for ``bf16_gemm_{layout}`` (same conventions as :func:`fp8_gemm`)."""
    a2 = a.T if layout[0] == "t" else a
    b2 = b.T if layout[1] == "n" else b
    out = a2.double() @ b2.double().T
    return out + c.double() if c is not None else out


def _aligned_sum(acc: torch.Tensor, products: torch.Tensor, bits: int) -> torch.Tensor:
    """``acc + sum(products[..., i])`` as the tensor cores add: every term is first aligned to the
    largest exponent among them and truncated toward zero to ``bits`` bits below it."""
    terms = torch.cat([acc.unsqueeze(-1), products], dim=-1)
    _, exponent = torch.frexp(terms)
    quantum = torch.ldexp(torch.ones_like(acc), exponent.amax(dim=-1) - bits).unsqueeze(-1)
    return (torch.trunc(terms / quantum) * quantum).sum(dim=-1)


def emulate_fp8_accumulation(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    mantissa_bits: int = 13,
    promote_every: int | None = 128,
    mma_k: int = 32,
    recipe: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """Simulate the tensor cores' FP8 accumulation, with or without FP32 promotion.

    Each ``mma_k`` chunk of K (one WGMMA instruction) is added to the tensor-core accumulator the way
    the hardware adds: the accumulator and the chunk's products are aligned to the largest exponent
    among them and truncated toward zero ``mantissa_bits`` bits below it (Hopper keeps about 14 bits),
    so small products lose their low bits to a large running sum. With ``promote_every`` set (a
    multiple of ``mma_k`` and of 128), every
    that many K the accumulator is scaled (per-token x per-block scales) and added to an exact
    running result, then restarted from zero: DeepGEMM's two-level accumulation. With ``None``
    the FP8 products are accumulated over the whole K in limited precision (scales applied per
    element first, as a kernel without promotion would need).

    Returns float64 ``[M, N]``.
    """
    a_fp8, sfa = a
    b_fp8, sfb = b
    m, k = a_fp8.shape
    n = b_fp8.shape[0]
    if promote_every is not None and (promote_every % mma_k or promote_every % BLOCK):
        raise ValueError(f"promote_every={promote_every} must be a multiple of mma_k={mma_k} and of {BLOCK}")
    sa = scales_fp64(sfa, k)
    gran_b = _rhs_gran(recipe, sfb, n)
    sb = scales_fp64(sfb, k)
    sb = sb.repeat_interleave(gran_b, dim=0)[:n] if gran_b != 1 else sb
    af, bf = a_fp8.double(), b_fp8.double()
    result = torch.zeros((m, n), dtype=torch.float64, device=af.device)
    acc = torch.zeros_like(result)
    for k0 in range(0, k, mma_k):
        kb = k0 // BLOCK
        if promote_every is None:
            # No promotion: scales must be folded into the products before the low-precision sum.
            lhs, rhs = af[:, k0:k0 + mma_k] * sa[:, kb:kb + 1], bf[:, k0:k0 + mma_k] * sb[:, kb:kb + 1]
        else:
            lhs, rhs = af[:, k0:k0 + mma_k], bf[:, k0:k0 + mma_k]
        acc = _aligned_sum(acc, lhs[:, None, :] * rhs[None, :, :], mantissa_bits)
        end = k0 + mma_k
        if promote_every is not None and (end % promote_every == 0 or end >= k):
            block = (end - 1) // BLOCK
            result += acc * sa[:, block:block + 1] * sb[:, block:block + 1].T
            acc = torch.zeros_like(acc)
    return result if promote_every is not None else acc
