"""``deep_gemm.testing.bench``: ``bench`` (CUDA events) and ``bench_kineto`` (profiler kernel times).

finegemm's kernels are not named as DeepGEMM's, so ``bench_kineto`` cannot always find the kernels a test names:
each name gets the time of the device activities whose names contain it; when none of the names is found, the
first gets the whole device time of the call (every kernel it launched) and the others 0. With
``DG_USE_NVIDIA_TOOLS=1`` (for runs under Nsight or compute-sanitizer) it skips the profiler and returns 1s.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import torch

from ...bench.timer import L2Flush, _device_activities


def bench(fn: Callable, num_warmups: int = 5, num_tests: int = 10, high_precision: bool = False) -> float:
    """Mean seconds per call of ``fn`` over ``num_tests`` calls, by CUDA events, after ``num_warmups`` calls
    and an L2 flush; ``high_precision`` first runs a large GEMM so the timed calls start on a busy GPU."""
    L2Flush(torch.device("cuda", torch.cuda.current_device()), 256 << 20)()
    for _ in range(num_warmups):
        fn()
    if high_precision:
        x = torch.randn(8192, 8192, device="cuda")
        x @ x
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(num_tests):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / num_tests / 1e3


class empty_suppress:  # noqa: N801  (DeepGEMM's name)
    """A context manager that does nothing (the quiet alternative is :class:`suppress_stdout_stderr`)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class suppress_stdout_stderr:  # noqa: N801  (DeepGEMM's name)
    """Silence file descriptors 1 and 2 (C and CUDA libraries' prints too) inside the ``with`` block."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self._null = os.open(os.devnull, os.O_WRONLY)
        self._saved = [os.dup(1), os.dup(2)]
        os.dup2(self._null, 1)
        os.dup2(self._null, 2)
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self._saved):
            os.dup2(saved, fd)
            os.close(saved)
        os.close(self._null)


def bench_kineto(fn: Callable, kernel_names: str | tuple[str, ...], num_tests: int = 30,
                 suppress_kineto_output: bool = False, trace_path: str | None = None, flush_l2: bool = True,
                 with_multiple_kernels: bool = False, barrier: Callable | None = None):
    """Mean device seconds per call of the kernels of ``fn`` named by ``kernel_names`` (a substring, or a tuple
    of them: a tuple of times back), over ``num_tests`` profiled calls (see the module doc for names finegemm's
    kernels do not carry). ``trace_path`` and ``with_multiple_kernels`` are accepted and unused; ``barrier`` is
    called before each call."""
    del trace_path, with_multiple_kernels
    names = (kernel_names,) if isinstance(kernel_names, str) else tuple(kernel_names)
    if int(os.environ.get("DG_USE_NVIDIA_TOOLS", "0") or 0):
        return (1,) * len(names) if isinstance(kernel_names, tuple) else 1
    device = torch.device("cuda", torch.cuda.current_device())
    flush = L2Flush(device, enabled=flush_l2)
    fn()  # compile and autotune outside the profiled run
    torch.cuda.synchronize()
    flush_names = set(name for name, _, _ in _device_activities(flush)) if flush_l2 else set()

    def run() -> None:
        for _ in range(num_tests):
            flush()
            if barrier is not None:
                barrier()
            fn()

    quiet = suppress_stdout_stderr if suppress_kineto_output else empty_suppress
    with quiet():
        acts = [a for a in _device_activities(run) if a[0] not in flush_names]
    times = [sum(end - start for name, start, end in acts if want in name) / num_tests / 1e9 for want in names]
    if not any(times):
        times[0] = sum(end - start for _, start, end in acts) / num_tests / 1e9
    return tuple(times) if isinstance(kernel_names, tuple) else times[0]


__all__ = ["bench", "bench_kineto", "empty_suppress", "suppress_stdout_stderr"]
