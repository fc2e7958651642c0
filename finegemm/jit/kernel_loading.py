"""Thread-safe loading of Triton's compiled kernels.

A ``CompiledKernel`` loads its CUDA module on first use: ``run`` (a property) calls ``_init_handles``, which
sets ``_run`` first and ``module`` / ``function`` only after ``load_binary`` returns (Triton 3.6-3.9 alike).
A second thread that reaches ``run`` in between sees ``_run`` set, skips the load and launches with
``function`` still None (tests/test_kernel_loading.py shows the race on a class with Triton's order).
:func:`make_thread_safe` serializes the load under one lock and makes ``run`` wait for it while ``function`` is
unset; once a kernel is loaded the property costs one more attribute test. Applied to Triton's class when
finegemm is imported. (The "invalid resource handle" that tests/test_threads.py met on an H100 under 3.9 came
from elsewhere: a recorded launch outliving its unloaded module, kernels/sm90/launcher.py ``Recording``.)
"""

from __future__ import annotations

import threading
from typing import Any

_LOAD_LOCK = threading.RLock()
_PATCHED = "_finegemm_thread_safe_load"


def make_thread_safe(cls: Any) -> bool:
    """Wrap ``cls._init_handles`` in a process-wide lock and make ``cls.run`` load until ``function`` is set.

    Returns False (and changes nothing) when ``cls`` lacks that shape (a Triton release that loads otherwise);
    idempotent."""
    if getattr(cls, _PATCHED, False):
        return True
    init = getattr(cls, "_init_handles", None)
    if not callable(init) or not isinstance(cls.__dict__.get("run"), property):
        return False

    def _init_handles(self: Any) -> None:
        with _LOAD_LOCK:
            init(self)

    def run(self: Any) -> Any:
        if self._run is None or self.function is None:
            self._init_handles()
        return self._run

    cls._init_handles = _init_handles
    cls.run = property(run, doc="The launcher, after the kernel's module is loaded (finegemm: thread-safe).")
    setattr(cls, _PATCHED, True)
    return True


def make_triton_thread_safe() -> bool:
    """:func:`make_thread_safe` on ``triton.compiler.compiler.CompiledKernel``; False where it does not apply."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return False
    return make_thread_safe(CompiledKernel)
