"""Argument checks shared by every public op: each failure names the argument, what it got, what it needs."""

from __future__ import annotations

from collections.abc import Iterable

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
        pairs.append(tuple(value))
    (gran_m, gran_k), (gran_n, gran_k_b) = pairs
    if gran_k != gran_k_b:
        raise ValueError(f"recipe_a and recipe_b must share their K granularity; got {pairs[0]} and {pairs[1]}")
    return (gran_m, gran_n, gran_k)


def check_alpha(alpha: object) -> None:
    """DeepGEMM 2.8's ``alpha`` (a multiplier of the product): only None or 1 here."""
    if alpha is not None and not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha == 1):
        raise ValueError(f"alpha must be None or 1 (finegemm's kernels do not scale the product); got {alpha!r}; "
                         "scale a's or b's scale factors instead")
