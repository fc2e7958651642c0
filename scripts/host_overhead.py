"""Host time per cached call of the sm90 FP8 GEMM paths, next to cuBLAS blockwise (one GPU run); ``--kind bf16``:
the BF16 GEMM's paths next to torch.mm (:func:`_bf16_paths`).

Usage (on the H200): ``PYTHONPATH=<tree> python3 scripts/host_overhead.py --label after --out FILE.json``.
Works on any finegemm tree that has kernels/sm90/dispatch.py (run it on the old and the new tree in
one device session for a same-machine before/after). Per path and shape it uses the bench harness's
``finegemm.bench.timer.host_overhead``: 10 warm-up calls, then 5 rounds of 200 back-to-back calls
without a sync; ``enqueue_us`` = host time per call (issue only), ``wall_us`` = per call until the
GPU finished all 200 (max of host and GPU time for small shapes). Medians over the rounds.

Paths:
  public        finegemm.fp8_gemm_nt on MN-major aligned scales (path B: nothing laid out per call)
  public_no_hot the same with api/gemm.py's hot-path cache emptied before each call (trees after
                931fef1): key, plan lookup, sm90 dispatch key and its recording, as before 931fef1
  direct        kernels/sm90/dispatch.fp8_gemm (what the public API calls after its plan lookup)
  direct_jit    the same plan launched through ``kernel[grid](*args, **meta)`` (the pre-replay launch)
  replay        the cached launcher.Recording alone (new tree only)
  cublas_block  torch._scaled_mm blockwise (1x128 LHS, 128x128 RHS scales), out= a preallocated tensor
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import finegemm
from finegemm.api import gemm as gemm_api
from finegemm.bench import peers, sysinfo
from finegemm.bench.timer import host_overhead
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90 import dispatch, gemm_1d2d
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

SHAPES = [(64, 2112, 7168), (128, 7168, 2048)]


def _paths(m: int, n: int, k: int) -> tuple[dict, dict]:
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a, sfa = per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16))
    b, sfb = per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16))
    sfa_k = finegemm.get_mn_major_tma_aligned_tensor(sfa)
    sfb_k = sfb.contiguous()
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    desc = GemmDesc("fp8_1d2d", m, n, k)
    cfg = dispatch.get_config(desc, device_facts(dev))
    grid, args, meta, reduce = dispatch._build_plan(desc, cfg, a, sfa_k, b, sfb_k, d, None)

    def direct_jit() -> None:
        gemm_1d2d.fp8_gemm_kernel[grid](*args, **meta)
        if reduce is not None:
            gemm_1d2d._splitk_reduce_kernel[reduce[0]](*reduce[1], **reduce[2])

    fns = {
        "public": lambda: finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d),
        "direct": lambda: dispatch.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None),
        "direct_jit": direct_jit,
    }
    info: dict = {"config": {k2: v for k2, v in cfg.__dict__.items()}}
    recording = fns["direct"]()  # trees after 931fef1 return the recording used
    torch.cuda.synchronize()
    recordings = getattr(dispatch, "_recordings", None)
    if recording is None and recordings:  # older trees: the last one made (each shape's first call)
        recording = list(recordings.values())[-1]
    if recording is not None:
        info["replay_modes"] = list(recording.modes)
        fns["replay"] = recording
    hot = getattr(gemm_api, "_FP8_RECORDINGS", None)
    if hot is not None:  # the public call without its hot path: plan lookup, then the sm90 dispatch's cache

        def public_no_hot() -> None:
            hot.clear()
            finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d)

        fns["public_no_hot"] = public_no_hot
    d_cublas = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    try:
        fns["cublas_block"] = peers._block_mm(a, sfa, b, sfb, torch.bfloat16, False, out=d_cublas)
    except peers.Refused as e:
        info["cublas_block"] = f"refused: {e}"
    return fns, info


BF16_SHAPES = [(1, 7168, 2048), (64, 2112, 7168), (128, 7168, 2048)]


def _bf16_paths(m: int, n: int, k: int) -> tuple[dict, dict]:
    """``--kind bf16``: public finegemm.bf16_gemm_nt, direct dispatch_bf16.bf16_gemm, direct_jit (its plan through
    ``kernel[grid]``, what every call did before the BF16 recordings), replay, and torch.mm (cuBLAS BF16) into
    a preallocated tensor."""
    from finegemm.kernels.sm90 import dispatch_bf16, gemm_bf16

    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    desc = GemmDesc("bf16", m, n, k)
    cfg = dispatch_bf16.get_config(desc, device_facts(dev))
    d_mm = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    fns = {
        "public": lambda: finegemm.bf16_gemm_nt(a, b, d),
        "direct": lambda: dispatch_bf16.bf16_gemm(desc, cfg, a, b, d, None),
        "cublas_bf16": lambda: torch.mm(a, b.T, out=d_mm),
    }
    if hasattr(cfg, "block_m"):  # a tensor-core tile; one-row calls may take the GEMV, which has no such plan
        grid, args, meta, reduce = dispatch_bf16._build_plan(desc, cfg, a, b, d, None)

        def direct_jit() -> None:
            gemm_bf16.bf16_gemm_kernel[grid](*args, **meta)
            if reduce is not None:
                gemm_bf16.splitk_reduce_kernel[reduce[0]](*reduce[1], **reduce[2])

        fns["direct_jit"] = direct_jit
    info: dict = {"config": {k2: v for k2, v in cfg.__dict__.items()}}
    recording = fns["direct"]()  # trees with BF16 recordings return the one used
    torch.cuda.synchronize()
    if recording is not None:
        info["replay_modes"] = list(recording.modes)
        fns["replay"] = recording
    return fns, info


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--label", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--commit", default=None)
    p.add_argument("--kind", choices=("fp8", "bf16"), default="fp8")
    args = p.parse_args()
    dev = torch.device("cuda")
    meta = sysinfo.collect(dev)
    if args.commit:
        meta["git"] = {"commit": args.commit}
    result = {"label": args.label, "meta": meta, "method": __doc__.split("Paths:")[0].strip(), "shapes": {}}
    for m, n, k in (BF16_SHAPES if args.kind == "bf16" else SHAPES):
        fns, info = (_bf16_paths if args.kind == "bf16" else _paths)(m, n, k)
        row = dict(info)
        for name, fn in fns.items():
            row[name] = host_overhead(fn, dev, calls=200, rounds=5, warmup=10)
            print(f"{args.label} {m}x{n}x{k} split_k={info['config']['split_k']} {name:13s} "
                  f"enqueue {row[name]['enqueue_us']:7.1f} us  wall {row[name]['wall_us']:7.1f} us", flush=True)
        result["shapes"][f"{m}x{n}x{k}"] = row
        with open(args.out, "w") as f:  # after each shape: a cut-off run keeps what it measured
            json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
