"""finegemm: FP8 GEMMs with fine-grained scaling for NVIDIA Hopper, in Triton and Gluon.

DeepGEMM's public names: ``import finegemm as deep_gemm`` works for its SM90 API, and
:func:`alias_as_deep_gemm` (or ``FINEGEMM_AS_DEEP_GEMM=1``) makes ``import deep_gemm`` itself give finegemm.
"""

from .jit.env import apply_cache_dir as _apply_cache_dir
from .jit.env import apply_ptxas as _apply_ptxas
from .jit.interpret import enable_interpreter_without_gpu as _enable_interpreter_without_gpu
from .jit.kernel_loading import make_triton_thread_safe as _make_triton_thread_safe

_apply_cache_dir()
# first: the interpreter choice must be made before anything imports triton (choosing a ptxas reads the
# bundled one's version through triton's package path)
_enable_interpreter_without_gpu()
_apply_ptxas()
_make_triton_thread_safe()

from .api import torch_ops as _torch_ops  # noqa: F401  (registers torch.ops.finegemm.*; imports the API itself)
from .api.attention import (
    fp8_fp4_mqa_logits,
    fp8_fp4_paged_mqa_logits,
    fp8_mqa_logits,
    fp8_paged_mqa_logits,
    get_paged_mqa_logits_metadata,
    pack_paged_kv_cache,
)
from .api.cublaslt import cublaslt_gemm_nn, cublaslt_gemm_nt, cublaslt_gemm_tn, cublaslt_gemm_tt
from .api.einsum import einsum, fp8_einsum
from .api.fp8_fp4 import (
    fp8_fp4_gemm_nn,
    fp8_fp4_gemm_nt,
    fp8_fp4_gemm_tn,
    fp8_fp4_gemm_tt,
    m_grouped_fp8_fp4_gemm_nn_contiguous,
    m_grouped_fp8_fp4_gemm_nt_contiguous,
    m_grouped_fp8_fp4_gemm_nt_masked,
)
from .api.gemm import (
    bf16_gemm_nn,
    bf16_gemm_nt,
    bf16_gemm_tn,
    bf16_gemm_tt,
    fp8_gemm_nn,
    fp8_gemm_nt,
    fp8_gemm_nt_skip_head_mid,
    fp8_gemm_tn,
    fp8_gemm_tt,
)
from .api.grouped import (
    fp8_m_grouped_gemm_nt_masked,
    k_grouped_bf16_gemm_tn_contiguous,
    k_grouped_fp8_gemm_nt_contiguous,
    k_grouped_fp8_gemm_tn_contiguous,
    m_grouped_bf16_gemm_nn_contiguous,
    m_grouped_bf16_gemm_nt_contiguous,
    m_grouped_bf16_gemm_nt_masked,
    m_grouped_fp8_gemm_nn_contiguous,
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from .api.hyperconnection import tf32_hc_prenorm_gemm
from .autograd import FP8Linear, fp8_grouped_linear, fp8_linear
from .fp4 import cast_back_from_fp4, per_token_cast_to_fp4, transpose_packed_fp4
from .layout import (
    get_k_alignment_for_k_grouped,
    get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor,
    get_mk_alignment_for_contiguous_layout,
    get_mn_major_tma_aligned_packed_ue8m0_tensor,
    get_mn_major_tma_aligned_tensor,
    get_num_sms,
    get_theoretical_mk_alignment_for_contiguous_layout,
    get_tma_aligned_size,
    set_mk_alignment_for_contiguous_layout,
    set_num_sms,
    transform_sf_into_required_layout,
)
from .quant import (
    align,
    ceil_div,
    ceil_to_ue8m0,
    pack_ue8m0,
    pack_ue8m0_to_int,
    per_block_cast_to_fp8,
    per_channel_cast_to_fp8,
    per_custom_dims_cast_to_fp8,
    per_token_cast_to_fp8,
    unpack_ue8m0,
    unpack_ue8m0_from_int,
)
from .reference import calc_diff
from .runtime import (
    get_pdl,
    get_tc_util,
    set_block_size_multiple_of,
    set_ignore_compile_dims,
    set_pdl,
    set_tc_util,
    use_deterministic_algorithms,
)

__version__ = "0.1.0"

bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked  # DeepGEMM's older name
# DeepGEMM's older names of the contiguous-layout alignment (deep_gemm.utils re-exports them at its top level)
get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


def alias_as_deep_gemm() -> bool:
    """Make ``import deep_gemm`` (``deep_gemm.utils``, ``deep_gemm.utils.layout``, ``deep_gemm.testing``, ...) give
    finegemm's DeepGEMM-compatible modules in this process, unless a real DeepGEMM is importable (it then wins,
    with a warning when ``deep_gemm`` is imported) or already imported (returns False, with a warning).

    For every process of an environment, engines' workers included, set ``FINEGEMM_AS_DEEP_GEMM=1`` instead: the
    ``finegemm-deep-gemm.pth`` file that pip installs does this at interpreter start.
    """
    import _finegemm_deep_gemm_hook

    return _finegemm_deep_gemm_hook.install()

__all__ = [
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt", "fp8_gemm_nt_skip_head_mid",
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt",
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "fp8_m_grouped_gemm_nt_masked", "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous", "m_grouped_bf16_gemm_nt_masked",
    "k_grouped_bf16_gemm_tn_contiguous",
    "fp8_mqa_logits", "fp8_paged_mqa_logits", "fp8_fp4_mqa_logits", "fp8_fp4_paged_mqa_logits",
    "get_paged_mqa_logits_metadata", "pack_paged_kv_cache",
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "transform_sf_into_required_layout", "get_mk_alignment_for_contiguous_layout", "set_num_sms", "get_num_sms",
    "set_mk_alignment_for_contiguous_layout", "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_k_alignment_for_k_grouped",
    "per_token_cast_to_fp8", "per_channel_cast_to_fp8", "per_block_cast_to_fp8", "ceil_to_ue8m0",
    "pack_ue8m0", "unpack_ue8m0", "pack_ue8m0_to_int", "unpack_ue8m0_from_int", "per_custom_dims_cast_to_fp8",
    "ceil_div", "align", "calc_diff", "fp8_linear", "fp8_grouped_linear", "FP8Linear",
    "einsum", "fp8_einsum", "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
    "set_pdl", "get_pdl", "use_deterministic_algorithms", "set_ignore_compile_dims",
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
    "bf16_m_grouped_gemm_nt_masked", "tf32_hc_prenorm_gemm", "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
    "set_tc_util", "get_tc_util", "set_block_size_multiple_of",
    "per_token_cast_to_fp4", "transpose_packed_fp4", "cast_back_from_fp4", "alias_as_deep_gemm",
]
