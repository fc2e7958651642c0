"""Config sweep of the sm90 m-grouped FP8 kernels on the H200 (writes JSON): the issue-6 shapes, each config
through ``dispatch_grouped`` directly, checked against the float64 reference, timed with CUDA events
(1 GiB L2 flush before each call, 5 warm-up calls, median of 30), fresh random data per shape.

Usage: PYTHONPATH=. python3 scripts/grouped_sweep.py OUT.json [--commit SHA] [--contiguous-only]

``--contiguous-only``: the contiguous shapes with uniform groups and with random group sizes (issue 6's
U(0.7, 1.3) x expected rows, each segment padded to 128, so 256-row tiles meet group boundaries inside them),
at 128- and 256-row tiles.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import random
import time

import torch

import finegemm
from finegemm.bench.sysinfo import collect
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90_grouped import get_sm90_grouped_config, make_grouped_config
from finegemm.kernels.sm90 import dispatch_grouped
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8
from finegemm.reference import grouped as ref
from finegemm.reference.dense import calc_diff

CONTIGUOUS = [(4, 8192, 4096, 7168), (4, 8192, 7168, 2048), (8, 4096, 4096, 7168), (8, 4096, 7168, 2048)]
MASKED = [(1, 1024, 4096, 7168), (4, 256, 7168, 2048), (16, 64, 4096, 7168), (16, 64, 7168, 2048),
          (32, 64, 7168, 2048)]
# (BLOCK_M, BLOCK_N, SFA_TMA, PIPE_MMA)
CONTIGUOUS_CFGS = [(128, 128, True, False), (128, 128, True, True), (64, 128, True, False), (64, 128, True, True),
                   (128, 64, True, True), (256, 128, True, False)]
# --contiguous-only: 128-row tiles (the pick before 256-row contiguous tiles) against 256-row ones
CONTIGUOUS_ONLY_CFGS = [(128, 128, True, False), (256, 128, True, False)]
MASKED_CFGS = [(64, 128, True, False), (64, 128, False, False), (64, 128, True, True), (64, 64, True, True),
               (128, 128, True, False), (128, 128, True, True), (128, 64, True, True), (64, 32, True, True),
               (256, 128, True, False)]


def _weights(g, n, k, dev):
    w = torch.randn(g, n, k, device=dev, dtype=torch.bfloat16)
    parts = [per_block_cast_to_fp8(w[i]) for i in range(g)]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def _random_layout(g: int, mpg: int, seed: int, dev) -> tuple[torch.Tensor, int]:
    """Per-row group ids (-1 padding) of ``g`` groups of ``mpg`` x U(0.7, 1.3) rows, segments padded to 128."""
    rng = random.Random(seed)
    rows = [int(mpg * rng.uniform(0.7, 1.3)) for _ in range(g)]
    ids = []
    for i, r in enumerate(rows):
        ids += [i] * r + [-1] * ((-r) % 128)
    return torch.tensor(ids, dtype=torch.int32, device=dev), sum(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--contiguous-only", action="store_true")
    ap.add_argument("--cfgs", default=None, help="'BM,BN,SFA_TMA,PIPE;...' (0/1 flags): these configs only")
    ap.add_argument("--masked-shapes", default=None,
                    help="'G,m,N,K;...': these masked shapes only (no contiguous ones) instead of the issue's list")
    args = ap.parse_args()
    dev = torch.device("cuda")
    facts = device_facts(dev)
    flush = L2Flush(dev)
    t0 = time.time()
    rows = []
    doc = dict(what=__doc__.splitlines()[0], commit=args.commit, date=datetime.datetime.now(datetime.UTC).isoformat(),
               system=collect(dev), results=rows)
    if args.masked_shapes:
        shapes = [("masked", tuple(int(v) for v in item.split(","))) for item in args.masked_shapes.split(";")]
    elif args.contiguous_only:
        shapes = [("contiguous", s) for s in CONTIGUOUS] + [("random", s) for s in CONTIGUOUS]
    else:
        shapes = [("masked", s) for s in MASKED] + [("contiguous", s) for s in CONTIGUOUS]
    for kind, (g, mpg, n, k) in shapes:
        if time.time() - t0 > args.budget_s:
            break
        b, sfb = _weights(g, n, k, dev)
        useful = g * mpg
        if kind in ("contiguous", "random"):
            if kind == "random":
                layout, useful = _random_layout(g, mpg, seed=g * n + k, dev=dev)
                m = layout.numel()
            else:
                m = g * mpg
                layout = torch.arange(m, device=dev, dtype=torch.int32) // mpg
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            a, sfa = per_token_cast_to_fp8(x)
            desc = GemmDesc("fp8_1d2d", m, n, k, layout="m_grouped_contiguous", num_groups=g)
            expected = ref.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), layout)
            d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            cfgs = CONTIGUOUS_ONLY_CFGS if args.contiguous_only else CONTIGUOUS_CFGS
        else:
            x = torch.randn(g, mpg, k, device=dev, dtype=torch.bfloat16)
            parts = [per_token_cast_to_fp8(x[i]) for i in range(g)]
            a, sfa = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
            layout = torch.full((g,), mpg, device=dev, dtype=torch.int32)
            desc = GemmDesc("fp8_1d2d", mpg, n, k, layout="m_grouped_masked", num_groups=g, expected_m=mpg)
            expected = ref.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), layout)
            d = torch.empty(g, mpg, n, device=dev, dtype=torch.bfloat16)
            cfgs = MASKED_CFGS
        if args.cfgs:
            cfgs = [tuple(int(v) for v in item.split(",")) for item in args.cfgs.split(";")]
            cfgs = [(bm, bn, bool(tma), bool(pipe)) for bm, bn, tma, pipe in cfgs]
        sfa_k, sfb_k = finegemm.get_mn_major_tma_aligned_tensor(sfa), sfb.contiguous()
        flops = 2 * useful * n * k
        chosen = get_sm90_grouped_config(desc, facts)
        for bm, bn, tma, pipe in cfgs:
            cfg = make_grouped_config(facts, bm, bn, tma, pipe_mma=pipe)
            if kind != "masked":
                fn = functools.partial(dispatch_grouped.m_grouped_fp8_1d2d_gemm_contiguous, desc, cfg, a, sfa_k, b,
                                       sfb_k, d, layout, False)
            else:
                fn = functools.partial(dispatch_grouped.m_grouped_fp8_1d2d_gemm_masked, desc, cfg, a, sfa_k, b,
                                       sfb_k, d, layout, mpg)
            d.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            valid = (layout >= 0) if kind == "random" else slice(None)
            diff = calc_diff(d[valid], expected[valid])
            t = time_cuda(fn, flush, 5, 30)
            row = dict(kind=kind, groups=g, m_per_group=mpg, M=d.numel() // n, N=n, K=k, block_m=bm, block_n=bn,
                       sfa_tma=tma, pipe_mma=pipe, stages=cfg.stages, heuristic=(cfg == chosen),
                       us=round(t.median_us, 1), TFLOPS=round(flops / t.median_us / 1e6, 1), calc_diff=diff)
            if kind == "random":  # padding rows must come out exactly 0
                row["padding_zero"] = bool((d[~valid] == 0).all())
            rows.append(row)
            print(json.dumps(row), flush=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
