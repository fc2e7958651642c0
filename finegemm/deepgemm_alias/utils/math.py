"""``deep_gemm.utils.math``: rounding helpers, FP8 casts and UE8M0 packing, and host-side FP4 casts."""

from ...fp4 import cast_back_from_fp4, per_token_cast_to_fp4, transpose_packed_fp4
from ...quant import (
    align,
    ceil_div,
    ceil_to_ue8m0,
    pack_ue8m0_to_int,
    per_block_cast_to_fp8,
    per_channel_cast_to_fp8,
    per_custom_dims_cast_to_fp8,
    per_token_cast_to_fp8,
    unpack_ue8m0_from_int,
)

__all__ = [
    "ceil_div", "align", "ceil_to_ue8m0", "pack_ue8m0_to_int", "per_token_cast_to_fp8", "per_channel_cast_to_fp8",
    "per_block_cast_to_fp8", "per_custom_dims_cast_to_fp8", "per_token_cast_to_fp4", "transpose_packed_fp4",
    "unpack_ue8m0_from_int", "cast_back_from_fp4",
]
