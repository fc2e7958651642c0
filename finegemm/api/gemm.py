"""Dense FP8 and BF16 GEMMs with DeepGEMM's names: ``fp8_gemm_{nt,nn,tn,tt}``, ``bf16_gemm_{nt,nn,tn,tt}``.

Layout letters follow DeepGEMM: the first is A, the second B. ``nt`` is the natural case, A ``[M, K]``
and B ``[N, K]`` (both K-major). A ``t`` for A means A is passed as ``[K, M]``; an ``n`` for B means B
is passed as ``[K, N]``; their scales are transposed alike (``[SFK, M]``, ``[SFK, SFN]``). The
``nn``/``tn``/``tt`` names transpose views and call the one ``nt`` path; any of them accepts
row- or column-major storage for each operand.

Non-finite values (every op of this module and of api/grouped.py and api/einsum.py, every backend, the CPU
interpreter included): ``d[m, n]`` is NaN when anything its sum reads is NaN: an element of row ``m`` of A or of
row ``n`` of B (e4m3 0x7F / 0xFF, e5m2 exponent 31 with a mantissa), one of their scales, or ``c[m, n]``; so a NaN
operand element poisons its whole row (A) or column (B) of ``d``, a NaN per-block scale the 128 columns of its
block. An Inf (e5m2 operands, FP32 scales, ``c``) gives Inf or NaN (Inf - Inf, Inf * 0) wherever it is read,
never a finite value. Nothing is clamped or skipped; ``calc_diff`` of such a result is NaN.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import torch

from ..jit import env
from ..jit.heuristics import GemmDesc
from ..kernels.portable.gemm_bf16 import launch_bf16_gemm
from ..kernels.portable.gemm_fp8 import launch_fp8_gemm
from ..layout import transform_sf_into_required_layout
from . import traced
from .checks import (
    FP8_DTYPES,
    OutputGuard,
    check_alpha,
    check_dim,
    check_dtype,
    check_output,
    check_row_or_col_major,
    check_same_device,
    check_tensor,
    int_tuple,
    merge_recipes,
    unpack_pair,
)
from .dispatch import _sm90_module, choose_backend, debug_sync, run_sm90
from .plan_cache import dispatch_state, new_cache, plan_for
from .plan_cache import remember as _remember
from .plan_cache import tensor_key as _key

Recipe = tuple[int, int, int]
RECIPE_1D2D: Recipe = (1, 128, 128)
RECIPE_1D1D: Recipe = (1, 1, 128)
OUT_DTYPES = (torch.bfloat16, torch.float32)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _infer_recipe(recipe: Recipe | None, sfb: torch.Tensor, n: int) -> Recipe:
    if recipe is None:
        # Per-block RHS scales have ceil(N/128) rows, per-channel ones N rows.
        rows = sfb.shape[0] if sfb.dim() == 2 else None
        if rows == _ceil_div(n, 128):
            return RECIPE_1D2D
        if rows == n:
            return RECIPE_1D1D
        raise ValueError(
            f"b[1] must hold per-block scales [ceil(N/128), K blocks] (recipe {RECIPE_1D2D}) or per-channel "
            f"scales [N, K blocks] (recipe {RECIPE_1D1D}) for N={n}; got shape {tuple(sfb.shape)} (pass recipe= "
            "to name the one meant)")
    recipe = int_tuple("recipe", recipe)
    if recipe not in (RECIPE_1D2D, RECIPE_1D1D):
        raise ValueError(f"recipe must be {RECIPE_1D2D} (per-block RHS scales) or {RECIPE_1D1D} "
                         f"(per-channel RHS scales); got {recipe}")
    return recipe


def _check_c(c: torch.Tensor | None, d: torch.Tensor, recipe: Recipe) -> None:
    if c is None:
        if recipe == RECIPE_1D1D:
            raise ValueError("c is required with recipe (1, 1, 128): it computes d = c + a @ b in FP32 "
                             "(pass c=d to accumulate in place)")
        return
    check_tensor("c", c)
    check_dtype("c", c, (torch.float32,) if recipe == RECIPE_1D1D else OUT_DTYPES)
    if tuple(c.shape) != tuple(d.shape):
        raise ValueError(f"c must have d's shape {tuple(d.shape)}; got {tuple(c.shape)}")


def fp8_gemm_nt(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    d: torch.Tensor,
    c: torch.Tensor | None = None,
    recipe: Recipe | None = None,
    recipe_a: tuple[int, int] | None = None,
    recipe_b: tuple[int, int] | None = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
    alpha: float | None = None,
) -> None:
    """``d = c + a @ b^T`` with FP8 operands, fine-grained scales and FP32 promotion every 128 of K.

    Args:
        a: ``(a_fp8, sfa)``: e4m3 (or e5m2) ``[M, K]``, row- or column-major; ``sfa`` fp32
            ``[M, ceil(K/128)]`` (any layout: transformed to MN-major TMA-aligned when it is not) or
            int32 packed UE8M0 ``[M, ceil(ceil(K/128)/4)]`` already MN-major and aligned.
        b: ``(b_fp8, sfb)``: ``[N, K]`` like ``a``; ``sfb`` fp32 ``[ceil(N/128), ceil(K/128)]`` per
            128x128 block (recipe ``(1, 128, 128)``) or ``[N, ceil(K/128)]`` per channel (recipe
            ``(1, 1, 128)``), or the packed int32 forms (same dtype as ``sfa``).
        d: output ``[M, N]`` row-major: bf16 or fp32 for ``(1, 128, 128)``, fp32 for ``(1, 1, 128)``.
        c: optional ``[M, N]`` added in FP32 (bf16/fp32; fp32 and required for ``(1, 1, 128)``; may be ``d``).
        recipe: ``(1, 128, 128)`` or ``(1, 1, 128)``; None infers it from ``sfb``'s rows.
        compiled_dims: accepted for DeepGEMM compatibility; every kernel is specialized on N and K
            and bucketed on M, whatever it says.
        disable_ue8m0_cast: accepted for DeepGEMM compatibility; FP32 scales are read as FP32 on every
            backend here and never cast to UE8M0.
        recipe_a, recipe_b: DeepGEMM 2.8's per-operand form of ``recipe`` (``(1, 128)`` and ``(128, 128)`` or
            ``(1, 128)``), instead of it.
        alpha: DeepGEMM 2.8's product multiplier: None or 1 only.

    Sizes: any M >= 0 and N >= 0 (M = 0 or N = 0 returns at once, as in DeepGEMM), any K >= 1 (partial last
    128-blocks of K and N are fine); the sm90 fast path takes K-major operands with K % 128 == 0 and rows of ``d``
    16-byte aligned for its TMA store (N % 8 == 0 for bf16 ``d``, N % 4 == 0 for fp32 ``d``) and
    falls back to the portable kernels otherwise.
    """
    del compiled_dims, disable_ue8m0_cast
    if recipe_a is not None or recipe_b is not None:
        recipe = merge_recipes(recipe, recipe_a, recipe_b)
    if alpha is not None:
        check_alpha(alpha)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.fp8_gemm_nt(a, b, d, c, recipe)
    try:
        a_fp8, sfa = a
        b_fp8, sfb = b
        # One flat key, read once: the six data pointers, then the call signature (plan_cache.tensor_key
        # of each tensor, inlined: a call per tensor costs ~0.1 us of a ~10 us budget; recipe; dispatch
        # state). key[6:] keys the validated plan; the whole key keys the sm90 recording of this exact
        # launch, which covers everything the recording encodes (sm90/dispatch.py's key is a subset).
        key = (a_fp8.data_ptr(), sfa.data_ptr(), b_fp8.data_ptr(), sfb.data_ptr(), d.data_ptr(),
               None if c is None else c.data_ptr(),
               a_fp8.shape, a_fp8.stride(), a_fp8.dtype, a_fp8.device,
               sfa.shape, sfa.stride(), sfa.dtype, sfa.device,
               b_fp8.shape, b_fp8.stride(), b_fp8.dtype, b_fp8.device,
               sfb.shape, sfb.stride(), sfb.dtype, sfb.device,
               d.shape, d.stride(), d.dtype, d.device,
               None if c is None else (c.shape, c.stride(), c.dtype, c.device),
               recipe, dispatch_state())
        recording = _FP8_RECORDINGS.get(key)
    except (TypeError, ValueError, AttributeError, RuntimeError):  # not tensors, unhashable recipe, ...
        key, recording = None, None
    # The decode hot path: this signature was validated (it is in the key) and launched at these
    # addresses; the recording replays it, or returns False (a launch hook, another current device)
    # and the call takes the path below.
    if recording is not None and recording():
        return
    plan = None if key is None else _FP8_PLANS.get(key[6:])
    if plan is None:
        plan = _plan_fp8(a, b, d, c, recipe)
        if key is not None:
            _remember(_FP8_PLANS, key[6:], plan)
        a_fp8, sfa = a
        b_fp8, sfb = b
    # d must not overlap an input: key[:6] are the six data pointers, in the guard's order
    plan.guard.check((a_fp8, sfa, b_fp8, sfb, d, c), key)
    if plan.sm90_direct:  # nothing to lay out, one sm90 launch (recorded for the hot path above)
        recording = _sm90_module().fp8_gemm(plan.desc, plan.config, a_fp8, sfa, b_fp8, sfb, d, c)
        if recording is not None and key is not None and not env.flag(env.DEBUG):
            _remember(_FP8_RECORDINGS, key, recording)
        debug_sync(plan.device)
        return
    _run_fp8(plan, a_fp8, sfa, b_fp8, sfb, d, c)


def _run_fp8(plan: _Plan, a_fp8, sfa, b_fp8, sfb, d, c) -> None:
    """Run a validated FP8 plan other than the recorded sm90 fast path: scale layouts, empty K, either backend."""
    if plan.desc is None:
        return
    if not plan.sfa_ready:
        sfa = transform_sf_into_required_layout(sfa, plan.desc.m, plan.desc.k, plan.recipe, is_sfa=True)
    if not plan.sfb_ready:
        sfb = transform_sf_into_required_layout(sfb, plan.desc.n, plan.desc.k, plan.recipe, is_sfa=False)
    if plan.desc.k == 0:
        if plan.desc.head_splits is not None:
            _zero_head_columns(d, plan.desc.head_splits)
        else:
            d.copy_(c if c is not None else torch.zeros_like(d))
    elif plan.backend == "sm90":
        run_sm90("fp8_gemm", plan.desc, plan.config, a_fp8, sfa, b_fp8, sfb, d, c)
    else:
        launch_fp8_gemm(a_fp8, sfa, b_fp8, sfb, d, c, plan.recipe == RECIPE_1D2D, plan.config,
                        plan.desc.head_splits)
    debug_sync(plan.device)


@dataclass(frozen=True)
class _Plan:
    """What one call signature resolved to; reused while shapes, strides, dtypes and devices repeat."""

    desc: GemmDesc | None  # None: M == 0, nothing to do
    recipe: Recipe
    backend: str
    config: Any
    device: torch.device
    sfa_ready: bool = True  # scales already in the required layout (path B): passed as they are
    sfb_ready: bool = True
    guard: OutputGuard | None = None  # d against the inputs, per call on the data pointers (checks.OutputGuard)
    sm90_direct: bool = field(init=False, repr=False)  # sm90, M > 0, K > 0, both scales ready

    def __post_init__(self) -> None:
        object.__setattr__(self, "sm90_direct", self.backend == "sm90" and self.desc is not None
                           and self.desc.k > 0 and self.sfa_ready and self.sfb_ready)


# Validation and dispatch cost tens of microseconds of Python; decode-sized GEMMs take about as much on
# the GPU, so each distinct call signature is validated once and its plan replayed (see plan_cache).
_FP8_PLANS: dict[tuple, _Plan] = new_cache()
_BF16_PLANS: dict[tuple, _Plan] = new_cache()
# Full key of fp8_gemm_nt (pointers + signature) -> the launcher.Recording that sm90/dispatch.py made for
# it. Recordings hold no tensor; with FINEGEMM_DEBUG set (part of dispatch_state) nothing is stored here.
_FP8_RECORDINGS: dict[tuple, Any] = new_cache()
# The same for bf16_gemm_nt (sm90/dispatch_bf16.py's recordings)
_BF16_RECORDINGS: dict[tuple, Any] = new_cache()


def _plan_fp8(a, b, d, c, recipe, head_splits: tuple[int, int, int] | None = None, no_c: bool = False) -> _Plan:
    """Validate every argument of :func:`fp8_gemm_nt` (with ``head_splits``: of
    :func:`fp8_gemm_nt_skip_head_mid`, whose ``d`` is wider; ``no_c``: of :func:`fp8_gemm_nt_1d1d_no_c`, recipe
    (1, 1, 128) without C) and resolve backend and config."""
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)
    check_dtype("a[0]", a_fp8, FP8_DTYPES)
    check_dtype("b[0]", b_fp8, FP8_DTYPES)
    check_dim("a[0]", a_fp8, 2, "[M, K]")
    check_dim("b[0]", b_fp8, 2, "[N, K]")
    m, k = a_fp8.shape
    n = b_fp8.shape[0]
    if b_fp8.shape[1] != k:
        raise ValueError(f"b[0] must be [N, K] with a's K={k}; got shape {tuple(b_fp8.shape)}")
    recipe = _infer_recipe(recipe, sfb, n)
    if head_splits is None:
        check_output("d", d, (m, n), (torch.float32,) if recipe == RECIPE_1D1D else OUT_DTYPES)
        if not no_c:
            _check_c(c, d, recipe)
    else:
        _check_head_output(d, head_splits, m, n, recipe)
    device = check_same_device(
        [("a[0]", a_fp8), ("a[1]", sfa), ("b[0]", b_fp8), ("b[1]", sfb), ("d", d), ("c", c)]
    )
    if sfa.dtype != sfb.dtype:
        raise TypeError(
            f"a[1] and b[1] must both be float32 or both int32 packed UE8M0; got {sfa.dtype} and {sfb.dtype}"
        )
    a_k_major = check_row_or_col_major("a[0]", a_fp8)
    b_k_major = check_row_or_col_major("b[0]", b_fp8)
    sfa_ready = transform_sf_into_required_layout(sfa, m, k, recipe, is_sfa=True, name="a[1]") is sfa
    sfb_ready = transform_sf_into_required_layout(sfb, n, k, recipe, is_sfa=False, name="b[1]") is sfb
    guard = OutputGuard(_FP8_NAMES, (a_fp8, sfa, b_fp8, sfb, d, c), 4, ("c",))
    if m == 0 or n == 0:
        return _Plan(None, recipe, "none", None, device, guard=guard)
    desc = GemmDesc(
        "fp8_1d2d" if recipe == RECIPE_1D2D else "fp8_1d1d", m, n, k, a_k_major, b_k_major,
        d.dtype == torch.float32, c is not None, sfa.dtype == torch.int32, head_splits=head_splits,
    )
    backend, config = choose_backend(desc, device) if k > 0 else ("none", None)
    return _Plan(desc, recipe, backend, config, device, sfa_ready, sfb_ready, guard)


_FP8_NAMES = ("a[0]", "a[1]", "b[0]", "b[1]", "d", "c")


_FP8_NO_C_PLANS: dict[tuple, _Plan] = new_cache()


def fp8_gemm_nt_1d1d_no_c(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
                          d: torch.Tensor) -> None:
    """``d = a @ b^T`` with recipe (1, 1, 128) into an FP32 ``d`` whose contents are not read (no C).

    For the training layers' weight gradient into a fresh buffer: ``fp8_gemm_nt(a, b, d, c=d)`` on a zeroed ``d``
    costs the zero fill and, in the kernel, a read of D. Not a DeepGEMM name (its recipe (1, 1, 128) takes a C).
    ``a``, ``b``, ``d``: as :func:`fp8_gemm_nt`'s for recipe (1, 1, 128) (``d`` fp32 ``[M, N]``, row-major).
    """
    plan = plan_for(_FP8_NO_C_PLANS, lambda: (_key(a[0]), _key(a[1]), _key(b[0]), _key(b[1]), _key(d),
                                              dispatch_state()),
                    lambda: _plan_fp8(a, b, d, None, RECIPE_1D1D, no_c=True))
    a_fp8, sfa = a
    b_fp8, sfb = b
    plan.guard.check((a_fp8, sfa, b_fp8, sfb, d, None))
    _run_fp8(plan, a_fp8, sfa, b_fp8, sfb, d, None)


def fp8_gemm_nt_skip_head_mid(
    a: tuple[torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor, torch.Tensor],
    d: torch.Tensor,
    head_splits: tuple[int, int, int],
    recipe: Recipe | None = None,
    compiled_dims: str = "nk",
    disable_ue8m0_cast: bool = False,
) -> None:
    """``a @ b^T`` written into ``d`` with a gap of ``mid`` columns inside every head (DeepGEMM's name).

    B's rows are heads of ``left + right`` output channels each (``head_splits = (left, mid, right)``); in
    ``d`` every head takes ``left + mid + right`` columns: its first ``left`` results, then ``mid``
    columns this call leaves untouched (e.g. the rotary part a later kernel fills), then its last
    ``right``. So GEMM column ``n`` of head ``h = n // (left + right)`` lands in column
    ``n + (h + (n % (left + right) >= left)) * mid``.

    Args:
        a, b: as :func:`fp8_gemm_nt`, with ``b[0]`` ``[N, K]``, ``N`` a multiple of ``left + right``.
        d: bf16 or fp32 ``[M, N + N / (left + right) * mid]``, row-major.
        head_splits: ``(left, mid, right)`` ints, ``left`` and ``right`` > 0, ``mid`` >= 0 (0: a plain
            :func:`fp8_gemm_nt`).
        recipe: ``(1, 128, 128)`` (per-block RHS scales) only; None infers it from ``b[1]``.
        compiled_dims, disable_ue8m0_cast: accepted for DeepGEMM compatibility, as in :func:`fp8_gemm_nt`.

    No ``c``: the gap columns keep whatever ``d`` held. The sm90 kernel runs it where ``left`` and
    ``right`` are multiples of 32 (every tile lands on consecutive columns), else the portable kernel.
    """
    del compiled_dims, disable_ue8m0_cast
    head_splits = _check_head_splits(head_splits)
    if torch.compiler.is_compiling():
        return traced.fp8_gemm_nt_skip_head_mid(a, b, d, head_splits, recipe)
    if head_splits[1] == 0:
        return fp8_gemm_nt(a, b, d, None, recipe)
    plan = plan_for(_HEAD_PLANS,
                    lambda: (_key(a[0]), _key(a[1]), _key(b[0]), _key(b[1]), _key(d), head_splits, recipe,
                             dispatch_state()),
                    lambda: _plan_fp8(a, b, d, None, recipe, head_splits))
    plan.guard.check((a[0], a[1], b[0], b[1], d, None))
    _run_fp8(plan, a[0], a[1], b[0], b[1], d, None)


_HEAD_PLANS: dict[tuple, _Plan] = new_cache()


def _check_head_splits(head_splits: object) -> tuple[int, int, int]:
    if (not isinstance(head_splits, (tuple, list)) or len(head_splits) != 3
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in head_splits)):
        raise TypeError(f"head_splits must be three ints (left, mid, right); got {head_splits!r}")
    left, mid, right = map(int, head_splits)
    if left <= 0 or right <= 0 or mid < 0:
        raise ValueError("head_splits (left, mid, right) needs left > 0, right > 0 and mid >= 0; "
                         f"got {tuple(head_splits)}")
    return left, mid, right


def _check_head_output(d: torch.Tensor, head_splits: tuple[int, int, int], m: int, n: int, recipe: Recipe) -> None:
    left, mid, right = head_splits
    if recipe != RECIPE_1D2D:
        raise ValueError(f"fp8_gemm_nt_skip_head_mid runs recipe {RECIPE_1D2D} (per-block RHS scales); got {recipe}")
    if n % (left + right):
        raise ValueError(f"b[0] has N={n} rows, not a whole number of heads of left + right = {left + right} "
                         f"(head_splits {head_splits})")
    check_output("d", d, (m, n + n // (left + right) * mid), OUT_DTYPES)


def _zero_head_columns(d: torch.Tensor, head_splits: tuple[int, int, int]) -> None:
    """Zero the columns of ``d`` a head-split GEMM writes (K = 0), leaving each head's gap as it is."""
    left, mid, right = head_splits
    heads = d.unflatten(1, (-1, left + mid + right))
    heads[..., :left].zero_()
    heads[..., left + mid:].zero_()


def _t(pair: tuple[torch.Tensor, torch.Tensor], name: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, sf = unpack_pair(name, pair)
    if x.dim() != 2 or sf.dim() != 2:
        raise ValueError(f"{name} must hold 2-D tensors; got shapes {tuple(x.shape)} and {tuple(sf.shape)}")
    return x.T, sf.T


def fp8_gemm_nn(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="nk",
                disable_ue8m0_cast=False, alpha=None) -> None:
    """``d = c + a @ b`` with a ``(e4m3 [M, K], sf [M, SFK])`` and b ``(e4m3 [K, N], sf [SFK, SFN])``."""
    fp8_gemm_nt(a, _t(b, "b"), d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha)


def fp8_gemm_tn(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="mn",
                disable_ue8m0_cast=False, alpha=None) -> None:
    """``d = c + a^T @ b`` with a ``(e4m3 [K, M], sf [SFK, M])`` and b ``(e4m3 [K, N], sf [SFK, SFN])``."""
    fp8_gemm_nt(_t(a, "a"), _t(b, "b"), d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha)


def fp8_gemm_tt(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims="mn",
                disable_ue8m0_cast=False, alpha=None) -> None:
    """``d = c + a^T @ b^T`` with a ``(e4m3 [K, M], sf [SFK, M])`` and b ``(e4m3 [N, K], sf [SFN, SFK])``."""
    fp8_gemm_nt(_t(a, "a"), b, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha)


def bf16_gemm_nt(
    a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None = None, compiled_dims: str = "nk",
    alpha: float | None = None,
) -> None:
    """``d = c + a @ b^T`` in FP32 accumulation.

    a: bf16 ``[M, K]``; b: bf16 ``[N, K]`` (each row- or column-major); d: bf16 or fp32 ``[M, N]``
    row-major; c: optional bf16/fp32 ``[M, N]`` (may be ``d``). Any M >= 0, N >= 0, K >= 0 (M = 0 or N = 0: nothing
    to do, as in DeepGEMM).

    On sm_90 the Gluon kernel (kernels/sm90/gemm_bf16.py) runs every layout whose rows TMA can
    address: K % 8 == 0 for a K-major operand, M % 8 == 0 / N % 8 == 0 for an MN-major A / B, and
    16-byte rows of ``d`` (N % 8 for bf16, N % 4 for fp32); other shapes run the portable kernel
    (``FINEGEMM_BACKEND=sm90`` raises ``BackendError`` for them instead). One-row calls with a K-major B (decode)
    run a Triton GEMV there at any alignment (kernels/sm90/gemv_bf16.py). ``alpha`` (DeepGEMM 2.8): None or 1.
    """
    del compiled_dims
    if alpha is not None:
        check_alpha(alpha)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.bf16_gemm_nt(a, b, d, c)
    try:
        # As fp8_gemm_nt: the data pointers, then the call signature; key[4:] keys the validated plan, the
        # whole key the sm90 recording of this exact launch (a superset of dispatch_bf16's key).
        key = (a.data_ptr(), b.data_ptr(), d.data_ptr(), None if c is None else c.data_ptr(),
               _key(a), _key(b), _key(d), _key(c), dispatch_state())
        recording = _BF16_RECORDINGS.get(key)
    except (TypeError, AttributeError, RuntimeError):
        key, recording = None, None
    if recording is not None and recording():
        return
    plan = None if key is None else _BF16_PLANS.get(key[4:])
    if plan is None:
        plan = _plan_bf16(a, b, d, c)
        if key is not None:
            _remember(_BF16_PLANS, key[4:], plan)
    plan.guard.check((a, b, d, c), key)  # key[:4]: the data pointers, in the guard's order
    if plan.desc is None:
        return
    if plan.desc.k == 0:
        d.copy_(c if c is not None else torch.zeros_like(d))
    elif plan.backend == "sm90":
        recording = _sm90_module().bf16_gemm(plan.desc, plan.config, a, b, d, c)
        if recording is not None and key is not None and not env.flag(env.DEBUG):
            _remember(_BF16_RECORDINGS, key, recording)
    else:
        launch_bf16_gemm(a, b, d, c, plan.config)
    debug_sync(plan.device)


def _plan_bf16(a, b, d, c) -> _Plan:
    """Validate every argument of :func:`bf16_gemm_nt` and resolve backend and config."""
    check_tensor("a", a)
    check_tensor("b", b)
    check_dtype("a", a, (torch.bfloat16,))
    check_dtype("b", b, (torch.bfloat16,))
    check_dim("a", a, 2, "[M, K]")
    check_dim("b", b, 2, "[N, K]")
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise ValueError(f"b must be [N, K] with a's K={k}; got shape {tuple(b.shape)}")
    check_output("d", d, (m, n), OUT_DTYPES)
    _check_c(c, d, RECIPE_1D2D)
    device = check_same_device([("a", a), ("b", b), ("d", d), ("c", c)])
    a_k_major = check_row_or_col_major("a", a)
    b_k_major = check_row_or_col_major("b", b)
    guard = OutputGuard(("a", "b", "d", "c"), (a, b, d, c), 2, ("c",))
    if m == 0 or n == 0:
        return _Plan(None, RECIPE_1D2D, "none", None, device, guard=guard)
    # C a kernel may stage like D: D's dtype, row-major, rows that do not overlap (not a broadcast bias)
    c_like_d = (c is not None and c.dtype == d.dtype and c.stride(-1) == 1 and (m == 1 or c.stride(-2) >= n))
    desc = GemmDesc("bf16", m, n, k, a_k_major, b_k_major, d.dtype == torch.float32, c is not None,
                    c_like_d=c_like_d)
    backend, config = choose_backend(desc, device) if k > 0 else ("none", None)
    return _Plan(desc, RECIPE_1D2D, backend, config, device, guard=guard)


def bf16_gemm_nn(a, b, d, c=None, compiled_dims="nk", alpha=None) -> None:
    """``d = c + a @ b`` with a bf16 ``[M, K]`` and b bf16 ``[K, N]``."""
    bf16_gemm_nt(a, check_tensor("b", b).T, d, c, compiled_dims, alpha)


def bf16_gemm_tn(a, b, d, c=None, compiled_dims="mn", alpha=None) -> None:
    """``d = c + a^T @ b`` with a bf16 ``[K, M]`` and b bf16 ``[K, N]``."""
    bf16_gemm_nt(check_tensor("a", a).T, check_tensor("b", b).T, d, c, compiled_dims, alpha)


def bf16_gemm_tt(a, b, d, c=None, compiled_dims="mn", alpha=None) -> None:
    """``d = c + a^T @ b^T`` with a bf16 ``[K, M]`` and b bf16 ``[N, K]``."""
    bf16_gemm_nt(check_tensor("a", a).T, b, d, c, compiled_dims, alpha)
