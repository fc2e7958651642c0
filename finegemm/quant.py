"""FP8 quantization helpers: per-token, per-channel and per-block casts, UE8M0 scales.

Scales are *dequantization multipliers*: ``x ≈ x_fp8.float() * scale``. Every cast

- accepts any size (a partial last block is quantized with the amax of the elements it has),
- clamps each block's amax to at least ``1e-4`` so all-zero blocks get a finite, positive scale,
- saturates values at ±448 (the largest finite E4M3 value) before the cast,
- with ``use_ue8m0=True`` rounds each scale *up* to a power of two, so ``|x / scale| <= 448`` still holds.

NaN and Inf inputs: the amax of a block that holds a NaN is NaN, so that block's scale is NaN and
its FP8 values are NaN; a block that holds ±Inf (and no NaN) gets an Inf scale and FP8 values of 0
for its finite elements and NaN for the infinite ones (Inf / Inf). Nothing is silently replaced: a
non-finite input gives a non-finite dequantized block, which no GEMM result can hide.
"""

from __future__ import annotations

import torch

from .api.checks import as_bool, as_int, check_tensor

FP8_E4M3_MAX = 448.0
BLOCK = 128
AMAX_FLOOR = 1e-4

__all__ = [
    "FP8_E4M3_MAX",
    "ceil_div",
    "align",
    "ceil_to_ue8m0",
    "per_token_cast_to_fp8",
    "per_channel_cast_to_fp8",
    "per_block_cast_to_fp8",
    "per_custom_dims_cast_to_fp8",
    "pack_ue8m0",
    "unpack_ue8m0",
    "pack_ue8m0_to_int",
    "unpack_ue8m0_from_int",
    "ue8m0_to_fp32",
]


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _int_or_int_tensor(name: str, x: object) -> int | torch.Tensor:
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool or x.dtype.is_floating_point or x.dtype.is_complex:
            raise TypeError(f"{name} must be an int or an integer tensor; got a {x.dtype} tensor")
        return x
    return as_int(name, x)


def ceil_div(x: int | torch.Tensor, y: int) -> int | torch.Tensor:
    """``ceil(x / y)`` (DeepGEMM's ``ceil_div``): ``x`` an int, or an integer tensor of any shape (elementwise, same
    dtype and device, as DeepGEMM's tests pass context lengths and 0-d prefix sums); ``y`` an int >= 1."""
    return _ceil_div(_int_or_int_tensor("x", x), as_int("y", y, 1))


def align(x: int | torch.Tensor, y: int) -> int | torch.Tensor:
    """``x`` rounded up to a multiple of ``y`` (DeepGEMM's ``align``): ``x`` an int or an integer tensor
    (elementwise), ``y`` an int >= 1."""
    return ceil_div(x, y) * y


def _check_gran(fn: str, gran_k: int) -> int:
    return as_int(f"{fn}: gran_k", gran_k, 1)


def _check_cast_args(fn: str, x: object, use_ue8m0: object, shape: str | None = "[M, K]") -> torch.Tensor:
    """``x`` a floating tensor (2-D ``shape`` unless None) and ``use_ue8m0`` a bool, or the named error."""
    check_tensor(f"{fn}: x", x)
    if not (x.is_floating_point() and x.element_size() > 1):
        raise TypeError(f"{fn}: x must be a bf16, fp16 or fp32 (or fp64) tensor; got dtype {x.dtype}")
    if shape is not None and x.dim() != 2:
        raise ValueError(f"{fn}: x must be 2-D {shape}, got shape {tuple(x.shape)}")
    as_bool(f"{fn}: use_ue8m0", use_ue8m0)
    return x


def _packed(fn: str, sf: torch.Tensor, use_ue8m0: bool, use_packed_ue8m0: bool) -> torch.Tensor:
    """``sf`` packed four UE8M0 exponents an int32 along its last dim (``use_packed_ue8m0``), else as it is."""
    if not as_bool(f"{fn}: use_packed_ue8m0", use_packed_ue8m0):
        return sf
    if not use_ue8m0:
        raise ValueError(f"{fn}: use_packed_ue8m0 needs use_ue8m0=True (only power-of-two scales pack)")
    return pack_ue8m0(sf)


def ceil_to_ue8m0(x: torch.Tensor) -> torch.Tensor:
    """Round each positive FP32 value up to the next power of two (2 ** ceil(log2 x)).

    The result is exactly representable as an UE8M0 exponent.
    """
    check_tensor("ceil_to_ue8m0: x", x)
    return torch.pow(2.0, torch.ceil(torch.log2(x.abs().float())))


def _scale_from_amax(amax: torch.Tensor, use_ue8m0: bool) -> torch.Tensor:
    # Divided by a 0-d tensor, not the Python float: on CUDA torch turns a division by a CPU scalar into a
    # multiplication by its rounded reciprocal, which can differ from amax / 448 in the last bit (the H200 run of
    # tests/test_quant_kernel.py found it); a tensor divisor is a true (IEEE) division on every device.
    sf = amax.float().clamp(min=AMAX_FLOOR) / amax.new_full((), FP8_E4M3_MAX, dtype=torch.float32)
    return ceil_to_ue8m0(sf) if use_ue8m0 else sf


