"""One-call GPU timing of the sm90 BF16 GEMM against cuBLAS BF16 on the 18 DeepSeek-V3 shapes (nt).

Usage (on the H200): ``PYTHONPATH=. python3 scripts/sm90_bf16_bench.py [--alts N] [--tiles 128x144,64x96s4]
[--commit HASH]``.
Per shape: fresh random normal bf16 inputs; finegemm's heuristic config plus up to N alternative
configs (the cost model's next best) and the ``--tiles`` given (BLOCK_MxBLOCK_N[sSPLIT], e.g. widths that are not
powers of two) through the sm90 launch, and ``torch.mm(a, b.T, out=d)``
(cuBLAS BF16) in the same process. Each result is checked against the float64 reference first.
Timing: finegemm.bench.timer.time_cuda (CUDA events, 1 GiB L2 flush before each call, 5 warm-ups,
median of 30). Writes ``$OUT/sm90_bf16_bench.json`` (or ./) and prints a table last.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os

import torch
import triton

from finegemm import reference
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit import heuristics_sm90
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import _bf16_candidates, bf16_estimate_us, get_sm90_bf16_config, make_bf16_config
from finegemm.kernels.sm90 import dispatch_bf16

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DEV = torch.device("cuda")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alts", type=int, default=2)
    ap.add_argument("--commit", default=os.environ.get("FG_COMMIT", "unknown"))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ms", default="64,128,4096", help="comma-separated M values to run")
    ap.add_argument("--shapes", default="", help="'M,N,K;M,N,K' instead of --ms x the six (N, K)")
    ap.add_argument("--tiles", default="", help="extra tiles to time on every shape: 'BMxBN[sSPLIT],...'")
    ap.add_argument("--out-fp32", action="store_true", help="FP32 D (cuBLAS: torch.mm with out_dtype=float32)")
    ap.add_argument("--d-halves", choices=("rule", "off", "all"), default="rule",
                    help="D staged in halves: where the rule says (heuristics_sm90.BF16_D_HALVES_MAX_STAGES), never, "
                    "or wherever that frees a ring stage")
    ap.add_argument("--max-stages", type=int, default=0,
                    help="> 0: ring stages a config may take at most (heuristics_sm90.BF16_MAX_STAGES, a probe)")
    args = ap.parse_args()
    if args.max_stages:
        heuristics_sm90.BF16_MAX_STAGES = heuristics_sm90.BF16_MAX_STAGES_WHOLE_K = args.max_stages
    heuristics_sm90.BF16_D_HALVES_WANTED = args.d_halves != "off"
    if args.d_halves == "all":  # no stage or K bound
        heuristics_sm90.BF16_D_HALVES_MAX_STAGES = 16
        heuristics_sm90.BF16_D_HALVES_BF16_MAX_K = 1 << 30
    out_dtype = torch.float32 if args.out_fp32 else torch.bfloat16
    out_dir = os.environ.get("OUT", ".")
    facts = device_facts(DEV)
    flush = L2Flush(DEV)
    rows = []
    meta = dict(what="sm90 BF16 GEMM (nt) vs cuBLAS BF16 (torch.mm), DeepSeek-V3 shapes",
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(), device=torch.cuda.get_device_name(),
                versions=dict(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda),
                commit=args.commit, max_stages=heuristics_sm90.BF16_MAX_STAGES_WHOLE_K, out=str(out_dtype),
                d_halves=args.d_halves,
                method="CUDA events, 1 GiB L2 flush before each call, 5 warm-ups, "
                f"median of {args.reps}, fresh random normal inputs per shape", facts=facts.__dict__)
    path = os.path.join(out_dir, "sm90_bf16_bench.json")
    shapes = ([tuple(int(v) for v in item.split(",")) for item in args.shapes.split(";")] if args.shapes else
              [(m, n, k) for m in (int(v) for v in args.ms.split(",")) for n, k in NK])
    for m, n, k in shapes:
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
        ref = reference.bf16_gemm("nt", a, b)
        desc = GemmDesc("bf16", m, n, k, out_fp32=args.out_fp32)
        chosen = get_sm90_bf16_config(desc, facts)
        ranked = sorted(_bf16_candidates(desc, facts), key=lambda c: bf16_estimate_us(desc, facts, *c))
        cfgs = [chosen] + [make_bf16_config(desc, facts, *c) for c in ranked
                           if c != (chosen.block_m, chosen.block_n, chosen.split_k)][:args.alts]
        for tile in filter(None, args.tiles.split(",")):
            bm, rest = tile.split("x")
            bn, _, split = rest.partition("s")
            extra = make_bf16_config(desc, facts, int(bm), int(bn), int(split or 1))
            if extra.stages >= 2 and extra not in cfgs:
                cfgs.append(extra)
        flops = 2 * m * n * k
        dc = torch.empty(m, n, device=DEV, dtype=out_dtype)
        mm = (functools.partial(torch.mm, a, b.T, out_dtype=torch.float32, out=dc) if args.out_fp32
              else functools.partial(torch.mm, a, b.T, out=dc))
        t_cublas = time_cuda(mm, flush, 5, args.reps).median_us
        row = dict(M=m, N=n, K=k, cublas_us=t_cublas, cublas_diff=reference.calc_diff(dc, ref), configs=[])
        for cfg in cfgs:
            d = torch.full((m, n), float("nan"), device=DEV, dtype=out_dtype)
            entry = dict(cfg=cfg.__dict__, heuristic=cfg is chosen,
                         model_us=bf16_estimate_us(desc, facts, cfg.block_m, cfg.block_n, cfg.split_k))
            try:
                dispatch_bf16.bf16_gemm(desc, cfg, a, b, d, None)
                torch.cuda.synchronize()
                entry["diff"] = reference.calc_diff(d, ref)
                entry["us"] = time_cuda(functools.partial(dispatch_bf16.bf16_gemm, desc, cfg, a, b, d, None),
                                        flush, 5, args.reps).median_us
            except Exception as e:  # record and go on: one bad config must not lose the table
                entry["error"] = repr(e)[:300]
            row["configs"].append(entry)
        rows.append(row)
        with open(path, "w") as f:
            json.dump(dict(meta, rows=rows), f, indent=1)
        h = row["configs"][0]
        best = min((c for c in row["configs"] if "us" in c), key=lambda c: c["us"], default=None)
        print(f"{m:5d} {n:6d} {k:6d} | heur {h.get('us', float('nan')):8.1f} us "
              f"{flops / h.get('us', float('nan')) / 1e6:6.0f} TF diff {h.get('diff', float('nan')):.1e} "
              f"cfg {h['cfg']['block_m']}x{h['cfg']['block_n']}s{h['cfg']['split_k']} | cuBLAS {t_cublas:8.1f} "
              f"| x {t_cublas / h.get('us', float('nan')):.2f} | best {best and best['us']:.1f} "
              f"{best and (best['cfg']['block_m'], best['cfg']['block_n'], best['cfg']['split_k'])}", flush=True)


if __name__ == "__main__":
    main()
