"""Which kernels a model's GEMM calls need: shapes in, the distinct compiled kernels out (``finegemm warmup``).

A serving engine calls the same few GEMM shapes (N, K, experts) at every batch size M. finegemm compiles one kernel
per *config*, not per M: :func:`enumerate_kernels` maps each (call, M) to the desc the public API builds and to the
(backend, config) that :func:`finegemm.api.dispatch._choose` (the dispatch's own rules) picks for it, adds the
specialization Triton's JIT gives the runtime integers that follow M, and groups the M values by the kernel they
compile. :mod:`finegemm.warmup_run` then compiles one representative M of each group into the disk cache.

Calls (:class:`WarmupCall`): ``dense`` (``fp8_gemm_nt``, recipe (1, 128, 128), BF16 D), ``masked``
(``m_grouped_fp8_gemm_nt_masked``: ``groups`` experts of ``max_m`` rows, M is ``expected_m``) and ``contiguous``
(``m_grouped_fp8_gemm_nt_contiguous``: M is the total rows, rounded up to the segment alignment).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .jit import env
from .jit.device import DeviceFacts
from .jit.heuristics import GemmDesc
from .layout import get_mk_alignment_for_contiguous_layout, get_tma_aligned_size

OPS = ("dense", "masked", "contiguous")
# masked calls: rows per expert compiled into the kernel (GROUP_ROWS) when neither the call nor --max-m says
DEFAULT_MAX_M = 1024
# local experts of a DeepSeek-V3/R1 layer with 256 routed experts over 8 expert-parallel ranks
DEFAULT_GROUPS = 32


@dataclass(frozen=True)
class WarmupCall:
    """One GEMM a model makes at varying M: ``op`` in :data:`OPS`, weights ``[groups, n, k]`` (dense: ``[n, k]``),
    ``max_m`` the masked layout's rows per expert."""

    op: str
    n: int
    k: int
    groups: int = 1
    max_m: int | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {self.op!r}")
        for name in ("n", "k", "groups"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.k % 128:
            raise ValueError(f"k must be a multiple of 128 (the scale block), got {self.k}")
        if self.op == "dense" and self.groups != 1:
            raise ValueError(f"a dense call has groups=1, got {self.groups}")
        if self.op == "masked" and self.max_m is None:
            object.__setattr__(self, "max_m", DEFAULT_MAX_M)
        if self.max_m is not None and (self.op != "masked" or not isinstance(self.max_m, int)
                                       or isinstance(self.max_m, bool) or self.max_m < 1):
            raise ValueError(f"max_m is a positive int of masked calls only, got {self.max_m!r} for op {self.op!r}")

    def __str__(self) -> str:
        text = f"{self.op} N={self.n} K={self.k}"
        if self.op != "dense":
            text += f" groups={self.groups}"
        if self.max_m is not None:
            text += f" max_m={self.max_m}"
        return text


_DSV3_DENSE = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))
_DSV3_EXPERT = ((4096, 7168), (7168, 2048))


def preset(name: str, groups: int = DEFAULT_GROUPS, max_m: int = DEFAULT_MAX_M) -> list[WarmupCall]:
    """Calls of a named model: ``deepseek-v3`` (alias ``deepseek-r1``): its dense projections, and its experts'
    up/down projections masked (decode) and contiguous (prefill) with ``groups`` local experts."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
    calls = [WarmupCall("dense", n, k) for n, k in _DSV3_DENSE]
    calls += [WarmupCall("masked", n, k, groups, max_m) for n, k in _DSV3_EXPERT]
    calls += [WarmupCall("contiguous", n, k, groups) for n, k in _DSV3_EXPERT]
    return calls


PRESETS = ("deepseek-v3", "deepseek-r1")


def parse_shapes(text: str, source: str = "shapes file") -> list[WarmupCall]:
    """Calls from a shapes file: JSON (a list of objects with ``op``, ``n``, ``k`` and optionally ``groups``,
    ``max_m``) or text, one call a line, ``op N K [groups [max_m]]``, ``#`` starting a comment. Raises ValueError
    naming the line (or JSON item) and what it needs."""
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON ({e})") from None
        if not isinstance(items, list):
            raise ValueError(f"{source}: JSON must be a list of calls, got {type(items).__name__}")
        calls = []
        for i, item in enumerate(items):
            where = f"{source} item {i}"
            if not isinstance(item, dict) or not {"op", "n", "k"} <= set(item):
                raise ValueError(f"{where}: needs an object with op, n, k (optional groups, max_m); got {item!r}")
            unknown = set(item) - {"op", "n", "k", "groups", "max_m"}
            if unknown:
                raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
            calls.append(_call(where, item["op"], item["n"], item["k"], item.get("groups", 1), item.get("max_m")))
        return calls
    calls = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{source} line {number}"
        if not 3 <= len(fields) <= 5:
            raise ValueError(f"{where}: needs 'op N K [groups [max_m]]', got {line.strip()!r}")
        try:
            numbers = [int(f) for f in fields[1:]]
        except ValueError:
            raise ValueError(f"{where}: N, K, groups and max_m must be integers, got {line.strip()!r}") from None
        calls.append(_call(where, fields[0], *numbers))
    if not calls:
        raise ValueError(f"{source}: no calls found")
    return calls


def _call(where: str, op: Any, n: Any, k: Any, groups: Any = 1, max_m: Any = None) -> WarmupCall:
    try:
        return WarmupCall(op, n, k, groups, max_m)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def parse_m_values(text: str) -> list[int]:
    """M values from ``"1-8192"``, ``"1,2,64"`` or a mix (``"1-128,4096"``), sorted and distinct; ValueError on
    anything else."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            first, last = (int(lo), int(hi)) if sep else (int(part), int(part))
        except ValueError:
            raise ValueError(f"--m needs positive ints or ranges like 1-8192, separated by commas; got {text!r}") \
                from None
        if first < 1 or last < first:
            raise ValueError(f"--m range {part!r}: needs 1 <= first <= last")
        values.update(range(first, last + 1))
    return sorted(values)


