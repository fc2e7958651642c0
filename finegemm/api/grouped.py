"""Grouped GEMMs for MoE with DeepGEMM's names: m-grouped (contiguous, masked) and k-grouped, FP8 and BF16.

m-grouped: every group (expert) shares N and K and has its own B ``[N, K]``.

- **contiguous** (training forward, prefill): the experts' tokens concatenated along M. Every expert
  segment starts on a multiple of ``get_mk_alignment_for_contiguous_layout()`` (128) rows; the rows
  between an expert's last token and the next segment are padding. ``grouped_layout`` is either
  int32 ``[M_total]`` with the expert of each row and ``-1`` for padding rows, or
  (``use_psum_layout=True``) int32 ``[G]`` with the *cumulative end row* of each expert's tokens:
  expert ``g`` owns rows ``[align(grouped_layout[g-1], 128), grouped_layout[g])`` (0 for ``g = 0``),
  DeepGEMM's PSUM meaning; an empty expert repeats the previous end (or its aligned value).
  **Padding rows of ``d`` are written as zeros** (DeepGEMM leaves them unspecified); their rows of
  ``a`` are never read, so they may hold anything, NaN included.
- **masked** (decode, CUDA graphs): ``a [G, max_m, K]`` plus ``masked_m`` int32 ``[G]`` on the
  device. Only rows ``< masked_m[g]`` of ``a[g]`` are read and of ``d[g]`` written; **every other row
  of ``d`` is left untouched**. ``masked_m`` is read by the kernel only (no host sync, capturable);
  a value above ``max_m`` is clamped to ``max_m`` and a negative one counts as 0, in the kernel, so
  no index ever leaves the tensors. ``expected_m`` is a tile-size hint.

k-grouped (weight gradients): M and N fixed, group ``g`` owns ``ks[g]`` consecutive K (each a
multiple of 128, 0 allowed), ``d[g] = c[g] + a_g^T b_g`` in FP32. ``c`` is required (pass ``c=d`` to
accumulate in place; otherwise ``c`` is read and ``d`` written, no extra copy).

Checks that need no tensor contents (shapes, dtypes, strides, devices, group counts, ``ks``) always
run before launch and raise ``TypeError``/``ValueError`` naming the argument, what it got and what
it needs. Checks of device-resident contents — ``grouped_layout`` ids in ``[-1, G)``, segment
alignment, PSUM ends non-decreasing and ``<= M_total``, ``ks_tensor == ks`` — need a device-to-host
copy, so on CUDA they run only with ``FINEGEMM_DEBUG=1`` (which also synchronizes after the launch);
on CPU tensors (interpreter) they always run, being free there. Unchecked bad contents give wrong
rows but never an out-of-bounds access: the kernels bound every index (ids outside ``[0, G)`` count
as padding; ``masked_m`` and ``ks_tensor`` values are clamped). ``masked_m`` contents are never
checked (every value has a defined meaning).

Dispatch builds a :class:`GemmDesc` with the grouped ``layout`` and asks
:func:`finegemm.api.dispatch.choose_backend`; the sm90 backend does not take grouped layouts yet, so
they run on the portable Triton kernels (``run_sm90`` is called with the same tensors once it does).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..jit import env
from ..jit.heuristics import FP8_BLOCK_K, GemmDesc, PortableConfig
from ..kernels.portable.k_grouped import launch_k_grouped
from ..kernels.portable.m_grouped import launch_m_grouped_contiguous, launch_m_grouped_masked
from ..layout import get_mk_alignment_for_contiguous_layout, transform_sf_into_required_layout
from .checks import (
    FP8_DTYPES,
    check_dim,
    check_dtype,
    check_output,
    check_row_or_col_major,
    check_same_device,
    check_tensor,
    describe,
    unpack_pair,
)
from .dispatch import choose_backend, run_sm90

Recipe = tuple[int, int, int]
RECIPE_1D2D: Recipe = (1, 128, 128)
RECIPE_1D1D: Recipe = (1, 1, 128)
Pair = tuple[torch.Tensor, torch.Tensor]

__all__ = [
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous",
    "m_grouped_fp8_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous",
    "m_grouped_bf16_gemm_nt_masked", "k_grouped_bf16_gemm_tn_contiguous",
]


# ---------------------------------------------------------------------------------------------
# Small private checks (the shared ones live in api/checks.py)
# ---------------------------------------------------------------------------------------------

def _check_recipe(recipe: object, allowed: Recipe, op: str) -> Recipe:
    if recipe is None:
        return allowed
    if not isinstance(recipe, (tuple, list)) or tuple(recipe) != allowed:
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
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")
    return value


def _reads_contents(t: torch.Tensor) -> bool:
    """Whether checks that read ``t``'s values run: free on the host, a sync on CUDA (debug only)."""
    return t.device.type == "cpu" or env.flag(env.DEBUG)


