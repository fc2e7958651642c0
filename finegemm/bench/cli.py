"""``python -m finegemm bench``: arguments and the driver.

``finegemm/__main__.py`` calls :func:`add_arguments` on its ``bench`` sub-parser and
:func:`main` with the parsed namespace; ``python -m finegemm.bench`` does the same on its own parser.

Exit codes: 0 all finegemm results correct; 1 a finegemm result failed (calc_diff over the bound, NaN,
or an exception); 2 bad arguments. Peers' failures are marked in the table and JSON but do not change
the exit code (they are not ours to fix).
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from typing import Any

import torch

import finegemm

from . import report, suites, sysinfo
from .peers import PEER_NAMES, make_peers
from .plot import plot
from .progress import Progress
from .runner import RunOptions, measure_host_overhead, run_cases
from .timer import copy_bandwidth

SHAPE_SUITES = ("dense", "weight-grad", "bf16")  # suites --shapes can replace the shapes of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the bench options to ``parser``."""
    parser.add_argument("--suite", default=None,
                        help=f"comma-separated suites among {', '.join(suites.SUITES)}, or 'all' (default: dense)")
    parser.add_argument("--shapes", default=None,
                        help="custom 'M,N,K;M,N,K' list for the dense suite (or for weight-grad / bf16 when "
                             "--suite names one of them)")
    parser.add_argument("--cases", default=None, metavar="PATTERNS",
                        help="keep only the cases whose name matches one of these comma-separated shell patterns "
                             "(e.g. '4096x*+c,4096x576x7168'); a pattern matching no case is an error")
    parser.add_argument("--peers", default=None,
                        help=f"comma-separated peer names or prefixes (default all): {', '.join(PEER_NAMES)}")
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                        help="write every number, with device, versions, commit and date, to PATH "
                             "(rewritten after each case, so a cut-off run keeps what it measured)")
    parser.add_argument("--plot", dest="plot_path", default=None, metavar="PATH.png",
                        help="bar chart per shape per peer with speedup markers (needs matplotlib)")
    parser.add_argument("--graph", action="store_true", help="time CUDA-graph replays instead of eager calls")
    parser.add_argument("--kernel-time", action="store_true",
                        help="also time each call's device span from torch's profiler (kernel time, no launch "
                             "latency: what DeepGEMM's own tests report); JSON key kernel_us")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per peer and case (default 30; smoke 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls first (default 5; smoke 1)")
    parser.add_argument("--no-flush", action="store_true", help="do not flush L2 (1 GiB zero) before each call")
    parser.add_argument("--flush-mode", choices=["zero", "read"], default="zero",
                        help="zero (default, the anchors' method: leaves L2 dirty, so a call's first reads also pay "
                             "write-backs) or read (sums the 1 GiB buffer: clean lines)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes for every suite (CPU interpreter in CI); implied without a CUDA GPU")
    parser.add_argument("--host-overhead", action="store_true",
                        help="also measure us/call of back-to-back launches of a small cached shape per peer")
    parser.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    parser.add_argument("--seed", type=int, default=0, help="base seed; every case draws its own data from it")
    parser.add_argument("--plain", action="store_true", help="plain-text table and progress even if rich is installed")
    parser.add_argument("--no-progress", action="store_true", help="no progress output on stderr")
    parser.add_argument("--verbose-errors", action="store_true", help="print tracebacks of finegemm errors")
    parser.add_argument("--commit", default=None,
                        help="finegemm commit to record (wins over a .git found beside the package: "
                             "a copy on a lent GPU may carry a stale one)")


def _suites(arg: str | None) -> list[str]:
    if not arg:
        return ["dense"]
    names = [s.strip() for s in arg.split(",") if s.strip()]
    if "all" in names:
        return list(suites.SUITES)
    bad = [s for s in names if s not in suites.SUITES]
    if bad:
        raise ValueError(f"--suite: unknown {bad}; known: {', '.join(suites.SUITES)}, all")
    return names


def build_cases(args: argparse.Namespace) -> tuple[list[suites.Case], list[dict[str, Any]]]:
    """Cases to run and the unavailable ones (suites whose finegemm op does not exist yet)."""
    names = _suites(args.suite)
    shapes = suites.parse_shapes(args.shapes) if args.shapes else None
    cases: list[suites.Case] = []
    unavailable: list[dict[str, Any]] = []
    for name in names:
        if shapes is not None and name in SHAPE_SUITES and not args.smoke:
            chosen = {"dense": suites.dense_cases, "weight-grad": suites.weight_grad_cases,
                      "bf16": suites.bf16_cases}[name](shapes)
        else:
            chosen = suites.suite_cases(name, smoke=args.smoke)
        ops = sorted({c.op for c in chosen})
        missing = [op for op in ops if not hasattr(finegemm, op)]
        if missing:
            unavailable.append({"suite": name, "missing": missing, "cases": len(chosen),
                                "reason": f"finegemm has no {', '.join(missing)} yet"})
            chosen = [c for c in chosen if c.op not in missing]
        cases += chosen
    if args.cases is not None:
        cases = select_cases(cases, args.cases)
    return cases, unavailable


def select_cases(cases: list[suites.Case], patterns: str) -> list[suites.Case]:
    """The ``cases`` whose name matches one of the comma-separated shell ``patterns`` (``--cases``), in order;
    raises ValueError naming a pattern that matches none."""
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    if not wanted:
        raise ValueError("--cases: no pattern given")
    unmatched = [p for p in wanted if not any(fnmatch.fnmatchcase(c.name, p) for c in cases)]
    if unmatched:
        raise ValueError(f"--cases: {unmatched} match no case of the chosen suites "
                         f"(names look like {cases[0].name!r})" if cases else f"--cases: {unmatched}: no cases")
    return [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) for p in wanted)]


