"""GPU timing of the m-grouped BF16 GEMMs (issue 6 shapes): finegemm sm90 vs finegemm portable vs a cuBLAS loop.

Usage (on the H200): ``PYTHONPATH=. python3 scripts/bf16_grouped_bench.py [--reps 20] [--skip-portable]``.

Shapes: contiguous 4 x 8192 and 8 x 4096 tokens (every group full, no padding), masked (G, max_m) in
(1, 1024), (2, 512), (4, 256), (16, 64) with ``masked_m = max_m = expected_m``; each with (N, K) in
{(4096, 7168), (7168, 2048)}. Per shape fresh random normal bf16 inputs.

Peers, in the same process: ``finegemm-sm90`` (public API, the sm90 backend asserted chosen),
``finegemm-portable`` (public API with ``FINEGEMM_BACKEND=portable``), ``cublas-loop`` (a Python loop of
``torch.matmul(a_g, b_g.T, out=d_g)`` per group: cuBLAS BF16, group sizes known on the host). Each
output is checked against the cuBLAS loop's (calc_diff, float64) before timing.
Timing: finegemm.bench.timer.time_cuda: CUDA events around each call, 1 GiB zeroed before each (L2
flush), 5 warm-ups, median of ``--reps`` (>= 20). TFLOPS over the valid rows: ``2 * rows * N * K / t``.
Writes ``$OUT/bf16_grouped.json`` (GPU name, torch/triton versions, commit from ``.commit``, date) and
prints a table; DeepGEMM anchors are compared where /work/shared/anchors has BF16 grouped entries.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics

import torch
import triton

import finegemm
from finegemm.api.dispatch import choose_backend
from finegemm.bench.peers import env_override
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.heuristics import GemmDesc
from finegemm.reference.dense import calc_diff

DEV = torch.device("cuda")
NK = [(4096, 7168), (7168, 2048)]
CONTIGUOUS = [(4, 8192), (8, 4096)]
MASKED = [(1, 1024), (2, 512), (4, 256), (16, 64)]
ANCHORS = "/work/shared/anchors/h200-2026-12-02.json"


def _commit() -> str:
    try:
        with open(".commit") as f:
            return f.read().strip()
    except OSError:
        return os.environ.get("FG_COMMIT", "unknown")


def _bf16_anchors() -> dict:
    """DeepGEMM BF16 m-grouped anchors keyed (kind, G, m, N, K); empty where the file has none."""
    try:
        with open(ANCHORS) as f:
            data = json.load(f)
    except OSError:
        return {}
    out = {}
    for row in data.get("grouped", []):
        if "bf16" in json.dumps(row).lower():  # the 2026-12-02 file holds FP8 grouped entries only
            out[(row["kind"], row["groups"], row["m_per_group"], row["N"], row["K"])] = row
    return out


def _contiguous_case(g: int, mpg: int, n: int, k: int):
    m = g * mpg
    a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16)
    layout = torch.arange(g, device=DEV, dtype=torch.int32).repeat_interleave(mpg)
    d = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    desc = GemmDesc("bf16", m, n, k, layout="m_grouped_contiguous", num_groups=g)

    def ours():
        finegemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout)

    d_ref = torch.empty_like(d)
    views = [(a[i * mpg:(i + 1) * mpg], b[i].T, d_ref[i * mpg:(i + 1) * mpg]) for i in range(g)]

    def cublas():
        for x, w, out in views:
            torch.matmul(x, w, out=out)

    return desc, ours, cublas, d, d_ref, m, None


def _masked_case(g: int, max_m: int, n: int, k: int):
    a = torch.randn(g, max_m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16)
    masked = [max_m] * g
    masked_m = torch.tensor(masked, device=DEV, dtype=torch.int32)
    d = torch.empty(g, max_m, n, device=DEV, dtype=torch.bfloat16)
    desc = GemmDesc("bf16", max_m, n, k, layout="m_grouped_masked", num_groups=g, expected_m=max_m)

    def ours():
        finegemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, max_m)

    d_ref = torch.empty_like(d)
    views = [(a[i, :r], b[i].T, d_ref[i, :r]) for i, r in enumerate(masked)]

    def cublas():
        for x, w, out in views:
            torch.matmul(x, w, out=out)

    return desc, ours, cublas, d, d_ref, sum(masked), max_m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--skip-portable", action="store_true")
    args = ap.parse_args()
    assert args.reps >= 20, "median of at least 20"
    out_dir = os.environ.get("OUT", ".")
    path = os.path.join(out_dir, "bf16_grouped.json")
    flush = L2Flush(DEV)
    anchors = _bf16_anchors()
    meta = dict(
        what="m-grouped BF16 GEMMs (nt): finegemm sm90 vs finegemm portable vs a cuBLAS BF16 loop per group",
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
        cuda=torch.version.cuda, commit=_commit(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
        method=f"CUDA events around each call, 1 GiB zeroed before each (L2 flush), {args.warmup} warm-ups, median "
               f"of {args.reps}; fresh random normal bf16 inputs per shape; TFLOPS over valid rows",
        deepgemm_bf16_grouped_anchors=len(anchors),
    )
    cases = [("contiguous", g, mpg, n, k) for n, k in NK for g, mpg in CONTIGUOUS]
    cases += [("masked", g, m, n, k) for n, k in NK for g, m in MASKED]
    rows = []
    for kind, g, m, n, k in cases:
        torch.manual_seed(g * 7919 + m + n + k)
        make = _contiguous_case if kind == "contiguous" else _masked_case
        desc, ours, cublas, d, d_ref, valid_rows, _ = make(g, m, n, k)
        flops = 2 * valid_rows * n * k
        row = dict(kind=kind, groups=g, m_per_group=m, N=n, K=k, valid_rows=valid_rows)
        backend, cfg = choose_backend(desc, DEV)
        row["sm90_chosen"] = backend == "sm90"
        row["config"] = cfg.__dict__ if backend == "sm90" else None
        cublas()
        torch.cuda.synchronize()
        peers = [("finegemm-sm90", "auto", ours)]
        if not args.skip_portable:
            peers.append(("finegemm-portable", "portable", ours))
        for name, switch, fn in peers:
            with env_override("FINEGEMM_BACKEND", switch):
                try:
                    d.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    diff = calc_diff(d, d_ref)
                    t = time_cuda(fn, flush, args.warmup, args.reps)
                    row[name] = dict(us=t.median_us, min_us=t.min_us, max_us=t.max_us, tflops=flops / t.median_us / 1e6,
                                     diff_vs_cublas=diff)
                except Exception as e:  # record and go on: one failing peer must not lose the table
                    row[name] = dict(error=repr(e)[:300])
        t = time_cuda(cublas, flush, args.warmup, args.reps)
        row["cublas-loop"] = dict(us=t.median_us, min_us=t.min_us, max_us=t.max_us, tflops=flops / t.median_us / 1e6)
        ours_us = row["finegemm-sm90"].get("us")
        if ours_us:
            row["x_cublas"] = row["cublas-loop"]["us"] / ours_us
            if "us" in row.get("finegemm-portable", {}):
                row["x_portable"] = row["finegemm-portable"]["us"] / ours_us
        anchor = anchors.get(("contig" if kind == "contiguous" else "masked", g, m, n, k))
        row["deepgemm_anchor_us"] = anchor["deepgemm_us"] if anchor else None
        rows.append(row)
        with open(path, "w") as f:
            json.dump(dict(meta, rows=rows), f, indent=1)
        s = row["finegemm-sm90"]
        p = row.get("finegemm-portable", {})
        print(f"{kind:10s} {g:2d}x{m:5d} {n:5d}x{k:5d} | sm90 {s.get('us', float('nan')):8.1f} us "
              f"{s.get('tflops', float('nan')):6.1f} TF diff {s.get('diff_vs_cublas', float('nan')):.1e} "
              f"{(cfg.block_m, cfg.block_n, cfg.stages) if backend == 'sm90' else backend} | portable "
              f"{p.get('us', float('nan')):8.1f} | cuBLAS loop {row['cublas-loop']['us']:8.1f} "
              f"| x cuBLAS {row.get('x_cublas', float('nan')):.2f} x portable {row.get('x_portable', float('nan')):.2f}"
              f"{'' if 'error' not in s else ' ERROR ' + s['error']}", flush=True)
        del d, d_ref, ours, cublas
        torch.cuda.empty_cache()
    ratios = [r["x_cublas"] for r in rows if "x_cublas" in r]
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"geomean x cuBLAS loop over {len(ratios)} shapes: {geo:.3f}")
        with open(path, "w") as f:
            json.dump(dict(meta, rows=rows, geomean_x_cublas=geo), f, indent=1)


if __name__ == "__main__":
    main()
