"""What the C read costs the sm90 FP32-out 1d1d GEMM (weight gradients) on the H200.

For weight-gradient shapes of the bench suite and a k-grouped per-group shape (K = 2048),
times ``fp8_gemm_nt(..., d, c=d, recipe=(1, 1, 128))`` (the harness's in-place accumulate) against the
same kernel config without C (``d = a @ b`` in FP32, through the sm90 dispatch: the API requires C) and
with C staged by TMA (``Sm90Config.c_tma``, and ``c_tma_late``: its load started after the first K-block
pair), and prints the chosen config. The no-C time bounds what
prefetching C (instead of the epilogue's blocking loads) can gain.
Fresh random data (the harness's inputs), CUDA events, 1 GiB L2 flush before each call, median of 20.
Usage: PYTHONPATH=. python3 scripts/c_epilogue_probe.py (JSON to $OUT/c_epilogue_probe.json).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Callable

import torch

import finegemm
from finegemm.bench.inputs import make_inputs
from finegemm.bench.suites import weight_grad_cases
from finegemm.bench.sysinfo import probe_record
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import make_config
from finegemm.kernels.sm90 import dispatch

# weight-gradient shapes of the bench suite (K 1536-7168) and the k-grouped per-group shape at G=16
SHAPES = [(2112, 4096, 7168), (24576, 4096, 1536), (7168, 4096, 2048), (4096, 4096, 7168), (4096, 7168, 2048)]


def probe(m: int, n: int, k: int, dev: torch.device, flush: L2Flush, facts) -> dict:
    """One shape: the dispatched 1d1d call with C in place and without C, and the config it ran."""
    case = weight_grad_cases([(m, n, k)])[0]
    t = make_inputs(case, dev, seed=11).t
    a, b = (t["a"][0], t["sfa_mn"]), t["b"]
    d = t["c"].clone()
    d_plain = torch.empty_like(d)
    desc = GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
    cfg = dispatch.get_config(desc, facts)
    sfb_mn = finegemm.get_mn_major_tma_aligned_tensor(b[1])
    with_c = time_cuda(lambda: finegemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128)), flush, 3, 20)
    # the API requires C for this recipe: the no-C kernel (same config) through the sm90 dispatch
    desc_no_c = dataclasses.replace(desc, with_c=False)
    no_c = time_cuda(lambda: dispatch.fp8_gemm(desc_no_c, cfg, a[0], a[1], b[0], sfb_mn, d_plain, None), flush, 3, 20)
    row = dict(M=m, N=n, K=k, with_c_us=round(with_c.median_us, 1), no_c_us=round(no_c.median_us, 1),
               c_share=round(1 - no_c.median_us / with_c.median_us, 3), config=repr(cfg))
    # the same config with C staged by TMA (Sm90Config.c_tma), through the sm90 dispatch directly, and for
    # reference the 128-row pipelined ring config with and without it; checked bitwise against the API's result
    ring = make_config(desc, facts, 128, 128 if k > 1024 else 64, sfa_tma=True, sfb_tma=True)
    variants = dict(c_tma=dataclasses.replace(cfg, c_tma=True),
                    c_tma_late=dataclasses.replace(cfg, c_tma=True, c_tma_late=True),
                    ring128=dataclasses.replace(ring, pipe_mma=True, c_tma=False),
                    ring128_c_tma=dataclasses.replace(ring, pipe_mma=True, c_tma=True),
                    ring128_c_tma_late=dataclasses.replace(ring, pipe_mma=True, c_tma=True, c_tma_late=True))
    d.copy_(t["c"])
    finegemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
    expected = d.clone()
    for name, vcfg in variants.items():
        d.copy_(t["c"])
        dispatch.fp8_gemm(desc, vcfg, a[0], a[1], b[0], sfb_mn, d, d)
        torch.cuda.synchronize()
        row[name + "_same"] = bool(torch.equal(d, expected))
        row[name + "_us"] = round(time_cuda(lambda c=vcfg: dispatch.fp8_gemm(desc, c, a[0], a[1], b[0], sfb_mn, d, d),
                                            flush, 3, 20).median_us, 1)
    print(f"{m}x{n}x{k}: c=d {row['with_c_us']} us, no C {row['no_c_us']} us ({100 * row['c_share']:.1f} %), "
          f"c_tma {row['c_tma_us']} ({row['c_tma_same']}) / late {row['c_tma_late_us']} ({row['c_tma_late_same']}), "
          f"ring128 {row['ring128_us']} / c_tma {row['ring128_c_tma_us']} / late {row['ring128_c_tma_late_us']}; "
          f"{cfg.block_m}x{cfg.block_n} st{cfg.stages} pipe={cfg.pipe_mma} se={cfg.small_epi}", flush=True)
    return row


def run_shapes(what: str, probe_fn: Callable[..., dict], shapes: list[tuple[int, int, int]], out_name: str) -> None:
    """``probe_fn(m, n, k, dev, flush, facts)`` for each shape on the GPU; the rows, with GPU, versions,
    commit (``.commit``) and date, rewritten to ``$OUT/<out_name>`` after each shape."""
    dev = torch.device("cuda")
    flush = L2Flush(dev)
    facts = device_facts(dev)
    result = probe_record(what, dev, "CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20")
    out = Path(os.environ.get("OUT", ".")) / out_name
    for m, n, k in shapes:
        result["rows"].append(probe_fn(m, n, k, dev, flush, facts))
        out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    run_shapes(__doc__.splitlines()[0], probe, SHAPES, "c_epilogue_probe.json")
