"""Float64 references for the grouped GEMMs, one per public op, with the public ops' argument conventions.

Built from the dequantized FP8 inputs (``x_fp8 * scale`` in float64) like :mod:`.dense`, so they
measure the kernels' error alone. Outputs are float64 and cover the whole output tensor:

- m-grouped contiguous: ``[M_total, N]``, padding rows 0 (what the kernels write there);
- m-grouped masked: ``[G, max_m, N]``, rows at or past ``clamp(masked_m[g], 0, max_m)`` are 0 (the
  kernels leave those rows of ``d`` untouched; tests compare only the valid rows and check the rest);
- k-grouped: ``[G, M, N]`` with ``c`` added.

They read ``grouped_layout`` / ``masked_m`` on the host (a sync on CUDA): they are references.
"""

from __future__ import annotations

import torch

from ..layout import get_mk_alignment_for_contiguous_layout
from .dense import BLOCK, dequantize_rows

Pair = tuple[torch.Tensor, torch.Tensor]

def _align(x: int, a: int | None = None) -> int:
    """``x`` rounded up to ``a`` (default: the current ``get_mk_alignment_for_contiguous_layout()``)."""
    a = a or get_mk_alignment_for_contiguous_layout()
    return (x + a - 1) // a * a


def contiguous_row_groups(grouped_layout: torch.Tensor, m: int, use_psum_layout: bool = False) -> torch.Tensor:
    """Expert of every row (int64 ``[M]``, -1 for padding) from either contiguous-layout form.

    Per-row form: ``grouped_layout`` itself. PSUM form (int32 ``[G]``): expert ``g`` owns rows
    ``[align(grouped_layout[g-1]), grouped_layout[g])``, ``align`` rounding up to the current
    ``get_mk_alignment_for_contiguous_layout()`` (0 for ``g = 0``); every other row is padding.
    """
    layout = grouped_layout.detach().cpu().to(torch.int64)
    if not use_psum_layout:
        return layout.clone()
    rows = torch.full((m,), -1, dtype=torch.int64)
    prev_end = 0
    for g, end in enumerate(layout.tolist()):
        start = _align(prev_end)
        if end > start:
            rows[start:min(end, m)] = g
        prev_end = max(end, prev_end)
    return rows


