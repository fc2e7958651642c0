"""Route Triton kernels through the interpreter on machines without a CUDA GPU.

Triton decides at decoration time whether ``@triton.jit`` builds a compiled or an interpreted
kernel, from ``TRITON_INTERPRET``. On a machine with no CUDA device nothing could be compiled
anyway, so finegemm turns the interpreter on before its portable kernels are defined. An explicit
``TRITON_INTERPRET`` setting is left as the user gave it.
"""

from __future__ import annotations

import os

import torch


def enable_interpreter_without_gpu() -> bool:
    if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    return interpreting()


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "yes", "on")
