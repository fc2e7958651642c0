"""FP8 quantization in one pass (Triton): per-token (1x128) and per-block (128x128) casts.

The same contract as :mod:`finegemm.quant` (scales are dequantization multipliers ``amax / 448`` with ``amax``
floored at 1e-4, optionally rounded up to a power of two; values saturated at ±448; a NaN in a group makes its
scale and values NaN), computed by one kernel that reads ``x`` once and writes the E4M3 values and the scales,
where the torch implementation makes a padded FP32 copy and five more passes. On a GPU the results should be
those of :mod:`finegemm.quant` bit for bit (IEEE division, round-to-nearest casts; the GPU tests check it), except
that power-of-two scales are exact here: ``2 ** ceil(log2 s)`` from the bits of ``s``, where the torch version's
float ``log2`` can round a scale just above a power of two down to it. Triton's CPU interpreter casts FP32 to
E4M3 wrongly (124.3 to 64, NaNs to arbitrary values), so on the CPU only exactly representable quotients come
out right (the CPU tests use such inputs; :mod:`finegemm.autograd` uses the torch casts there).

``x`` may have any strides: a transposed view quantizes along its logical rows (e.g. ``dy.t()`` per token of
the weight gradient's K, the tokens) without a copy.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...quant import AMAX_FLOOR, BLOCK, FP8_E4M3_MAX

PER_TOKEN_ROWS = 32  # rows of a per-token program: [32, 128] elements, 4 warps
TRANSPOSED_PER_TOKEN_ROWS = 64
AMAX_FLOOR_C = tl.constexpr(AMAX_FLOOR)
FP8_MAX_C = tl.constexpr(FP8_E4M3_MAX)


@triton.jit
def _scale(amax, UE8M0: tl.constexpr):
    """``max(amax, floor) / 448`` (NaN kept), rounded up to a power of two with ``UE8M0`` (Inf and NaN kept)."""
    sf = tl.math.div_rn(tl.maximum(amax, AMAX_FLOOR_C, propagate_nan=tl.PropagateNan.ALL), FP8_MAX_C)
    if UE8M0:
        bits = sf.to(tl.int32, bitcast=True)
        exp = (bits >> 23) & 0xFF
        up = ((bits & 0x7FFFFF) != 0) & (exp < 0xFF)
        sf = tl.where(up, (exp + 1) << 23, bits).to(tl.float32, bitcast=True)
    return sf


@triton.jit
def _cast_kernel(x_ptr, q_ptr, sf_ptr, R, C, stride_xr, stride_xc, stride_sfr,
                 GROUP_R: tl.constexpr, BLOCK_R: tl.constexpr, UE8M0: tl.constexpr, ROWS_CONTIGUOUS: tl.constexpr):
    """Rows ``[pid_r * BLOCK_R, +BLOCK_R)`` x columns ``[pid_c * 128, +128)`` of ``x`` [R, C] into ``q`` [R, C]
    (row-major) and their scales: one per row (``GROUP_R`` 1) or one for the block (``GROUP_R`` 128) into ``sf``
    [ceil(R / GROUP_R), ceil(C / 128)] (row stride ``stride_sfr``). ``ROWS_CONTIGUOUS`` (a transposed view,
    ``stride_xr`` 1): the tile is read as [128, BLOCK_R] so that neighbouring threads read neighbouring
    addresses, and transposed in the kernel."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = pid_c * 128 + tl.arange(0, 128)
    row_ok = rows < R
    mask = row_ok[:, None] & (cols < C)[None, :]
    r64 = rows.to(tl.int64)
    if ROWS_CONTIGUOUS:
        xt = tl.load(x_ptr + cols[:, None].to(tl.int64) * stride_xc + r64[None, :] * stride_xr,
                     mask=(cols < C)[:, None] & row_ok[None, :], other=0.0)
        x = tl.trans(xt).to(tl.float32)
    else:
        x = tl.load(x_ptr + r64[:, None] * stride_xr + cols[None, :].to(tl.int64) * stride_xc, mask=mask,
                    other=0.0).to(tl.float32)
    # tl.max drops NaN: a group's NaN is counted apart and put back into its amax
    row_amax = tl.max(tl.abs(x), axis=1)
    row_nan = tl.max((x != x).to(tl.int32), axis=1)
    if GROUP_R == 1:
        sf = _scale(tl.where(row_nan > 0, float("nan"), row_amax), UE8M0)
        q = tl.math.div_rn(x, sf[:, None])
        tl.store(sf_ptr + r64 * stride_sfr + pid_c, sf, mask=row_ok)
    else:
        sf = _scale(tl.where(tl.max(row_nan, axis=0) > 0, float("nan"), tl.max(row_amax, axis=0)), UE8M0)
        q = tl.math.div_rn(x, sf)
        tl.store(sf_ptr + pid_r * stride_sfr + pid_c, sf)
    q = tl.clamp(q, -FP8_MAX_C, FP8_MAX_C, propagate_nan=tl.PropagateNan.ALL)
    tl.store(q_ptr + r64[:, None] * C + cols[None, :], q.to(tl.float8e4nv), mask=mask)


def cast_to_fp8(x: torch.Tensor, group_rows: int, use_ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [R, C] (any float dtype, any strides) quantized per ``group_rows`` x 128 group: ``group_rows`` 1 is
    :func:`finegemm.per_token_cast_to_fp8`, 128 is :func:`finegemm.per_block_cast_to_fp8`.

    Returns ``(q, sf)``: e4m3 ``[R, C]`` row-major and fp32 ``[ceil(R / group_rows), ceil(C / 128)]``.
    """
    if x.dim() != 2:
        raise ValueError(f"cast_to_fp8: x must be 2-D [R, C], got shape {tuple(x.shape)}")
    if group_rows not in (1, BLOCK):
        raise ValueError(f"cast_to_fp8: group_rows must be 1 or {BLOCK}, got {group_rows}")
    r, c = x.shape
    q = torch.empty((r, c), dtype=torch.float8_e4m3fn, device=x.device)
    sf = torch.empty((triton.cdiv(r, group_rows), triton.cdiv(c, BLOCK)), dtype=torch.float32, device=x.device)
    if r == 0 or c == 0:
        return q, sf
    rows_contiguous = x.stride(0) == 1 and x.stride(1) != 1 and r > 1
    # a transposed per-token tile reads 64 contiguous rows (128 bytes of bf16) per column
    block_r = BLOCK if group_rows != 1 else (TRANSPOSED_PER_TOKEN_ROWS if rows_contiguous else PER_TOKEN_ROWS)
    grid = (triton.cdiv(r, block_r), triton.cdiv(c, BLOCK))
    _cast_kernel[grid](x, q, sf, r, c, x.stride(0), x.stride(1), sf.stride(0), GROUP_R=group_rows,
                       BLOCK_R=block_r, UE8M0=use_ue8m0, ROWS_CONTIGUOUS=rows_contiguous,
                       num_warps=4 if block_r <= 64 else 8)
    return q, sf
