"""Argument checks shared by every public op: each failure names the argument, what it got, what it needs."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable, Sequence

import torch

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
E4M3 = (torch.float8_e4m3fn,)


def describe(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, stride {tuple(t.stride())}, dtype {t.dtype}, device {t.device}"


def check_tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def unpack_pair(name: str, pair: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``(fp8 tensor, scale tensor)`` from an argument that must be such a pair."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{name} must be a pair (fp8 tensor, scale tensor); got {type(pair).__name__}")
    return check_tensor(f"{name}[0]", pair[0]), check_tensor(f"{name}[1]", pair[1])


def check_dtype(name: str, t: torch.Tensor, allowed: Iterable[torch.dtype]) -> None:
    allowed = tuple(allowed)
    if t.dtype not in allowed:
        names = ", ".join(str(d) for d in allowed)
        raise TypeError(f"{name} must have dtype {names}; got {t.dtype}")


def check_shape(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}; got {tuple(t.shape)}")


def check_dim(name: str, t: torch.Tensor, dim: int, what: str) -> None:
    if t.dim() != dim:
        raise ValueError(f"{name} must be {dim}-D {what}; got shape {tuple(t.shape)}")


def check_same_device(pairs: Iterable[tuple[str, torch.Tensor | None]]) -> torch.device:
    pairs = [(n, t) for n, t in pairs if t is not None]
    first_name, first = pairs[0]
    for name, t in pairs[1:]:
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device} but {first_name} is on {first.device}; all tensors "
                             "of one call must be on the same device")
    return first.device


def check_row_or_col_major(name: str, t: torch.Tensor) -> bool:
    """True when the last dim is contiguous (row-major / K-major for ``[MN, K]``), False for column-major.

    Either way the other stride must leave rows 16-byte aligned, as TMA and vector loads need.
    """
    rows, cols = t.shape[-2], t.shape[-1]
    s0, s1 = t.stride(-2), t.stride(-1)
    if s1 == 1 or cols == 1:
        if rows > 1 and s0 < cols:
            raise ValueError(f"{name} rows overlap: {describe(t)}")
        return True
    if s0 == 1 or rows == 1:
        if cols > 1 and s1 < rows:
            raise ValueError(f"{name} columns overlap: {describe(t)}")
        return False
    raise ValueError(f"{name} must be row-major (stride(-1) == 1) or column-major (stride(-2) == 1); got {describe(t)}")


def check_output(name: str, t: torch.Tensor, shape: tuple[int, ...], dtypes: Iterable[torch.dtype]) -> None:
    check_tensor(name, t)
    check_dtype(name, t, dtypes)
    check_shape(name, t, shape)
    if t.dim() >= 2 and t.numel() > 0 and t.stride(-1) != 1:
        raise ValueError(f"{name} must be row-major (stride(-1) == 1); got {describe(t)}")
    check_output_memory(name, t, 0 if t.dim() == 3 else None)


def merge_recipes(recipe: object, recipe_a: object, recipe_b: object) -> object:
    """DeepGEMM 2.8's per-operand granularities ``recipe_a = (gran_m, gran_k)``, ``recipe_b = (gran_n, gran_k)`` as
    the one ``recipe = (gran_m, gran_n, gran_k)`` finegemm's entries take (``recipe`` when neither is given).
    The recipes the entries accept are then checked there."""
    if recipe_a is None and recipe_b is None:
        return recipe
    if recipe is not None:
        raise ValueError(f"pass recipe or recipe_a and recipe_b, not both; got recipe={recipe}, recipe_a={recipe_a}, "
                         f"recipe_b={recipe_b}")
    pairs = []
    for name, value in (("recipe_a", recipe_a), ("recipe_b", recipe_b)):
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ValueError(f"{name} must be a pair (granularity along M or N, granularity along K); got {value!r}")
        pairs.append(int_tuple(name, value))
    (gran_m, gran_k), (gran_n, gran_k_b) = pairs
    if gran_k != gran_k_b:
        raise ValueError(f"recipe_a and recipe_b must share their K granularity; got {pairs[0]} and {pairs[1]}")
    return (gran_m, gran_n, gran_k)


def check_alpha(alpha: object) -> None:
    """DeepGEMM 2.8's ``alpha`` (a multiplier of the product): only None or 1 here."""
    if alpha is not None and not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha == 1):
        raise ValueError(f"alpha must be None or 1 (finegemm's kernels do not scale the product); got {alpha!r}; "
                         "scale a's or b's scale factors instead")


