"""``python -m finegemm warmup``: compile every kernel a model's GEMM calls need into the disk cache, once each.

On a GPU each distinct kernel (:func:`finegemm.warmup.enumerate_kernels`) is compiled by one real call of the public
API at the first M that needs it, so the warm-up compiles exactly what dispatch would: the same desc, config,
constexprs, Triton specialization, options and environment, hence the same Triton cache key. Calls run in
``--jobs`` spawned processes (compiling is CPU-bound: LLVM and ptxas); the cache is Triton's, under
``FINEGEMM_CACHE_DIR`` (``TRITON_CACHE_DIR``). A later process finds every kernel there: its first call of each
kernel loads the cubin instead of compiling it.

Without a GPU, ``--compile-only`` compiles the sm90 kernels for ``GPUTarget("cuda", 90, 32)`` through
:mod:`finegemm.kernels.sm90.compile_check`: a check that every kernel compiles (and how long that takes), not a cache
for a GPU process. Its cache keys differ from a launch's: the JIT adds the launch's specialization attributes (16-byte
divisibility of pointers and of M, M == 1 compiled in) to the source's hash, and the CUDA backend's hash names the
ptxas version, which FINEGEMM_PTXAS may pick differently on the GPU machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from . import warmup
from .jit import env

DEFAULT_M = "1-8192"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``warmup`` subcommand's options."""
    parser.add_argument("--preset", default=None, choices=warmup.PRESETS,
                        help="a model's calls (default deepseek-v3 unless --shapes is given)")
    parser.add_argument("--shapes", default=None,
                        help="a shapes file: lines 'op N K [groups [max_m]]' (op dense, masked, contiguous) or JSON")
    parser.add_argument("--m", default=DEFAULT_M, help=f"M values: ranges and lists, e.g. 1-8192 or 1-256,4096 "
                                                       f"(default {DEFAULT_M}; masked: expected_m up to max_m)")
    parser.add_argument("--groups", type=int, default=warmup.DEFAULT_GROUPS,
                        help=f"local experts of the preset's grouped calls (default {warmup.DEFAULT_GROUPS})")
    parser.add_argument("--max-m", type=int, default=warmup.DEFAULT_MAX_M,
                        help=f"rows per expert of the preset's masked calls (default {warmup.DEFAULT_MAX_M})")
    parser.add_argument("--num-sms", type=int, default=None,
                        help="the SM cap the engine sets (finegemm.set_num_sms); default all of the device's")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="compiling processes (default: the CPU cores)")
    parser.add_argument("--dry-run", action="store_true", help="list the kernels, compile nothing")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU: compile the sm90 kernels for sm_90 as a check (not a cache a GPU process uses)")
    parser.add_argument("--json", default=None, help="write the summary as JSON to this path")


def calls_from_args(args: argparse.Namespace) -> list[warmup.WarmupCall]:
    """The calls ``--shapes`` or ``--preset`` name (ValueError on a bad file)."""
    if args.shapes is not None:
        with open(args.shapes) as f:
            calls = warmup.parse_shapes(f.read(), args.shapes)
        if args.preset is not None:
            calls = warmup.preset(args.preset, args.groups, args.max_m) + calls
        return calls
    return warmup.preset(args.preset or "deepseek-v3", args.groups, args.max_m)


def target_facts(num_sms: int | None, gpu: bool):
    """Device facts the kernels are chosen for: the current GPU's, else an H200's (sm_90, 132 SMs); ``num_sms``
    caps the SMs as :func:`finegemm.set_num_sms` would."""
    from .jit.device import H200, device_facts

    if gpu:
        import torch

        facts = device_facts(torch.device("cuda", torch.cuda.current_device()))
    else:
        facts = H200
    if num_sms is not None:
        if num_sms < 1:
            raise ValueError(f"--num-sms must be a positive int, got {num_sms}")
        facts = dataclasses.replace(facts, num_sms=min(num_sms, facts.num_sms))
    return facts


# Triton's compile events in this process: compile() calls that found their key in the disk cache, and those that
# compiled (knobs.compilation.listener)
_events = {"hits": 0, "compiles": 0}


def _listen(*, cache_hit: bool, **_: Any) -> None:
    _events["hits" if cache_hit else "compiles"] += 1