def _debug_sync(device: torch.device) -> None:
    if device.type == "cuda" and env.flag(env.DEBUG):
        torch.cuda.synchronize(device)


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


def _contiguous_config(config: PortableConfig) -> PortableConfig:
    # A tile must not straddle two expert segments: BLOCK_M has to divide the segment alignment.
    align = get_mk_alignment_for_contiguous_layout()
    if align % config.block_m == 0:
        return config
    block_m = max(bm for bm in (16, 32, 64, 128) if align % bm == 0 and bm <= config.block_m)
    return PortableConfig(block_m, config.block_n, config.block_k, config.num_warps, config.num_stages, config.group_m)


# ---------------------------------------------------------------------------------------------
# Content checks (host tensors always; CUDA only with FINEGEMM_DEBUG=1)
# ---------------------------------------------------------------------------------------------

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
        raise TypeError(f"ks must be a list of ints (each group's K, on the host); got {type(ks).__name__}")
    ks = list(ks)
    if any(isinstance(k, bool) or not isinstance(k, int) for k in ks):
        raise TypeError(f"ks must hold Python ints; got {ks!r}")
    if len(ks) != num_groups:
        raise ValueError(f"ks has {len(ks)} groups but d has {num_groups} ([G, M, N]); the group counts must match")
    align = get_mk_alignment_for_contiguous_layout()
    for g, k in enumerate(ks):
        if k < 0 or k % align:
            raise ValueError(f"ks[{g}] = {k}: every group's K must be a non-negative multiple of "
                             f"get_mk_alignment_for_contiguous_layout() = {align}")
    if sum_k is not None and sum(ks) != sum_k:
        raise ValueError(f"sum(ks) = {sum(ks)} but {sum_k_name} holds K = {sum_k}; ks must sum to the concatenated K")
    return ks


def _check_ks_tensor_contents(ks_tensor: torch.Tensor, ks: list[int]) -> None:
    values = [int(v) for v in ks_tensor.detach().cpu().tolist()]
    if values != ks:
        raise ValueError(f"ks_tensor holds {values} but ks is {ks}; they must be the same per-group K")


# ---------------------------------------------------------------------------------------------
# m-grouped contiguous
# ---------------------------------------------------------------------------------------------

def _check_grouped_layout(grouped_layout: object, m: int, num_groups: int, use_psum_layout: bool) -> torch.Tensor:
    if use_psum_layout:
        return _check_int32_vector("grouped_layout", grouped_layout, num_groups,
                                   "use_psum_layout=True: the cumulative end row of each group")
    return _check_int32_vector("grouped_layout", grouped_layout, m, "the group of each row of a, -1 for padding")


