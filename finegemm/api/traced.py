"""The public entries' calls while torch.compile traces: each forwards to its ``torch.ops.finegemm.*`` operator.

The API modules call these only under ``torch.compiler.is_compiling()``; the operators themselves are registered by
api/torch_ops.py (imported by the package after the API), so this module imports nothing of finegemm and the API
modules do not import the registrations. Arguments are the public entry's, reshaped for an operator schema: the
(FP8, scale) pairs split, ``c is d`` passed as a flag (an operator's arguments may not alias), recipes as int lists.
"""

from __future__ import annotations

import torch

__all__ = ["fp8_gemm_nt", "fp8_gemm_nt_skip_head_mid", "bf16_gemm_nt", "m_grouped_contiguous", "m_grouped_masked",
           "k_grouped", "fp8_mqa_logits", "fp8_paged_mqa_logits", "einsum", "fp8_einsum"]


def _recipe_arg(recipe) -> list[int] | None:
    """The API's recipe tuple as an operator argument (a schema takes an int list, not a tuple)."""
    return None if recipe is None else list(recipe)


def _split(x, fp8: bool):
    return x if fp8 else (x, None)


def fp8_gemm_nt(a, b, d, c, recipe) -> None:
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    torch.ops.finegemm.fp8_gemm_nt(a_fp8, sfa, b_fp8, sfb, d, None if c is d else c, c is d,
                                   _recipe_arg(recipe))


def fp8_gemm_nt_skip_head_mid(a, b, d, head_splits, recipe) -> None:
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    torch.ops.finegemm.fp8_gemm_nt_skip_head_mid(a_fp8, sfa, b_fp8, sfb, d, list(head_splits), _recipe_arg(recipe))


def bf16_gemm_nt(a, b, d, c) -> None:
    torch.ops.finegemm.bf16_gemm_nt(a, b, d, None if c is d else c, c is d)


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


def fp8_mqa_logits(q, kv, weights, start, end, clean_logits, max_seqlen_k, logits_dtype) -> torch.Tensor:
    kv_fp8, kv_sf = kv
    return torch.ops.finegemm.fp8_mqa_logits(q, kv_fp8, kv_sf, weights, start, end, clean_logits, max_seqlen_k,
                                             logits_dtype)


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits, logits_dtype) -> torch.Tensor:
    return torch.ops.finegemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                                                   max_context_len, clean_logits, logits_dtype)


def einsum(expr, a, b, d, c) -> None:
    torch.ops.finegemm.einsum(expr, a, b, d, None if c is d else c, c is d)


def fp8_einsum(expr, a, b, d, c, recipe) -> None:
    (a_fp8, sfa), (b_fp8, sfb) = a, b
    torch.ops.finegemm.fp8_einsum(expr, a_fp8, sfa, b_fp8, sfb, d, None if c is d else c, c is d, list(recipe))