def _init_worker(num_sms: int | None) -> None:
    """A compiling process: count Triton's compile events, cap the SMs as the engine does."""
    import triton

    triton.knobs.compilation.listener = _listen
    if num_sms is not None:
        import finegemm

        finegemm.set_num_sms(num_sms)


def _counted(work, *args) -> dict:
    before = dict(_events)
    start = time.perf_counter()
    work(*args)
    return {"seconds": time.perf_counter() - start, "compiles": _events["compiles"] - before["compiles"],
            "hits": _events["hits"] - before["hits"]}


class CallInputs:
    """Operands of ``call`` on the current GPU for every M up to ``max_m`` (zero FP8 data, unit scales in the
    layouts the API requires, so nothing is transformed on the way); :meth:`run` makes the call at one M through
    ``api`` (``finegemm``, or a module with DeepGEMM's names such as ``deep_gemm``)."""

    def __init__(self, call: warmup.WarmupCall, max_m: int, api: Any = None) -> None:
        import torch

        import finegemm

        self.call, self.api = call, api or finegemm
        self.dev = dev = torch.device("cuda", torch.cuda.current_device())
        fp8 = torch.float8_e4m3fn
        self.sfk = sfk = call.k // 128
        sfn = -(-call.n // 128)
        g = call.groups
        if call.op == "dense":
            self.b = (torch.zeros(call.n, call.k, dtype=fp8, device=dev), torch.ones(sfn, sfk, device=dev))
            rows = max_m
        else:
            self.b = (torch.zeros(g, call.n, call.k, dtype=fp8, device=dev), torch.ones(g, sfn, sfk, device=dev))
            rows = call.max_m if call.op == "masked" else warmup.contiguous_rows(max_m)
        lead = (g,) if call.op == "masked" else ()
        self.a = torch.zeros(*lead, rows, call.k, dtype=fp8, device=dev)
        self.d = torch.empty(*lead, rows, call.n, dtype=torch.bfloat16, device=dev)
        if call.op == "masked":
            self.sfa = finegemm.get_mn_major_tma_aligned_tensor(torch.ones(g, rows, sfk, device=dev))

    def run(self, m: int) -> None:
        """The call at M = ``m`` (masked: ``expected_m`` and every expert's ``masked_m``)."""
        import torch

        import finegemm

        call, api, dev = self.call, self.api, self.dev
        if call.op == "masked":
            masked_m = torch.full((call.groups,), m, dtype=torch.int32, device=dev)
            api.m_grouped_fp8_gemm_nt_masked((self.a, self.sfa), self.b, self.d, masked_m, m)
            return
        rows = m if call.op == "dense" else warmup.contiguous_rows(m)
        sfa = finegemm.get_mn_major_tma_aligned_tensor(torch.ones(rows, self.sfk, device=dev))
        if call.op == "dense":
            api.fp8_gemm_nt((self.a[:rows], sfa), self.b, self.d[:rows])
            return
        align = finegemm.get_mk_alignment_for_contiguous_layout()
        segment = max(align, rows // call.groups // align * align)  # every expert's rows start on the alignment
        layout = (torch.arange(rows, device=dev) // segment).clamp(max=call.groups - 1).to(torch.int32)
        api.m_grouped_fp8_gemm_nt_contiguous((self.a[:rows], sfa), self.b, self.d[:rows], layout)


def _call_on_gpu(call: warmup.WarmupCall, m: int) -> None:
    """One call of the public API for ``call`` at M = ``m`` on the current GPU."""
    import torch

    CallInputs(call, m).run(m)
    torch.cuda.synchronize()


def _compile_on_cpu(kernel: warmup.Kernel) -> None:
    """Compile ``kernel`` (sm90) for sm_90 without a GPU."""
    from .kernels.sm90 import compile_check

    if kernel.desc.layout == "normal":
        compile_check.compile_variant(kernel.desc, kernel.config)
    else:
        compile_check.compile_grouped_variant(kernel.desc, kernel.config)


def gpu_task(call: warmup.WarmupCall, m: int) -> dict:
    """Worker entry: warm one kernel by a real call; returns seconds and Triton's compile events."""
    return _counted(_call_on_gpu, call, m)


def cpu_task(kernel: warmup.Kernel) -> dict:
    """Worker entry: compile one sm90 kernel for sm_90; returns seconds and Triton's compile events."""
    return _counted(_compile_on_cpu, kernel)


def _run_tasks(fn, tasks: list[tuple], jobs: int, num_sms: int | None) -> list[dict]:
    """``fn(*task)`` for each task, in ``jobs`` spawned processes where there is more than one task for them."""
    jobs = max(1, min(jobs, len(tasks)))
    if jobs == 1:
        import triton

        listener = triton.knobs.compilation.listener
        _init_worker(num_sms)
        try:
            return [fn(*task) for task in tasks]
        finally:
            triton.knobs.compilation.listener = listener
    import multiprocessing

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                             initargs=(num_sms,)) as pool:
        futures = [pool.submit(fn, *task) for task in tasks]
        return [f.result() for f in futures]


def run(calls: list[warmup.WarmupCall], ms: list[int], jobs: int, dry_run: bool = False, compile_only: bool = False,
        num_sms: int | None = None, out=None) -> dict:
    """Enumerate (and unless ``dry_run`` compile) the kernels of ``calls`` over ``ms``; returns the summary."""
    import torch

    out = out or sys.stdout
    gpu = torch.cuda.is_available() and not compile_only
    if not gpu and not compile_only and not dry_run:
        raise ValueError("no CUDA GPU here: pass --compile-only (a compile check for sm_90) or --dry-run")
    facts = target_facts(num_sms, gpu)
    start = time.perf_counter()
    plans = warmup.enumerate_kernels(calls, ms, facts)
    by_backend: dict[str, int] = {}
    for plan in plans:
        by_backend[plan.kernel.backend] = by_backend.get(plan.kernel.backend, 0) + 1
    summary: dict[str, Any] = {
        "mode": "dry-run" if dry_run else "gpu" if gpu else "compile-only (sm_90 check)",
        "device": facts.name, "num_sms": facts.num_sms, "calls": [str(c) for c in calls],
        "m_values": len(ms), "kernels": len(plans), "by_backend": by_backend, "cache_dir": env.apply_cache_dir(),
        "enumerate_seconds": round(time.perf_counter() - start, 3),
    }
    print(f"finegemm warmup: {len(calls)} calls x {len(ms)} M values -> {len(plans)} distinct kernels "
          f"({', '.join(f'{b}: {n}' for b, n in sorted(by_backend.items()))}) for {facts.name}, "
          f"{facts.num_sms} SMs", file=out)
    if dry_run:
        for plan in plans:
            print("  " + warmup.describe(plan), file=out)
        return summary
    if gpu:
        tasks = [(plan.call, plan.ms[0]) for plan in plans]
        results = _run_tasks(gpu_task, tasks, jobs, num_sms)
    else:
        # the compile check has no launch specialization: kernels that differ only in it compile once
        kernels = list(dict.fromkeys(dataclasses.replace(p.kernel, ints=()) for p in plans
                                     if p.kernel.backend == "sm90"))
        results = _run_tasks(cpu_task, [(k,) for k in kernels], jobs, num_sms)
    compiled = sum(1 for r in results if r["compiles"])
    cached = sum(1 for r in results if not r["compiles"] and r["hits"])
    seconds = time.perf_counter() - start
    summary.update(
        compiled_kernels=compiled, cached_kernels=cached, warmed=len(results),
        triton_compiles=sum(r["compiles"] for r in results), triton_cache_hits=sum(r["hits"] for r in results),
        jobs=max(1, min(jobs, len(results))), seconds=round(seconds, 3),
        compile_seconds_sum=round(sum(r["seconds"] for r in results), 3),
    )
    print(f"  warmed {len(results)}: compiled {compiled}, found in cache {cached} (Triton: "
          f"{summary['triton_compiles']} compiles, {summary['triton_cache_hits']} cache hits) in {seconds:.1f} s "
          f"with {summary['jobs']} processes; cache {summary['cache_dir']}", file=out)
    return summary


def main(args: argparse.Namespace) -> int:
    try:
        calls = calls_from_args(args)
        ms = warmup.parse_m_values(args.m)
        summary = run(calls, ms, args.jobs, args.dry_run, args.compile_only, args.num_sms)
    except (ValueError, OSError) as e:
        print(f"finegemm warmup: {e}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0