def _m_grouped_contiguous(kind: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor,
                          sfb: torch.Tensor | None, d: torch.Tensor, grouped_layout: torch.Tensor,
                          use_psum_layout: bool, expected_m: int | None, device: torch.device) -> None:
    m, k = a.shape
    num_groups, n, _ = b.shape
    if _reads_contents(grouped_layout):
        if use_psum_layout:
            _check_psum_layout_contents(grouped_layout, m)
        else:
            _check_row_layout_contents(grouped_layout, num_groups)
    if m == 0:
        return
    a_k_major = check_row_or_col_major("a[0]" if sfa is not None else "a", a)
    b_k_major = check_row_or_col_major("b[0]" if sfb is not None else "b", b)
    desc = GemmDesc(kind, m, n, k, a_k_major, b_k_major, False, False, sfa is not None and sfa.dtype == torch.int32,
                    layout="m_grouped_contiguous", num_groups=num_groups, expected_m=expected_m)
    backend, config = choose_backend(desc, device)
    if backend == "sm90":
        run_sm90(f"m_grouped_{kind}_gemm_contiguous", desc, config, a, sfa, b, sfb, d, grouped_layout,
                 use_psum_layout)
    else:
        launch_m_grouped_contiguous(a, b, d, grouped_layout, sfa, sfb, use_psum_layout,
                                    get_mk_alignment_for_contiguous_layout(), _contiguous_config(config))
    _debug_sync(device)


def m_grouped_fp8_gemm_nt_contiguous(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    grouped_layout: torch.Tensor,
    recipe: Recipe | None = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
    use_psum_layout: bool = False,
    *,
    expected_m_for_psum_layout: int | None = None,
) -> None:
    """``d[r] = a[r] @ b[group(r)]^T`` for every row r of every expert segment; padding rows of d = 0.

    Args:
        a: ``(a_fp8, sfa)``: e4m3 (or e5m2) ``[M_total, K]``, row- or column-major; ``sfa`` fp32
            ``[M_total, ceil(K/128)]`` per token (any layout: made MN-major TMA-aligned when it is not)
            or int32 packed UE8M0 ``[M_total, ceil(ceil(K/128)/4)]`` already in that layout.
        b: ``(b_fp8, sfb)``: ``[G, N, K]`` (each ``[N, K]`` row- or column-major); ``sfb`` fp32
            ``[G, ceil(N/128), ceil(K/128)]`` per 128x128 block (or the packed int32 form, same dtype as sfa).
        d: bf16 ``[M_total, N]`` row-major.
        grouped_layout: int32 ``[M_total]`` (group of each row, ``-1`` for padding) or, with
            ``use_psum_layout``, int32 ``[G]`` cumulative end rows (see the module doc), on a's device.
        recipe: ``(1, 128, 128)`` or None (the same).
        compiled_dims, disable_ue8m0_cast: accepted for DeepGEMM compatibility (no effect here).
        use_psum_layout: read ``grouped_layout`` as PSUM ends instead of per-row ids.
        expected_m_for_psum_layout: optional rows-per-group hint (tile choice only).

    Every segment must start on a multiple of ``get_mk_alignment_for_contiguous_layout()`` (128).
    Any M_total >= 0, N >= 1, K >= 1. See the module doc for which content checks run where.
    """
    del compiled_dims
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)
    recipe = _check_recipe(recipe, RECIPE_1D2D, "m_grouped_fp8_gemm_nt_contiguous")
    check_dtype("a[0]", a_fp8, FP8_DTYPES)
    check_dtype("b[0]", b_fp8, FP8_DTYPES)
    check_dim("a[0]", a_fp8, 2, "[M_total, K]")
    m, k = a_fp8.shape
    num_groups, n = _check_grouped_b("b[0]", b_fp8, k)
    check_output("d", d, (m, n), (torch.bfloat16,))
    grouped_layout = _check_grouped_layout(grouped_layout, m, num_groups, use_psum_layout)
    device = check_same_device([("a[0]", a_fp8), ("a[1]", sfa), ("b[0]", b_fp8), ("b[1]", sfb), ("d", d),
                                ("grouped_layout", grouped_layout)])
    _sf_pair_dtypes(sfa, sfb)
    sfa = transform_sf_into_required_layout(sfa, m, k, recipe, is_sfa=True, disable_ue8m0_cast=disable_ue8m0_cast,
                                            name="a[1]")
    sfb = transform_sf_into_required_layout(sfb, n, k, recipe, num_groups=num_groups, is_sfa=False,
                                            disable_ue8m0_cast=disable_ue8m0_cast, name="b[1]")
    _m_grouped_contiguous("fp8_1d2d", a_fp8, sfa, b_fp8, sfb, d, grouped_layout, use_psum_layout,
                          expected_m_for_psum_layout, device)


