"""Per-call-signature plans shared by the public APIs (DESIGN.md §6: host overhead per call matters).

Validation and dispatch cost tens of microseconds of Python per call; decode-sized kernels take about
as long on the GPU. So each op validates a distinct *call signature* once and replays the plan it
resolved to. A signature is everything validation reads without looking inside a tensor: per tensor
``(shape, stride, dtype, device)`` (:func:`tensor_key`), each scalar argument with its exact type
(:func:`scalar_key`, so ``1`` does not hit the plan of ``True``), and the process state that steers
dispatch (:func:`dispatch_state`: ``FINEGEMM_BACKEND``, ``FINEGEMM_DEBUG``, the :func:`finegemm.set_num_sms` cap).

Checks of tensor *contents* are not part of any plan: callers run them on every call where they run
at all. A key that cannot be built or hashed (a non-tensor where a tensor belongs, an unhashable
scalar) means "no plan": the caller validates, which raises the argument's clear error.

The caches are plain dicts (one ``dict.get`` per hit) bounded by :data:`MAX_PLANS`; a full cache is
emptied rather than evicted piecemeal, which keeps the hit path free of bookkeeping.

Threads: every access is one ``dict.get``, one store or one ``clear``, each atomic under the GIL, and a plan is
immutable and a pure function of its key. So two threads missing one key both validate and store equal plans,
and a ``clear`` racing a store loses at most that plan (validated again on its next call): no lock is needed.
The data-pointer checks (:class:`~finegemm.api.checks.OutputGuard`) run per call, outside any plan.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from ..jit import device as _device
from ..jit import env

__all__ = ["MAX_PLANS", "tensor_key", "scalar_key", "dispatch_state", "new_cache", "remember", "plan_for",
           "plan_and_key", "clear_all"]

MAX_PLANS = 4096  # distinct signatures per op; real workloads have tens (one per layer shape and M bucket)

_ALL_CACHES: list[dict] = []


def tensor_key(t: torch.Tensor | None) -> tuple | None:
    """What validation reads of ``t`` without its contents: shape, strides, dtype, device (None stays None).

    Raises ``AttributeError``/``TypeError`` for a non-tensor, which callers take as "validate".
    """
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


def scalar_key(value: Any) -> tuple:
    """``value`` with its exact type, so values equal across types (``1``, ``1.0``, ``True``) get distinct plans."""
    return (value.__class__, value)


def dispatch_state() -> tuple:
    """Process state a plan depends on: raw ``FINEGEMM_BACKEND`` and ``FINEGEMM_DEBUG``, the ``set_num_sms`` cap.

    Values are read as stored (:meth:`EnvSwitch.raw`, bytes on POSIX, None when unset): a key needs
    no decoding, and this runs on every call of every public op. ``FINEGEMM_DEBUG`` is part of it so
    that a cached fast path (api/gemm.py's recordings, stored only while it is off) misses once it is on.
    """
    data = getattr(os.environ, "_data", None)
    if data.__class__ is dict and _ENV_KEYS is not None:  # EnvSwitch.raw's fast path, for both at once
        return (data.get(_ENV_KEYS[0]), data.get(_ENV_KEYS[1]), _device._num_sms_cap)
    return (env.BACKEND.raw(), env.DEBUG.raw(), _device._num_sms_cap)


_ENV_KEYS = (env.BACKEND._key, env.DEBUG._key) if isinstance(env.BACKEND._key, bytes) else None


def new_cache() -> dict:
    """An empty plan cache, registered so that :func:`clear_all` (tests, benchmarks) can empty it."""
    cache: dict = {}
    _ALL_CACHES.append(cache)
    return cache


def remember(cache: dict, key: tuple, plan: Any) -> None:
    """Store ``plan`` under ``key``, emptying ``cache`` first when it holds :data:`MAX_PLANS` plans."""
    if len(cache) >= MAX_PLANS:
        cache.clear()
    cache[key] = plan


def plan_for(cache: dict, make_key: Callable[[], tuple], validate: Callable[[], Any]) -> Any:
    """The plan of one call: ``cache[make_key()]`` when present, else ``validate()`` (remembered).

    ``validate`` checks every argument and raises the clear error on bad input; a key that cannot be
    built (``TypeError``, ``ValueError``, ``AttributeError``, ``IndexError`` or ``KeyError`` from ``make_key``,
    e.g. indexing a malformed pair, or from hashing it) only means the call is validated and its plan not kept.
    """
    return plan_and_key(cache, make_key, validate)[0]


def plan_and_key(cache: dict, make_key: Callable[[], tuple], validate: Callable[[], Any]) -> tuple[Any, tuple | None]:
    """:func:`plan_for`, with the call's key too (None when it could not be built): for callers that key more by it
    (a recorded launch under the signature and the data pointers)."""
    try:
        key = make_key()
        plan = cache.get(key)
    except (TypeError, ValueError, AttributeError, IndexError, KeyError):
        key, plan = None, None
    if plan is None:
        plan = validate()
        if key is not None:
            remember(cache, key, plan)
    return plan, key


def clear_all() -> None:
    """Forget every plan of every registered cache (the next call of each signature validates again)."""
    for cache in _ALL_CACHES:
        cache.clear()
