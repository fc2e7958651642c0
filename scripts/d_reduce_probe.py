"""The weight-gradient GEMM with C = D (``d = d + a @ b``, added by TMA reduce-add, ``D_REDUCE``) against the same
call with a separate C tensor of the same values (C read by the kernel, D stored), in one process, alternating.

Usage (on the GPU): ``PYTHONPATH=. python3 scripts/d_reduce_probe.py [--rounds R] [--tiles T,T,...]``; writes
``$OUT/d_reduce_probe.json`` (or ./). Every shape: the two forms' outputs from the same inputs, compared bitwise,
and calc_diff against the float64 reference; then events (1 GiB L2 flush, 5 warm-ups, median of 30) for each.
``--tiles`` (with ``--shapes M,N,K;...``): explicit configs through the sm90 dispatch instead of the public call,
each in place and with a separate C: ``rule`` (the rules' pick), ``BMxBN`` (pipelined, whole K) or ``BMxBNtS``
(pipelined, the last round's tiles split S ways in the kernel).
"""

from __future__ import annotations

import functools
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


def _arg(name: str, default: str | None = None) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def _tile_config(desc, facts, spec: str):
    """``rule``, ``BMxBN`` or ``BMxBNtS`` (module doc) for ``desc``."""
    import dataclasses

    from finegemm.jit.heuristics_sm90 import get_sm90_config, make_config

    if spec == "rule":
        return get_sm90_config(desc, facts)
    tile, _, split = spec.partition("t")
    bm, bn = (int(v) for v in tile.split("x"))
    cfg = dataclasses.replace(make_config(desc, facts, bm, bn, int(split or 1), sfa_tma=True, sfb_tma=True),
                              pipe_mma=True)
    return dataclasses.replace(cfg, splitk_fused=True, split_tail=True) if split else cfg


def tiles_main(rounds: int, tiles: list[str], shapes: list[tuple[int, int, int]], out: dict) -> None:
    """``--tiles``: each shape's configs through ``dispatch.fp8_gemm``, in place (C is D) and with a separate C."""
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.kernels.sm90 import dispatch

    facts = device_facts(torch.device("cuda"))
    for m, n, k in shapes:
        torch.manual_seed(0)
        a = finegemm.per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
        b = finegemm.per_token_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
        sfa, sfb = (finegemm.get_mn_major_tma_aligned_tensor(x[1]) for x in (a, b))
        c0 = torch.randn(m, n, device="cuda", dtype=torch.float32)
        ref = reference.fp8_gemm_nt(a, b, c0, recipe=(1, 1, 128))
        desc = GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
        for spec in tiles:
            cfg = _tile_config(desc, facts, spec)
            d_sep, d_in = torch.empty_like(c0), c0.clone()
            dispatch.fp8_gemm(desc, cfg, a[0], sfa, b[0], sfb, d_sep, c0)
            dispatch.fp8_gemm(desc, cfg, a[0], sfa, b[0], sfb, d_in, d_in)
            torch.cuda.synchronize()
            row = dict(M=m, N=n, K=k, tile=spec, config=cfg.__dict__, in_place=dispatch.d_reduce_ok(desc, cfg, d_in,
                                                                                                  d_in),
                       bitwise=bool(torch.equal(d_sep, d_in)), diff_in_place=calc_diff(d_in.double(), ref),
                       separate_us=[], in_place_us=[])
            separate = functools.partial(dispatch.fp8_gemm, desc, cfg, a[0], sfa, b[0], sfb, d_sep, c0)
            in_place = functools.partial(dispatch.fp8_gemm, desc, cfg, a[0], sfa, b[0], sfb, d_in, d_in)
            for _ in range(rounds):
                row["separate_us"].append(sm90_dev.time_fn(separate))
                row["in_place_us"].append(sm90_dev.time_fn(in_place))
            print(f"{m}x{n}x{k} {spec}: reduce {row['in_place']} bitwise {row['bitwise']} diff "
                  f"{row['diff_in_place']:.1e} separate {row['separate_us']} in place {row['in_place_us']}",
                  flush=True)
            out["cases"].append(row)
            json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "d_reduce_probe.json"), "w"), indent=1)


def main() -> None:
    rounds = int(_arg("--rounds", "2"))
    sm90_dev.FLUSH = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    out = dict(what=__doc__.split("\n")[0], gpu=torch.cuda.get_device_name(),
               commit=open(".commit").read().strip() if os.path.exists(".commit") else "unknown",
               date=time.strftime("%Y-%m-%d %H:%M"), cases=[])
    if "--tiles" in sys.argv:
        shapes = [tuple(int(v) for v in s.split(",")) for s in _arg("--shapes", "").split(";") if s]
        tiles_main(rounds, _arg("--tiles").split(","), shapes or SHAPES, out)
        return
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