def _to_fp8(x: torch.Tensor) -> torch.Tensor:
    # clamp keeps values that rounding pushed past 448 finite (torch's cast would give NaN).
    return x.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)


def per_token_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool = False, gran_k: int = BLOCK,
                          use_packed_ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize activations with one scale per row per 128 columns (the ``1x128`` LHS recipe).

    Args:
        x: ``[M, K]`` floating tensor (any float dtype, any device).
        use_ue8m0: round scales up to powers of two.
        gran_k: columns per scale (128: what every finegemm GEMM reads; others for DeepGEMM's other formats).
        use_packed_ue8m0: return the scales packed (:func:`pack_ue8m0`; needs ``use_ue8m0``).

    Returns:
        ``(x_fp8, sf)``: ``x_fp8`` e4m3 ``[M, K]`` contiguous; ``sf`` fp32 ``[M, ceil(K/gran_k)]`` contiguous
        (packed: int32 ``[M, ceil(ceil(K/gran_k)/4)]``).
    """
    _check_cast_args("per_token_cast_to_fp8", x, use_ue8m0)
    gran = _check_gran("per_token_cast_to_fp8", gran_k)
    m, k = x.shape
    kb = _ceil_div(k, gran)
    padded = torch.zeros((m, kb * gran), dtype=torch.float32, device=x.device)
    padded[:, :k] = x.float()
    view = padded.view(m, kb, gran)
    sf = _scale_from_amax(view.abs().amax(dim=2), use_ue8m0)
    q = _to_fp8(view / sf.unsqueeze(2)).view(m, kb * gran)[:, :k].contiguous()
    return q, _packed("per_token_cast_to_fp8", sf, use_ue8m0, use_packed_ue8m0)


def per_channel_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool = False,
                            gran_k: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize with one scale per column per 128 rows (the RHS of the ``1d1d`` recipe given as ``[K, N]``).

    Args:
        x: ``[K, N]`` floating tensor; blocks of ``gran_k`` (128) run along dim 0.
        use_ue8m0: round scales up to powers of two.
        gran_k: rows per scale.

    Returns:
        ``(x_fp8, sf)``: e4m3 ``[K, N]`` contiguous and fp32 ``[ceil(K/gran_k), N]`` contiguous.
    """
    _check_cast_args("per_channel_cast_to_fp8", x, use_ue8m0, "[K, N]")
    q_t, sf_t = per_token_cast_to_fp8(x.t(), use_ue8m0, _check_gran("per_channel_cast_to_fp8", gran_k))
    return q_t.t().contiguous(), sf_t.t().contiguous()


def per_block_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool = False,
                          gran_k: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize weights with one scale per 128x128 block (the ``128x128`` RHS recipe).

    Args:
        x: ``[N, K]`` floating tensor.
        use_ue8m0: round scales up to powers of two.
        gran_k: the block's side (128).

    Returns:
        ``(x_fp8, sf)``: e4m3 ``[N, K]`` contiguous and fp32 ``[ceil(N/gran_k), ceil(K/gran_k)]`` contiguous.
    """
    _check_cast_args("per_block_cast_to_fp8", x, use_ue8m0, "[N, K]")
    gran = _check_gran("per_block_cast_to_fp8", gran_k)
    n, k = x.shape
    nb, kb = _ceil_div(n, gran), _ceil_div(k, gran)
    padded = torch.zeros((nb * gran, kb * gran), dtype=torch.float32, device=x.device)
    padded[:n, :k] = x.float()
    view = padded.view(nb, gran, kb, gran)
    sf = _scale_from_amax(view.abs().amax(dim=(1, 3)), use_ue8m0)
    q = _to_fp8(view / sf[:, None, :, None]).view(nb * gran, kb * gran)[:n, :k].contiguous()
    return q, sf


def per_custom_dims_cast_to_fp8(x: torch.Tensor, dims: tuple[int, ...],
                                use_ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize with one scale per index of the dims ``dims``, over all the others (DeepGEMM's name; e.g.
    ``dims=(0,)`` on a ``[S_kv, D]`` key cache gives the per-key scales ``fp8_mqa_logits`` reads).

    Returns ``(x_fp8, sf)``: e4m3 of ``x``'s shape and fp32 scales of the ``dims``' sizes (in ``dims``' order of
    ``x``'s dims), with ``x ≈ x_fp8 * sf`` broadcast back over the other dims.
    """
    _check_cast_args("per_custom_dims_cast_to_fp8", x, use_ue8m0, None)
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"per_custom_dims_cast_to_fp8: dims must be a tuple of ints, got {dims!r}")
    dims = [as_int("per_custom_dims_cast_to_fp8: dims[i]", d) for d in dims]
    kept = sorted({d % x.dim() for d in dims}) if x.dim() else []
    if len(kept) != len(dims) or any(not -x.dim() <= d < x.dim() for d in dims):
        raise ValueError(f"per_custom_dims_cast_to_fp8: dims must name distinct dims of a {x.dim()}-D x, got {dims}")
    others = tuple(i for i in range(x.dim()) if i not in kept)
    xf = x.float()
    amax = xf.abs().amax(dim=others, keepdim=True) if others else xf.abs()
    sf = _scale_from_amax(amax, use_ue8m0)
    return _to_fp8(xf / sf), sf.reshape([x.shape[d] for d in kept])