# ---------------------------------------------------------------------------------------------
# Scalars: counts, flags and sizes (numpy integers count as ints; bool is not a count)
# ---------------------------------------------------------------------------------------------

def as_int(name: str, value: object, minimum: int | None = None) -> int:
    """``value`` as a Python int: any integral number (``int``, ``numpy.int64``, ...; not ``bool``, not ``2.0``).

    Raises ``TypeError`` for any other type and ``ValueError`` below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value}")
    return value


def int_tuple(name: str, value: object) -> tuple[int, ...]:
    """``value`` (a tuple or list of ints, e.g. a recipe) as a tuple of Python ints, or the named ``TypeError``."""
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of ints; got {type(value).__name__} {value!r}")
    return tuple(as_int(f"{name}[{i}]", v) for i, v in enumerate(value))


def as_bool(name: str, value: object) -> bool:
    """``value`` as a bool: ``True``/``False`` (or ``numpy.bool_``); no truthy stand-ins like ``'no'`` or None."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise TypeError(f"{name} must be a bool (True or False); got {type(value).__name__} {value!r}")


# ---------------------------------------------------------------------------------------------
# Output memory: every element its own bytes, none shared with an input (one place for every op)
# ---------------------------------------------------------------------------------------------

def byte_span(t: torch.Tensor | None) -> int:
    """Bytes from ``t.data_ptr()`` to one past its last addressed byte (0 for None or an empty tensor)."""
    if t is None or t.numel() == 0:
        return 0
    return (1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))) * t.element_size()


def check_output_memory(name: str, t: torch.Tensor, group_dim: int | None = None) -> None:
    """Raise ``ValueError`` when two elements of output ``t`` share memory.

    A stride of 0 on a dim of size > 1 (an ``expand``ed or broadcast view), or strides that fold one dim onto
    another (rows or, with ``group_dim``, whole groups laid over each other): the kernel's writes would land on
    each other. Sufficient test: sorted by stride, each dim must step past everything the smaller ones span.
    """
    if t.numel() == 0:
        return
    dims = sorted((stride, size, i) for i, (size, stride) in enumerate(zip(t.shape, t.stride())) if size > 1)
    span = 0  # elements the dims so far reach past their first, i.e. sum (size - 1) * stride
    for stride, size, i in dims:
        if stride <= span:
            what = "groups" if i == group_dim else f"dim {i}"
            why = " (stride 0: an expanded view)" if stride == 0 else ""
            raise ValueError(f"{name} is an output, so each of its elements needs memory of its own; its {what} "
                             f"(size {size}, stride {stride}) overlap{why}: {describe(t)}. Pass a tensor from "
                             "torch.empty (or any non-overlapping view)")
        span += (size - 1) * stride