def _t_grouped_pair(pair: object, name: str) -> Pair:
    x, sf = unpack_pair(name, pair)
    if x.dim() != 3 or sf.dim() != 3:
        raise ValueError(f"{name} must hold 3-D tensors ([G, K, N] and [G, SFK, SFN]); "
                         f"got shapes {tuple(x.shape)} and {tuple(sf.shape)}")
    return x.transpose(1, 2), sf.transpose(1, 2)


def m_grouped_fp8_gemm_nn_contiguous(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    grouped_layout: torch.Tensor,
    recipe: Recipe | None = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
    use_psum_layout: bool = False,
) -> None:
    """As :func:`m_grouped_fp8_gemm_nt_contiguous` with b = (fp8 ``[G, K, N]``,
    sf ``[G, ceil(K/128), ceil(N/128)]``)."""
    m_grouped_fp8_gemm_nt_contiguous(a, _t_grouped_pair(b, "b"), d, grouped_layout, recipe, compiled_dims,
                                     disable_ue8m0_cast, use_psum_layout)


def m_grouped_bf16_gemm_nt_contiguous(
    a: torch.Tensor,
    b: torch.Tensor,
    d: torch.Tensor,
    grouped_layout: torch.Tensor,
    compiled_dims: str = "nk",
    use_psum_layout: bool = False,
    *,
    expected_m_for_psum_layout: int | None = None,
) -> None:
    """BF16 twin of :func:`m_grouped_fp8_gemm_nt_contiguous`: a bf16 ``[M_total, K]``, b bf16 ``[G, N, K]``
    (row- or column-major each), d bf16 ``[M_total, N]`` (padding rows 0), FP32 accumulation."""
    del compiled_dims
    check_tensor("a", a)
    check_tensor("b", b)
    check_dtype("a", a, (torch.bfloat16,))
    check_dtype("b", b, (torch.bfloat16,))
    check_dim("a", a, 2, "[M_total, K]")
    m, k = a.shape
    num_groups, n = _check_grouped_b("b", b, k)
    check_output("d", d, (m, n), (torch.bfloat16,))
    grouped_layout = _check_grouped_layout(grouped_layout, m, num_groups, use_psum_layout)
    device = check_same_device([("a", a), ("b", b), ("d", d), ("grouped_layout", grouped_layout)])
    _m_grouped_contiguous("bf16", a, None, b, None, d, grouped_layout, use_psum_layout,
                          expected_m_for_psum_layout, device)


def m_grouped_bf16_gemm_nn_contiguous(
    a: torch.Tensor,
    b: torch.Tensor,
    d: torch.Tensor,
    grouped_layout: torch.Tensor,
    compiled_dims: str = "nk",
    use_psum_layout: bool = False,
) -> None:
    """As :func:`m_grouped_bf16_gemm_nt_contiguous` with b bf16 ``[G, K, N]``."""
    b = check_tensor("b", b)
    if b.dim() != 3:
        raise ValueError(f"b must be 3-D [G, K, N]; got shape {tuple(b.shape)}")
    m_grouped_bf16_gemm_nt_contiguous(a, b.transpose(1, 2), d, grouped_layout, compiled_dims, use_psum_layout)


# ---------------------------------------------------------------------------------------------
# m-grouped masked
# ---------------------------------------------------------------------------------------------