def _grouped_rows_matmul(lhs: torch.Tensor, rhs_per_group: list[torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """``out[r] = lhs[r] @ rhs_per_group[rows[r]].T`` for rows with a group, 0 elsewhere (float64)."""
    out = torch.zeros((lhs.shape[0], rhs_per_group[0].shape[0]), dtype=torch.float64, device=lhs.device)
    rows = rows.to(lhs.device)
    for g, rhs in enumerate(rhs_per_group):
        sel = rows == g
        if bool(sel.any()):
            out[sel] = lhs[sel] @ rhs.T
    return out


def m_grouped_fp8_gemm_nt_contiguous(a: Pair, b: Pair, grouped_layout: torch.Tensor,
                                     use_psum_layout: bool = False) -> torch.Tensor:
    """a = (fp8 ``[M, K]``, sf ``[M, SFK]``), b = (fp8 ``[G, N, K]``, sf ``[G, ceil(N/128), SFK]``) → ``[M, N]``.

    Scales may be fp32 or packed UE8M0 int32, any strides.
    """
    a_fp8, sfa = a
    b_fp8, sfb = b
    lhs = dequantize_rows(a_fp8, sfa, 1)
    rhs = [dequantize_rows(b_fp8[g], sfb[g], BLOCK) for g in range(b_fp8.shape[0])]
    return _grouped_rows_matmul(lhs, rhs, contiguous_row_groups(grouped_layout, a_fp8.shape[0], use_psum_layout))


def m_grouped_fp8_gemm_nn_contiguous(a: Pair, b: Pair, grouped_layout: torch.Tensor,
                                     use_psum_layout: bool = False) -> torch.Tensor:
    """As the ``nt`` form with b = (fp8 ``[G, K, N]``, sf ``[G, SFK, ceil(N/128)]``)."""
    return m_grouped_fp8_gemm_nt_contiguous(a, (b[0].transpose(1, 2), b[1].transpose(1, 2)), grouped_layout,
                                            use_psum_layout)


def masked_rows(masked_m: torch.Tensor, max_m: int) -> list[int]:
    """Valid rows of every group: ``clamp(masked_m[g], 0, max_m)`` (what the kernels compute)."""
    return [min(max(int(v), 0), max_m) for v in masked_m.detach().cpu().tolist()]


def m_grouped_fp8_gemm_nt_masked(a: Pair, b: Pair, masked_m: torch.Tensor) -> torch.Tensor:
    """a = (fp8 ``[G, max_m, K]``, sf ``[G, max_m, SFK]``), b as contiguous → ``[G, max_m, N]`` (invalid rows 0)."""
    a_fp8, sfa = a
    b_fp8, sfb = b
    num_groups, max_m, _ = a_fp8.shape
    out = torch.zeros((num_groups, max_m, b_fp8.shape[1]), dtype=torch.float64, device=a_fp8.device)
    for g, rows in enumerate(masked_rows(masked_m, max_m)):
        if rows:
            lhs = dequantize_rows(a_fp8[g, :rows], sfa[g, :rows], 1)
            out[g, :rows] = lhs @ dequantize_rows(b_fp8[g], sfb[g], BLOCK).T
    return out


def _k_offsets(ks: list[int]) -> list[int]:
    offsets, total = [], 0
    for k in ks:
        offsets.append(total)
        total += k
    return offsets


def k_grouped_fp8_gemm_tn_contiguous(a: Pair, b: Pair, ks: list[int], c: torch.Tensor) -> torch.Tensor:
    """a = (fp8 ``[sum K, M]``, sf ``[sum K/128, M]``), b = (fp8 ``[sum K, N]``, sf ``[sum K/128, N]``).

    Returns ``c[g] + a_g^T @ b_g`` (float64 ``[G, M, N]``) with ``a_g = a[k_start:k_start + ks[g]]``.
    """
    a_fp8, sfa = a
    b_fp8, sfb = b
    out = c.double().clone()
    for g, (k0, k) in enumerate(zip(_k_offsets(ks), ks)):
        if k:
            kb0, kb1 = k0 // BLOCK, (k0 + k + BLOCK - 1) // BLOCK
            lhs = dequantize_rows(a_fp8[k0:k0 + k].T, sfa[kb0:kb1].T, 1)
            rhs = dequantize_rows(b_fp8[k0:k0 + k].T, sfb[kb0:kb1].T, 1)
            out[g] += lhs @ rhs.T
    return out


def k_grouped_fp8_gemm_nt_contiguous(a: Pair, b: Pair, ks: list[int], c: torch.Tensor) -> torch.Tensor:
    """a = (flat fp8 ``[sum K * M]``: group g a row-major ``[M, ks[g]]`` block at element ``k_start * M``,
    sf ``[M, sum K/128]``), b alike with N. Returns ``c[g] + a_g @ b_g^T`` (float64 ``[G, M, N]``)."""
    a_fp8, sfa = a
    b_fp8, sfb = b
    _, m, n = c.shape
    a_flat, b_flat = a_fp8.reshape(-1), b_fp8.reshape(-1)
    out = c.double().clone()
    for g, (k0, k) in enumerate(zip(_k_offsets(ks), ks)):
        if k:
            kb0, kb1 = k0 // BLOCK, (k0 + k + BLOCK - 1) // BLOCK
            lhs = dequantize_rows(a_flat[k0 * m:(k0 + k) * m].view(m, k), sfa[:, kb0:kb1], 1)
            rhs = dequantize_rows(b_flat[k0 * n:(k0 + k) * n].view(n, k), sfb[:, kb0:kb1], 1)
            out[g] += lhs @ rhs.T
    return out


def m_grouped_bf16_gemm_nt_contiguous(a: torch.Tensor, b: torch.Tensor, grouped_layout: torch.Tensor,
                                      use_psum_layout: bool = False) -> torch.Tensor:
    """a bf16 ``[M, K]``, b bf16 ``[G, N, K]`` → float64 ``[M, N]`` (padding rows 0)."""
    rhs = [b[g].double() for g in range(b.shape[0])]
    return _grouped_rows_matmul(a.double(), rhs, contiguous_row_groups(grouped_layout, a.shape[0], use_psum_layout))


def m_grouped_bf16_gemm_nn_contiguous(a: torch.Tensor, b: torch.Tensor, grouped_layout: torch.Tensor,
                                      use_psum_layout: bool = False) -> torch.Tensor:
    """As the ``nt`` form with b bf16 ``[G, K, N]``."""
    return m_grouped_bf16_gemm_nt_contiguous(a, b.transpose(1, 2), grouped_layout, use_psum_layout)


def m_grouped_bf16_gemm_nt_masked(a: torch.Tensor, b: torch.Tensor, masked_m: torch.Tensor) -> torch.Tensor:
    """a bf16 ``[G, max_m, K]``, b bf16 ``[G, N, K]`` → float64 ``[G, max_m, N]`` (invalid rows 0)."""
    num_groups, max_m, _ = a.shape
    out = torch.zeros((num_groups, max_m, b.shape[1]), dtype=torch.float64, device=a.device)
    for g, rows in enumerate(masked_rows(masked_m, max_m)):
        if rows:
            out[g, :rows] = a[g, :rows].double() @ b[g].double().T
    return out


def k_grouped_bf16_gemm_tn_contiguous(a: torch.Tensor, b: torch.Tensor, ks: list[int], c: torch.Tensor) -> torch.Tensor:
    """a bf16 ``[sum K, M]``, b bf16 ``[sum K, N]`` → ``c[g] + a_g^T @ b_g`` (float64 ``[G, M, N]``)."""
    out = c.double().clone()
    for g, (k0, k) in enumerate(zip(_k_offsets(ks), ks)):
        if k:
            out[g] += a[k0:k0 + k].double().T @ b[k0:k0 + k].double()
    return out
