"""``deep_gemm.utils.layout``: scale-factor layout helpers and the contiguous-layout alignment switches."""

from ...layout import (
    get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor,
    get_mk_alignment_for_contiguous_layout,
    get_mn_major_tma_aligned_packed_ue8m0_tensor,
    get_mn_major_tma_aligned_tensor,
    get_theoretical_mk_alignment_for_contiguous_layout,
    get_tma_aligned_size,
    set_mk_alignment_for_contiguous_layout,
)

# DeepGEMM's older names of the one alignment (rows of an m-grouped segment, K of a k-grouped one)
get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout

__all__ = [
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor", "set_mk_alignment_for_contiguous_layout",
    "get_mk_alignment_for_contiguous_layout", "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
]