def _ue8m0_exponents(sf: torch.Tensor) -> torch.Tensor:
    """Biased 8-bit exponents of power-of-two FP32 scales (raises if a scale is not a power of two)."""
    check_tensor("sf", sf)
    if not sf.is_floating_point():
        raise TypeError(f"sf must hold float32 power-of-two scales; got dtype {sf.dtype}")
    bits = sf.float().contiguous().view(torch.int32)
    if bool(((bits & 0x807FFFFF) != 0).any()):
        raise ValueError("UE8M0 packing needs positive power-of-two FP32 scales (use ceil_to_ue8m0 first)")
    return (bits >> 23) & 0xFF


def pack_ue8m0(sf: torch.Tensor) -> torch.Tensor:
    """Pack power-of-two FP32 scales into int32, four UE8M0 exponents per word along the last dim.

    ``sf``: ``[..., SFK]`` fp32 (each a positive power of two). Returns int32 ``[..., ceil(SFK/4)]``
    contiguous; byte ``j`` (little-endian) of word ``w`` holds the exponent of column ``4*w + j``;
    missing columns of the last word are 0.
    """
    exps = _ue8m0_exponents(sf)
    sfk = exps.shape[-1]
    words = _ceil_div(sfk, 4)
    padded = torch.zeros((*exps.shape[:-1], words * 4), dtype=torch.int32, device=sf.device)
    padded[..., :sfk] = exps
    padded = padded.view(*exps.shape[:-1], words, 4)
    packed = padded[..., 0] | (padded[..., 1] << 8) | (padded[..., 2] << 16) | (padded[..., 3] << 24)
    return packed.contiguous()


def pack_ue8m0_to_int(x: torch.Tensor) -> torch.Tensor:
    """DeepGEMM's name of :func:`pack_ue8m0` for a last dim that is a multiple of 4 (fp32 ``x`` ``[..., 4W]`` →
    int32 ``[..., W]``)."""
    if check_tensor("x", x).dim() == 0 or x.shape[-1] % 4:
        raise ValueError(f"pack_ue8m0_to_int: the last dim must be a multiple of 4, got shape {tuple(x.shape)}")
    return pack_ue8m0(x)


def unpack_ue8m0_from_int(packed_sf: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_ue8m0_to_int`: int32 ``packed_sf`` ``[..., W]`` → fp32 ``[..., 4W]``."""
    if check_tensor("packed_sf", packed_sf).dim() == 0:
        raise ValueError("unpack_ue8m0_from_int: packed_sf must have a last dim of int32 words; got a 0-d tensor")
    return unpack_ue8m0(packed_sf, packed_sf.shape[-1] * 4)


def ue8m0_to_fp32(exps: torch.Tensor) -> torch.Tensor:
    """FP32 values ``2 ** (e - 127)`` of biased UE8M0 exponents (int tensor, 0..254)."""
    e = exps.to(torch.int32)
    # e == 0 is 2**-127, a denormal in FP32 (bit 22 set); every other exponent is e << 23.
    bits = torch.where(e == 0, torch.full_like(e, 0x00400000), e << 23)
    return bits.view(torch.float32)


def unpack_ue8m0(packed: torch.Tensor, sfk: int) -> torch.Tensor:
    """Inverse of :func:`pack_ue8m0`: int32 ``[..., W]`` → fp32 ``[..., sfk]`` (any strides in)."""
    if check_tensor("packed", packed).dtype != torch.int32:
        raise TypeError(f"unpack_ue8m0: packed must be int32, got {packed.dtype}")
    if packed.dim() == 0:
        raise ValueError("unpack_ue8m0: packed must have a last dim of int32 words; got a 0-d tensor")
    sfk = as_int("unpack_ue8m0: sfk", sfk, 0)
    if sfk > packed.shape[-1] * 4:
        raise ValueError(f"unpack_ue8m0: sfk={sfk} needs at least {_ceil_div(sfk, 4)} words, got {packed.shape[-1]}")
    p = packed.contiguous()
    parts = [(p >> (8 * j)) & 0xFF for j in range(4)]
    exps = torch.stack(parts, dim=-1).reshape(*p.shape[:-1], p.shape[-1] * 4)[..., :sfk]
    return ue8m0_to_fp32(exps.contiguous())
