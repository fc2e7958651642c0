"""torch.compile support: the public entries as torch custom operators (``torch.ops.finegemm.*``).

While torch.compile traces a function, each public entry (``fp8_gemm_nt``, ``bf16_gemm_nt``, the m- and
k-grouped GEMMs, the MQA logits) calls the operator here instead of running its host path, which dynamo
would try to trace and fail or break the graph on (data pointers, dict caches, Triton's launcher). The graph
then holds one opaque node per call whose implementation is the eager entry itself, so results, argument
errors and CUDA-graph capture (``mode="reduce-overhead"``) are those of eager code. The ``nn``/``tn``/``tt``
forms reach these through their ``nt`` entry (their transposes are views dynamo traces).

Outputs the caller passes (``d``) are declared mutated (``c`` may be ``d``: passed as a flag, since an
operator's arguments may not alias); the logits ops return a new tensor, faked with the same shape, dtype and
row-padded strides. Eager calls never go through here: the operator dispatcher costs microseconds a call.
"""

# No ``from __future__ import annotations``: torch.library reads these annotations as types.

import torch

__all__ = ["fp8_gemm_nt", "fp8_gemm_nt_skip_head_mid", "bf16_gemm_nt", "m_grouped_contiguous", "m_grouped_masked",
           "k_grouped", "fp8_mqa_logits", "fp8_paged_mqa_logits", "einsum", "fp8_einsum"]


def _recipe(recipe: list[int] | None) -> tuple[int, ...] | None:
    """An operator's recipe argument back as the API's tuple."""
    return None if recipe is None else tuple(recipe)


def _recipe_arg(recipe) -> list[int] | None:
    """The API's recipe tuple as an operator argument (a schema takes an int list, not a tuple)."""
    return None if recipe is None else list(recipe)


def _no_output(*args: object, **kwargs: object) -> None:
    """Fake of an operator that only writes its ``d``."""
    return None


# ------------------------------------------------------------------------------------------------ dense
@torch.library.custom_op("finegemm::fp8_gemm_nt", mutates_args=("d",))
def _fp8_gemm_nt(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor, d: torch.Tensor,
                 c: torch.Tensor | None, c_is_d: bool, recipe: list[int] | None) -> None:
    from .gemm import fp8_gemm_nt as eager

    eager((a, sfa), (b, sfb), d, d if c_is_d else c, _recipe(recipe))


@torch.library.custom_op("finegemm::bf16_gemm_nt", mutates_args=("d",))
def _bf16_gemm_nt(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None,
                  c_is_d: bool) -> None:
    from .gemm import bf16_gemm_nt as eager

    eager(a, b, d, d if c_is_d else c)


def fp8_gemm_nt(a, b, d, c, recipe) -> None:
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    torch.ops.finegemm.fp8_gemm_nt(a_fp8, sfa, b_fp8, sfb, d, None if c is d else c, c is d,
                                   _recipe_arg(recipe))


@torch.library.custom_op("finegemm::fp8_gemm_nt_skip_head_mid", mutates_args=("d",))
def _fp8_gemm_nt_skip_head_mid(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor,
                               d: torch.Tensor, head_splits: list[int], recipe: list[int] | None) -> None:
    from .gemm import fp8_gemm_nt_skip_head_mid as eager

    eager((a, sfa), (b, sfb), d, tuple(head_splits), _recipe(recipe))


def fp8_gemm_nt_skip_head_mid(a, b, d, head_splits, recipe) -> None:
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    torch.ops.finegemm.fp8_gemm_nt_skip_head_mid(a_fp8, sfa, b_fp8, sfb, d, list(head_splits), _recipe_arg(recipe))


def bf16_gemm_nt(a, b, d, c) -> None:
    torch.ops.finegemm.bf16_gemm_nt(a, b, d, None if c is d else c, c is d)


# ---------------------------------------------------------------------------------------------- grouped
@torch.library.custom_op("finegemm::m_grouped_contiguous", mutates_args=("d",))
def _m_grouped_contiguous(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                          d: torch.Tensor, grouped_layout: torch.Tensor, use_psum_layout: bool,
                          expected_m: int | None, recipe: list[int] | None) -> None:
    from . import grouped

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
    from . import grouped

    if sfa is None:
        grouped.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m)
    else:
        grouped.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, masked_m, expected_m, _recipe(recipe))


@torch.library.custom_op("finegemm::k_grouped", mutates_args=("d",))
def _k_grouped(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
               d: torch.Tensor, ks: list[int], ks_tensor: torch.Tensor, c: torch.Tensor | None, c_is_d: bool,
               form: str, recipe: list[int] | None) -> None:
    from . import grouped

    c = d if c_is_d else c
    if sfa is None:
        grouped.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c)
    elif form == "nt":
        grouped.k_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, ks, ks_tensor, c, _recipe(recipe))
    else:
        grouped.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, ks, ks_tensor, c, _recipe(recipe))


