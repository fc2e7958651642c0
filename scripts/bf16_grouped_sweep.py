"""Config sweep of the sm90 m-grouped BF16 kernel on the issue-6 shapes (H200), to set the rules by measurement.

Usage: ``PYTHONPATH=. python3 scripts/bf16_grouped_sweep.py [--budget-s 150] [--masked-only]``. Per shape fresh random
normal bf16 inputs; every config launched through ``dispatch_bf16_grouped`` directly (the rules bypassed),
checked against the cuBLAS loop's output (calc_diff) and timed with finegemm.bench.timer.time_cuda (CUDA
events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20). Also the dense BF16 kernel on the
contiguous shapes' total rows (one B), to separate grouped scheduling from the tile's own rate.
Writes ``$OUT/bf16_grouped_sweep.json`` after every shape; stops starting new shapes past the budget.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import time

import torch
import triton

from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import make_bf16_config
from finegemm.jit.heuristics_sm90_bf16_grouped import (
    get_sm90_bf16_grouped_config,
    grouped_estimate_us,
    make_bf16_grouped_config,
)
from finegemm.kernels.sm90 import dispatch_bf16, dispatch_bf16_grouped
from finegemm.reference.dense import calc_diff

DEV = torch.device("cuda")
MASKED_TILES = [(64, 64), (64, 128), (128, 64), (128, 128), (128, 256)]
DECODE_TILES = [(64, 64), (64, 128), (64, 256)]


def _masked(g, m, n, k, tiles, facts, flush, reps):
    a = torch.randn(g, m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16)
    masked_m = torch.full((g,), m, device=DEV, dtype=torch.int32)
    ref = torch.empty(g, m, n, device=DEV, dtype=torch.bfloat16)
    for i in range(g):
        torch.matmul(a[i], b[i].T, out=ref[i])

    def cublas():
        for i in range(g):
            torch.matmul(a[i], b[i].T, out=ref[i])

    desc = GemmDesc("bf16", m, n, k, layout="m_grouped_masked", num_groups=g, expected_m=m)
    out = dict(kind="masked", groups=g, m_per_group=m, N=n, K=k,
               heuristic=get_sm90_bf16_grouped_config(desc, facts).__dict__,
               cublas_us=time_cuda(cublas, flush, 3, reps).median_us, configs=[])
    for bm, bn in tiles:
        cfg = make_bf16_grouped_config(facts, bm, bn)
        d = torch.full((g, m, n), float("nan"), device=DEV, dtype=torch.bfloat16)

        run = functools.partial(dispatch_bf16_grouped.m_grouped_bf16_gemm_masked, desc, cfg, a, None, b, None, d,
                                masked_m, m)
        run()
        torch.cuda.synchronize()
        us = time_cuda(run, flush, 3, reps).median_us
        out["configs"].append(dict(cfg=cfg.__dict__, diff=calc_diff(d, ref), us=us,
                                   model_us=grouped_estimate_us(desc, facts, bm, bn)))
    return out


def _contiguous(g, mpg, n, k, variants, facts, flush, reps):
    m = g * mpg
    a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16)
    layout = torch.arange(g, device=DEV, dtype=torch.int32).repeat_interleave(mpg)
    ends = torch.arange(1, g + 1, device=DEV, dtype=torch.int32) * mpg
    ref = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)

    def cublas():
        for i in range(g):
            torch.matmul(a[i * mpg:(i + 1) * mpg], b[i].T, out=ref[i * mpg:(i + 1) * mpg])

    cublas()
    desc = GemmDesc("bf16", m, n, k, layout="m_grouped_contiguous", num_groups=g)
    out = dict(kind="contiguous", groups=g, m_per_group=mpg, N=n, K=k,
               cublas_us=time_cuda(cublas, flush, 3, reps).median_us, configs=[])
    for bm, bn, gm, psum in variants:
        cfg = make_bf16_grouped_config(facts, bm, bn, gm)
        d = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
        lay = ends if psum else layout

        run = functools.partial(dispatch_bf16_grouped.m_grouped_bf16_gemm_contiguous, desc, cfg, a, None, b, None, d,
                                lay, psum)
        run()
        torch.cuda.synchronize()
        out["configs"].append(dict(cfg=cfg.__dict__, psum=psum, diff=calc_diff(d, ref),
                                   us=time_cuda(run, flush, 3, reps).median_us))
    # the dense kernel on the same rows with group 0's B (its rate without the grouped schedule)
    ddesc = GemmDesc("bf16", m, n, k)
    dcfg = make_bf16_config(ddesc, facts, 128, 256)
    d = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    b0 = b[0]
    out["dense_same_rows_us"] = time_cuda(lambda: dispatch_bf16.bf16_gemm(ddesc, dcfg, a, b0, d, None), flush, 3,
                                          reps).median_us
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--masked-only", action="store_true", help="the masked shapes only (no contiguous ones)")
    args = ap.parse_args()
    t0 = time.time()
    facts = device_facts(DEV)
    flush = L2Flush(DEV)
    path = os.path.join(os.environ.get("OUT", "."), "bf16_grouped_sweep.json")
    commit = open(".commit").read().strip() if os.path.exists(".commit") else "unknown"
    meta = dict(what="sm90 m-grouped BF16 config sweep", gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                triton=triton.__version__, commit=commit, date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                method=f"CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, median of {args.reps}")
    jobs = []
    for n, k in ((4096, 7168), (7168, 2048)):
        jobs.append(("m", (16, 64, n, k, DECODE_TILES)))
        jobs.append(("m", (4, 256, n, k, MASKED_TILES)))
        jobs.append(("m", (2, 512, n, k, MASKED_TILES)))
    for n, k in () if args.masked_only else ((4096, 7168), (7168, 2048)):
        jobs.append(("c", (4, 8192, n, k, [(128, 256, 16, False), (128, 128, 8, False), (128, 256, 8, True)])))
    rows = []
    for kind, job in jobs:
        if time.time() - t0 > args.budget_s:
            print("budget spent; skipped", kind, job[:4], flush=True)
            continue
        torch.manual_seed(sum(job[:4]))
        row = _masked(*job, facts, flush, args.reps) if kind == "m" else _contiguous(*job, facts, flush, args.reps)
        rows.append(row)
        with open(path, "w") as f:
            json.dump(dict(meta, rows=rows), f, indent=1)
        cfgs = " ".join(f"{c['cfg']['block_m']}x{c['cfg']['block_n']}s{c['cfg']['stages']}"
                        f"{'g' + str(c['cfg']['group_m']) if c['cfg']['group_m'] != 8 else ''}"
                        f"{'p' if c.get('psum') else ''}={c['us']:.1f}(d{c['diff']:.0e})" for c in row["configs"])
        extra = f" dense {row['dense_same_rows_us']:.1f}" if "dense_same_rows_us" in row else ""
        print(f"{row['kind']:10s} {row['groups']:2d}x{row['m_per_group']:5d} {row['N']}x{row['K']} cuBLAS "
              f"{row['cublas_us']:.1f} | {cfgs}{extra} | t={time.time() - t0:.0f}s", flush=True)
        del row
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
