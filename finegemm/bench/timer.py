"""Timing: CUDA events around each call with the L2 flushed before it, optional CUDA-graph replay, the
device-side kernel span of each call from the profiler, host overhead per call, device-to-device copy
bandwidth, and a wall-clock fallback for the CPU smoke mode.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import torch

# 1 GiB: many times the H200's 60 MB L2 (DESIGN.md §7, the anchors' method), so nothing survives a flush.
FLUSH_BYTES = 1 << 30
# Each buffer of the copy-bandwidth test: 1 GiB read + 1 GiB written per copy, far past L2.
COPY_BYTES = 1 << 30


@dataclass(frozen=True)
class Timing:
    """Per-call times in microseconds over ``samples`` timed calls."""

    median_us: float
    min_us: float
    max_us: float
    samples: int
    method: str  # "cuda-events", "cuda-graph", "kernel-span" or "wall"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _summary(times_us: list[float], method: str) -> Timing:
    return Timing(statistics.median(times_us), min(times_us), max(times_us), len(times_us), method)


FLUSH_MODES = ("zero", "read")


class L2Flush:
    """Pushes the timed call's operands out of L2 — call before each timed call (a no-op on the CPU).

    ``mode`` "zero" (the anchors' method, DeepGEMM's too): zeroes a buffer of ``nbytes``, which leaves L2 full
    of dirty lines, so the call's first ~L2-size of reads also pays their write-back to HBM. "read": sums the
    buffer instead, leaving clean lines: the call's reads alone reach HBM.
    """

    def __init__(self, device: torch.device, nbytes: int = FLUSH_BYTES, enabled: bool = True,
                 mode: str = "zero") -> None:
        if mode not in FLUSH_MODES:
            raise ValueError(f"flush mode must be one of {FLUSH_MODES}, got {mode!r}")
        self.mode = mode
        self.buf = torch.empty(nbytes, dtype=torch.uint8, device=device) if enabled and device.type == "cuda" else None

    def __call__(self) -> None:
        if self.buf is None:
            return
        if self.mode == "zero":
            self.buf.zero_()
        else:
            self.buf.view(torch.int64).sum()


def capture_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture ``fn`` (already warmed up) into a CUDA graph; returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # one call on the capture stream, so lazy per-stream state (cuBLAS workspaces) exists
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def time_cuda(fn: Callable[[], Any], flush: L2Flush, warmup: int, repeats: int, graph: bool = False,
              replay: Callable[[], Any] | None = None) -> Timing:
    """Median over ``repeats`` calls of the time between CUDA events recorded just around each call; with
    ``graph``, of replays of a CUDA graph of ``fn`` (``replay``: one :func:`capture_graph` already made)."""
    run = (replay or capture_graph(fn)) if graph else fn
    for _ in range(warmup):
        flush()
        run()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends):
        flush()
        start.record()
        run()
        end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    return _summary(times, "cuda-graph" if graph else "cuda-events")


def call_spans(activities: list[tuple[str, int, int]], flush_names: list[str], per_call: int) -> list[float]:
    """Device span of each call in a profiled run of ``flush(); call()`` repeated, in microseconds.

    ``activities``: the run's device activities (kernels, memsets, copies) as ``(name, start_ns, end_ns)``;
    ``flush_names``: the activities one flush enqueues; ``per_call``: how many one call enqueues. In start
    order the run is flush, call, flush, call, ...; a call's span runs from the start of its first activity
    to the end of its last (launches that overlap, e.g. programmatic dependent ones, count once; the launch
    latency before the first kernel does not count). A call with no activity spans 0.
    """
    chunk = len(flush_names) + per_call
    if not flush_names or len(activities) % chunk:
        raise ValueError(f"{len(activities)} device activities are not calls of {len(flush_names)} flush and "
                         f"{per_call} call activities each")
    ordered = sorted(activities, key=lambda a: a[1])
    spans = []
    for i in range(0, len(ordered), chunk):
        head, body = ordered[i:i + len(flush_names)], ordered[i + len(flush_names):i + chunk]
        if sorted(name for name, _, _ in head) != sorted(flush_names):
            raise ValueError(f"expected the flush ({flush_names}) at activity {i}, got {[n for n, _, _ in head]}")
        spans.append((max(e for _, _, e in body) - min(s for _, s, _ in body)) / 1e3 if body else 0.0)
    return spans


def _device_activities(run: Callable[[], Any]) -> list[tuple[str, int, int]]:
    """``(name, start_ns, end_ns)`` of every device activity (kernel, memset, copy) ``run()`` enqueues."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return [(e.name(), e.start_ns(), e.end_ns()) for e in prof.profiler.kineto_results.events()
            if e.device_type() == torch.autograd.DeviceType.CUDA and not e.is_user_annotation()]


def time_kernels(fn: Callable[[], Any], flush: L2Flush, warmup: int, repeats: int) -> Timing:
    """Median over ``repeats`` calls of the device span of each call's activities (:func:`call_spans`): the
    kernel time DeepGEMM's own tests report (its ``bench_kineto``), without the launch latency that
    :func:`time_cuda`'s events include. The L2 flush before each call separates the calls."""
    if flush.buf is None:
        raise ValueError("time_kernels needs the L2 flush: its activities mark where each call starts")
    for _ in range(warmup):
        flush()
        fn()
    flush_names = [name for name, _, _ in _device_activities(flush)]
    per_call = len(_device_activities(fn))

    def run() -> None:
        for _ in range(repeats):
            flush()
            fn()

    return _summary(call_spans(_device_activities(run), flush_names, per_call), "kernel-span")


def time_wall(fn: Callable[[], Any], warmup: int, repeats: int) -> Timing:
    """Wall-clock median (CPU tensors through the interpreter: exercises the code path, not a speed)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return _summary(times, "wall")


def time_call(fn: Callable[[], Any], device: torch.device, flush: L2Flush, warmup: int, repeats: int,
              graph: bool = False, replay: Callable[[], Any] | None = None) -> Timing:
    if device.type == "cuda":
        return time_cuda(fn, flush, warmup, repeats, graph, replay)
    return time_wall(fn, warmup, repeats)


def host_overhead(fn: Callable[[], Any], device: torch.device, calls: int = 200, rounds: int = 5,
                  warmup: int = 10) -> dict[str, float]:
    """Microseconds per call of ``calls`` back-to-back launches (no flush, no sync in between).

    ``enqueue_us``: host time to issue one call (what the Python side costs); ``wall_us``: time per call
    until the device finished them all — for a small shape, whichever of host or device is slower.
    Medians over ``rounds``.
    """
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    enqueue, wall = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        enqueue.append((t1 - t0) / calls * 1e6)
        wall.append((t2 - t0) / calls * 1e6)
    return {"enqueue_us": statistics.median(enqueue), "wall_us": statistics.median(wall), "calls": calls}


def copy_bandwidth(device: torch.device, nbytes: int = COPY_BYTES, repeats: int = 10) -> float | None:
    """Device-to-device copy rate in GB/s (bytes read + bytes written), None off the GPU."""
    if device.type != "cuda":
        return None
    src = torch.randint(1, 255, (nbytes,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends):
        start.record()
        dst.copy_(src)
        end.record()
    torch.cuda.synchronize()
    ms = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))
    del src, dst
    return 2 * nbytes / (ms * 1e-3) / 1e9
