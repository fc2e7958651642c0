"""Triton's compiled kernels load their module thread-safely once finegemm is imported (jit/kernel_loading.py)."""

from __future__ import annotations

import threading
import time

import finegemm  # noqa: F401  (applies the patch)
from finegemm.jit.kernel_loading import make_thread_safe


def _loader_class():
    """A class with Triton's loading order (3.6-3.9): ``_run`` set, then a slow load, then ``function``."""

    class Kernel:
        loads = 0

        def __init__(self) -> None:
            self.module = self.function = self._run = None

        def _init_handles(self) -> None:
            if self.module is not None:
                return
            self._run = "launcher"
            time.sleep(0.05)  # load_binary
            type(self).loads += 1
            self.module, self.function = "module", "function"

        @property
        def run(self):
            if self._run is None:
                self._init_handles()
            return self._run

    return Kernel


def _launch_from_threads(kernel, n: int = 8) -> list:
    """What each thread passes to the launcher: (``kernel.run``, ``kernel.function``), as JITFunction.run reads
    them, all threads released at once."""
    barrier, seen = threading.Barrier(n), []

    def launch() -> None:
        barrier.wait()
        seen.append((kernel.run, kernel.function))

    threads = [threading.Thread(target=launch) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seen


def test_the_race_exists_without_the_patch():
    """The unpatched order gives some thread a launcher with no function (the card's invalid resource handle)."""
    kernel = _loader_class()()
    assert any(function is None for _, function in _launch_from_threads(kernel))


def test_patched_threads_all_get_the_loaded_function_and_load_once():
    cls = _loader_class()
    assert make_thread_safe(cls) and make_thread_safe(cls)  # idempotent
    kernel = cls()
    assert _launch_from_threads(kernel) == [("launcher", "function")] * 8
    assert cls.loads == 1


def test_a_class_of_another_shape_is_left_alone():
    class Other:
        def run(self):
            return None

    assert not make_thread_safe(Other)
    assert not hasattr(Other, "_finegemm_thread_safe_load")


def test_tritons_compiled_kernel_is_patched_on_import():
    from triton.compiler.compiler import CompiledKernel

    assert getattr(CompiledKernel, "_finegemm_thread_safe_load", False)
