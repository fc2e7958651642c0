"""The ``deep_gemm`` module finegemm provides under the opt-in alias (``FINEGEMM_AS_DEEP_GEMM=1`` or
``finegemm.alias_as_deep_gemm()``): DeepGEMM 2.6.1's SM90 names, its ``utils`` and ``testing`` helpers.

Not offered: the SM100-only mega MoE kernels and symmetric buffers (``SymmBuffer``, ``fp8_fp4_mega_moe``, ...),
``deep_gemm.utils.dist`` (their multi-process helpers) and ``deep_gemm.legacy`` (DeepGEMM's A100 Triton kernels).
``__version__`` is the DeepGEMM API level mirrored; ``__finegemm_version__`` finegemm's own.
"""

import finegemm as _fg

from . import testing, utils
from .utils import *  # noqa: F403  (DeepGEMM re-exports its utils at the top level)

__version__ = "2.6.1"
__finegemm_version__ = _fg.__version__

# DeepGEMM 2.6.1's top-level names (deep_gemm/__init__.py there) that exist for SM90
_NAMES = (
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_ignore_compile_dims",
    "set_block_size_multiple_of", "set_pdl", "get_pdl",
    "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt", "fp8_gemm_nt_skip_head_mid",
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous", "m_grouped_bf16_gemm_nt_masked",
    "k_grouped_bf16_gemm_tn_contiguous",
    "einsum", "fp8_einsum",
    "fp8_fp4_mqa_logits", "get_paged_mqa_logits_metadata", "fp8_fp4_paged_mqa_logits",
    "fp8_mqa_logits", "fp8_paged_mqa_logits",
    "tf32_hc_prenorm_gemm",
    "transform_sf_into_required_layout",
    "fp8_m_grouped_gemm_nt_masked", "bf16_m_grouped_gemm_nt_masked",
)
globals().update({name: getattr(_fg, name) for name in _NAMES})

__all__ = [*_NAMES, "testing", "utils", *utils.__all__]
