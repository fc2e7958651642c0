"""Host-side FP4 (E2M1) casts under DeepGEMM's names, for code and tests written against its helpers.

No finegemm kernel takes FP4 operands (that needs SM100's block-scaled MMA; the ``fp8_fp4_*`` GEMMs refuse them,
as DeepGEMM's SM90 build does). These helpers quantize, transpose and dequantize packed FP4 on the host so
that such code imports and can build its inputs.

Packed layout: two 4-bit codes per int8 byte along the last dim, the even column in the low nibble. A code is
``sign << 3 | magnitude index`` into :data:`E2M1_VALUES`; zero never carries the sign bit.
"""

from __future__ import annotations

import torch

from .api.checks import as_bool, as_int, check_tensor
from .quant import ceil_to_ue8m0, pack_ue8m0_to_int, unpack_ue8m0_from_int

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
_AMAX_FLOOR = 1e-4


def _codes(x: torch.Tensor) -> torch.Tensor:
    """int8 E2M1 codes of ``x`` (already scaled into [-6, 6]): nearest magnitude, ties to the smaller one."""
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    midpoints = (values[1:] + values[:-1]) / 2
    mag = torch.bucketize(x.abs().float().contiguous(), midpoints, right=False).to(torch.int8)
    return torch.where((x < 0) & (mag != 0), mag | 8, mag)


def _pack(codes: torch.Tensor) -> torch.Tensor:
    """int8 codes ``[..., 2W]`` → int8 ``[..., W]``, the even column in the low nibble."""
    return ((codes[..., 0::2] & 0x0F) | ((codes[..., 1::2] & 0x0F) << 4)).to(torch.int8)


def _unpack(packed: torch.Tensor) -> torch.Tensor:
    """int8 ``[..., W]`` → int8 codes ``[..., 2W]``."""
    codes = torch.stack((packed & 0x0F, (packed >> 4) & 0x0F), dim=-1)
    return codes.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def per_token_cast_to_fp4(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128,
                          use_packed_ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``x`` ``[M, N]`` (N even) to packed E2M1 with one scale per row per ``gran_k`` columns.

    Returns ``(int8 [M, N/2], sf)``: ``sf`` fp32 ``[M, ceil(N/gran_k)]`` (``amax / 6``, amax floored at 1e-4,
    rounded up to a power of two with ``use_ue8m0``), or with ``use_packed_ue8m0`` (needs ``use_ue8m0``) int32
    ``[M, ceil(ceil(N/gran_k)/4)]``, the missing exponents of the last word being those of 1.0.
    """
    x = check_tensor("x", x)
    use_ue8m0, use_packed_ue8m0 = as_bool("use_ue8m0", use_ue8m0), as_bool("use_packed_ue8m0", use_packed_ue8m0)
    gran_k = as_int("gran_k", gran_k, 1)
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"per_token_cast_to_fp4: x must be 2-D with an even number of columns; got {tuple(x.shape)}")
    if use_packed_ue8m0 and not use_ue8m0:
        raise ValueError("per_token_cast_to_fp4: use_packed_ue8m0 needs use_ue8m0=True")
    m, n = x.shape
    blocks = -(-n // gran_k)
    padded = torch.zeros((m, blocks * gran_k), dtype=torch.float32, device=x.device)
    padded[:, :n] = x.float()
    groups = padded.view(m, blocks, gran_k)
    sf = groups.abs().amax(dim=2).clamp_min(_AMAX_FLOOR) / E2M1_MAX
    if use_ue8m0:
        sf = ceil_to_ue8m0(sf)
    packed = _pack(_codes(groups / sf.unsqueeze(2)).view(m, -1))[:, :n // 2].contiguous()
    if use_packed_ue8m0:
        sf = torch.nn.functional.pad(sf, (0, (-blocks) % 4), value=1.0)
        return packed, pack_ue8m0_to_int(sf)
    return packed, sf


def transpose_packed_fp4(a: torch.Tensor) -> torch.Tensor:
    """Packed E2M1 ``[M, N/2]`` (M even) → the packed transpose ``[N, M/2]``."""
    if check_tensor("a", a).dtype != torch.int8 or a.dim() != 2 or a.shape[0] % 2:
        raise ValueError(f"transpose_packed_fp4: a must be int8 [M, N/2] with M even; got {a.dtype} {tuple(a.shape)}")
    return _pack(_unpack(a).T.contiguous()).contiguous()


def cast_back_from_fp4(packed: torch.Tensor, sf: torch.Tensor, gran_k: int = 128,
                       use_packed_ue8m0: bool = False) -> torch.Tensor:
    """Dequantize packed E2M1 ``[M, N/2]`` with its scales (as :func:`per_token_cast_to_fp4` returns them) to fp32
    ``[M, N]``."""
    packed, sf = check_tensor("packed", packed), check_tensor("sf", sf)
    gran_k, use_packed_ue8m0 = as_int("gran_k", gran_k, 1), as_bool("use_packed_ue8m0", use_packed_ue8m0)
    if packed.dtype != torch.int8 or packed.dim() != 2:
        raise ValueError(f"cast_back_from_fp4: packed must be int8 [M, N/2]; got {packed.dtype} {tuple(packed.shape)}")
    if use_packed_ue8m0:
        sf = unpack_ue8m0_from_int(sf)
    blocks = -(-2 * packed.shape[1] // gran_k)
    if sf.dim() != 2 or sf.shape[0] != packed.shape[0] or sf.shape[1] < blocks:
        raise ValueError(f"cast_back_from_fp4: sf must be [M, >= {blocks}] for packed {tuple(packed.shape)} at "
                         f"gran_k={gran_k}; got {tuple(sf.shape)}")
    codes = _unpack(packed).long()
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)[codes & 7]
    values = torch.where((codes & 8) != 0, -values, values)
    block = torch.arange(values.shape[1], device=packed.device) // gran_k
    return values * sf[:, block]


__all__ = ["per_token_cast_to_fp4", "transpose_packed_fp4", "cast_back_from_fp4", "E2M1_VALUES"]