def main(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args`` (from :func:`add_arguments`); returns the exit code."""
    out = sys.stdout
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench: --device cuda but no CUDA GPU is visible", file=sys.stderr)
        return 2
    if device.type != "cuda" and not args.smoke:
        print("bench: no CUDA GPU: running the CPU smoke mode (tiny shapes through Triton's interpreter)",
              file=sys.stderr)
        args.smoke = True
    try:
        cases, unavailable = build_cases(args)
        peers = make_peers([p.strip() for p in args.peers.split(",") if p.strip()] if args.peers else None)
    except ValueError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    opts = RunOptions(
        warmup=args.warmup if args.warmup is not None else (1 if args.smoke else 5),
        repeats=args.repeats if args.repeats is not None else (2 if args.smoke else 30),
        graph=args.graph and device.type == "cuda", flush=not args.no_flush, flush_mode=args.flush_mode,
        seed=args.seed,
        verbose_errors=args.verbose_errors, kernel_time=args.kernel_time and device.type == "cuda",
    )
    if args.kernel_time and args.no_flush:
        print("bench: --kernel-time needs the L2 flush (its kernels separate the calls): drop --no-flush",
              file=sys.stderr)
        return 2
    if opts.repeats < 1 or opts.warmup < 0:
        print("bench: --repeats must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2

    meta = sysinfo.collect(device)
    if args.commit:
        # the caller names the tree it copied (a lent GPU's copy may carry a stale .git of its own)
        meta["git"] = {"commit": args.commit, "dirty": None, "source": "--commit", "git_here": meta["git"]}
    dev = meta["device"]
    print(f"finegemm bench on {dev['name']}" + (f" ({dev['sm_count']} SMs)" if "sm_count" in dev else "")
          + f", torch {meta['versions']['torch']}, triton {meta['versions']['triton']}, "
          f"commit {(meta['git']['commit'] or 'unknown')[:10]}{' (dirty)' if meta['git']['dirty'] else ''}", file=out)
    for u in unavailable:
        print(f"suite {u['suite']}: unavailable ({u['reason']}); {u['cases']} cases defined", file=out)
    copy_gbps = copy_bandwidth(device)
    options = {"warmup": opts.warmup, "repeats": opts.repeats, "graph": opts.graph, "flush_bytes":
               (1 << 30) if opts.flush and device.type == "cuda" else 0, "flush_mode": opts.flush_mode,
               "seed": opts.seed, "smoke": args.smoke,
               "peers": [p.name for p in peers], "kernel_time": opts.kernel_time}

    steps = sum(1 for c in cases for p in peers if c.kind in p.kinds)
    progress = Progress(steps, enabled=not args.no_progress, plain=args.plain)
    done: list = []

    def on_case(_: int, cr) -> None:
        done.append(cr)
        if args.json_path:
            report.write_json(args.json_path, report.document(meta, options, copy_gbps, done, unavailable, None,
                                                              complete=False))

    try:
        results = run_cases(cases, peers, device, opts, copy_gbps, on_case=on_case, on_step=progress.step)
    finally:
        progress.close()
    if device.type == "cuda":
        meta["device"]["clocks_after"] = sysinfo.gpu_clocks()  # the clocks at start are often idle ones
    host = None
    if args.host_overhead:
        small = suites.Case("host", "fp8_gemm", 16, 64, 128) if args.smoke else suites.Case("host", "fp8_gemm", 128,
                                                                                           512, 512)
        host = measure_host_overhead(peers, device, small, seed=args.seed)

    by_suite: dict[str, list] = {}
    for cr in results:
        by_suite.setdefault(cr.case.suite, []).append(cr)
    for name, crs in by_suite.items():
        report.print_table(f"{name} on {dev['name']} ({opts.repeats} timed calls, median"
                           f"{', graphs' if opts.graph else ''})", crs, out, plain=args.plain)
    s = report.summary(results)
    report.print_summary(s, {k: v for k, v in (host or {}).items() if k != "case"}, copy_gbps, out)
    if args.json_path:
        report.write_json(args.json_path, report.document(meta, options, copy_gbps, results, unavailable, host,
                                                          complete=True))
        print(f"wrote {args.json_path}", file=out)
    if args.plot_path:
        why = plot(results, args.plot_path, f"finegemm bench on {dev['name']}")
        print(f"plot: {why}" if why else f"wrote {args.plot_path}", file=out)
    return 1 if s["finegemm_failures"] else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m finegemm.bench", description="finegemm benchmark harness")
    add_arguments(p)
    return p
