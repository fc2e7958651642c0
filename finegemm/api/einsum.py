"""``einsum`` and ``fp8_einsum``: DeepGEMM's hard-coded Einstein sums (MLA's per-head projections).

Each expression is a batched GEMM over permuted views of its tensors (no copies), run by the portable
batched kernel (kernels/portable/batched.py; on Hopper its ``tl.dot`` lowers to WGMMA):

==================  ==========================================  =====================================
expression          computes                                    batched GEMM ``[G, M, K] x [G, N, K]``
==================  ==========================================  =====================================
``bmk,bnk->mn``     ``d = c + sum_b a[b] @ b[b]^T``              G = b summed into one ``[m, n]``
``bhr,hdr->bhd``    ``d[:, h] = a[:, h] @ b[h]^T``               G = h, M = b, N = d, K = r
``bhd,hdr->bhr``    ``d[:, h] = a[:, h] @ b[h]``                 G = h, M = b, N = r, K = d
``bhd,bhr->hdr``    ``d[h] = c[h] + a[:, h]^T @ b[:, h]``        G = h, M = d, N = r, K = b (tokens)
==================  ==========================================  =====================================

``fp8_einsum`` takes the two per-head expressions ``bhr,hdr->bhd`` and ``bhd,hdr->bhr`` with FP8 operands:
``a = (e4m3 [B, H, K'], fp32 [B, H, ceil(K'/128)])`` scaled per token and 128 of its last dim, ``b = (e4m3
[H, D, R], fp32 [H, ceil(D/128), ceil(R/128)])`` scaled per 128x128 block of each head's ``[D, R]`` matrix
(``per_block_cast_to_fp8`` of ``b[h]``), FP32 promotion every 128 of K.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..jit import env
from ..jit.cache import report_config
from ..jit.device import device_facts
from ..jit.heuristics import GemmDesc, get_portable_config
from ..kernels.portable.batched import batched_launch
from ..kernels.sm90 import launcher
from ..layout import transform_sf_into_required_layout
from . import traced
from .checks import (
    E4M3,
    OutputGuard,
    check_dtype,
    check_output_memory,
    check_same_device,
    check_tensor,
    int_tuple,
    unpack_pair,
)
from .dispatch import _sm90_bf16_grouped_module, _sm90_grouped_module, check_device_usable, debug_sync
from .plan_cache import dispatch_state, new_cache, plan_and_key, tensor_key

EXPRESSIONS = ("bmk,bnk->mn", "bhr,hdr->bhd", "bhd,hdr->bhr", "bhd,bhr->hdr")
# The per-head expressions on the sm90 grouped kernels (GROUPING 3 of kernels/sm90/gemm_bf16.py, and of the
# gemm_1d2d package for fp8_einsum's bhr,hdr->bhd; A and D read and written in place) instead of the batched
# Triton kernel, where head_batched_wanted says so. None: that measured rule; True / False force the head-batched
# plans on / off (tests, the baselines of results/einsum-bench-h200-2026-12-05-ea2067b.json).
HEAD_BATCHED_SM90: bool | None = None
# Tokens a head from which bhr,hdr->bhd (BF16 and FP8) takes the head-batched kernel: H200, 128 heads, r = 512,
# d = 128, us Triton / head-batched (results/einsum-bench-h200-2026-12-05-ea2067b.json): FP8 13.6 / 15.9 at 128
# tokens, 22.0 / 20.3 at 256, 37.7 / 27.8 at 512; BF16 17.2 / 17.8 at 128, 25.1 / 24.9 at 256, 40.7 / 38.2 at 512
HEAD_BATCHED_MIN_TOKENS = 256
HEAD_EXPRESSIONS = ("bhr,hdr->bhd", "bhd,hdr->bhr")
FP8_EXPRESSIONS = HEAD_EXPRESSIONS  # fp8_einsum takes the per-head expressions
OUT_DTYPES = (torch.bfloat16, torch.float32)
FP8_RECIPE = (1, 128, 128)


def einsum(expr: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None = None,
           use_cublaslt: bool = False) -> None:
    """``d = c + einsum(expr, a, b)`` for bf16 ``a`` and ``b`` (module docstring lists the expressions).

    ``d``: bf16 or fp32 of the expression's output shape; ``c``: optional, ``d``'s shape, bf16 or fp32 (may be
    ``d`` itself, to accumulate). Any strides. ``use_cublaslt`` is accepted for DeepGEMM compatibility: the
    Triton kernel runs every expression.
    """
    del use_cublaslt
    if torch.compiler.is_compiling():
        return traced.einsum(expr, a, b, d, c)

    def validate() -> _Plan:
        _check_expr("einsum", expr, EXPRESSIONS)
        for name, t in (("a", a), ("b", b)):
            check_tensor(name, t)
            check_dtype(name, t, (torch.bfloat16,))
        return _plan(expr, a, b, d, c, None, None)

    _run(validate, expr, a, b, d, c, None, None)


def fp8_einsum(expr: str, a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor],
               d: torch.Tensor, c: torch.Tensor | None = None, recipe: tuple[int, int, int] = FP8_RECIPE) -> None:
    """``d = c + einsum(expr, a, b)`` with FP8 operands and fine-grained scales (module docstring).

    ``expr``: ``bhr,hdr->bhd`` or ``bhd,hdr->bhr``; ``d``: bf16 or fp32; ``c``: optional like ``d``;
    ``recipe``: ``(1, 128, 128)`` only.
    """
    if torch.compiler.is_compiling():
        return traced.fp8_einsum(expr, a, b, d, c, recipe)
    a_fp8, sfa = unpack_pair("a", a)
    b_fp8, sfb = unpack_pair("b", b)

    def validate() -> _Plan:
        _check_expr("fp8_einsum", expr, FP8_EXPRESSIONS)
        if int_tuple("recipe", recipe) != FP8_RECIPE:
            raise ValueError(f"fp8_einsum: recipe must be {FP8_RECIPE} (per-token a, per-block b); got {recipe!r}")
        check_dtype("a[0]", a_fp8, E4M3)
        check_dtype("b[0]", b_fp8, E4M3)
        check_dtype("a[1]", sfa, (torch.float32,))
        check_dtype("b[1]", sfb, (torch.float32,))
        return _plan(expr, a_fp8, b_fp8, d, c, sfa, sfb)

    _run(validate, expr, a_fp8, b_fp8, d, c, sfa, sfb, recipe)


@dataclass(frozen=True)
class _Plan:
    """What one call signature resolved to: nothing to do, ``d = c`` (or 0), or a launch with this config."""

    expr: str
    action: str  # "none", "fill" or "launch"
    config: Any = None
    device: torch.device | None = None
    sm90: Any = None  # (desc, config) of the head-batched sm90 kernel (head_batched_wanted), tried first
    guard: OutputGuard | None = None  # d against the inputs (a, b, d, c, sfa, sfb), per call (checks.OutputGuard)


# signature -> _Plan (validation once a signature, plan_cache); (signature, pointers) -> the recorded launch
_PLANS: dict[tuple, _Plan] = new_cache()
_RECORDINGS: dict[tuple, Any] = launcher.new_recordings()
MAX_RECORDINGS = 1024


def _run(validate, expr, a, b, d, c, sfa, sfb, recipe=None) -> None:
    """Validate the call's signature once (its plan is kept), then run the plan; a launch is recorded under the
    signature and the data pointers and replayed through Triton's C launcher on later calls (launcher.py)."""
    def make_key() -> tuple:
        return (expr, recipe if recipe is None else tuple(recipe), tensor_key(a), tensor_key(b), tensor_key(d),
                tensor_key(c), tensor_key(sfa), tensor_key(sfb), dispatch_state())

    plan, sig = plan_and_key(_PLANS, make_key, validate)
    plan.guard.check((a, b, d, c, sfa, sfb))
    if plan.action == "none":
        return
    if plan.action == "fill":
        d.copy_(c if c is not None else torch.zeros_like(d))
        return

    if plan.sm90 is not None and _run_sm90_heads(plan, a, b, d, sfa, sfb):
        debug_sync(plan.device)
        return

    def build() -> list:
        av, bv, dv, cv, sfav, sfbv, sum_batches = _batched_views(plan.expr, a, b, d, c, sfa, sfb)
        return [batched_launch(av, bv, dv, cv, plan.config, sfav, sfbv, sum_batches)]

    if sig is None or plan.device.type != "cuda":  # recordings replay CUDA launches only
        launcher.launch_normally(build())
    else:
        ptrs = tuple(None if t is None else t.data_ptr() for t in (a, b, d, c, sfa, sfb))
        launcher.replay_or_record(_RECORDINGS, (sig, ptrs), build, MAX_RECORDINGS)
    debug_sync(plan.device)


