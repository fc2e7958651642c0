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
        decode_fp8_specials()
    return interpreting()


def decode_fp8_specials() -> None:
    """Make the interpreter widen FP8 NaN and Inf as the GPU's ``cvt`` does.

    Triton's interpreter widens FP8 (``tl.dot`` operands, ``.to(tl.float32)``) by exponent arithmetic that knows
    no special values: e4m3 NaN (0x7F / 0xFF) reads as +-480 and e5m2 Inf / NaN (exponent 31) as finite powers of
    two, so a NaN input gave finite output on the CPU path only. This wraps that conversion (``_convert_float``,
    a module global the interpreter looks up per call) to put the IEEE NaN / Inf of the wider type in their place.
    """
    import numpy as np
    from triton.runtime import interpreter

    convert = interpreter._convert_float
    if getattr(convert, "_finegemm_specials", False):
        return

    @functools.wraps(convert)
    def convert_with_specials(input, input_dtype, output_dtype, rounding_mode):
        out = convert(input, input_dtype, output_dtype, rounding_mode)
        name = getattr(input_dtype, "name", "")
        if name not in ("fp8e4nv", "fp8e5") or output_dtype.primitive_bitwidth <= 8:
            return out
        bits = np.frombuffer(input.tobytes(), dtype=np.uint8).reshape(out.shape)
        if name == "fp8e4nv":  # e4m3fn: no Inf; S.1111.111 is NaN
            nan, inf = (bits & 0x7F) == 0x7F, np.zeros(bits.shape, dtype=bool)
        else:  # e5m2: exponent 31 is Inf (mantissa 0) or NaN
            special = (bits & 0x7C) == 0x7C
            inf, nan = special & ((bits & 0x03) == 0), special & ((bits & 0x03) != 0)
        if not (nan.any() or inf.any()):
            return out
        width, mantissa = output_dtype.primitive_bitwidth, output_dtype.fp_mantissa_width
        inf_bits = ((1 << (width - 1 - mantissa)) - 1) << mantissa
        sign = (bits >> 7).astype(out.dtype) << (width - 1)
        out = out.copy()
        out[inf] = (sign | inf_bits)[inf]
        out[nan] = (sign | inf_bits | (1 << (mantissa - 1)))[nan]
        return out

    convert_with_specials._finegemm_specials = True
    interpreter._convert_float = convert_with_specials


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
