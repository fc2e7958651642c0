"""L2 prefetch of B (``b_prefetch`` of the FP8 and BF16 configs) on the shapes whose B streams from HBM, on the H200
(benchmarks/NOTES.md v14).

Dense FP8 at M = 64 and 128 on the six DeepSeek-V3 (N, K), the masked MoE decode shapes of issue 6, and BF16 at
M = 1 and 128 on the harness's BF16 shapes (``bf16``), each at its dispatched config with B's tile 0 (off), 4, 8
and 16 K blocks ahead prefetched into L2. A prefetch changes no arithmetic, so every result must equal the
prefetch-0 one bit for bit (checked). Fresh random data (the harness's inputs), CUDA events, 1 GiB L2 flush before
each call (zero mode, as the anchors), 3 warm-ups, median of 20.
Usage: PYTHONPATH=. python3 scripts/b_prefetch_probe.py [dense|masked|bf16 ...] (JSON to
$OUT/b_prefetch_probe.json, rewritten after each shape).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import torch

import finegemm
from finegemm.bench.inputs import make_inputs
from finegemm.bench.suites import BF16_NK, dense_cases
from finegemm.bench.sysinfo import probe_record
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90 import dispatch, dispatch_bf16, dispatch_grouped
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

DISTANCES = [0, 4, 8, 16]
NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
MASKED = [(16, 64, 7168, 2048), (4, 256, 4096, 7168), (4, 256, 7168, 2048), (2, 512, 4096, 7168),
          (1, 1024, 4096, 7168)]


def _bind(launch, desc, *args):
    """``config -> launch(desc, config, *args)``."""
    return lambda config: launch(desc, config, *args)


def _sweep(name: str, config, run, out: torch.Tensor, flush: L2Flush) -> dict:
    row = dict(shape=name, config=repr(config), us={}, bitwise={})
    baseline = None
    for dist in DISTANCES:
        cfg = dataclasses.replace(config, b_prefetch=dist)
        out.fill_(float("nan"))
        run(cfg)
        torch.cuda.synchronize()
        if baseline is None:
            baseline = out.clone()
        row["bitwise"][dist] = bool(torch.equal(out.view(torch.int16), baseline.view(torch.int16)))
        row["us"][dist] = round(time_cuda(lambda c=cfg: run(c), flush, 3, 20).median_us, 2)
    print(f"{name}: " + ", ".join(f"{d}: {row['us'][d]} us{'' if row['bitwise'][d] else ' DIFFERS'}"
                                  for d in DISTANCES), flush=True)
    return row


def dense_rows(dev, flush, facts):
    for m in (64, 128):
        for n, k in NK:
            t = make_inputs(dense_cases([(m, n, k)])[0], dev, seed=m + n + k).t
            a, sfa, (b, sfb) = t["a"][0], t["sfa_mn"], t["b"]
            desc = GemmDesc("fp8_1d2d", m, n, k)
            d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            yield _sweep(f"dense {m}x{n}x{k}", dispatch.get_config(desc, facts),
                         _bind(dispatch.fp8_gemm, desc, a, sfa, b, sfb, d, None), d, flush)


def masked_rows(dev, flush, facts):
    for g, mpg, n, k in MASKED:
        w = torch.randn(g, n, k, device=dev, dtype=torch.bfloat16)
        parts = [per_block_cast_to_fp8(w[i]) for i in range(g)]
        b, sfb = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]).contiguous()
        x = torch.randn(g, mpg, k, device=dev, dtype=torch.bfloat16)
        parts = [per_token_cast_to_fp8(x[i]) for i in range(g)]
        a, sfa = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
        sfa = finegemm.get_mn_major_tma_aligned_tensor(sfa)
        masked_m = torch.full((g,), mpg, device=dev, dtype=torch.int32)
        desc = GemmDesc("fp8_1d2d", mpg, n, k, layout="m_grouped_masked", num_groups=g, expected_m=mpg)
        d = torch.empty(g, mpg, n, device=dev, dtype=torch.bfloat16)
        yield _sweep(f"masked {g}x{mpg}x({n}, {k})", dispatch_grouped.get_config(desc, facts),
                     _bind(dispatch_grouped.m_grouped_fp8_1d2d_gemm_masked, desc, a, sfa, b, sfb, d, masked_m, mpg),
                     d, flush)


def bf16_rows(dev, flush, facts):
    for m in (1, 128):
        for n, k in BF16_NK:
            gen = torch.Generator(device=dev).manual_seed(m + n + k)
            a = torch.randn(m, k, generator=gen, device=dev).bfloat16()
            b = torch.randn(n, k, generator=gen, device=dev).bfloat16()
            desc = GemmDesc("bf16", m, n, k)
            d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            yield _sweep(f"bf16 {m}x{n}x{k}", dispatch_bf16.get_config(desc, facts),
                         _bind(dispatch_bf16.bf16_gemm, desc, a, b, d, None), d, flush)


def main() -> None:
    parts = sys.argv[1:] or ["dense", "masked", "bf16"]
    dev = torch.device("cuda")
    flush, facts = L2Flush(dev), device_facts(dev)
    result = probe_record(__doc__.splitlines()[0], dev, "CUDA events, 1 GiB L2 flush (zero) before each call, "
                          "3 warm-ups, median of 20")
    out = Path(os.environ.get("OUT", ".")) / "b_prefetch_probe.json"
    for part in parts:
        for row in {"dense": dense_rows, "masked": masked_rows, "bf16": bf16_rows}[part](dev, flush, facts):
            result["rows"].append(row)
            out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
