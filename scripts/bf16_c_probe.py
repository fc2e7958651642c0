"""BF16 with C (``d = c + a @ b^T``, BF16 out, the bf16 suite's ``+c`` cases): the heuristic's config against
BLOCK_M 192 at a few shapes. Usage (on the H200): ``PYTHONPATH=. python3 scripts/bf16_c_probe.py``; writes
``$OUT/bf16_c_probe.json``. CUDA events, 1 GiB L2 flush before each call, 5 warm-ups, median of 30; each
config checked against the float64 reference first."""

from __future__ import annotations

import json
import os

import torch

from finegemm import reference
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_bf16_config, make_bf16_config
from finegemm.kernels.sm90 import dispatch_bf16

DEV = torch.device("cuda")
SHAPES = [(4096, 576, 7168), (4096, 2112, 7168), (8192, 576, 7168), (4096, 4096, 7168)]


def main() -> None:
    facts = device_facts(DEV)
    flush = L2Flush(DEV)
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
        c = torch.randn(m, n, device=DEV, dtype=torch.bfloat16)
        desc = GemmDesc("bf16", m, n, k, True, True, False, True)
        ref = reference.bf16_gemm("nt", a, b, c)
        row = dict(M=m, N=n, K=k, configs=[])
        for name, cfg in (("heuristic", get_sm90_bf16_config(desc, facts)),
                          ("192x128", make_bf16_config(desc, facts, 192, 128))):
            d = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
            dispatch_bf16.bf16_gemm(desc, cfg, a, b, d, c)
            torch.cuda.synchronize()
            diff = reference.calc_diff(d, ref)
            t = time_cuda(lambda cfg=cfg, d=d, desc=desc, a=a, b=b, c=c: dispatch_bf16.bf16_gemm(desc, cfg, a, b, d, c),
                          flush, 5, 30)
            row["configs"].append(dict(name=name, cfg=cfg.__dict__, diff=diff, us=t.median_us))
            print(m, n, k, name, cfg.block_m, cfg.block_n, cfg.split_k, f"{t.median_us:.1f} us", f"diff {diff:.1e}",
                  flush=True)
        rows.append(row)
    json.dump(dict(gpu=torch.cuda.get_device_name(), rows=rows),
              open(os.path.join(os.environ.get("OUT", "."), "bf16_c_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