def _m_grouped_masked(kind: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor,
                      sfb: torch.Tensor | None, d: torch.Tensor, masked_m: torch.Tensor, expected_m: int,
                      device: torch.device) -> None:
    num_groups, max_m, k = a.shape
    n = b.shape[1]
    if max_m == 0:
        return
    a_k_major = check_row_or_col_major("a[0]" if sfa is not None else "a", a)
    b_k_major = check_row_or_col_major("b[0]" if sfb is not None else "b", b)
    desc = GemmDesc(kind, max_m, n, k, a_k_major, b_k_major, False, False, sfa is not None and sfa.dtype == torch.int32,
                    layout="m_grouped_masked", num_groups=num_groups, expected_m=expected_m)
    backend, config = choose_backend(desc, device)
    if backend == "sm90":
        run_sm90(f"m_grouped_{kind}_gemm_masked", desc, config, a, sfa, b, sfb, d, masked_m, expected_m)
    else:
        launch_m_grouped_masked(a, b, d, masked_m, sfa, sfb, config)
    _debug_sync(device)


def _check_masked_shapes(a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor, d: torch.Tensor,
                         masked_m: object, expected_m: object) -> tuple[int, int, int, int, torch.Tensor]:
    check_dim(a_name, a, 3, "[G, max_m, K]")
    num_groups, max_m, k = a.shape
    if num_groups < 1:
        raise ValueError(f"{a_name} must hold at least one group; got shape {tuple(a.shape)}")
    _, n = _check_grouped_b(b_name, b, k, a_name, num_groups)
    check_output("d", d, (num_groups, max_m, n), (torch.bfloat16,))
    masked_m = _check_int32_vector("masked_m", masked_m, num_groups, "valid rows of each group, on the device")
    _check_positive_int("expected_m", expected_m)
    return num_groups, max_m, n, k, masked_m


def m_grouped_fp8_gemm_nt_masked(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    masked_m: torch.Tensor,
    expected_m: int,
    recipe: Recipe | None = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
) -> None:
    """``d[g, :masked_m[g]] = a[g, :masked_m[g]] @ b[g]^T`` for every group; other rows of d untouched.

    Args:
        a: ``(a_fp8, sfa)``: e4m3 (or e5m2) ``[G, max_m, K]`` (each ``[max_m, K]`` row- or column-major);
            ``sfa`` fp32 ``[G, max_m, ceil(K/128)]`` (any layout; made MN-major TMA-aligned) or int32
            packed UE8M0 ``[G, max_m, ceil(ceil(K/128)/4)]`` already in that layout.
        b: ``(b_fp8, sfb)``: ``[G, N, K]``; ``sfb`` fp32 ``[G, ceil(N/128), ceil(K/128)]`` (or packed int32).
        d: bf16 ``[G, max_m, N]`` row-major.
        masked_m: int32 ``[G]`` valid rows per group, on the device; read by the kernel only (no sync,
            CUDA-graph capturable). Values above ``max_m`` act as ``max_m``, negative ones as 0.
        expected_m: positive int, the typical rows per group (tile-size hint only).
        recipe: ``(1, 128, 128)`` or None. compiled_dims, disable_ue8m0_cast: DeepGEMM compatibility.

    Path B (scales already in the required layout) allocates and copies nothing, so a call can be
    captured in a CUDA graph once the kernel is compiled (call it once before capturing).
    """
    del compiled_dims
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)
    recipe = _check_recipe(recipe, RECIPE_1D2D, "m_grouped_fp8_gemm_nt_masked")
    check_dtype("a[0]", a_fp8, FP8_DTYPES)
    check_dtype("b[0]", b_fp8, FP8_DTYPES)
    num_groups, max_m, n, k, masked_m = _check_masked_shapes("a[0]", a_fp8, "b[0]", b_fp8, d, masked_m, expected_m)
    device = check_same_device([("a[0]", a_fp8), ("a[1]", sfa), ("b[0]", b_fp8), ("b[1]", sfb), ("d", d),
                                ("masked_m", masked_m)])
    _sf_pair_dtypes(sfa, sfb)
    sfa = transform_sf_into_required_layout(sfa, max_m, k, recipe, num_groups=num_groups, is_sfa=True,
                                            disable_ue8m0_cast=disable_ue8m0_cast, name="a[1]")
    sfb = transform_sf_into_required_layout(sfb, n, k, recipe, num_groups=num_groups, is_sfa=False,
                                            disable_ue8m0_cast=disable_ue8m0_cast, name="b[1]")
    _m_grouped_masked("fp8_1d2d", a_fp8, sfa, b_fp8, sfb, d, masked_m, expected_m, device)


fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked  # DeepGEMM's older name


def m_grouped_bf16_gemm_nt_masked(
    a: torch.Tensor,
    b: torch.Tensor,
    d: torch.Tensor,
    masked_m: torch.Tensor,
    expected_m: int,
    compiled_dims: str = "nk",
) -> None:
    """BF16 twin of :func:`m_grouped_fp8_gemm_nt_masked`: a bf16 ``[G, max_m, K]``, b bf16 ``[G, N, K]``,
    d bf16 ``[G, max_m, N]`` (rows at or past ``masked_m[g]`` untouched), FP32 accumulation."""
    del compiled_dims
    check_tensor("a", a)
    check_tensor("b", b)
    check_dtype("a", a, (torch.bfloat16,))
    check_dtype("b", b, (torch.bfloat16,))
    _, _, _, _, masked_m = _check_masked_shapes("a", a, "b", b, d, masked_m, expected_m)
    device = check_same_device([("a", a), ("b", b), ("d", d), ("masked_m", masked_m)])
    _m_grouped_masked("bf16", a, None, b, None, d, masked_m, expected_m, device)


# ---------------------------------------------------------------------------------------------
# k-grouped
# ---------------------------------------------------------------------------------------------

def _check_k_grouped_out(d: torch.Tensor, c: torch.Tensor | None) -> tuple[int, int, int]:
    check_tensor("d", d)
    check_dim("d", d, 3, "[G, M, N]")
    num_groups, m, n = d.shape
    check_output("d", d, (num_groups, m, n), (torch.float32,))
    if num_groups < 1:
        raise ValueError(f"d must hold at least one group; got shape {tuple(d.shape)}")
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


def _k_grouped(kind: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
               c: torch.Tensor, d: torch.Tensor, ks: list[int], ks_tensor: torch.Tensor, flat_k_major: bool,
               a_k_major: bool, b_k_major: bool, device: torch.device) -> None:
    num_groups, m, n = d.shape
    sum_k = sum(ks)
    if _reads_contents(ks_tensor):
        _check_ks_tensor_contents(ks_tensor, ks)
    if m == 0 or n == 0:
        return
    if sum_k == 0:
        if c.data_ptr() != d.data_ptr():
            d.copy_(c)
        return
    desc = GemmDesc(kind, m, n, sum_k, a_k_major, b_k_major, True, True, False, layout="k_grouped",
                    num_groups=num_groups)
    backend, config = choose_backend(desc, device)
    if backend == "sm90":
        run_sm90(f"k_grouped_{kind}_gemm", desc, config, a, sfa, b, sfb, c, d, ks, ks_tensor, flat_k_major)
    else:
        launch_k_grouped(a, b, c, d, ks_tensor, sum_k, sfa, sfb, flat_k_major, config)
    _debug_sync(device)


def _check_ks_tensor(ks_tensor: object, num_groups: int) -> torch.Tensor:
    return _check_int32_vector("ks_tensor", ks_tensor, num_groups, "the same per-group K as ks, on the device")


