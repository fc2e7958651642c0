"""Scale loads shared by the portable FP8 kernels: FP32 or packed UE8M0, one value per (row, K block)."""

import triton
import triton.language as tl


@triton.jit
def load_scale(sf_ptr, rows, kb, stride_row, stride_k, mask, PACKED: tl.constexpr):
    """Scales of ``rows`` for K block ``kb`` as fp32 (``rows``: int tensor; masked rows read 0)."""
    offs = rows.to(tl.int64) * stride_row
    if PACKED:
        word = tl.load(sf_ptr + offs + (kb // 4) * stride_k, mask=mask, other=0)
        exp = (word >> ((kb % 4) * 8)) & 0xFF
        # exponent 0 is 2**-127, a denormal in fp32; every other exponent is exp << 23.
        bits = tl.where(exp == 0, 0x00400000, exp << 23)
        scale = tl.where(mask, bits.to(tl.float32, bitcast=True), 0.0)
    else:
        scale = tl.load(sf_ptr + offs + kb * stride_k, mask=mask, other=0.0)
    return scale