def call_desc(call: WarmupCall, m: int) -> GemmDesc | None:
    """The desc the public API builds for ``call`` at M = ``m`` (K-major FP8 operands, FP32 scales, BF16 D, no C);
    None where M does not apply (a masked ``expected_m`` above ``max_m``)."""
    if call.op == "dense":
        return GemmDesc("fp8_1d2d", m, call.n, call.k, True, True, False, False, False)
    if call.op == "masked":
        if m > call.max_m:
            return None
        return GemmDesc("fp8_1d2d", call.max_m, call.n, call.k, True, True, False, False, False,
                        layout="m_grouped_masked", num_groups=call.groups, expected_m=m)
    alignment = get_mk_alignment_for_contiguous_layout()
    return GemmDesc("fp8_1d2d", contiguous_rows(m), call.n, call.k, True, True, False, False, False,
                    layout="m_grouped_contiguous", num_groups=call.groups, alignment=alignment)


def contiguous_rows(m: int) -> int:
    """Rows of a contiguous call at M = ``m``: ``m`` rounded up to the segment alignment."""
    alignment = get_mk_alignment_for_contiguous_layout()
    return -(-m // alignment) * alignment


def _int_class(value: int) -> str:
    """How Triton's JIT specializes a runtime int argument: the value 1 is compiled in, a multiple of 16 gets the
    divisibility attribute ("D", BaseBackend.get_int_specialization), anything else neither."""
    return "1" if value == 1 else "D" if value % 16 == 0 else ""


def row_int_classes(desc: GemmDesc) -> tuple[str, ...]:
    """Specialization of the launch's runtime ints that follow the rows: M and the MN-major LHS scales' K stride
    (M rounded up to 16 bytes of FP32). Masked calls pass ``max_m``-derived ints, the same at every expected_m."""
    if desc.layout == "m_grouped_masked":
        return ()
    return _int_class(desc.m), _int_class(get_tma_aligned_size(desc.m, 4))


@dataclass(frozen=True)
class Kernel:
    """One compiled kernel: the call's desc with the per-call rows erased where they are not compiled in, the
    backend and config the dispatch picks, and the Triton specialization of the row-dependent ints."""

    backend: str
    desc: GemmDesc
    config: Any
    ints: tuple[str, ...]


@dataclass
class KernelPlan:
    """A kernel and the M values of ``call`` that compile it (``ms[0]`` is the one the warm-up runs)."""

    kernel: Kernel
    call: WarmupCall
    ms: list[int] = dataclasses.field(default_factory=list)


def kernel_for(desc: GemmDesc, facts: DeviceFacts, requested: str | None = None) -> Kernel:
    """The kernel a call of ``desc`` compiles on ``facts`` under ``FINEGEMM_BACKEND`` (or ``requested``): the
    dispatch's own choice (:func:`finegemm.api.dispatch._choose`)."""
    from .api.dispatch import _choose

    backend, config = _choose(desc, facts, requested or env.backend())
    compiled_rows = desc.m if desc.layout == "m_grouped_masked" else 0
    erased = dataclasses.replace(desc, m=compiled_rows, expected_m=None)
    return Kernel(backend, erased, config, row_int_classes(desc))


def enumerate_kernels(calls: Sequence[WarmupCall], ms: Iterable[int], facts: DeviceFacts,
                      requested: str | None = None) -> list[KernelPlan]:
    """The distinct kernels ``calls`` compile over the M values ``ms``, in first-seen order, each with its Ms."""
    ms = sorted(set(ms))
    plans: dict[Kernel, KernelPlan] = {}
    for call in calls:
        for m in ms:
            desc = call_desc(call, m)
            if desc is None:
                continue
            kernel = kernel_for(desc, facts, requested)
            plan = plans.get(kernel)
            if plan is None:
                plan = plans[kernel] = KernelPlan(kernel, call)
            plan.ms.append(m)
    return list(plans.values())


def m_ranges(ms: Sequence[int], limit: int = 0) -> str:
    """``[1, 2, 3, 7]`` as ``"1-3,7"``; with ``limit``, the first ``limit`` ranges and a count of the rest."""
    parts, start = [], None
    for i, m in enumerate(ms):
        if start is None:
            start = m
        if i + 1 == len(ms) or ms[i + 1] != m + 1:
            parts.append(str(start) if start == m else f"{start}-{m}")
            start = None
    if limit and len(parts) > limit:
        return ",".join(parts[:limit]) + f",... ({len(ms)} values)"
    return ",".join(parts)


def describe(plan: KernelPlan) -> str:
    """One line of ``--dry-run``: the call, the backend and config, the int specialization, the Ms."""
    cfg = plan.kernel.config
    fields = ", ".join(f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
                       if getattr(cfg, f.name) != f.default or f.name in ("block_m", "block_n", "stages"))
    ints = ",".join(c or "-" for c in plan.kernel.ints) or "n/a"
    kernel = f"{plan.kernel.backend} {type(cfg).__name__}({fields})"
    return f"{plan.call} | {kernel} | ints {ints} | M {m_ranges(plan.ms, 4)}"
