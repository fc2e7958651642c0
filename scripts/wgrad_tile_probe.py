"""Tile sweep of the sm90 weight-gradient GEMM (recipe (1, 1, 128), FP32 ``d = c + a @ b`` with c = d) on the H200.

For the weight-gradient shapes whose tile rounds fill the 132 SMs worst (576 and 2112 rows at K = 7168)
and two controls, times the dispatched config and candidates of other heights, widths and split-K
through the sm90 dispatch (C staged by TMA wherever the config allows), each checked bitwise against the
dispatched result (split-K: calc_diff against it). Fresh random data (the harness's inputs), CUDA
events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20.
Usage: PYTHONPATH=. python3 scripts/wgrad_tile_probe.py (JSON to $OUT/wgrad_tile_probe.json).
"""

from __future__ import annotations

import dataclasses
import os
import sys

import torch

import finegemm
from finegemm.bench.inputs import make_inputs
from finegemm.bench.suites import weight_grad_cases
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import SPLIT_TAIL_K, make_config
from finegemm.kernels.sm90 import dispatch
from finegemm.reference.dense import calc_diff

sys.path.insert(0, os.path.dirname(__file__))
from c_epilogue_probe import run_shapes  # noqa: E402

SHAPES = [(2112, 4096, 7168), (576, 4096, 7168), (4096, 4096, 7168), (7168, 4096, 2048)]
# (BLOCK_M, BLOCK_N, split-K, shared D staging, PIPE_MMA); scales by TMA in the ring throughout; split "t": the
# last partial tile round split SPLIT_TAIL_K ways (split_tail, fused reduction)
CANDIDATES = [(256, 128, 1, True, False), (128, 128, 1, False, True), (128, 64, 1, False, True),
              (64, 128, 1, False, True), (128, 128, 2, False, True), (64, 128, 2, False, True),
              (128, 128, "t", False, True), (128, 64, "t", False, True), (64, 128, "t", False, True)]


def probe(m: int, n: int, k: int, dev: torch.device, flush: L2Flush, facts) -> dict:
    t = make_inputs(weight_grad_cases([(m, n, k)])[0], dev, seed=13).t
    a, sfa, (b, sfb) = t["a"][0], t["sfa_mn"], t["b"]
    sfb_mn = finegemm.get_mn_major_tma_aligned_tensor(sfb)
    desc = GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
    d = t["c"].clone()
    chosen = dispatch.get_config(desc, facts)

    def run(cfg):
        d.copy_(t["c"])
        dispatch.fp8_gemm(desc, cfg, a, sfa, b, sfb_mn, d, d)

    run(chosen)
    expected = d.clone()
    row = dict(M=m, N=n, K=k, chosen=repr(chosen), configs=[])
    for cand in [None] + CANDIDATES:
        if cand is None:
            cfg, name = chosen, "dispatched"
        else:
            bm, bn, split, se, pipe = cand
            tail = split == "t"
            cfg = dataclasses.replace(make_config(desc, facts, bm, bn, SPLIT_TAIL_K if tail else split, small_epi=se,
                                                  sfa_tma=True, sfb_tma=True), pipe_mma=pipe)
            if tail:
                cfg = dataclasses.replace(cfg, splitk_fused=True, split_tail=True, c_tma=cfg.can_stage_c)
            name = f"{bm}x{bn}s{split}{'-se' if se else ''}{'-pipe' if pipe else ''}"
        try:
            run(cfg)
            torch.cuda.synchronize()
        except Exception as err:  # noqa: BLE001 - a config that does not compile or launch
            row["configs"].append(dict(name=name, error=repr(err)[:200]))
            continue
        entry = dict(name=name, config=repr(cfg), same=bool(torch.equal(d, expected)),
                     calc_diff=float(calc_diff(d.double(), expected.double())))
        entry["us"] = round(time_cuda(lambda c=cfg: dispatch.fp8_gemm(desc, c, a, sfa, b, sfb_mn, d, d),
                                      flush, 3, 20).median_us, 1)
        row["configs"].append(entry)
        print(f"{m}x{n}x{k} {name}: {entry['us']} us same={entry['same']} diff={entry['calc_diff']:.1e}", flush=True)
    return row


if __name__ == "__main__":
    run_shapes(__doc__.splitlines()[0], probe, SHAPES, "wgrad_tile_probe.json")