def _runs(t: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """(sorted start byte of every contiguous run of ``t``'s elements, the run length in bytes); None when there are
    more than :data:`MAX_OVERLAP_RUNS` runs."""
    es = t.element_size()
    dims = sorted((stride * es, size) for size, stride in zip(t.shape, t.stride()) if size > 1 and stride != 0)
    run = es
    while dims and dims[0][0] == run:  # fold the innermost dense dims into one run of bytes
        run *= dims.pop(0)[1]
    if math.prod(size for _, size in dims) > MAX_OVERLAP_RUNS:
        return None
    starts = torch.zeros(1, dtype=torch.int64)
    for stride, size in dims:
        starts = (starts[:, None] + torch.arange(size, dtype=torch.int64)[None, :] * stride).reshape(-1)
    return torch.sort(starts + t.data_ptr()).values, run


MAX_OVERLAP_RUNS = 1 << 22  # runs per tensor the exact test enumerates (32 MiB of int64 offsets)


def shares_memory(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether any byte of ``x`` is a byte of ``y`` (exact; views of one buffer that interleave are told apart).

    Byte ranges that do not meet answer at once. Otherwise both are cut into runs of contiguous bytes and each
    run of ``x`` is looked up among the sorted runs of ``y``. Tensors of more than :data:`MAX_OVERLAP_RUNS` runs
    whose ranges meet are taken as overlapping.
    """
    x_span, y_span = byte_span(x), byte_span(y)
    if not x_span or not y_span:
        return False
    x0, y0 = x.data_ptr(), y.data_ptr()
    if x0 >= y0 + y_span or y0 >= x0 + x_span:
        return False
    if x.device != y.device:
        return False
    x_runs, y_runs = _runs(x), _runs(y)
    if x_runs is None or y_runs is None:
        return True
    (xs, x_run), (ys, y_run) = x_runs, y_runs
    # a run of y [s, s + y_run) meets a run of x [o, o + x_run) iff o - y_run < s < o + x_run
    hi = torch.searchsorted(ys, xs + x_run, right=False)
    lo = torch.searchsorted(ys, xs - y_run, right=True)
    return bool((hi > lo).any())


def same_view(x: torch.Tensor, y: torch.Tensor) -> bool:
    """``x`` and ``y`` address the same elements the same way (``c is d``, or an identical view of it)."""
    return (x.data_ptr() == y.data_ptr() and x.dtype == y.dtype and x.shape == y.shape
            and x.stride() == y.stride() and x.device == y.device)


def check_no_overlap(out_name: str, out: torch.Tensor, inputs: Iterable[tuple[str, torch.Tensor | None]],
                     may_be_out: Iterable[str] = ()) -> None:
    """Raise ``ValueError`` when output ``out`` shares memory with an input (names from ``inputs``).

    An input named in ``may_be_out`` may be ``out`` itself (the same view: ``c=d`` accumulates in place), never
    a partly overlapping one. The kernels read inputs while they write ``out``, so any other overlap gives
    results that depend on tile order.
    """
    may_be_out = tuple(may_be_out)
    for name, t in inputs:
        if t is None or not shares_memory(out, t):
            continue
        if name in may_be_out and same_view(out, t):
            continue
        allowed = f" ({name} may be {out_name} itself, the same view, to accumulate in place)" if name in may_be_out \
            else ""
        raise ValueError(f"{out_name} overlaps {name} in memory: the kernel would overwrite {name} while reading it"
                         f"{allowed}. {out_name}: {describe(out)}, data_ptr {out.data_ptr():#x}; {name}: "
                         f"{describe(t)}, data_ptr {t.data_ptr():#x}")


class OutputGuard:
    """The per-call output check of one validated call signature: ``out`` (index ``out`` of the call's tensors) must
    not share memory with the others (:func:`check_no_overlap`).

    Built once per plan from the signature's byte spans (shape, strides and dtype are in the plan key); a call
    then costs one range comparison per input on its data pointers, and only ranges that meet (``c is d``, views
    of one buffer) take the exact test.
    """

    __slots__ = ("names", "out", "out_span", "may_be_out", "inputs")

    def __init__(self, names: Sequence[str], tensors: Sequence[torch.Tensor | None], out: int = 0,
                 may_be_out: Iterable[str] = ()) -> None:
        self.names = tuple(names)
        self.out = out
        self.may_be_out = tuple(may_be_out)
        o = tensors[out]
        self.out_span = byte_span(o)
        # (index, byte span, may be the output's own view) of each non-empty input. The last: an input that may be
        # the output and has its shape, strides and dtype (all in the plan key) is, at the output's address, the
        # same view, accepted without the exact test
        self.inputs = tuple(
            (i, byte_span(t), self.names[i] in self.may_be_out and t.shape == o.shape and t.stride() == o.stride()
             and t.dtype == o.dtype)
            for i, t in enumerate(tensors) if i != out and byte_span(t))

    def check(self, tensors: Sequence[torch.Tensor | None], ptrs: Sequence[int | None] | None = None) -> None:
        """Raise ``ValueError`` when this call's output overlaps an input. ``ptrs``: the tensors' data pointers in
        the same order, if the caller has them (more entries may follow)."""
        if not self.out_span:
            return
        if ptrs is None:
            ptrs = [0 if t is None else t.data_ptr() for t in tensors]
        lo = ptrs[self.out]
        hi = lo + self.out_span
        for i, span, may_alias in self.inputs:
            p = ptrs[i]
            if p < hi and lo < p + span and not (may_alias and p == lo):
                out = self.out
                check_no_overlap(self.names[out], tensors[out],
                                 [(n, t) for j, (n, t) in enumerate(zip(self.names, tensors)) if j != out],
                                 self.may_be_out)
                return