def _check_expr(fn: str, expr: object, supported: tuple[str, ...]) -> None:
    if not isinstance(expr, str) or expr.replace(" ", "") not in supported:
        raise ValueError(f"{fn}: expression {expr!r} is not supported; supported: {', '.join(supported)}")


def _sizes(expr: str, a: torch.Tensor, b: torch.Tensor) -> dict[str, int]:
    """Size of each index letter, checked across ``a`` and ``b``."""
    lhs, _ = expr.split("->")
    sizes: dict[str, int] = {}
    for name, t, letters in (("a", a, lhs.split(",")[0]), ("b", b, lhs.split(",")[1])):
        if t.dim() != len(letters):
            raise ValueError(f"{name} must be {len(letters)}-D [{', '.join(letters)}] for {expr!r}; "
                             f"got shape {tuple(t.shape)}")
        for letter, size in zip(letters, t.shape):
            if sizes.setdefault(letter, size) != size:
                raise ValueError(f"{name} has {letter}={size} but a has {letter}={sizes[letter]} in {expr!r} "
                                 f"(a {tuple(a.shape)}, b {tuple(b.shape)})")
    return sizes


def _check_scales(expr: str, sizes: dict[str, int], sfa: torch.Tensor, sfb: torch.Tensor) -> None:
    k_letter = "r" if expr == "bhr,hdr->bhd" else "d"
    want_a = (sizes["b"], sizes["h"], -(-sizes[k_letter] // 128))
    want_b = (sizes["h"], -(-sizes["d"] // 128), -(-sizes["r"] // 128))
    if tuple(sfa.shape) != want_a:
        raise ValueError(f"a[1] must be [b, h, ceil({k_letter}/128)] = {want_a} (per token and 128 of {k_letter}); "
                         f"got {tuple(sfa.shape)}")
    if tuple(sfb.shape) != want_b:
        raise ValueError(f"b[1] must be [h, ceil(d/128), ceil(r/128)] = {want_b} (per 128x128 block of each "
                         f"head); got {tuple(sfb.shape)}")


def _batched_views(expr: str, a, b, d, c, sfa, sfb):
    """(A [G, M, K], B [G, N, K], D [G, M, N], C, sfa [G, M, KB], sfb [G, NB, KB], sum over G) for ``expr``."""
    def heads_first(t):
        return None if t is None else t.permute(1, 0, 2)

    if expr == "bmk,bnk->mn":
        return a, b, d.unsqueeze(0), None if c is None else c.unsqueeze(0), None, None, True
    if expr == "bhr,hdr->bhd":
        return heads_first(a), b, heads_first(d), heads_first(c), heads_first(sfa), sfb, False
    if expr == "bhd,hdr->bhr":
        sfb_t = None if sfb is None else sfb.permute(0, 2, 1)
        return heads_first(a), b.permute(0, 2, 1), heads_first(d), heads_first(c), heads_first(sfa), sfb_t, False
    # bhd,bhr->hdr
    return a.permute(1, 2, 0), b.permute(1, 2, 0), d, c, None, None, False


def _plan(expr, a, b, d, c, sfa, sfb) -> _Plan:
    """Check every argument of a validated expression's call and resolve its plan."""
    expr = expr.replace(" ", "")
    sizes = _sizes(expr, a, b)
    out_shape = tuple(sizes[letter] for letter in expr.split("->")[1])
    check_tensor("d", d)
    check_dtype("d", d, OUT_DTYPES)
    if tuple(d.shape) != out_shape:
        raise ValueError(f"d must have shape {out_shape} ([{', '.join(expr.split('->')[1])}]) for {expr!r}; "
                         f"got {tuple(d.shape)}")
    if c is not None:
        check_tensor("c", c)
        check_dtype("c", c, OUT_DTYPES)
        if tuple(c.shape) != out_shape:
            raise ValueError(f"c must have d's shape {out_shape}; got {tuple(c.shape)}")
    if sfa is not None:
        _check_scales(expr, sizes, sfa, sfb)
    device = check_same_device([("a", a), ("b", b), ("d", d), ("c", c), ("a[1]", sfa), ("b[1]", sfb)])
    check_device_usable(device)
    check_output_memory("d", d)
    names = ("a", "b") if sfa is None else ("a[0]", "b[0]")
    guard = OutputGuard((*names, "d", "c", "a[1]", "b[1]"), (a, b, d, c, sfa, sfb), 2, ("c",))
    av, bv = _batched_views(expr, a, b, d, c, sfa, sfb)[:2]
    g, m, k = av.shape
    n = bv.shape[1]
    if d.numel() == 0:
        return _Plan(expr, "none", guard=guard)
    if k == 0 or g == 0:  # nothing to sum: d = c (or 0)
        return _Plan(expr, "fill", guard=guard)
    desc = GemmDesc("fp8_1d2d" if sfa is not None else "bf16", m, n, k, out_fp32=d.dtype == torch.float32,
                    with_c=c is not None)
    config = get_portable_config(desc, device_facts(device))
    sm90 = _sm90_head_plan(expr, a, b, d, c, sfa, device, (g, m, n, k))
    report_config(desc, f"{'sm90 head-batched' if sm90 else 'portable batched'} ({expr}, G={g})",
                  sm90[1] if sm90 else config)
    return _Plan(expr, "launch", config, device, sm90, guard)


def _head_views(expr, a, b, d) -> tuple | None:
    """(A ``[b, h * K]``, B ``[h * N, K]`` or N-major ``[h * K, N]``, D ``[b, h * N]``, B N-major) as in-place 2-D views
    for the head-batched sm90 kernel, or None where the strides do not allow it."""
    bsz, h, k = a.shape
    n = d.shape[2]
    if a.stride(2) != 1 or a.stride(1) != k or d.stride(2) != 1 or d.stride(1) != n:
        return None
    mn_major = expr == "bhd,hdr->bhr"  # b [h, K = d, N = r]
    rows, cols = (k, n) if mn_major else (n, k)
    if b.stride(2) != 1 or b.stride(1) != cols or b.stride(0) != rows * cols:
        return None
    a2 = a.as_strided((bsz, h * k), (a.stride(0), 1))
    d2 = d.as_strided((bsz, h * n), (d.stride(0), 1))
    return a2, b.as_strided((h * rows, cols), (cols, 1)), d2, mn_major


def head_batched_wanted(expr: str, fp8: bool, tokens: int) -> bool:
    """Whether a per-head einsum of ``tokens`` rows a head goes to the head-batched sm90 kernel rather than the
    batched Triton kernel (where both can run it), as measured on the H200 (commit 38dd6d8): BF16 ``bhd,hdr->bhr``
    always (14.1 / 14.1 us at 64 tokens, 65.9 / 41.9 at 512, 438.0 / 285.5 at 4096), ``bhr,hdr->bhd`` from
    ``HEAD_BATCHED_MIN_TOKENS`` (below it the Triton kernel's one launch of small tiles wins by 3-30 %).
    ``HEAD_BATCHED_SM90`` True / False overrides the rule."""
    if HEAD_BATCHED_SM90 is not None:
        return HEAD_BATCHED_SM90
    return (expr == "bhd,hdr->bhr" and not fp8) or tokens >= HEAD_BATCHED_MIN_TOKENS


def _sm90_head_plan(expr, a, b, d, c, sfa, device, gmnk) -> tuple | None:
    """The head-batched sm90 kernel's (desc, config) for this call, or None (not wanted by
    :func:`head_batched_wanted`, not sm_90, a C, an FP32 D, strides it cannot view in place, sizes its tiles do not
    divide, or FP8 with an N-major B, which FP8 WGMMA cannot read)."""
    if not (head_batched_wanted(expr, sfa is not None, gmnk[1]) and expr in HEAD_EXPRESSIONS and c is None
            and d.dtype == torch.bfloat16 and env.backend() != "portable"):
        return None
    facts = device_facts(device)
    module = _sm90_bf16_grouped_module() if sfa is None else _sm90_grouped_module()
    views = _head_views(expr, a, b, d)
    if not facts.is_sm90 or module is None or views is None or (sfa is not None and views[3]):
        return None
    g, m, n, k = gmnk
    got = module.head_batched_plan(m, n, k, g, views[3], facts) if sfa is None else \
        module.head_batched_plan(m, n, k, g, facts)
    return None if isinstance(got, str) else got


def _run_sm90_heads(plan: _Plan, a, b, d, sfa, sfb) -> bool:
    """Launch ``plan``'s head-batched sm90 kernel; False where the views' addresses keep TMA out (nothing ran)."""
    a2, b2, d2, _ = _head_views(plan.expr, a, b, d)
    if sfa is None:
        return _sm90_bf16_grouped_module().bf16_head_batched(*plan.sm90, a2, b2, d2)
    bsz, h, k = a.shape
    # per-token scales in the masked form's layout, [heads, b, K/128] MN-major (a copy of b * heads * K/128 floats)
    sfa_heads = transform_sf_into_required_layout(sfa.permute(1, 0, 2), bsz, k, FP8_RECIPE, num_groups=h,
                                                  is_sfa=True, name="a[1]")
    return _sm90_grouped_module().fp8_head_batched(*plan.sm90, a2, sfa_heads, b2, sfb.contiguous(), d2)
