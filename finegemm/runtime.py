"""Process-wide switches under DeepGEMM's names (``set_pdl``, ``use_deterministic_algorithms``, ...).

``set_num_sms`` / ``get_num_sms`` live in :mod:`finegemm.jit.device` (the heuristics read the cap). DeepGEMM's
``set_tc_util`` and ``set_block_size_multiple_of`` tune its own tile heuristic and have no counterpart
here, so they are not offered: a call fails loudly rather than being ignored.
"""

from __future__ import annotations

import os

from .jit import env


def set_pdl(enable: bool) -> None:
    """Launch with programmatic dependent launch where finegemm's sm90 launches support it (DeepGEMM's
    ``set_pdl``): the split-K reductions and the k-grouped chains start while the kernel before them
    drains. The same switch as the environment variable ``FINEGEMM_PDL`` (default on), which this sets.

    Launches already recorded baked the old choice in, so every recording is dropped: each shape's next
    call builds its launch again (tens of microseconds once).
    """
    if not isinstance(enable, bool):
        raise TypeError(f"set_pdl: enable must be a bool, got {enable!r}")
    os.environ[env.PDL.name] = "1" if enable else "0"
    forget_plans_and_launches()


def forget_plans_and_launches() -> None:
    """Drop every validated call plan and every recorded launch: after a process-wide setting that they baked in
    changed (:func:`set_pdl`, :func:`finegemm.set_mk_alignment_for_contiguous_layout`), each signature's next call
    validates and records again."""
    from .api import plan_cache
    from .kernels.sm90 import launcher

    launcher.clear_recordings()
    plan_cache.clear_all()  # the public entries' hot-path caches hold recordings too


def get_pdl() -> bool:
    """Whether launches that support programmatic dependent launch use it (``FINEGEMM_PDL``, :func:`set_pdl`)."""
    return env.flag(env.PDL)


def use_deterministic_algorithms(enabled: bool = True) -> None:
    """DeepGEMM's switch to deterministic kernels. Every finegemm kernel is deterministic already (split-K
    partials are summed in a fixed order, by a second launch or by the last split to arrive; no kernel
    accumulates floating point through atomics): the same inputs give bitwise the same output on every
    run, so either value keeps that and changes nothing."""
    if not isinstance(enabled, bool):
        raise TypeError(f"use_deterministic_algorithms: enabled must be a bool, got {enabled!r}")


def set_ignore_compile_dims(value: bool) -> None:
    """DeepGEMM's switch to ignore the ``compiled_dims`` argument. finegemm always does: every kernel is
    specialized on N and K and bucketed on M whatever ``compiled_dims`` says, so this changes nothing."""
    if not isinstance(value, bool):
        raise TypeError(f"set_ignore_compile_dims: value must be a bool, got {value!r}")
