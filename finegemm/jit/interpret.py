"""Route Triton kernels through the interpreter on machines without a CUDA GPU.

Triton decides at decoration time whether ``@triton.jit`` builds a compiled or an interpreted
kernel, from ``TRITON_INTERPRET``. On a machine with no CUDA device nothing could be compiled
anyway, so finegemm turns the interpreter on before its portable kernels are defined. An explicit
``TRITON_INTERPRET`` setting is left as the user gave it.
"""

from __future__ import annotations

import functools
import os
import threading

import torch


def enable_interpreter_without_gpu() -> bool:
    if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    snapshot_language()
    if interpreting():
        serialize_interpreted_launches()
    return interpreting()


# Triton's interpreter is not thread-safe: a launch keeps its grid position in one process-wide builder and
# patches triton.language while it runs, so two threads launching at once read each other's program ids (4
# threads x 40 fp8_gemm_nt calls: ~60 InterpreterError "x >= grid_dim[0]" before this lock). Every interpreted
# launch in the process therefore holds this lock; calls from several threads are correct, one launch at a time.
INTERPRETER_LOCK = threading.RLock()


def serialize_interpreted_launches() -> None:
    """Make ``InterpretedFunction.run`` (every interpreted ``kernel[grid](...)``) hold :data:`INTERPRETER_LOCK`."""
    from triton.runtime import interpreter

    run = interpreter.InterpretedFunction.run
    if getattr(run, "_finegemm_locked", False):
        return

    @functools.wraps(run)
    def locked_run(self, *args, **kwargs):
        with INTERPRETER_LOCK:
            return run(self, *args, **kwargs)

    locked_run._finegemm_locked = True
    interpreter.InterpretedFunction.run = locked_run


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")


# Triton 3.6's interpreter patches ``triton.language`` (its builtins, ``tensor``'s operators,
# ``dtype.to_ir``, ...) while it runs a kernel, and a nested ``@triton.jit`` helper call patches
# again without restoring. A real compile later in the same process (the sm_90 compile checks on
# CI) then builds IR through the interpreter's semantics and fails. ``restore_language`` puts back
# what was there when finegemm was imported.
def _patched_objects() -> list[object]:
    import triton.language as tl

    return [tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.tensor_descriptor_base]


_LANGUAGE_SNAPSHOT: list[tuple[object, dict]] = []


def snapshot_language() -> None:
    """Record ``triton.language`` as it is now (called once TRITON_INTERPRET is settled, before
    any kernel runs: importing ``triton.language`` earlier would fix the interpreter choice)."""
    if not _LANGUAGE_SNAPSHOT:
        _LANGUAGE_SNAPSHOT.extend((obj, dict(vars(obj))) for obj in _patched_objects())


def restore_language() -> None:
    """Undo any leftover interpreter patches of ``triton.language`` (no-op when there are none)."""
    for obj, original in _LANGUAGE_SNAPSHOT:
        current = vars(obj)
        for name in [n for n in current if n not in original]:
            delattr(obj, name)
        for name, value in original.items():
            if current.get(name, _MISSING) is not value:
                setattr(obj, name, value)


_MISSING = object()