def k_grouped_fp8_gemm_tn_contiguous(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    ks: list[int],
    ks_tensor: torch.Tensor,
    c: torch.Tensor | None = None,
    recipe: Recipe = RECIPE_1D1D,
    compiled_dims: str = "mn",
) -> None:
    """``d[g] = c[g] + a_g^T @ b_g`` per group, FP32, with the groups concatenated along K (1d1d recipe).

    Args:
        a: ``(a_fp8, sfa)``: e4m3 (or e5m2) ``[sum(ks), M]`` (MN-major as DeepGEMM passes it; column-major
            also accepted); ``a_g = a[k_start:k_start + ks[g]]``. ``sfa`` fp32 ``[sum(ks)/128, M]``, one
            scale per channel per 128 of K, any strides (read in place, never copied).
        b: ``(b_fp8, sfb)``: ``[sum(ks), N]`` and fp32 ``[sum(ks)/128, N]`` likewise.
        d: fp32 ``[G, M, N]`` row-major.
        ks: host list of each group's K: non-negative multiples of 128 (0 = empty group) summing to
            ``a``'s rows.
        ks_tensor: int32 ``[G]`` with the same values, on the device (the kernel reads it).
        c: fp32 ``[G, M, N]``, required (``c=d`` accumulates in place).
        recipe: ``(1, 1, 128)`` only. compiled_dims: accepted for DeepGEMM compatibility.
    """
    del compiled_dims
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)
    _check_recipe(recipe, RECIPE_1D1D, "k_grouped_fp8_gemm_tn_contiguous")
    check_dtype("a[0]", a_fp8, FP8_DTYPES)
    check_dtype("b[0]", b_fp8, FP8_DTYPES)
    num_groups, m, n = _check_k_grouped_out(d, c)
    check_dim("a[0]", a_fp8, 2, "[sum(ks), M]")
    check_dim("b[0]", b_fp8, 2, "[sum(ks), N]")
    ks = _check_ks(ks, num_groups, "a[0]", a_fp8.shape[0])
    sum_k = sum(ks)
    if tuple(a_fp8.shape) != (sum_k, m):
        raise ValueError(f"a[0] must be [sum(ks), M] = {(sum_k, m)}; got shape {tuple(a_fp8.shape)}")
    if tuple(b_fp8.shape) != (sum_k, n):
        raise ValueError(f"b[0] must be [sum(ks), N] = {(sum_k, n)}; got shape {tuple(b_fp8.shape)}")
    _check_k_grouped_sf("a[1]", sfa, (sum_k // FP8_BLOCK_K, m), "[sum(ks)/128, M]")
    _check_k_grouped_sf("b[1]", sfb, (sum_k // FP8_BLOCK_K, n), "[sum(ks)/128, N]")
    ks_tensor = _check_ks_tensor(ks_tensor, num_groups)
    device = check_same_device([("a[0]", a_fp8), ("a[1]", sfa), ("b[0]", b_fp8), ("b[1]", sfb), ("d", d), ("c", c),
                                ("ks_tensor", ks_tensor)])
    a_mn_major = check_row_or_col_major("a[0]", a_fp8)
    b_mn_major = check_row_or_col_major("b[0]", b_fp8)
    _k_grouped("fp8_1d1d", a_fp8, sfa, b_fp8, sfb, c, d, ks, ks_tensor, False, not a_mn_major, not b_mn_major, device)


def _check_flat_operand(name: str, x: torch.Tensor, sum_k: int, mn: int, what: str) -> None:
    if x.numel() != sum_k * mn:
        raise ValueError(f"{name} must hold sum(ks) * {what} = {sum_k} * {mn} = {sum_k * mn} elements (each group a "
                         f"row-major [{what}, ks[g]] block, concatenated); got {describe(x)}")
    if not x.is_contiguous():
        raise ValueError(f"{name} must be contiguous (groups packed back to back); got {describe(x)}")


def k_grouped_fp8_gemm_nt_contiguous(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    ks: list[int],
    ks_tensor: torch.Tensor,
    c: torch.Tensor | None = None,
    recipe: Recipe = RECIPE_1D1D,
    compiled_dims: str = "mn",
) -> None:
    """``d[g] = c[g] + a_g @ b_g^T`` per group, FP32, K-major groups packed back to back (DeepGEMM's SM90 form).

    Args:
        a: ``(a_fp8, sfa)``: contiguous e4m3 (or e5m2) buffer of ``sum(ks) * M`` elements (any shape,
            usually 1-D): group g is a row-major ``[M, ks[g]]`` block starting at element
            ``sum(ks[:g]) * M``. ``sfa`` fp32 ``[M, sum(ks)/128]`` (group g's columns
            ``sum(ks[:g])/128 ...``), any strides (read in place).
        b: ``(b_fp8, sfb)``: the same with N: ``sum(ks) * N`` elements, sfb fp32 ``[N, sum(ks)/128]``.
        d: fp32 ``[G, M, N]`` row-major. ks, ks_tensor, c, recipe: as
            :func:`k_grouped_fp8_gemm_tn_contiguous`.
    """
    del compiled_dims
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)
    _check_recipe(recipe, RECIPE_1D1D, "k_grouped_fp8_gemm_nt_contiguous")
    check_dtype("a[0]", a_fp8, FP8_DTYPES)
    check_dtype("b[0]", b_fp8, FP8_DTYPES)
    num_groups, m, n = _check_k_grouped_out(d, c)
    ks = _check_ks(ks, num_groups)
    sum_k = sum(ks)
    _check_flat_operand("a[0]", a_fp8, sum_k, m, "M")
    _check_flat_operand("b[0]", b_fp8, sum_k, n, "N")
    _check_k_grouped_sf("a[1]", sfa, (m, sum_k // FP8_BLOCK_K), "[M, sum(ks)/128]")
    _check_k_grouped_sf("b[1]", sfb, (n, sum_k // FP8_BLOCK_K), "[N, sum(ks)/128]")
    ks_tensor = _check_ks_tensor(ks_tensor, num_groups)
    device = check_same_device([("a[0]", a_fp8), ("a[1]", sfa), ("b[0]", b_fp8), ("b[1]", sfb), ("d", d), ("c", c),
                                ("ks_tensor", ks_tensor)])
    _k_grouped("fp8_1d1d", a_fp8, sfa, b_fp8, sfb, c, d, ks, ks_tensor, True, True, True, device)


def k_grouped_bf16_gemm_tn_contiguous(
    a: torch.Tensor,
    b: torch.Tensor,
    d: torch.Tensor,
    ks: list[int],
    ks_tensor: torch.Tensor,
    c: torch.Tensor | None = None,
    compiled_dims: str = "mn",
) -> None:
    """BF16 twin of :func:`k_grouped_fp8_gemm_tn_contiguous`: a bf16 ``[sum(ks), M]``, b bf16
    ``[sum(ks), N]`` (row- or column-major), d and c (required) fp32 ``[G, M, N]``."""
    del compiled_dims
    check_tensor("a", a)
    check_tensor("b", b)
    check_dtype("a", a, (torch.bfloat16,))
    check_dtype("b", b, (torch.bfloat16,))
    num_groups, m, n = _check_k_grouped_out(d, c)
    check_dim("a", a, 2, "[sum(ks), M]")
    check_dim("b", b, 2, "[sum(ks), N]")
    ks = _check_ks(ks, num_groups, "a", a.shape[0])
    sum_k = sum(ks)
    if tuple(a.shape) != (sum_k, m):
        raise ValueError(f"a must be [sum(ks), M] = {(sum_k, m)}; got shape {tuple(a.shape)}")
    if tuple(b.shape) != (sum_k, n):
        raise ValueError(f"b must be [sum(ks), N] = {(sum_k, n)}; got shape {tuple(b.shape)}")
    ks_tensor = _check_ks_tensor(ks_tensor, num_groups)
    device = check_same_device([("a", a), ("b", b), ("d", d), ("c", c), ("ks_tensor", ks_tensor)])
    a_mn_major = check_row_or_col_major("a", a)
    b_mn_major = check_row_or_col_major("b", b)
    _k_grouped("bf16", a, None, b, None, c, d, ks, ks_tensor, False, not a_mn_major, not b_mn_major, device)
