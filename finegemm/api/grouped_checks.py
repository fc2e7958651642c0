"""Argument checks of the grouped GEMMs (api/grouped.py): operand shapes, recipes, layouts and the per-group K
lists, each raising a ``TypeError``/``ValueError`` that names the argument, what it got and what it needs. The
content checks read tensor values (host tensors always, CUDA ones only under ``FINEGEMM_DEBUG=1``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..layout import get_k_alignment_for_k_grouped, get_mk_alignment_for_contiguous_layout
from .checks import as_int, check_dim, check_dtype, check_output, check_tensor, describe, int_tuple
from .gemm import Recipe


def _check_recipe(recipe: object, allowed: Recipe, op: str) -> Recipe:
    if recipe is None:
        return allowed
    if int_tuple("recipe", recipe) != allowed:
        raise ValueError(f"{op} supports recipe {allowed} only; got {recipe!r}")
    return allowed


def _check_int32_vector(name: str, t: object, length: int, what: str) -> torch.Tensor:
    t = check_tensor(name, t)
    check_dtype(name, t, (torch.int32,))
    if t.dim() != 1 or t.shape[0] != length:
        raise ValueError(f"{name} must be int32 [{length}] ({what}); got shape {tuple(t.shape)}")
    if length > 1 and t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous; got {describe(t)}")
    return t


def _check_positive_int(name: str, value: object) -> int:
    return as_int(name, value, 1)


def _sf_pair_dtypes(sfa: torch.Tensor, sfb: torch.Tensor) -> None:
    if sfa.dtype != sfb.dtype:
        raise TypeError(f"a[1] and b[1] must both be float32 or both int32 packed UE8M0; "
                        f"got {sfa.dtype} and {sfb.dtype}")


def _check_grouped_b(name: str, b: torch.Tensor, k: int, groups_name: str | None = None,
                     num_groups: int | None = None) -> tuple[int, int]:
    """Check b is ``[G, N, K]`` with a's K (and ``groups_name``'s G); returns (G, N)."""
    check_dim(name, b, 3, "[G, N, K]")
    g, n, b_k = b.shape
    if num_groups is not None and g != num_groups:
        raise ValueError(f"{name} has {g} groups but {groups_name} has {num_groups}; the group counts must match")
    if b_k != k:
        raise ValueError(f"{name} must be [G, N, K] with a's K={k}; got shape {tuple(b.shape)}")
    if g < 1 or n < 1:
        raise ValueError(f"{name} must hold at least one group and N >= 1; got shape {tuple(b.shape)}")
    return g, n


def _check_row_layout_contents(layout: torch.Tensor, num_groups: int) -> None:
    ids = layout.detach().cpu().to(torch.int64)
    if ids.numel() == 0:
        return
    bad = (ids < -1) | (ids >= num_groups)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"grouped_layout[{row}] = {int(ids[row])} is not a group id: ids must be in [0, {num_groups}) "
                         "or -1 for padding rows")
    align = get_mk_alignment_for_contiguous_layout()
    # A valid row must continue the row above it unless it starts an aligned block.
    prev = torch.cat([torch.full((1,), -1, dtype=torch.int64), ids[:-1]])
    rows = torch.arange(ids.numel())
    starts = (ids >= 0) & (ids != prev) & (rows % align != 0)
    if bool(starts.any()):
        row = int(starts.nonzero()[0, 0])
        raise ValueError(
            f"grouped_layout: the rows of group {int(ids[row])} start at row {row}, which is not a multiple of "
            f"get_mk_alignment_for_contiguous_layout() = {align}; pad every group's segment with -1 rows to a "
            f"multiple of {align} (row {row - 1} holds {int(ids[row - 1])})"
        )


def _check_psum_layout_contents(layout: torch.Tensor, m: int) -> None:
    ends = [int(v) for v in layout.detach().cpu().tolist()]
    align = get_mk_alignment_for_contiguous_layout()
    prev = 0
    for g, end in enumerate(ends):
        start = (prev + align - 1) // align * align
        if end != prev and end < start:
            raise ValueError(
                f"grouped_layout (psum) [{g}] = {end}: with use_psum_layout each entry is the cumulative end row "
                f"of a group, which starts at align(previous end {prev}, {align}) = {start}; it must be >= {start} "
                f"(or equal {prev} for an empty group)"
            )
        prev = end
    if ends and ends[-1] > m:
        raise ValueError(f"grouped_layout (psum) ends at row {ends[-1]} but a has only M_total={m} rows")


def _check_ks(ks: object, num_groups: int, sum_k_name: str | None = None, sum_k: int | None = None) -> list[int]:
    if isinstance(ks, torch.Tensor) or not isinstance(ks, Sequence):
        raise TypeError(f"ks_cpu must be a list of ints (each group's K, on the host); got {type(ks).__name__}")
    ks = [as_int(f"ks_cpu[{g}]", k) for g, k in enumerate(ks)]
    if len(ks) != num_groups:
        raise ValueError(f"ks_cpu has {len(ks)} groups but d has {num_groups} ([G, M, N]); the group counts must match")
    align = get_k_alignment_for_k_grouped()
    for g, k in enumerate(ks):
        if k < 0 or k % align:
            raise ValueError(f"ks_cpu[{g}] = {k}: every group's K must be a non-negative multiple of "
                             f"get_k_alignment_for_k_grouped() = {align} (the contiguous alignment "
                             f"{get_mk_alignment_for_contiguous_layout()}, and at least the 128-wide scale block)")
    if sum_k is not None and sum(ks) != sum_k:
        raise ValueError(f"sum(ks_cpu) = {sum(ks)} but {sum_k_name} holds K = {sum_k}; ks_cpu must sum to the "
                         "concatenated K")
    return ks


def _check_ks_tensor_contents(ks_tensor: torch.Tensor, ks: list[int]) -> None:
    values = [int(v) for v in ks_tensor.detach().cpu().tolist()]
    if values != ks:
        raise ValueError(f"grouped_layout holds {values} but ks_cpu is {ks}; they must be the same per-group K")


def _check_k_grouped_out(d: torch.Tensor, c: torch.Tensor | None, no_c: bool = False) -> tuple[int, int, int]:
    check_tensor("d", d)
    check_dim("d", d, 3, "[G, M, N]")
    num_groups, m, n = d.shape
    check_output("d", d, (num_groups, m, n), (torch.float32,))
    if num_groups < 1:
        raise ValueError(f"d must hold at least one group; got shape {tuple(d.shape)}")
    if no_c:
        return num_groups, m, n
    if c is None:
        raise ValueError("c is required by k-grouped GEMMs: they compute d[g] = c[g] + a_g^T b_g in FP32 "
                         "(pass c=d to accumulate in place)")
    check_tensor("c", c)
    check_dtype("c", c, (torch.float32,))
    if tuple(c.shape) != tuple(d.shape):
        raise ValueError(f"c must have d's shape {tuple(d.shape)} ([G, M, N]); got {tuple(c.shape)}")
    return num_groups, m, n


def _check_k_grouped_sf(name: str, sf: torch.Tensor, shape: tuple[int, int], what: str) -> None:
    if sf.dtype == torch.int32:
        raise TypeError(f"{name}: k-grouped FP8 GEMMs take float32 scales {what}; packed UE8M0 int32 scales are not "
                        "supported for k-grouped layouts (DeepGEMM accepts them only on SM100 with gran_k = 32)")
    check_dtype(name, sf, (torch.float32,))
    if tuple(sf.shape) != shape:
        raise ValueError(f"{name} must be float32 {what} = {shape}; got {describe(sf)}")


def _check_flat_operand(name: str, x: torch.Tensor, sum_k: int, mn: int, what: str) -> None:
    if x.numel() != sum_k * mn:
        raise ValueError(f"{name} must hold sum(ks) * {what} = {sum_k} * {mn} = {sum_k * mn} elements (each group a "
                         f"row-major [{what}, ks[g]] block, concatenated); got {describe(x)}")
    if not x.is_contiguous():
        raise ValueError(f"{name} must be contiguous (groups packed back to back); got {describe(x)}")
