"""The K loop of one output tile, shared by the portable grouped kernels (m-grouped and k-grouped).

The caller resolves the group (which B, which rows of A, which K range) and hands in row and
column pointers at ``k = 0``; :func:`tile_product` walks ``k_len`` along K and returns the FP32
tile. FP8 follows the dense kernel's two-level accumulation (DESIGN.md §1): each 128-wide K block
goes through ``tl.dot`` into a fresh FP32 partial that is scaled by ``sfa[row, kb] * sfb[col, kb]``
and added to the result. BF16 accumulates straight into FP32.
"""

import triton
import triton.language as tl

from .scales import load_scale


@triton.jit
def tile_product(
    a_rows, b_cols, stride_ak, stride_bk, k_len, m_mask, n_mask,
    sfa_ptr, sfa_rows, stride_sfa_m, stride_sfa_k, sfa_kb0,
    sfb_ptr, sfb_rows, stride_sfb_n, stride_sfb_k, sfb_kb0,
    IS_FP8: tl.constexpr, SF_PACKED: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """FP32 ``[BLOCK_M, BLOCK_N]`` = sum over ``k < k_len`` of ``A[m, k] * B[k, n]`` (scaled for FP8).

    a_rows: ``[BLOCK_M, 1]`` pointers to each row's element at ``k = 0``; b_cols: ``[1, BLOCK_N]``
    likewise for B's columns. ``k_len <= 0`` runs no iteration (a zero tile, nothing loaded). FP8
    only: scales of row ``sfa_rows[i]`` for K block ``sfa_kb0 + kb`` (and ``sfb_rows`` for B); the
    masks zero the rows/columns they exclude, scales included.
    """
    tl.static_assert(not IS_FP8 or BLOCK_K == 128, "FP8 promotion needs BLOCK_K == 128 (one scale per K block)")
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(k_len, BLOCK_K)):
        rk = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        k_mask = rk < k_len
        a = tl.load(a_rows + rk.to(tl.int64)[None, :] * stride_ak, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_cols + rk.to(tl.int64)[:, None] * stride_bk, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        if IS_FP8:
            partial = tl.dot(a, b, out_dtype=tl.float32)
            sa = load_scale(sfa_ptr, sfa_rows, sfa_kb0 + kb, stride_sfa_m, stride_sfa_k, m_mask, SF_PACKED)
            sb = load_scale(sfb_ptr, sfb_rows, sfb_kb0 + kb, stride_sfb_n, stride_sfb_k, n_mask, SF_PACKED)
            acc += partial * (sa[:, None] * sb[None, :])
        elif UPCAST:
            # Triton's interpreter (3.6-3.9) multiplies bf16 tiles as their raw bits; fp32 (exact for bf16) is right.
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.float32)
    return acc
