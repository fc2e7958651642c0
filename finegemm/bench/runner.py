"""Run every case x peer: build fresh inputs, check each peer's result against the float64 reference,
then time it; derive TFLOPS, GB/s, the HBM floor and the ratios the report prints.
"""

from __future__ import annotations

import gc
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

import finegemm

from ..api.dispatch import BackendError
from .inputs import make_inputs
from .peers import Peer, Prepared, Refused
from .suites import Case, missing_op
from .timer import L2Flush, Timing, capture_graph, host_overhead, time_call, time_kernels

# Datasheet dense rates of the H100/H200 SXM (TFLOPS): FP8 1979, BF16 989. They only decide whether a
# shape is memory-bound (its HBM floor exceeds its compute floor at this rate); no ratio uses them.
PEAK_TFLOPS = {"fp8": 1979.0, "bf16": 989.0}
CEILING_PEER = "cublas-tensor"


@dataclass
class RunOptions:
    warmup: int = 5
    repeats: int = 30
    graph: bool = False
    flush: bool = True
    flush_mode: str = "zero"  # timer.L2Flush: "zero" (the anchors' method) or "read" (no dirty lines left)
    seed: int = 0
    verbose_errors: bool = False
    kernel_time: bool = False  # also time each call's device span from the profiler (timer.time_kernels)


@dataclass
class PeerResult:
    """One peer on one case. ``status``: ok, fail (wrong result), error (raised), refused, skipped."""

    status: str
    reason: str = ""
    timing: Timing | None = None
    calc_diff: float | None = None
    note: str = ""
    kernel_timing: Timing | None = None  # the device span per call (RunOptions.kernel_time)

    @property
    def us(self) -> float | None:
        return self.timing.median_us if self.timing else None

    @property
    def kernel_us(self) -> float | None:
        return self.kernel_timing.median_us if self.kernel_timing else None


@dataclass
class CaseResult:
    case: Case
    results: dict[str, PeerResult] = field(default_factory=dict)
    ours: dict[str, bool] = field(default_factory=dict)  # peer name -> is a finegemm peer
    hbm_floor_us: float | None = None
    memory_bound: bool | None = None

    def metrics(self, peer: str) -> dict[str, float | None]:
        """us, TFLOPS, GB/s, % of the per-tensor ceiling's speed, % of the HBM floor for ``peer``."""
        r = self.results.get(peer)
        us = r.us if r else None
        if not us:
            return {"us": None, "TFLOPS": None, "GBps": None, "pct_ceiling": None, "pct_hbm_floor": None}
        ceil = self.results.get(CEILING_PEER)
        ceil_us = ceil.us if ceil and ceil.status == "ok" else None
        return {
            "us": us,
            "TFLOPS": self.case.flops / (us * 1e-6) / 1e12,
            "GBps": self.case.bytes / (us * 1e-6) / 1e9,
            "pct_ceiling": 100.0 * ceil_us / us if ceil_us else None,
            "pct_hbm_floor": 100.0 * self.hbm_floor_us / us if self.hbm_floor_us else None,
        }

    def speedup(self, ours: str, other: str) -> float | None:
        """``other``'s time over ``ours`` (> 1: finegemm is faster); None unless both ran correctly."""
        a, b = self.results.get(ours), self.results.get(other)
        if not (a and b and a.status == "ok" and b.status == "ok" and a.us and b.us):
            return None
        return b.us / a.us


def _floor(case: Case, copy_gbps: float | None) -> tuple[float | None, bool | None]:
    if not copy_gbps:
        return None, None
    floor_us = case.bytes / (copy_gbps * 1e9) * 1e6
    compute_us = case.flops / (PEAK_TFLOPS["fp8" if case.is_fp8 else "bf16"] * 1e12) * 1e6
    return floor_us, floor_us > compute_us


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:240] if text else ''}"


