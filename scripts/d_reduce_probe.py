"""The weight-gradient GEMM with C = D (``d = d + a @ b``, added by TMA reduce-add, ``D_REDUCE``) against the same
call with a separate C tensor of the same values (C read by the kernel, D stored), in one process, alternating.

Usage (on the GPU): ``PYTHONPATH=. python3 scripts/d_reduce_probe.py [--rounds R]``; writes
``$OUT/d_reduce_probe.json`` (or ./). Every shape: the two forms' outputs from the same inputs, compared bitwise,
and calc_diff against the float64 reference; then events (1 GiB L2 flush, 5 warm-ups, median of 30) for each.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import sm90_dev  # noqa: E402

import finegemm  # noqa: E402
from finegemm import reference  # noqa: E402
from finegemm.reference import calc_diff  # noqa: E402

SHAPES = [(2112, 4096, 7168), (576, 4096, 7168), (24576, 4096, 1536), (32768, 4096, 512), (7168, 4096, 16384),
          (4096, 4096, 7168), (7168, 4096, 2048)]


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
    sm90_dev.FLUSH = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    out = dict(what=__doc__.split("\n")[0], gpu=torch.cuda.get_device_name(),
               commit=open(".commit").read().strip() if os.path.exists(".commit") else "unknown",
               date=time.strftime("%Y-%m-%d %H:%M"), cases=[])
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        a = finegemm.per_token_cast_to_fp8(x, use_ue8m0=False)
        b = finegemm.per_token_cast_to_fp8(w, use_ue8m0=False)
        c0 = torch.randn(m, n, device="cuda", dtype=torch.float32)
        d_sep = torch.empty_like(c0)
        c_sep = c0.clone()
        finegemm.fp8_gemm_nt(a, b, d_sep, c=c_sep, recipe=(1, 1, 128))
        d_in = c0.clone()
        finegemm.fp8_gemm_nt(a, b, d_in, c=d_in, recipe=(1, 1, 128))
        torch.cuda.synchronize()
        ref = reference.fp8_gemm_nt(a, b, c0, recipe=(1, 1, 128))
        row = dict(M=m, N=n, K=k, bitwise=bool(torch.equal(d_sep, d_in)),
                   diff_separate=calc_diff(d_sep.double(), ref), diff_in_place=calc_diff(d_in.double(), ref),
                   separate_us=[], in_place_us=[])
        for _ in range(rounds):
            row["separate_us"].append(sm90_dev.time_fn(
                lambda a=a, b=b, d=d_sep, c=c_sep: finegemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))))
            row["in_place_us"].append(sm90_dev.time_fn(
                lambda a=a, b=b, d=d_in: finegemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))))
        print(f"{m}x{n}x{k}: bitwise {row['bitwise']} diff {row['diff_in_place']:.1e} separate "
              f"{row['separate_us']} in place {row['in_place_us']}", flush=True)
        out["cases"].append(row)
        json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "d_reduce_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