def _split(x, fp8: bool):
    return x if fp8 else (x, None)


def m_grouped_contiguous(a, b, d, grouped_layout, use_psum_layout, expected_m, recipe, fp8: bool) -> None:
    (a_x, sfa), (b_x, sfb) = _split(a, fp8), _split(b, fp8)
    torch.ops.finegemm.m_grouped_contiguous(a_x, sfa, b_x, sfb, d, grouped_layout, use_psum_layout, expected_m,
                                            _recipe_arg(recipe))


def m_grouped_masked(a, b, d, masked_m, expected_m, recipe, fp8: bool) -> None:
    (a_x, sfa), (b_x, sfb) = _split(a, fp8), _split(b, fp8)
    torch.ops.finegemm.m_grouped_masked(a_x, sfa, b_x, sfb, d, masked_m, expected_m,
                                        _recipe_arg(recipe))


def k_grouped(a, b, d, ks, ks_tensor, c, recipe, form: str, fp8: bool) -> None:
    (a_x, sfa), (b_x, sfb) = _split(a, fp8), _split(b, fp8)
    torch.ops.finegemm.k_grouped(a_x, sfa, b_x, sfb, d, list(ks), ks_tensor, None if c is d else c, c is d, form,
                                 _recipe_arg(recipe))


# ----------------------------------------------------------------------------------------------- logits
@torch.library.custom_op("finegemm::fp8_mqa_logits", mutates_args=())
def _fp8_mqa_logits(q: torch.Tensor, kv: torch.Tensor, kv_sf: torch.Tensor, weights: torch.Tensor,
                    cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, clean_logits: bool,
                    max_seqlen_k: int, logits_dtype: torch.dtype) -> torch.Tensor:
    from .attention import fp8_mqa_logits as eager

    return eager(q, (kv, kv_sf), weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k,
                 logits_dtype)


@_fp8_mqa_logits.register_fake
def _(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k, logits_dtype):
    from .attention import _row_stride

    cols = max_seqlen_k if max_seqlen_k > 0 else kv.shape[0]
    return q.new_empty_strided((q.shape[0], cols), (_row_stride(cols), 1), dtype=logits_dtype)


@torch.library.custom_op("finegemm::fp8_paged_mqa_logits", mutates_args=())
def _fp8_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                          block_table: torch.Tensor, schedule_meta: torch.Tensor, max_context_len: int,
                          clean_logits: bool, logits_dtype: torch.dtype) -> torch.Tensor:
    from .attention import fp8_paged_mqa_logits as eager

    return eager(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
                 logits_dtype=logits_dtype)


@_fp8_paged_mqa_logits.register_fake
def _(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits, logits_dtype):
    from .attention import _row_stride

    rows, cols = q.shape[0] * q.shape[1], max_context_len
    return q.new_empty_strided((rows, cols), (_row_stride(cols), 1), dtype=logits_dtype)


def fp8_mqa_logits(q, kv, weights, start, end, clean_logits, max_seqlen_k, logits_dtype) -> torch.Tensor:
    kv_fp8, kv_sf = kv
    return torch.ops.finegemm.fp8_mqa_logits(q, kv_fp8, kv_sf, weights, start, end, clean_logits, max_seqlen_k,
                                             logits_dtype)


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits, logits_dtype) -> torch.Tensor:
    return torch.ops.finegemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                                                   max_context_len, clean_logits, logits_dtype)


# ----------------------------------------------------------------------------------------------- einsum
@torch.library.custom_op("finegemm::einsum", mutates_args=("d",))
def _einsum(expr: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None,
            c_is_d: bool) -> None:
    from .einsum import einsum as eager

    eager(expr, a, b, d, d if c_is_d else c)


@torch.library.custom_op("finegemm::fp8_einsum", mutates_args=("d",))
def _fp8_einsum(expr: str, a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor,
                d: torch.Tensor, c: torch.Tensor | None, c_is_d: bool, recipe: list[int]) -> None:
    from .einsum import fp8_einsum as eager

    eager(expr, (a, sfa), (b, sfb), d, d if c_is_d else c, tuple(recipe))


def einsum(expr, a, b, d, c) -> None:
    torch.ops.finegemm.einsum(expr, a, b, d, None if c is d else c, c is d)


def fp8_einsum(expr, a, b, d, c, recipe) -> None:
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    torch.ops.finegemm.fp8_einsum(expr, a_fp8, sfa, b_fp8, sfb, d, None if c is d else c, c is d, list(recipe))


for _op in (_fp8_gemm_nt, _fp8_gemm_nt_skip_head_mid, _bf16_gemm_nt, _m_grouped_contiguous, _m_grouped_masked,
            _k_grouped, _einsum, _fp8_einsum):
    _op.register_fake(_no_output)