def run_peer(peer: Peer, case: Case, inp: Any, device: torch.device, flush: L2Flush, opts: RunOptions) -> PeerResult:
    """Check then time one peer on one case (exceptions become refused / error results)."""
    prepared: Prepared | None = None
    try:
        prepared = peer.prepare(case, inp)
        with prepared.context():
            prepared.reset()
            prepared.fn()
            _sync(device)
            diff = inp.check(prepared.output(), prepared.family, prepared.with_c)
            # one graph serves both timers (a second capture would add a second set of graph-owned buffers)
            replay = capture_graph(prepared.fn) if opts.graph and device.type == "cuda" else None
            timing = time_call(prepared.fn, device, flush, opts.warmup, opts.repeats, opts.graph, replay)
            kernel_timing = None
            if opts.kernel_time and device.type == "cuda" and flush.buf is not None:
                kernel_timing = time_kernels(replay or prepared.fn, flush, opts.warmup, opts.repeats)
    except Refused as e:
        return PeerResult("refused", str(e))
    except BackendError as e:
        return PeerResult("refused", _short(e))
    except Exception as e:
        if opts.verbose_errors:
            traceback.print_exc()
        # Ours raising is a failure; a peer raising on a shape it does not take is a refusal.
        return PeerResult("error" if peer.is_ours else "refused", _short(e))
    ok = diff == diff and diff < case.tolerance  # NaN fails
    note = prepared.note if prepared else ""
    reason = "" if ok else f"calc_diff {diff:.3g} >= {case.tolerance:g}" if diff == diff else "NaN in the result"
    return PeerResult("ok" if ok else "fail", reason, timing, diff, note, kernel_timing)


def run_cases(
    cases: list[Case],
    peers: list[Peer],
    device: torch.device,
    opts: RunOptions,
    copy_gbps: float | None,
    on_case: Callable[[int, CaseResult], None] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> list[CaseResult]:
    """Every case against every peer that handles its kind; ``on_case`` after each case (progress, JSON)."""
    flush = L2Flush(device, enabled=opts.flush, mode=opts.flush_mode)
    availability = {p.name: p.available(device) for p in peers}
    results = []
    for index, case in enumerate(cases):
        cr = CaseResult(case)
        cr.hbm_floor_us, cr.memory_bound = _floor(case, copy_gbps)
        missing = missing_op(case, finegemm)
        inp = make_inputs(case, device, opts.seed * 100003 + index) if missing is None else None
        for peer in peers:
            if case.kind not in peer.kinds:
                continue
            cr.ours[peer.name] = peer.is_ours
            if on_step:
                on_step(f"{case.suite} {case.name} {peer.name}")
            if missing is not None:
                cr.results[peer.name] = PeerResult("skipped", missing)
            elif availability[peer.name]:
                cr.results[peer.name] = PeerResult("skipped", availability[peer.name])
            else:
                cr.results[peer.name] = run_peer(peer, case, inp, device, flush, opts)
        del inp
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        results.append(cr)
        if on_case:
            on_case(index, cr)
    return results


def measure_host_overhead(peers: list[Peer], device: torch.device, case: Case, seed: int = 0) -> dict[str, Any]:
    """Per-call host cost of back-to-back launches of one small, already compiled ``case`` per peer."""
    out: dict[str, Any] = {"case": case.params()}
    inp = make_inputs(case, device, seed)
    availability = {p.name: p.available(device) for p in peers}
    for peer in peers:
        if case.kind not in peer.kinds:
            continue
        if availability[peer.name]:
            out[peer.name] = {"status": "skipped", "reason": availability[peer.name]}
            continue
        try:
            prepared = peer.prepare(case, inp)
            with prepared.context():
                on_gpu = device.type == "cuda"
                out[peer.name] = {"status": "ok", **host_overhead(
                    prepared.fn, device, calls=200 if on_gpu else 2, rounds=5 if on_gpu else 1,
                    warmup=10 if on_gpu else 1)}
        except (Refused, BackendError) as e:
            out[peer.name] = {"status": "refused", "reason": _short(e)}
        except Exception as e:
            out[peer.name] = {"status": "error" if peer.is_ours else "refused", "reason": _short(e)}
    return out
