"""torch.compile support: the public entries registered as torch custom operators (``torch.ops.finegemm.*``).

While torch.compile traces a function, each public entry (``fp8_gemm_nt``, ``bf16_gemm_nt``, the m- and
k-grouped GEMMs, the MQA logits, the einsums) calls its operator through api/traced.py instead of running its host
path, which dynamo would try to trace and fail or break the graph on (data pointers, dict caches, Triton's
launcher). The graph then holds one opaque node per call whose implementation is the eager entry itself, so
results, argument errors and CUDA-graph capture (``mode="reduce-overhead"``) are those of eager code. The
``nn``/``tn``/``tt`` forms reach these through their ``nt`` entry (their transposes are views dynamo traces).

Outputs the caller passes (``d``) are declared mutated (``c`` may be ``d``: passed as a flag, since an
operator's arguments may not alias); the logits ops return a new tensor, faked with the same shape, dtype and
row-padded strides. Eager calls never go through here: the operator dispatcher costs microseconds a call.

Dependencies run one way: this module imports the API modules; they import only api/traced.py. The package's
``__init__`` imports this module after the API, so the operators exist before anything can be traced.
"""

# No ``from __future__ import annotations``: torch.library reads these annotations as types.

import torch

from . import grouped
from .attention import _row_stride
from .attention import fp8_mqa_logits as _eager_mqa_logits
from .attention import fp8_paged_mqa_logits as _eager_paged_mqa_logits
from .einsum import einsum as _eager_einsum
from .einsum import fp8_einsum as _eager_fp8_einsum
from .gemm import bf16_gemm_nt as _eager_bf16_gemm_nt
from .gemm import fp8_gemm_nt as _eager_fp8_gemm_nt
from .gemm import fp8_gemm_nt_skip_head_mid as _eager_skip_head_mid

__all__: list[str] = []


def _recipe(recipe: list[int] | None) -> tuple[int, ...] | None:
    """An operator's recipe argument back as the API's tuple."""
    return None if recipe is None else tuple(recipe)


def _no_output(*args: object, **kwargs: object) -> None:
    """Fake of an operator that only writes its ``d``."""
    return None


# ------------------------------------------------------------------------------------------------ dense
@torch.library.custom_op("finegemm::fp8_gemm_nt", mutates_args=("d",))
def _fp8_gemm_nt(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor, d: torch.Tensor,
                 c: torch.Tensor | None, c_is_d: bool, recipe: list[int] | None) -> None:
    _eager_fp8_gemm_nt((a, sfa), (b, sfb), d, d if c_is_d else c, _recipe(recipe))


@torch.library.custom_op("finegemm::bf16_gemm_nt", mutates_args=("d",))
def _bf16_gemm_nt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None,
                  c_is_d: bool) -> None:
    _eager_bf16_gemm_nt(a, b, d, d if c_is_d else c)


@torch.library.custom_op("finegemm::fp8_gemm_nt_skip_head_mid", mutates_args=("d",))
def _fp8_gemm_nt_skip_head_mid(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor,
                               d: torch.Tensor, head_splits: list[int], recipe: list[int] | None) -> None:
    _eager_skip_head_mid((a, sfa), (b, sfb), d, tuple(head_splits), _recipe(recipe))


# ---------------------------------------------------------------------------------------------- grouped
@torch.library.custom_op("finegemm::m_grouped_contiguous", mutates_args=("d",))
def _m_grouped_contiguous(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                          d: torch.Tensor, grouped_layout: torch.Tensor, use_psum_layout: bool,
                          expected_m: int | None, recipe: list[int] | None) -> None:
    if sfa is None:  # BF16
        grouped.m_grouped_bf16_gemm_nt_contiguous(a, b, d, grouped_layout, use_psum_layout=use_psum_layout,
                                                  expected_m_for_psum_layout=expected_m)
    else:
        grouped.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, grouped_layout, _recipe(recipe),
                                                 use_psum_layout=use_psum_layout,
                                                 expected_m_for_psum_layout=expected_m)


@torch.library.custom_op("finegemm::m_grouped_masked", mutates_args=("d",))
def _m_grouped_masked(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                      d: torch.Tensor, masked_m: torch.Tensor, expected_m: int, recipe: list[int] | None) -> None:
    if sfa is None:
        grouped.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m)
    else:
        grouped.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, masked_m, expected_m, _recipe(recipe))


@torch.library.custom_op("finegemm::k_grouped", mutates_args=("d",))
def _k_grouped(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
               d: torch.Tensor, ks: list[int], ks_tensor: torch.Tensor, c: torch.Tensor | None, c_is_d: bool,
               form: str, recipe: list[int] | None) -> None:
    c = d if c_is_d else c
    if sfa is None:
        grouped.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c)
    elif form == "nt":
        grouped.k_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, ks, ks_tensor, c, _recipe(recipe))
    else:
        grouped.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, ks, ks_tensor, c, _recipe(recipe))


# ----------------------------------------------------------------------------------------------- logits
@torch.library.custom_op("finegemm::fp8_mqa_logits", mutates_args=())
def _fp8_mqa_logits(q: torch.Tensor, kv: torch.Tensor, kv_sf: torch.Tensor, weights: torch.Tensor,
                    cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, clean_logits: bool,
                    max_seqlen_k: int, logits_dtype: torch.dtype) -> torch.Tensor:
    return _eager_mqa_logits(q, (kv, kv_sf), weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                             max_seqlen_k, logits_dtype)


@_fp8_mqa_logits.register_fake
def _(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k, logits_dtype):
    cols = max_seqlen_k if max_seqlen_k > 0 else kv.shape[0]
    return q.new_empty_strided((q.shape[0], cols), (_row_stride(cols), 1), dtype=logits_dtype)


@torch.library.custom_op("finegemm::fp8_paged_mqa_logits", mutates_args=())
def _fp8_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                          block_table: torch.Tensor, schedule_meta: torch.Tensor, max_context_len: int,
                          clean_logits: bool, logits_dtype: torch.dtype) -> torch.Tensor:
    return _eager_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                                   clean_logits, logits_dtype=logits_dtype)


@_fp8_paged_mqa_logits.register_fake
def _(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits, logits_dtype):
    rows, cols = q.shape[0] * q.shape[1], max_context_len
    return q.new_empty_strided((rows, cols), (_row_stride(cols), 1), dtype=logits_dtype)


# ----------------------------------------------------------------------------------------------- einsum
@torch.library.custom_op("finegemm::einsum", mutates_args=("d",))
def _einsum(expr: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None,
            c_is_d: bool) -> None:
    _eager_einsum(expr, a, b, d, d if c_is_d else c)


@torch.library.custom_op("finegemm::fp8_einsum", mutates_args=("d",))
def _fp8_einsum(expr: str, a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor,
                d: torch.Tensor, c: torch.Tensor | None, c_is_d: bool, recipe: list[int]) -> None:
    _eager_fp8_einsum(expr, (a, sfa), (b, sfb), d, d if c_is_d else c, tuple(recipe))


for _op in (_fp8_gemm_nt, _fp8_gemm_nt_skip_head_mid, _bf16_gemm_nt, _m_grouped_contiguous, _m_grouped_masked,
            _k_grouped, _einsum, _fp8_einsum):
    _op.register_fake(_no_output)
