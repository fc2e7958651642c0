"""One-call GPU timing of the BF16 GEMV kernel (kernels/sm90/gemv_bf16.py) against the tensor-core kernel's pick and
cuBLAS on one-row GEMMs (decode), with and without C.

Usage (on the GPU): ``PYTHONPATH=. python3 scripts/gemv_probe.py [--commit HASH] [--reps 30]``.
Per shape: fresh random normal bf16 inputs; cuBLAS (``torch.mm`` / ``torch.addmm`` into D's dtype), the sm90
tensor-core kernel at the rules' tile, and the GEMV kernel at the rules' config plus the variants below, each
checked against the float64 reference before it is timed (finegemm.bench.timer.time_cuda: CUDA events, 1 GiB L2
flush before each call, 5 warm-ups, median). Writes ``$OUT/gemv_probe.json`` and prints one line a shape.
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
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import gemv_blocks, get_sm90_bf16_config, make_gemv_config
from finegemm.kernels.sm90 import dispatch_bf16

DEV = torch.device("cuda")
# (N, K, FP32 out): the harness bf16 suite's one-row cases
SHAPES = [(2112, 7168, False), (576, 7168, False), (24576, 1536, False), (32768, 512, False), (7168, 16384, False),
          (4096, 7168, False), (7168, 2048, False), (256, 7168, True), (129280, 7168, True)]
# GEMV variants besides the rules' config: (block_n, block_k, split (0: the rule's), num_warps)
VARIANTS = [(16, 512, 0, 4), (16, 512, -2, 4), (4, 1024, -2, 4), (4, 1024, 1, 4), (8, 1024, 0, 4), (4, 512, 0, 4),
            (32, 256, -2, 4), (4, 2048, 0, 4)]


def _cublas(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor):
    """The harness's cublas-bf16 call into ``d`` (bench/peers.py), or None for an FP32 C."""
    if d.dtype == torch.float32:
        return None if c is not None else functools.partial(torch.mm, a, b.t(), out_dtype=torch.float32, out=d)
    if c is not None:
        return functools.partial(torch.addmm, c, a, b.t(), out=d)
    return functools.partial(torch.mm, a, b.t(), out=d)


def _timed(call, d: torch.Tensor, ref: torch.Tensor, flush: L2Flush, reps: int) -> dict:
    """calc_diff of a first call and of a repeat into the poisoned ``d``, then the timing; an error is recorded (one
    bad config must not lose the table)."""
    try:
        diffs = []
        for _ in range(2):
            d.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            diffs.append(reference.calc_diff(d, ref))
        return dict(diff=diffs[0], repeat_diff=diffs[1], us=time_cuda(call, flush, 5, reps).median_us)
    except Exception as e:  # noqa: BLE001
        return dict(error=repr(e)[:300])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit", default=os.environ.get("FG_COMMIT", "unknown"))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    facts = device_facts(DEV)
    flush = L2Flush(DEV)
    meta = dict(what="BF16 GEMV vs the sm90 tensor-core pick and cuBLAS at M = 1",
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(), device=torch.cuda.get_device_name(),
                versions=dict(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda),
                commit=args.commit, method=f"CUDA events, 1 GiB L2 flush before each call, 5 warm-ups, median of "
                f"{args.reps}, fresh random normal inputs per shape")
    path = os.path.join(os.environ.get("OUT", "."), "gemv_probe.json")
    rows = []
    for n, k, fp32 in SHAPES:
        for with_c in (False, True):
            out_dtype = torch.float32 if fp32 else torch.bfloat16
            a = torch.randn(1, k, device=DEV, dtype=torch.bfloat16)
            b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
            c = torch.randn(1, n, device=DEV, dtype=out_dtype) if with_c else None
            ref = reference.bf16_gemm("nt", a, b, c)
            desc = GemmDesc("bf16", 1, n, k, out_fp32=fp32, with_c=with_c, c_like_d=with_c)
            dc = torch.empty(1, n, device=DEV, dtype=out_dtype)
            cublas = _cublas(a, b, c, dc)
            if cublas is None:  # FP32 C: no single cuBLAS call (the harness refuses it too)
                continue
            cublas()
            torch.cuda.synchronize()
            row = dict(N=n, K=k, out="fp32" if fp32 else "bf16", with_c=with_c,
                       cublas_us=time_cuda(cublas, flush, 5, args.reps).median_us,
                       cublas_diff=reference.calc_diff(dc, ref), configs=[])
            rule = make_gemv_config(desc, facts, *gemv_blocks(k))
            cfgs = [("tensor-core", get_sm90_bf16_config(desc, facts)), ("gemv-rule", rule)]
            for bn, bk, split, warps in VARIANTS:
                if split < 0:
                    split = max(1, rule.split_k // -split)
                cfgs.append((f"gemv-{bn}x{bk}s{split or 'r'}w{warps}",
                             make_gemv_config(desc, facts, bn, bk, split, warps)))
            for name, cfg in cfgs:
                d = torch.full((1, n), float("nan"), device=DEV, dtype=out_dtype)
                call = functools.partial(dispatch_bf16.bf16_gemm, desc, cfg, a, b, d, c)
                row["configs"].append(dict(name=name, cfg=cfg.__dict__, **_timed(call, d, ref, flush, args.reps)))
            rows.append(row)
            with open(path, "w") as f:
                json.dump(dict(meta, rows=rows), f, indent=1)
            timed = [e for e in row["configs"] if "us" in e]
            best = min(timed, key=lambda e: e["us"], default=None)
            figures = " ".join(f"{e['name']} {e['us']:.1f}" for e in timed[:2])
            errors = [e["name"] for e in row["configs"] if "error" in e or e.get("diff", 0) > 1e-4]
            print(f"1x{n}x{k}{':f32' if fp32 else ''}{'+c' if with_c else ''} cuBLAS {row['cublas_us']:.1f} | "
                  f"{figures} | best {best and best['name']} {best and best['us']:.1f} | bad {errors}", flush=True)


if __name__ == "__main__":
    main()
