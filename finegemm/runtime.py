"""Process-wide switches under DeepGEMM's names (``set_pdl``, ``use_deterministic_algorithms``, ...).

``set_num_sms`` / ``get_num_sms`` live in :mod:`finegemm.jit.device` (the heuristics read the cap). DeepGEMM's
``set_tc_util`` and ``set_block_size_multiple_of`` tune inputs of its own tile heuristic (a tensor-core
utilization figure in its cycle model, a divisor of BLOCK_N); finegemm's heuristics have neither input, so
both are accepted, validated and stored (``get_tc_util`` reads the value back) and change no tile choice;
``set_block_size_multiple_of`` warns when asked for anything but 1.
"""

from __future__ import annotations

import os
import warnings

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


_TC_UTIL = [0]  # 0: unset, read back as 100 (DeepGEMM's convention)
_BLOCK_SIZE_MULTIPLE_OF = [(1, 1)]


def set_tc_util(new_tc_util: int) -> None:
    """DeepGEMM's tensor-core utilization figure for its cycle model, 0..100 (0 restores the default of 100).
    Stored for :func:`get_tc_util`; finegemm's tile heuristics do not model it."""
    if isinstance(new_tc_util, bool) or not isinstance(new_tc_util, int) or not 0 <= new_tc_util <= 100:
        raise ValueError(f"set_tc_util: new_tc_util must be an int in [0, 100]; got {new_tc_util!r}")
    _TC_UTIL[0] = new_tc_util


def get_tc_util() -> int:
    """The value of :func:`set_tc_util`, 100 when unset or set to 0."""
    return _TC_UTIL[0] or 100


def set_block_size_multiple_of(new_value: int | tuple[int, int]) -> None:
    """DeepGEMM's constraint on its tile sizes: ``BLOCK_M`` / ``BLOCK_N`` multiples of ``new_value`` (one int for
    both, or a pair). finegemm's tile choice does not read it: 1 (no constraint) is what it honours; any other
    value is stored and warns that tiles are chosen without it."""
    pair = (new_value, new_value) if isinstance(new_value, int) else new_value
    if (not isinstance(pair, (tuple, list)) or len(pair) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pair)):
        raise ValueError(f"set_block_size_multiple_of: new_value must be a positive int or a pair of them; "
                         f"got {new_value!r}")
    _BLOCK_SIZE_MULTIPLE_OF[0] = tuple(pair)
    if tuple(pair) != (1, 1):
        warnings.warn(f"set_block_size_multiple_of({new_value!r}): finegemm's tile heuristics do not take a "
                      "block-size divisor; BLOCK_M / BLOCK_N are chosen without it", stacklevel=2)
