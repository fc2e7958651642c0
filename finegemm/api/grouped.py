"""Grouped GEMMs for MoE with DeepGEMM's names: m-grouped (contiguous, masked) and k-grouped, FP8 and BF16.

m-grouped: every group (expert) shares N and K and has its own B ``[N, K]``.

- **contiguous** (training forward, prefill): the experts' tokens concatenated along M. Every expert
  segment starts on a multiple of ``get_mk_alignment_for_contiguous_layout()`` (128 by default) rows; the rows
  between an expert's last token and the next segment are padding. ``grouped_layout`` is either
  int32 ``[M_total]`` with the expert of each row and ``-1`` for padding rows, or
  (``use_psum_layout=True``) int32 ``[G]`` with the *cumulative end row* of each expert's tokens:
  expert ``g`` owns rows ``[align(grouped_layout[g-1]), grouped_layout[g])`` (0 for ``g = 0``),
  DeepGEMM's PSUM meaning; an empty expert repeats the previous end (or its aligned value).
  **Padding rows of ``d`` are written as zeros** (DeepGEMM leaves them unspecified); their rows of
  ``a`` are never read, so they may hold anything, NaN included.
- **masked** (decode, CUDA graphs): ``a [G, max_m, K]`` plus ``masked_m`` int32 ``[G]`` on the
  device. Only rows ``< masked_m[g]`` of ``a[g]`` are read and of ``d[g]`` written; **every other row
  of ``d`` is left untouched**. ``masked_m`` is read by the kernel only (no host sync, capturable);
  a value above ``max_m`` is clamped to ``max_m`` and a negative one counts as 0, in the kernel, so
  no index ever leaves the tensors. ``expected_m`` is a tile-size hint.

k-grouped (weight gradients): M and N fixed, group ``g`` owns ``ks[g]`` consecutive K (each a
multiple of ``get_k_alignment_for_k_grouped()``: 128, or a larger contiguous alignment; 0 allowed),
``d[g] = c[g] + a_g^T b_g`` in FP32. ``c`` is required (pass ``c=d`` to
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
:func:`finegemm.api.dispatch.choose_backend`. On Hopper the m-grouped FP8 GEMMs (contiguous and masked,
recipe ``(1, 128, 128)``, K-major A and B, K a multiple of 128) run the sm90 Gluon kernel
(finegemm/kernels/sm90/dispatch_grouped.py, configs from finegemm/jit/heuristics_sm90_grouped.py); the
k-grouped GEMMs (FP8 nt/tn, BF16 tn) run per-group launches of the dense sm90 kernels
(finegemm/kernels/sm90/dispatch_k_grouped.py) where the tensors are TMA-addressable; the m-grouped
BF16 GEMMs take the sm90 path of finegemm/kernels/sm90/dispatch_bf16_grouped.py where it is present and
supports the case. Every other case (column-major FP8 operands, unaligned tensors, other devices) runs
the portable Triton kernels, and ``FINEGEMM_BACKEND=sm90`` on such a case raises ``BackendError`` with
the reason.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..jit import env
from ..jit.heuristics import FP8_BLOCK_K, GemmDesc
from ..kernels.portable.k_grouped import launch_k_grouped
from ..kernels.portable.m_grouped import contiguous_config, launch_m_grouped_contiguous, launch_m_grouped_masked
from ..layout import (
    get_mk_alignment_for_contiguous_layout,
    transform_sf_into_required_layout,
)
from . import traced
from .checks import (
    FP8_DTYPES,
    OutputGuard,
    as_bool,
    as_int,
    check_dim,
    check_dtype,
    check_output,
    check_row_or_col_major,
    check_same_device,
    check_tensor,
    merge_recipes,
    unpack_pair,
)
from .dispatch import _sm90_grouped_module, choose_backend, debug_sync, portable_instead, run_sm90
from .gemm import RECIPE_1D1D, RECIPE_1D2D, Recipe
from .grouped_checks import (
    _check_flat_operand,
    _check_grouped_b,
    _check_int32_vector,
    _check_k_grouped_out,
    _check_k_grouped_sf,
    _check_ks,
    _check_ks_tensor_contents,
    _check_positive_int,
    _check_psum_layout_contents,
    _check_recipe,
    _check_row_layout_contents,
    _sf_pair_dtypes,
)
from .plan_cache import dispatch_state, new_cache, plan_for, scalar_key, tensor_key

Pair = tuple[torch.Tensor, torch.Tensor]

__all__ = [
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous",
    "m_grouped_fp8_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous",
    "m_grouped_bf16_gemm_nt_masked", "k_grouped_bf16_gemm_tn_contiguous",
]


# ---------------------------------------------------------------------------------------------
# Content checks (api/grouped_checks.py): host tensors always; CUDA only with FINEGEMM_DEBUG=1
# ---------------------------------------------------------------------------------------------

def _reads_contents(device: torch.device) -> bool:
    """Whether checks that read tensor values run: free on the host, a sync on CUDA (debug only).

    Decided on every call (never cached in a plan): contents change between calls of one signature.
    """
    return device.type == "cpu" or env.flag(env.DEBUG)


# ---------------------------------------------------------------------------------------------
# Plans: each distinct call signature is validated once (DESIGN.md §6)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Plan:
    """What one call signature of a grouped op resolved to; replayed while the signature repeats.

    Content checks are never part of a plan: they run on every call where they run at all.
    """

    desc: GemmDesc | None  # None: an empty problem, nothing to launch
    backend: str
    config: Any
    device: torch.device
    sfa_relayout: tuple | None = None  # path A: (mn, k, num_groups) to re-lay sfa out with; None: ready
    sfb_relayout: tuple | None = None
    ks: list[int] | None = None  # k-grouped: the validated per-group K
    copy_c: bool = False  # k-grouped with sum(ks) == 0 and a non-empty d: d = c
    guard: OutputGuard | None = None  # d against the inputs, per call on the data pointers (checks.OutputGuard)


def _guarded(plan: _Plan, tensors: tuple, extra: tuple[str, ...], may_be_out: tuple[str, ...] = ()) -> _Plan:
    """``plan`` with the guard of ``tensors`` = (a, sfa, b, sfb, d, *extra), d the output."""
    names = (*_names(tensors[1] is not None), "d", *extra)
    return replace(plan, guard=OutputGuard(names, tensors, 4, may_be_out))


# Host overhead per call on this CPU (python 3.11, torch 2.13), launches patched to no-ops, best of 5 x 4000
# calls, FP8 path B scales, before -> after the plans. "CUDA-like" leaves out the content checks, which read
# grouped_layout / ks_tensor on every call of CPU tensors (on CUDA only with FINEGEMM_DEBUG=1):
#   CUDA-like: m-grouped contiguous fp8 30 -> 8.5 us, bf16 18.5 -> 7.0 us; masked fp8 30 -> 8.3 us,
#   bf16 19 -> 6.9 us; k-grouped fp8 tn 27 -> 9.7 us.
#   CPU with content checks: contiguous fp8 per-row ids 133 -> 98 us (the id checks are ~90 us of torch ops),
#   psum 35 -> 12 us; k-grouped 30 -> 13 us.
_CONTIGUOUS_PLANS = new_cache()
_MASKED_PLANS = new_cache()
_K_GROUPED_PLANS = new_cache()


def _ks_key(ks: object) -> tuple[int, ...]:
    """``ks`` as part of a plan key; a ``TypeError`` (no plan, validate) unless it is a list/tuple of ints."""
    if type(ks) not in (list, tuple):
        raise TypeError("ks is not a list of ints")
    return tuple(map(operator.index, ks))  # numpy integers key as the ints they are; validation refuses bools


_NO_KS = object()  # _lookup's default: the op takes no ks


def _lookup(cache: dict, op: str, fp8: bool, a: object, b: object, tensors: tuple, scalars: tuple,
            validate: Callable[[], _Plan], ks: object = _NO_KS) -> _Plan:
    """The plan of this call's signature, from ``cache`` or from ``validate()`` (which raises on bad input).

    ``fp8``: ``a`` and ``b`` are (tensor, scales) pairs, else tensors; ``tensors`` are the other tensor
    arguments, ``scalars`` the other arguments validation reads, ``ks`` the k-grouped host list.
    """
    def make_key() -> tuple:
        if fp8:
            (a_x, sfa), (b_x, sfb) = a, b
            operands = (tensor_key(a_x), tensor_key(sfa), tensor_key(b_x), tensor_key(sfb))
        else:
            operands = (tensor_key(a), tensor_key(b))
        key = (op, *operands, *map(tensor_key, tensors), *map(scalar_key, scalars), dispatch_state())
        return key if ks is _NO_KS else (*key, _ks_key(ks))

    return plan_for(cache, make_key, validate)


def _check_fp8_operands(a: object, b: object, recipe: object, allowed: Recipe, op: str) -> tuple[torch.Tensor, ...]:
    """(a_fp8, sfa, b_fp8, sfb) from the FP8 pairs, after the recipe and FP8 dtype checks."""
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)
    _check_recipe(recipe, allowed, op)
    check_dtype("a[0]", a_fp8, FP8_DTYPES)
    check_dtype("b[0]", b_fp8, FP8_DTYPES)
    return a_fp8, sfa, b_fp8, sfb


def _check_bf16_operands(a: object, b: object) -> tuple[torch.Tensor, None, torch.Tensor, None]:
    """(a, None, b, None) after the tensor and bf16 dtype checks (the None stand for FP8's scales)."""
    check_tensor("a", a)
    check_tensor("b", b)
    check_dtype("a", a, (torch.bfloat16,))
    check_dtype("b", b, (torch.bfloat16,))
    return a, None, b, None


def _names(fp8: bool) -> tuple[str, str, str, str]:
    """How errors call a, its scales, b and its scales: ``a[0]``... for FP8 pairs, ``a``/``b`` for BF16."""
    return ("a[0]", "a[1]", "b[0]", "b[1]") if fp8 else ("a", "a[1]", "b", "b[1]")


def _same_device(a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                 *others: tuple[str, torch.Tensor | None]) -> torch.device:
    a_name, sfa_name, b_name, sfb_name = _names(sfa is not None)
    return check_same_device([(a_name, a), (sfa_name, sfa), (b_name, b), (sfb_name, sfb), *others])


def _scale_relayout(name: str, sf: torch.Tensor, mn: int, k: int, num_groups: int | None,
                    is_sfa: bool) -> tuple | None:
    """Validate a 1d2d scale tensor: None when it is already in the required layout (path B, passed as it
    is), else the arguments that re-lay it out on every call (path A)."""
    ready = transform_sf_into_required_layout(sf, mn, k, RECIPE_1D2D, num_groups=num_groups, is_sfa=is_sfa,
                                              name=name) is sf
    return None if ready else (mn, k, num_groups)


def _required_scales(plan: _Plan, sfa: torch.Tensor | None,
                     sfb: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    if plan.sfa_relayout is not None:
        mn, k, groups = plan.sfa_relayout
        sfa = transform_sf_into_required_layout(sfa, mn, k, RECIPE_1D2D, num_groups=groups, is_sfa=True)
    if plan.sfb_relayout is not None:
        mn, k, groups = plan.sfb_relayout
        sfb = transform_sf_into_required_layout(sfb, mn, k, RECIPE_1D2D, num_groups=groups, is_sfa=False)
    return sfa, sfb


def _m_grouped_plan(kind: str, layout: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor,
                    sfb: torch.Tensor | None, expected_m: int | None, device: torch.device,
                    d: torch.Tensor | None = None) -> _Plan:
    """Scale checks, backend and config of an m-grouped call whose shapes and devices passed their checks
    (``a`` ``[M_total, K]`` contiguous or ``[G, max_m, K]`` masked, ``b`` ``[G, N, K]``)."""
    m, k = a.shape[-2], a.shape[-1]
    num_groups, n, _ = b.shape
    relayout = (None, None)
    if sfa is not None:
        _sf_pair_dtypes(sfa, sfb)
        sfa_groups = num_groups if a.dim() == 3 else None
        relayout = (_scale_relayout("a[1]", sfa, m, k, sfa_groups, True),
                    _scale_relayout("b[1]", sfb, n, k, num_groups, False))
    if m == 0:
        return _Plan(None, "none", None, device)
    a_name, _, b_name, _ = _names(sfa is not None)
    a_k_major = check_row_or_col_major(a_name, a)
    b_k_major = check_row_or_col_major(b_name, b)
    alignment = get_mk_alignment_for_contiguous_layout() if layout == "m_grouped_contiguous" else 128
    desc = GemmDesc(kind, m, n, k, a_k_major, b_k_major, False, False, sfa is not None and sfa.dtype == torch.int32,
                    layout=layout, num_groups=num_groups, expected_m=expected_m, alignment=alignment)
    backend, config = choose_backend(desc, device)
    if backend == "sm90" and layout == "m_grouped_masked":
        reason = _sm90_grouped_module().masked_layout_reason(a, d)
        if reason is not None:
            backend, config = portable_instead(desc, device, reason)
    if backend != "sm90" and layout == "m_grouped_contiguous":
        config = contiguous_config(config, alignment)
    return _Plan(desc, backend, config, device, *relayout)


# ---------------------------------------------------------------------------------------------
# m-grouped contiguous
# ---------------------------------------------------------------------------------------------

def _check_grouped_layout(grouped_layout: object, m: int, num_groups: int, use_psum_layout: bool) -> torch.Tensor:
    if use_psum_layout:
        return _check_int32_vector("grouped_layout", grouped_layout, num_groups,
                                   "use_psum_layout=True: the cumulative end row of each group")
    return _check_int32_vector("grouped_layout", grouped_layout, m, "the group of each row of a, -1 for padding")


def _plan_contiguous(kind: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                     d: torch.Tensor, grouped_layout: object, use_psum_layout: bool, expected_m: int | None) -> _Plan:
    """Validate an m-grouped contiguous call whose operands passed their dtype checks."""
    use_psum_layout = as_bool("use_psum_layout", use_psum_layout)
    if expected_m is not None:
        expected_m = as_int("expected_m_for_psum_layout", expected_m, 0)
    a_name, _, b_name, _ = _names(sfa is not None)
    check_dim(a_name, a, 2, "[M_total, K]")
    m, k = a.shape
    num_groups, n = _check_grouped_b(b_name, b, k)
    check_output("d", d, (m, n), (torch.bfloat16,))
    grouped_layout = _check_grouped_layout(grouped_layout, m, num_groups, use_psum_layout)
    device = _same_device(a, sfa, b, sfb, ("d", d), ("grouped_layout", grouped_layout))
    return _guarded(_m_grouped_plan(kind, "m_grouped_contiguous", a, sfa, b, sfb, expected_m, device),
                    (a, sfa, b, sfb, d, grouped_layout), ("grouped_layout",))


def _run_contiguous(plan: _Plan, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor,
                    sfb: torch.Tensor | None, d: torch.Tensor, grouped_layout: torch.Tensor,
                    use_psum_layout: bool) -> None:
    plan.guard.check((a, sfa, b, sfb, d, grouped_layout))
    if _reads_contents(plan.device):
        if use_psum_layout:
            _check_psum_layout_contents(grouped_layout, a.shape[0])
        else:
            _check_row_layout_contents(grouped_layout, b.shape[0])
    if plan.desc is None:
        return
    sfa, sfb = _required_scales(plan, sfa, sfb)
    if plan.backend == "sm90":
        run_sm90(f"m_grouped_{plan.desc.kind}_gemm_contiguous", plan.desc, plan.config, a, sfa, b, sfb, d,
                 grouped_layout, use_psum_layout)
    else:
        launch_m_grouped_contiguous(a, b, d, grouped_layout, sfa, sfb, use_psum_layout, plan.desc.alignment,
                                    plan.config)
    debug_sync(plan.device)


def m_grouped_fp8_gemm_nt_contiguous(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    grouped_layout: torch.Tensor,
    recipe: Recipe | None = None,
    recipe_a: tuple[int, int] | None = None,
    recipe_b: tuple[int, int] | None = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
    use_psum_layout: bool = False,
    ensure_zero_padding: bool = True,
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
        recipe_a, recipe_b: DeepGEMM 2.8's per-operand form of ``recipe`` (``(1, 128)``, ``(128, 128)``).
        ensure_zero_padding: DeepGEMM 2.8's switch; padding rows are always written 0 here.

    Every segment must start on a multiple of ``get_mk_alignment_for_contiguous_layout()`` (128 by default).
    Any M_total >= 0, N >= 1, K >= 1. See the module doc for which content checks run where.
    """
    del compiled_dims, disable_ue8m0_cast, ensure_zero_padding
    recipe = merge_recipes(recipe, recipe_a, recipe_b)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.m_grouped_contiguous(a, b, d, grouped_layout, use_psum_layout,
                                              expected_m_for_psum_layout, recipe, True)

    def validate() -> _Plan:
        a_fp8, sfa, b_fp8, sfb = _check_fp8_operands(a, b, recipe, RECIPE_1D2D, "m_grouped_fp8_gemm_nt_contiguous")
        return _plan_contiguous("fp8_1d2d", a_fp8, sfa, b_fp8, sfb, d, grouped_layout, use_psum_layout,
                                expected_m_for_psum_layout)

    plan = _lookup(_CONTIGUOUS_PLANS, "m_grouped_fp8_gemm_nt_contiguous", True, a, b, (d, grouped_layout),
                   (recipe, use_psum_layout, expected_m_for_psum_layout), validate)
    _run_contiguous(plan, a[0], a[1], b[0], b[1], d, grouped_layout, use_psum_layout)


def _t_grouped_pair(pair: object, name: str) -> Pair:
    x, sf = unpack_pair(name, pair)
    if x.dim() != 3 or sf.dim() != 3:
        raise ValueError(f"{name} must hold 3-D tensors ([G, K, N] and [G, SFK, SFN]); "
                         f"got shapes {tuple(x.shape)} and {tuple(sf.shape)}")
    return x.transpose(1, 2), sf.transpose(1, 2)


def m_grouped_fp8_gemm_nn_contiguous(a: Pair, b: Pair, d: torch.Tensor, grouped_layout: torch.Tensor,
                                     recipe: Recipe | None = None, recipe_a: tuple[int, int] | None = None,
                                     recipe_b: tuple[int, int] | None = None, compiled_dims: str = "nk",
                                     disable_ue8m0_cast: bool = False, use_psum_layout: bool = False,
                                     ensure_zero_padding: bool = True) -> None:
    """As :func:`m_grouped_fp8_gemm_nt_contiguous` with b = (fp8 ``[G, K, N]``,
    sf ``[G, ceil(K/128), ceil(N/128)]``)."""
    m_grouped_fp8_gemm_nt_contiguous(a, _t_grouped_pair(b, "b"), d, grouped_layout, recipe, recipe_a, recipe_b,
                                     compiled_dims, disable_ue8m0_cast, use_psum_layout, ensure_zero_padding)


def m_grouped_bf16_gemm_nt_contiguous(
    a: torch.Tensor,
    b: torch.Tensor,
    d: torch.Tensor,
    grouped_layout: torch.Tensor,
    compiled_dims: str = "nk",
    use_psum_layout: bool = False,
    ensure_zero_padding: bool = True,
    expected_m_for_psum_layout: int | None = None,
) -> None:
    """BF16 twin of :func:`m_grouped_fp8_gemm_nt_contiguous`: a bf16 ``[M_total, K]``, b bf16 ``[G, N, K]``
    (row- or column-major each), d bf16 ``[M_total, N]`` (padding rows 0, whatever ``ensure_zero_padding``
    says), FP32 accumulation."""
    del compiled_dims, ensure_zero_padding
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.m_grouped_contiguous(a, b, d, grouped_layout, use_psum_layout,
                                              expected_m_for_psum_layout, None, False)

    def validate() -> _Plan:
        return _plan_contiguous("bf16", *_check_bf16_operands(a, b), d, grouped_layout, use_psum_layout,
                                expected_m_for_psum_layout)

    plan = _lookup(_CONTIGUOUS_PLANS, "m_grouped_bf16_gemm_nt_contiguous", False, a, b, (d, grouped_layout),
                   (use_psum_layout, expected_m_for_psum_layout), validate)
    _run_contiguous(plan, a, None, b, None, d, grouped_layout, use_psum_layout)


def m_grouped_bf16_gemm_nn_contiguous(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, grouped_layout: torch.Tensor,
                                      compiled_dims: str = "nk", use_psum_layout: bool = False,
                                      ensure_zero_padding: bool = True) -> None:
    """As :func:`m_grouped_bf16_gemm_nt_contiguous` with b bf16 ``[G, K, N]``."""
    b = check_tensor("b", b)
    if b.dim() != 3:
        raise ValueError(f"b must be 3-D [G, K, N]; got shape {tuple(b.shape)}")
    m_grouped_bf16_gemm_nt_contiguous(a, b.transpose(1, 2), d, grouped_layout, compiled_dims, use_psum_layout,
                                      ensure_zero_padding)


# ---------------------------------------------------------------------------------------------
# m-grouped masked
# ---------------------------------------------------------------------------------------------

def _plan_masked(kind: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                 d: torch.Tensor, masked_m: object, expected_m: object) -> _Plan:
    """Validate an m-grouped masked call whose operands passed their dtype checks."""
    a_name, _, b_name, _ = _names(sfa is not None)
    check_dim(a_name, a, 3, "[G, max_m, K]")
    num_groups, max_m, k = a.shape
    if num_groups < 1:
        raise ValueError(f"{a_name} must hold at least one group; got shape {tuple(a.shape)}")
    _, n = _check_grouped_b(b_name, b, k, a_name, num_groups)
    check_output("d", d, (num_groups, max_m, n), (torch.bfloat16,))
    masked_m = _check_int32_vector("masked_m", masked_m, num_groups, "valid rows of each group, on the device")
    expected_m = _check_positive_int("expected_m", expected_m)  # a Python int in the desc (numpy ints accepted)
    device = _same_device(a, sfa, b, sfb, ("d", d), ("masked_m", masked_m))
    return _guarded(_m_grouped_plan(kind, "m_grouped_masked", a, sfa, b, sfb, expected_m, device, d),
                    (a, sfa, b, sfb, d, masked_m), ("masked_m",))


def _run_masked(plan: _Plan, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                d: torch.Tensor, masked_m: torch.Tensor, expected_m: int) -> None:
    plan.guard.check((a, sfa, b, sfb, d, masked_m))
    if plan.desc is None:
        return
    sfa, sfb = _required_scales(plan, sfa, sfb)
    if plan.backend == "sm90":
        run_sm90(f"m_grouped_{plan.desc.kind}_gemm_masked", plan.desc, plan.config, a, sfa, b, sfb, d, masked_m,
                 expected_m)
    else:
        launch_m_grouped_masked(a, b, d, masked_m, sfa, sfb, plan.config)
    debug_sync(plan.device)


def m_grouped_fp8_gemm_nt_masked(
    a: Pair,
    b: Pair,
    d: torch.Tensor,
    masked_m: torch.Tensor,
    expected_m: int,
    recipe: Recipe | None = None,
    recipe_a: tuple[int, int] | None = None,
    recipe_b: tuple[int, int] | None = None,
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
        recipe: ``(1, 128, 128)`` or None (or DeepGEMM 2.8's ``recipe_a``, ``recipe_b``). compiled_dims,
            disable_ue8m0_cast: DeepGEMM compatibility.

    Path B (scales already in the required layout) allocates and copies nothing, so a call can be
    captured in a CUDA graph once the kernel is compiled (call it once before capturing).
    """
    del compiled_dims, disable_ue8m0_cast
    recipe = merge_recipes(recipe, recipe_a, recipe_b)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.m_grouped_masked(a, b, d, masked_m, expected_m, recipe, True)

    def validate() -> _Plan:
        a_fp8, sfa, b_fp8, sfb = _check_fp8_operands(a, b, recipe, RECIPE_1D2D, "m_grouped_fp8_gemm_nt_masked")
        return _plan_masked("fp8_1d2d", a_fp8, sfa, b_fp8, sfb, d, masked_m, expected_m)

    plan = _lookup(_MASKED_PLANS, "m_grouped_fp8_gemm_nt_masked", True, a, b, (d, masked_m), (recipe, expected_m),
                   validate)
    _run_masked(plan, a[0], a[1], b[0], b[1], d, masked_m, expected_m)


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
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.m_grouped_masked(a, b, d, masked_m, expected_m, None, False)

    def validate() -> _Plan:
        return _plan_masked("bf16", *_check_bf16_operands(a, b), d, masked_m, expected_m)

    plan = _lookup(_MASKED_PLANS, "m_grouped_bf16_gemm_nt_masked", False, a, b, (d, masked_m), (expected_m,), validate)
    _run_masked(plan, a, None, b, None, d, masked_m, expected_m)


# ---------------------------------------------------------------------------------------------
# k-grouped
# ---------------------------------------------------------------------------------------------

def _plan_k_grouped(kind: str, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                    c: torch.Tensor | None, d: torch.Tensor, ks: object, ks_tensor: object,
                    flat_k_major: bool, no_c: bool = False) -> _Plan:
    """Validate a k-grouped call whose operands passed their dtype checks.

    ``flat_k_major``: a and b are the flat K-major buffers of the ``nt`` form (FP8 only); otherwise the
    ``[sum(ks), M]`` / ``[sum(ks), N]`` operands of the ``tn`` form. ``no_c``: of
    :func:`k_grouped_fp8_gemm_tn_contiguous_no_c` (``c`` None, ``d`` not read).
    """
    a_name, sfa_name, b_name, sfb_name = _names(sfa is not None)
    num_groups, m, n = _check_k_grouped_out(d, c, no_c)
    if flat_k_major:
        ks = _check_ks(ks, num_groups)
        sum_k = sum(ks)
        _check_flat_operand(a_name, a, sum_k, m, "M")
        _check_flat_operand(b_name, b, sum_k, n, "N")
        sf_shapes = ((m, sum_k // FP8_BLOCK_K), "[M, sum(ks)/128]", (n, sum_k // FP8_BLOCK_K), "[N, sum(ks)/128]")
    else:
        check_dim(a_name, a, 2, "[sum(ks), M]")
        check_dim(b_name, b, 2, "[sum(ks), N]")
        ks = _check_ks(ks, num_groups, a_name, a.shape[0])
        sum_k = sum(ks)
        if tuple(a.shape) != (sum_k, m):
            raise ValueError(f"{a_name} must be [sum(ks), M] = {(sum_k, m)}; got shape {tuple(a.shape)}")
        if tuple(b.shape) != (sum_k, n):
            raise ValueError(f"{b_name} must be [sum(ks), N] = {(sum_k, n)}; got shape {tuple(b.shape)}")
        sf_shapes = ((sum_k // FP8_BLOCK_K, m), "[sum(ks)/128, M]", (sum_k // FP8_BLOCK_K, n), "[sum(ks)/128, N]")
    if sfa is not None:
        _check_k_grouped_sf(sfa_name, sfa, sf_shapes[0], sf_shapes[1])
        _check_k_grouped_sf(sfb_name, sfb, sf_shapes[2], sf_shapes[3])
    ks_tensor = _check_int32_vector("grouped_layout", ks_tensor, num_groups,
                                    "the same per-group K as ks_cpu, on the device")
    device = _same_device(a, sfa, b, sfb, ("d", d), ("c", c), ("grouped_layout", ks_tensor))
    # tn: a and b are [sum(ks), MN]; "row-major" there means MN-major, so K-major is the opposite.
    a_k_major = flat_k_major or not check_row_or_col_major(a_name, a)
    b_k_major = flat_k_major or not check_row_or_col_major(b_name, b)
    guard = OutputGuard((a_name, sfa_name, b_name, sfb_name, "d", "c", "ks_tensor"), (a, sfa, b, sfb, d, c, ks_tensor),
                        4, ("c",))
    if m == 0 or n == 0 or sum_k == 0:
        return _Plan(None, "none", None, device, ks=ks, copy_c=m > 0 and n > 0, guard=guard)
    desc = GemmDesc(kind, m, n, sum_k, a_k_major, b_k_major, True, not no_c, False, layout="k_grouped",
                    num_groups=num_groups)
    backend, config = choose_backend(desc, device)
    if backend == "sm90":
        # tensor layouts the desc cannot show (unaligned bases or strides, a non-row-major c): portable
        from .dispatch import _sm90_k_grouped_module

        reason = _sm90_k_grouped_module().layout_reason(desc, a, b, c, d, flat_k_major)
        if reason is not None:
            backend, config = portable_instead(desc, device, reason)
    return _Plan(desc, backend, config, device, ks=ks, guard=guard)


def _run_k_grouped(plan: _Plan, a: torch.Tensor, sfa: torch.Tensor | None, b: torch.Tensor, sfb: torch.Tensor | None,
                   c: torch.Tensor | None, d: torch.Tensor, ks_tensor: torch.Tensor, flat_k_major: bool) -> None:
    plan.guard.check((a, sfa, b, sfb, d, c, ks_tensor))
    if _reads_contents(plan.device):
        _check_ks_tensor_contents(ks_tensor, plan.ks)
    if plan.desc is None:
        if plan.copy_c:
            if c is None:
                d.zero_()
            elif c.data_ptr() != d.data_ptr():
                d.copy_(c)
        return
    if plan.backend == "sm90":
        run_sm90(f"k_grouped_{plan.desc.kind}_gemm", plan.desc, plan.config, a, sfa, b, sfb, c, d, plan.ks,
                 ks_tensor, flat_k_major)
    else:
        launch_k_grouped(a, b, c, d, ks_tensor, plan.desc.k, sfa, sfb, flat_k_major, plan.config)
    debug_sync(plan.device)


def _no_psum_ks(use_psum_layout: object) -> None:
    if as_bool("use_psum_layout", use_psum_layout):
        raise ValueError(f"use_psum_layout must be False for the k-grouped GEMMs (ks_cpu and grouped_layout give each "
                         f"group's K); got {use_psum_layout!r}")


def _k_grouped_fp8(a: object, b: object, d: torch.Tensor, ks: object, ks_tensor: object, c: torch.Tensor | None,
                   recipe: object, flat_k_major: bool, op: str) -> None:
    def validate() -> _Plan:
        a_fp8, sfa, b_fp8, sfb = _check_fp8_operands(a, b, recipe, RECIPE_1D1D, op)
        return _plan_k_grouped("fp8_1d1d", a_fp8, sfa, b_fp8, sfb, c, d, ks, ks_tensor, flat_k_major)

    plan = _lookup(_K_GROUPED_PLANS, op, True, a, b, (d, c, ks_tensor), (recipe,), validate, ks)
    _run_k_grouped(plan, a[0], a[1], b[0], b[1], c, d, ks_tensor, flat_k_major)


def k_grouped_fp8_gemm_tn_contiguous_no_c(a: Pair, b: Pair, d: torch.Tensor, ks: list[int],
                                          ks_tensor: torch.Tensor) -> None:
    """``d[g] = a_g^T @ b_g`` per group into an FP32 ``d`` whose contents are not read (no C; an empty group's
    ``d[g]`` is 0).

    For the MoE training layer's expert weight gradients into a fresh buffer: ``c=d`` on a zeroed ``d`` costs the
    zero fill and, in the kernels, a read of D. Not a DeepGEMM name (its k-grouped GEMMs take a C). ``a``, ``b``,
    ``d``, ``ks``, ``ks_tensor``: as :func:`k_grouped_fp8_gemm_tn_contiguous`'s.
    """
    op = "k_grouped_fp8_gemm_tn_contiguous_no_c"

    def validate() -> _Plan:
        a_fp8, sfa, b_fp8, sfb = _check_fp8_operands(a, b, RECIPE_1D1D, RECIPE_1D1D, op)
        return _plan_k_grouped("fp8_1d1d", a_fp8, sfa, b_fp8, sfb, None, d, ks, ks_tensor, False, no_c=True)

    plan = _lookup(_K_GROUPED_PLANS, op, True, a, b, (d, ks_tensor), (), validate, ks)
    _run_k_grouped(plan, a[0], a[1], b[0], b[1], None, d, ks_tensor, False)


def k_grouped_fp8_gemm_tn_contiguous(a: Pair, b: Pair, d: torch.Tensor, ks_cpu: list[int], grouped_layout: torch.Tensor,
                                     c: torch.Tensor | None = None, recipe: Recipe = RECIPE_1D1D,
                                     compiled_dims: str = "mn", use_psum_layout: bool = False) -> None:
    """``d[g] = c[g] + a_g^T @ b_g`` per group, FP32, with the groups concatenated along K (1d1d recipe).

    Args:
        a: ``(a_fp8, sfa)``: e4m3 (or e5m2) ``[sum(ks), M]`` (MN-major as DeepGEMM passes it; column-major
            also accepted); ``a_g = a[k_start:k_start + ks[g]]``. ``sfa`` fp32 ``[sum(ks)/128, M]``, one
            scale per channel per 128 of K, any strides (read in place, never copied).
        b: ``(b_fp8, sfb)``: ``[sum(ks), N]`` and fp32 ``[sum(ks)/128, N]`` likewise.
        d: fp32 ``[G, M, N]`` row-major.
        ks_cpu: host list of each group's K (``ks`` below): non-negative multiples of 128 (0 = empty group)
            summing to ``a``'s rows.
        grouped_layout: int32 ``[G]`` with the same values, on the device (the kernel reads it).
        c: fp32 ``[G, M, N]``, required (``c=d`` accumulates in place).
        recipe: ``(1, 1, 128)`` only. compiled_dims: accepted for DeepGEMM compatibility.
        use_psum_layout: DeepGEMM's cumulative form of ``grouped_layout``: False only (on SM90 DeepGEMM needs
            ``ks_cpu`` too).
    """
    del compiled_dims
    ks, ks_tensor = ks_cpu, grouped_layout
    _no_psum_ks(use_psum_layout)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.k_grouped(a, b, d, ks, ks_tensor, c, recipe, "tn", True)
    _k_grouped_fp8(a, b, d, ks, ks_tensor, c, recipe, False, "k_grouped_fp8_gemm_tn_contiguous")


def k_grouped_fp8_gemm_nt_contiguous(a: Pair, b: Pair, d: torch.Tensor, ks_cpu: list[int], grouped_layout: torch.Tensor,
                                     c: torch.Tensor | None = None, recipe: Recipe = RECIPE_1D1D,
                                     compiled_dims: str = "mn", use_psum_layout: bool = False) -> None:
    """``d[g] = c[g] + a_g @ b_g^T`` per group, FP32, K-major groups packed back to back (DeepGEMM's SM90 form).

    Args:
        a: ``(a_fp8, sfa)``: contiguous e4m3 (or e5m2) buffer of ``sum(ks) * M`` elements (any shape,
            usually 1-D): group g is a row-major ``[M, ks[g]]`` block starting at element
            ``sum(ks[:g]) * M``. ``sfa`` fp32 ``[M, sum(ks)/128]`` (group g's columns
            ``sum(ks[:g])/128 ...``), any strides (read in place).
        b: ``(b_fp8, sfb)``: the same with N: ``sum(ks) * N`` elements, sfb fp32 ``[N, sum(ks)/128]``.
        d: fp32 ``[G, M, N]`` row-major. ks_cpu, grouped_layout, c, recipe, use_psum_layout: as
            :func:`k_grouped_fp8_gemm_tn_contiguous`.
    """
    del compiled_dims
    ks, ks_tensor = ks_cpu, grouped_layout
    _no_psum_ks(use_psum_layout)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.k_grouped(a, b, d, ks, ks_tensor, c, recipe, "nt", True)
    _k_grouped_fp8(a, b, d, ks, ks_tensor, c, recipe, True, "k_grouped_fp8_gemm_nt_contiguous")


def k_grouped_bf16_gemm_tn_contiguous(
    a: torch.Tensor,
    b: torch.Tensor,
    d: torch.Tensor,
    ks_cpu: list[int],
    grouped_layout: torch.Tensor,
    c: torch.Tensor | None = None,
    compiled_dims: str = "mn",
    use_psum_layout: bool = False,
) -> None:
    """BF16 twin of :func:`k_grouped_fp8_gemm_tn_contiguous`: a bf16 ``[sum(ks), M]``, b bf16
    ``[sum(ks), N]`` (row- or column-major), d and c (required) fp32 ``[G, M, N]``."""
    del compiled_dims
    ks, ks_tensor = ks_cpu, grouped_layout
    _no_psum_ks(use_psum_layout)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.k_grouped(a, b, d, ks, ks_tensor, c, None, "tn", False)

    def validate() -> _Plan:
        return _plan_k_grouped("bf16", *_check_bf16_operands(a, b), c, d, ks, ks_tensor, False)

    plan = _lookup(_K_GROUPED_PLANS, "k_grouped_bf16_gemm_tn_contiguous", False, a, b, (d, c, ks_tensor), (),
                   validate, ks)
    _run_k_grouped(plan, a, None, b, None, c, d, ks_tensor, False)
