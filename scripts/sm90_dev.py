"""One-call GPU session for the sm90 kernels: correctness sweep, config sweep, peers, host overhead.

Usage (on the H200): ``PYTHONPATH=. python3 scripts/sm90_dev.py [check] [bench] [host] [v3] [--full]``.
``v3``: M=4096 sweep of 128- vs 256-row tiles (stages, shared D staging, TMA-loaded LHS scales), each
config also checked against the float64 reference; writes after every shape.
``v4``: M<=128 decode shapes (narrow deep-ring tiles vs split-K, TMA scales, PIPE_MMA) and the FP32-out
shapes (recipe (1,1,128) weight gradients with C, FP32-out 1d2d at large M); every candidate is first
compiled in parallel worker processes (disk cache), then checked against the float64 reference and
timed; stops timing new configs past ``V4_DEADLINE_S`` (default 140 s) so a bounded run comes back.
``v5``: the weight-gradient shapes with the per-channel RHS scales in the ring (sfb_tma), 128 vs 256 rows.
``v6``: PIPE_MMA on and off on every shape; ``v7``: BLOCK_N 16 / 32 / 64 at M <= 128; ``v8``: split-K with the
reduction fused into the GEMM kernel at M <= 128; ``v9``: split-K of the last partial tile round only;
``v11``: v9's 1d2d split tails again and 256x64 tiles; ``v12``: split-K at M <= 128 with the
reduction launched by programmatic dependent launch; ``v13``: BLOCK_M 192 (three math warpgroups) at M = 4096;
``v14``: the BLOCK_M 192 rule's other shapes against the rule before it; ``v15``: BLOCK_M 192 with FP32 out and C;
``v16`` (removed with the tile it timed, results/sm90_v16_a_regs_sweep.json): the 128x256 two-panel tile with A
in registers at M = 4096, slower on all six shapes; ``v17``: FP32-out 1d2d
tiles (192, 256 with the shared staging, 128 rows) where the BLOCK_M 192 rule's FP32 extension is unmeasured;
``v18``: tiles of two column blocks (128x192, 64x96, ...; BLOCK_N1) where DeepGEMM's configs are such widths;
``v19``: the FP32-out picks moved off tiles that spill (NOTES v23) against those tiles.
``v4compile`` (CPU, no GPU): compiles every v4 candidate for sm_90 and prints registers/spills.
Writes ``$OUT/sm90_dev.json`` (or ./sm90_dev.json) and prints a short table last.
Timing: CUDA events around each call, a 1 GiB buffer zeroed before each timed call (L2 flush),
5 warm-up calls, median of 30, fresh random normal inputs per shape.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
import time

import torch

import finegemm
from finegemm import reference
from finegemm.jit.device import device_facts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_config, make_config
from finegemm.kernels.sm90 import dispatch as sm90
from finegemm.quant import pack_ue8m0, per_block_cast_to_fp8, per_token_cast_to_fp8

SHAPES_NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DEV = torch.device("cuda")
# DeepGEMM 2.6.1 on the H200 (shared/anchors/h200-2026-12-02.json, 'dense'), kernel us
DEEPGEMM_US = {
    (64, 2112, 7168): 12.8,
    (64, 24576, 1536): 19.5,
    (64, 32768, 512): 11.7,
    (64, 7168, 16384): 43.3,
    (64, 4096, 7168): 16.3,
    (64, 7168, 2048): 10.7,
    (128, 2112, 7168): 13.7,
    (128, 24576, 1536): 20.4,
    (128, 32768, 512): 13.3,
    (128, 7168, 16384): 46.8,
    (128, 4096, 7168): 17.3,
    (128, 7168, 2048): 12.2,
    (4096, 2112, 7168): 96.5,
    (4096, 24576, 1536): 233.0,
    (4096, 32768, 512): 130.8,
    (4096, 7168, 16384): 647.9,
    (4096, 4096, 7168): 167.0,
    (4096, 7168, 2048): 93.9,
}
FLUSH = None


def inputs(m, n, k, recipe="1d2d", packed=False, with_c=False, out=torch.bfloat16):
    x = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=packed)
    if recipe == "1d2d":
        b, sfb = per_block_cast_to_fp8(w, use_ue8m0=packed)
    else:
        b, sfb = per_token_cast_to_fp8(w, use_ue8m0=packed)
    if packed:
        sfa_k = finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfa)
        sfb_k = (pack_ue8m0(sfb).contiguous() if recipe == "1d2d"
                 else finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfb))
    else:
        sfa_k = finegemm.get_mn_major_tma_aligned_tensor(sfa)
        sfb_k = sfb.contiguous() if recipe == "1d2d" else finegemm.get_mn_major_tma_aligned_tensor(sfb)
    c = torch.randn(m, n, device=DEV, dtype=torch.float32) if with_c else None
    d = torch.empty(m, n, device=DEV, dtype=out)
    return a, sfa, sfa_k, b, sfb, sfb_k, c, d


def desc_for(m, n, k, recipe, packed, out, with_c):
    return GemmDesc("fp8_1d2d" if recipe == "1d2d" else "fp8_1d1d", m, n, k, True, True,
                    out == torch.float32, with_c, packed)


def run_direct(desc, cfg, t):
    a, sfa, sfa_k, b, sfb, sfb_k, c, d = t
    sm90.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, c)


def time_fn(fn, reps=30, warm=5):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        FLUSH.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def check_case(m, n, k, recipe="1d2d", packed=False, out=torch.bfloat16, with_c=False, cfg=None, alias=False):
    t = inputs(m, n, k, recipe, packed, with_c, out)
    a, sfa, sfa_k, b, sfb, sfb_k, c, d = t
    desc = desc_for(m, n, k, recipe, packed, out, with_c)
    facts = device_facts(DEV)
    cfg = cfg or get_sm90_config(desc, facts)
    if alias and c is not None:
        d.copy_(c)
        c_ref = c.clone()
        t = (a, sfa, sfa_k, b, sfb, sfb_k, d, d)
    else:
        c_ref = c
        d.fill_(float("nan"))
    run_direct(desc, cfg, t)
    torch.cuda.synchronize()
    got = d.clone()
    ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c_ref, recipe=(1, 128, 128) if recipe == "1d2d" else (1, 1, 128))
    diff = reference.calc_diff(got, ref)
    same = None
    if not alias:
        d.fill_(float("nan"))
        run_direct(desc, cfg, t)
        torch.cuda.synchronize()
        same = bool(torch.equal(d.view(torch.uint8) if False else d, got))
    ok = diff < 1e-3 and not math.isnan(diff) and (same in (None, True))
    return dict(M=m, N=n, K=k, recipe=recipe, packed=packed, out=str(out), with_c=with_c, alias=alias,
                cfg=cfg.__dict__, diff=diff, repeat_equal=same, ok=ok)


def phase_check(full):
    res = []
    cases = []
    for m in (64, 128, 4096):
        for n, k in SHAPES_NK:
            cases.append(dict(m=m, n=n, k=k))
    for m in (1, 77, 333, 4095):
        for n, k in ((2112, 7168), (576, 7168), (2112, 128), (576, 128)):
            cases.append(dict(m=m, n=n, k=k))
    cases += [dict(m=333, n=2112, k=7168, packed=True), dict(m=64, n=2112, k=7168, packed=True),
              dict(m=4096, n=7168, k=2048, packed=True),
              dict(m=333, n=2112, k=7168, out=torch.float32, with_c=True),
              dict(m=256, n=4096, k=7168, recipe="1d1d", out=torch.float32, with_c=True),
              dict(m=333, n=576, k=7168, recipe="1d1d", out=torch.float32, with_c=True, alias=True),
              dict(m=2112, n=4096, k=7168, recipe="1d1d", out=torch.float32, with_c=True),
              dict(m=77, n=2112, k=7168, recipe="1d1d", out=torch.float32, with_c=True, packed=True)]
    facts = device_facts(DEV)
    # forced configs: every tile family, split-K, both MMA schedules
    for bm, bn, split, pipe in ((64, 16, 1, True), (64, 32, 4, True), (64, 64, 1, False), (128, 128, 1, False),
                                (128, 64, 2, True), (64, 128, 8, True)):
        desc = desc_for(128, 2112, 7168, "1d2d", False, torch.bfloat16, False)
        cfg = make_config(desc, facts, bm, bn, split)
        cfg = type(cfg)(**{**cfg.__dict__, "pipe_mma": pipe})
        cases.append(dict(m=128 if bm == 128 else 77, n=2112, k=7168, cfg=cfg))
    for cs in cases:
        try:
            r = check_case(**cs)
        except Exception as e:  # noqa: BLE001
            r = dict(case=str(cs), error=repr(e)[:400], ok=False)
        res.append(r)
        print("CHECK", "ok " if r["ok"] else "BAD", {k: r.get(k) for k in ("M", "N", "K", "recipe", "packed",
              "with_c", "diff", "repeat_equal", "error")}, r.get("cfg", {}).get("block_n"), flush=True)
    return res


def cublas_times(m, n, k):
    out = {}
    try:
        a, sfa, _, b, sfb, _, _, _ = inputs(m, n, k)
        sa = sfa.t().contiguous().t()  # (M, K/128) M-major
        sb = sfb.t()
        out["cublas_block_us"] = time_fn(lambda: torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16))
    except Exception as e:  # noqa: BLE001
        out["cublas_block_err"] = repr(e)[:200]
    try:
        a, _, _, b, _, _, _, _ = inputs(m, n, k)
        one = torch.ones((), device=DEV)
        out["cublas_tensor_us"] = time_fn(lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16))
    except Exception as e:  # noqa: BLE001
        out["cublas_tensor_err"] = repr(e)[:200]
    return out


def candidates(desc, facts):
    cands = {get_sm90_config(desc, facts)}
    m = desc.m
    num_kb = desc.k // 128
    if m <= 256:
        for bm, bn in ((64, 64), (64, 128), (128, 128) if m > 64 else (64, 32)):
            for split in (1, 2, 4, 8):
                if num_kb % split == 0 and num_kb // split >= 2 and (bm == 64 or m > 64):
                    cands.add(make_config(desc, facts, bm, bn, split))
    else:
        for bm, bn in ((128, 128), (128, 64)):
            cands.add(make_config(desc, facts, bm, bn, 1))
            c = make_config(desc, facts, bm, bn, 1)
            cands.add(type(c)(**{**c.__dict__, "pipe_mma": not c.pipe_mma}))
    return sorted(cands, key=lambda c: (c != get_sm90_config(desc, facts), c.block_m, c.block_n, c.split_k))


def phase_bench(full, anchors):
    facts = device_facts(DEV)
    res = []
    for m in (64, 128, 4096):
        for n, k in SHAPES_NK:
            desc = desc_for(m, n, k, "1d2d", False, torch.bfloat16, False)
            t = inputs(m, n, k)
            row = dict(M=m, N=n, K=k, configs=[])
            heur = get_sm90_config(desc, facts)
            for cfg in candidates(desc, facts) if full else [heur]:
                try:
                    us = time_fn(lambda cfg=cfg, desc=desc, t=t: run_direct(desc, cfg, t))
                except Exception as e:  # noqa: BLE001
                    row["configs"].append(dict(cfg=cfg.__dict__, error=repr(e)[:300]))
                    continue
                row["configs"].append(dict(cfg=cfg.__dict__, us=us, heuristic=cfg == heur))
            ok = [c for c in row["configs"] if "us" in c]
            row["heur_us"] = next((c["us"] for c in ok if c.get("heuristic")), None)
            row["best_us"] = min(c["us"] for c in ok) if ok else None
            row["best_cfg"] = min(ok, key=lambda c: c["us"])["cfg"] if ok else None
            row.update(cublas_times(m, n, k))
            anc = anchors.get((m, n, k), {})
            row["deepgemm_us"] = anc.get("deepgemm_us")
            flops = 2 * m * n * k
            for key in ("heur_us", "best_us", "cublas_block_us", "cublas_tensor_us", "deepgemm_us"):
                if row.get(key):
                    row[key.replace("_us", "_TFLOPS")] = flops / row[key] / 1e6
            res.append(row)
            print("BENCH", m, n, k, {k2: (round(v, 1) if isinstance(v, float) else v) for k2, v in row.items()
                                     if k2.endswith("_us")}, flush=True)
    # 1d1d (FP32 out, C accumulated) on DeepGEMM's weight-gradient sweep shapes
    for m, n, k in ((4096, 4096, 7168), (2112, 4096, 7168), (7168, 4096, 2048)):
        desc = desc_for(m, n, k, "1d1d", False, torch.float32, True)
        t = inputs(m, n, k, "1d1d", False, True, torch.float32)
        cfg = get_sm90_config(desc, facts)
        us = time_fn(lambda cfg=cfg, desc=desc, t=t: run_direct(desc, cfg, t))
        res.append(dict(M=m, N=n, K=k, recipe="1d1d", heur_us=us, cfg=cfg.__dict__,
                        heur_TFLOPS=2 * m * n * k / us / 1e6))
        print("BENCH1D1D", m, n, k, round(us, 1), round(2 * m * n * k / us / 1e6), flush=True)
    return res


def v3_configs(desc, facts):
    """(name, config) pairs of the v3 sweep: the v2 128x128 baseline and the BLOCK_M 256 variants."""
    base = make_config(desc, facts, 128, 128)
    out = [("128x128 v2", dataclasses.replace(base, pipe_mma=False)),
           ("128x128 tma", dataclasses.replace(make_config(desc, facts, 128, 128, sfa_tma=True), pipe_mma=False)),
           ("256x128", make_config(desc, facts, 256, 128)),
           ("256x128 small_epi", make_config(desc, facts, 256, 128, small_epi=True)),
           ("256x128 tma", make_config(desc, facts, 256, 128, sfa_tma=True)),
           ("256x128 tma g16", dataclasses.replace(make_config(desc, facts, 256, 128, sfa_tma=True), group_m=16))]
    heur = get_sm90_config(desc, facts)
    if all(c != heur for _, c in out):
        out.append(("heuristic", heur))
    return out


def direct_launch(desc, cfg, t):
    """The GEMM kernel launched straight from its plan (kernel time only; no host launcher in the way)."""
    a, sfa, sfa_k, b, sfb, sfb_k, c, d = t
    grid, args, meta, reduce = sm90._build_plan(desc, cfg, a, sfa_k, b, sfb_k, d, c)
    assert reduce is None
    from finegemm.kernels.sm90 import gemm_1d2d

    return lambda: gemm_1d2d.fp8_gemm_kernel[grid](*args, **meta)


def phase_v3(result, path):
    facts = device_facts(DEV)
    rows = result.setdefault("v3", [])
    for n, k in SHAPES_NK:
        m = 4096
        desc = desc_for(m, n, k, "1d2d", False, torch.bfloat16, False)
        t = inputs(m, n, k)
        a, sfa, _, b, sfb, _, _, d = t
        ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), None, recipe=(1, 128, 128))
        row = dict(M=m, N=n, K=k, configs=[], deepgemm_us=DEEPGEMM_US.get((m, n, k)))
        flops = 2 * m * n * k
        for name, cfg in v3_configs(desc, facts):
            entry = dict(name=name, cfg=cfg.__dict__)
            try:
                fn = direct_launch(desc, cfg, t)
                d.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                entry["diff"] = reference.calc_diff(d, ref)
                first = d.clone()
                d.fill_(float("nan"))
                run_direct(desc, cfg, t)
                torch.cuda.synchronize()
                entry["repeat_equal"] = bool(torch.equal(first, d))
                entry["ok"] = bool(entry["diff"] < 1e-3 and entry["repeat_equal"])
                entry["us"] = time_fn(fn)
                entry["TFLOPS"] = flops / entry["us"] / 1e6
            except Exception as e:  # noqa: BLE001
                entry["error"] = repr(e)[:300]
            row["configs"].append(entry)
            print("V3", m, n, k, name, {k2: (round(v, 4) if isinstance(v, float) else v) for k2, v in entry.items()
                                        if k2 in ("us", "TFLOPS", "diff", "ok", "error")}, flush=True)
        row.update(cublas_times(m, n, k))
        rows.append(row)
        json.dump(result, open(path, "w"), indent=1, default=str)
    print(f"{'N':>6} {'K':>6} " + " ".join(f"{name:>18}" for name, _ in v3_configs(
        desc_for(4096, 2112, 7168, "1d2d", False, torch.bfloat16, False), facts)) + "  cuBLASb      DG")
    for r in rows:
        cells = " ".join(f"{c.get('us', float('nan')):18.1f}" for c in r["configs"])
        print(f"{r['N']:>6} {r['K']:>6} {cells} {r.get('cublas_block_us', float('nan')):8.1f} {r['deepgemm_us']:7.1f}")


# ---------------------------------------------------------------------------------------------
# v4: configs never re-measured after v3 (M <= 256; FP32 out / recipe (1,1,128))
# ---------------------------------------------------------------------------------------------
# DeepGEMM's weight-gradient shapes (anchors fp8_gemm_test_sweep, 1D1D, FP32 out, accumulate=1), us
WGRAD_DEEPGEMM_US = {
    (2112, 4096, 7168): 135.0, (576, 4096, 7168): 56.8, (24576, 4096, 1536): 419.5,
    (32768, 4096, 512): 446.9, (7168, 4096, 16384): 904.6, (4096, 4096, 7168): 246.8,
    (7168, 4096, 2048): 162.5,
}
FP32_1D2D_SHAPES = [(4096, 4096, 7168), (4096, 7168, 2048)]  # no DeepGEMM anchor: cuBLAS peers only
HBM_TBPS = 4.25


def v3_small_config(desc, facts):
    """The v3 heuristic at M <= 256, frozen here so the v4 sweep can time it as the baseline."""
    bm = 64 if desc.m <= 64 else 128
    num_kb = desc.k // 128
    tiles = math.ceil(desc.m / bm) * math.ceil(desc.n / 128)
    split = 1
    for s in (2, 4, 8):
        if num_kb % s == 0 and num_kb // s >= 12 and tiles * s <= facts.num_sms:
            split = s
    return make_config(desc, facts, bm, 128, split)


def v3_fp32_config(desc, facts):
    """The v3 heuristic for FP32 out / 1d1d at M > 256: the v2 128x128 plain schedule."""
    return dataclasses.replace(make_config(desc, facts, 128, 128), pipe_mma=False)


def _fill_split(desc, facts, bm, bn):
    """Largest split (2, 4, 8) whose units fit one wave with >= 8 K blocks each (1 if none)."""
    num_kb = desc.k // 128
    tiles = math.ceil(desc.m / bm) * math.ceil(desc.n / bn)
    best = 1
    for s in (2, 4, 8):
        if num_kb % s == 0 and num_kb // s >= 8 and tiles * s <= facts.num_sms:
            best = s
    return best


def _distinct(named):
    """(name, config) pairs without repeated configs (the first name wins) or ones with < 3 stages."""
    seen, uniq = set(), []
    for name, cfg in named:
        if cfg not in seen and cfg.stages >= 3:
            seen.add(cfg)
            uniq.append((name, cfg))
    return uniq


def v4_configs(desc, facts):
    """(name, config) candidates of the v4 sweep for one shape (the v3 pick first, named 'v3')."""
    rep = dataclasses.replace
    out = []
    if desc.m <= 256:
        old = v3_small_config(desc, facts)
        out.append(("v3", old))
        out.append(("v3 tma", rep(make_config(desc, facts, old.block_m, 128, old.split_k, sfa_tma=True),
                                  pipe_mma=old.pipe_mma)))
        for bn in (32, 64, 128):
            tiles = math.ceil(desc.m / 64) * math.ceil(desc.n / bn)
            split = _fill_split(desc, facts, 64, bn)
            if tiles >= 64 or split == 1:
                out.append((f"64x{bn} tma", make_config(desc, facts, 64, bn, 1, sfa_tma=True)))
            if split > 1 and bn < 128:
                out.append((f"64x{bn} s{split} tma", make_config(desc, facts, 64, bn, split, sfa_tma=True)))
        out.append(("64x32", make_config(desc, facts, 64, 32)))
        out.append(("64x64", make_config(desc, facts, 64, 64)))
        out.append(("64x32 tma nopipe", rep(make_config(desc, facts, 64, 32, 1, sfa_tma=True), pipe_mma=False)))
        out.append(("64x64 tma nopipe", rep(make_config(desc, facts, 64, 64, 1, sfa_tma=True), pipe_mma=False)))
        if desc.m > 64:
            out.append(("128x64 tma", make_config(desc, facts, 128, 64, 1, sfa_tma=True)))
    else:
        out.append(("v3", v3_fp32_config(desc, facts)))
        tma = rep(make_config(desc, facts, 128, 128, sfa_tma=True), pipe_mma=False)
        out.append(("128x128 tma", tma))
        out.append(("128x128 tma g16", rep(tma, group_m=16)))
        out.append(("128x64 tma", make_config(desc, facts, 128, 64, sfa_tma=True)))
        out.append(("128x64 tma nopipe", rep(make_config(desc, facts, 128, 64, sfa_tma=True), pipe_mma=False)))
        if desc.kind == "fp8_1d2d":
            out.append(("256x128 se tma", make_config(desc, facts, 256, 128, small_epi=True, sfa_tma=True)))
    uniq = _distinct(out)
    heur = get_sm90_config(desc, facts)
    if heur not in [cfg for _, cfg in uniq]:
        uniq.append(("heuristic", heur))
    return uniq


def v4_shapes():
    """(label, m, n, k, recipe, out dtype, with C) in sweep order: decode shapes first."""
    out = []
    for m in (64, 128):
        for n, k in SHAPES_NK:
            out.append(("small", m, n, k, "1d2d", torch.bfloat16, False))
    for m, n, k in WGRAD_DEEPGEMM_US:
        out.append(("wgrad", m, n, k, "1d1d", torch.float32, True))
    for m, n, k in FP32_1D2D_SHAPES:
        out.append(("fp32_1d2d", m, n, k, "1d2d", torch.float32, True))
    return out


def phase_v4compile():
    """CPU: compile every v4 candidate for sm_90; print (and return) registers, stack and local bytes."""
    from finegemm.jit.device import H200
    from finegemm.kernels.sm90.compile_check import compile_variant, resource_usage

    seen, rows = {}, []
    for label, m, n, k, recipe, out, with_c in v4_shapes():
        desc = desc_for(m, n, k, recipe, False, out, with_c)
        for name, cfg in v4_configs(desc, H200):
            key = (desc.kind, n, k, desc.out_fp32, with_c, cfg)
            if key not in seen:
                t0 = time.time()
                try:
                    use = resource_usage(compile_variant(desc, cfg, "fp32" if with_c else "bf16"))
                except Exception as e:  # noqa: BLE001
                    use = dict(error=repr(e)[:200])
                seen[key] = dict(use, compile_s=round(time.time() - t0, 2))
            row = dict(shape=f"{label} {m}x{n}x{k}", name=name, cfg=cfg.__dict__, **seen[key])
            rows.append(row)
            print("V4C", row["shape"], name, {k2: v for k2, v in seen[key].items()}, flush=True)
    bad = [r for r in rows if r.get("error") or r.get("STACK") or r.get("LOCAL")]
    print(f"V4C SUMMARY: {len(seen)} compiles, {len(bad)} candidates spill or fail", flush=True)
    for r in bad:
        print("V4C BAD", r["shape"], r["name"], r, flush=True)
    return rows


def _v4_precompile_task(task):
    """Worker: build one shape's inputs and launch each config once (fills Triton's disk cache)."""
    (m, n, k, recipe, out_name, with_c), cfgs = task
    out = getattr(torch, out_name)
    errs = []
    try:
        t = inputs(m, n, k, recipe, False, with_c, out)
        desc = desc_for(m, n, k, recipe, False, out, with_c)
        for cfg in cfgs:
            try:
                run_direct(desc, cfg, t)
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e)[:200])
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        errs.append(repr(e)[:200])
    return errs


def _v4_precompile(workers=8, shapes=None, configs=None):
    import multiprocessing as mp

    shapes, configs = shapes or v4_shapes, configs or v4_configs
    facts = device_facts(DEV)
    tasks = []
    for _label, m, n, k, recipe, out, with_c in shapes():
        desc = desc_for(m, n, k, recipe, False, out, with_c)
        cfgs = [c for _, c in configs(desc, facts)]
        for i in range(0, len(cfgs), 4):
            tasks.append(((m, n, k, recipe, str(out).split(".")[-1], with_c), cfgs[i:i + 4]))
    t0 = time.time()
    try:
        with mp.get_context("spawn").Pool(workers) as pool:
            errs = [e for r in pool.imap_unordered(_v4_precompile_task, tasks) for e in r]
    except Exception as e:  # noqa: BLE001
        errs = [f"pool failed: {e!r}"[:300]]
    print(f"V4 precompile: {len(tasks)} tasks in {time.time() - t0:.1f} s, {len(errs)} errors {errs[:3]}", flush=True)
    return dict(tasks=len(tasks), seconds=time.time() - t0, errors=errs[:20])


def cublas_fp32_times(m, n, k):
    """cuBLAS peers for the FP32-out shapes: blockwise 1x128 x 128x128 and per-tensor, FP32 out, no C."""
    out = {}
    try:
        a, sfa, _, b, sfb, _, _, _ = inputs(m, n, k)
        sa, sb = sfa.t().contiguous().t(), sfb.t()
        out["cublas_block_us"] = time_fn(lambda: torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.float32))
    except Exception as e:  # noqa: BLE001
        out["cublas_block_err"] = repr(e)[:200]
    try:
        a, _, _, b, _, _, _, _ = inputs(m, n, k)
        one = torch.ones((), device=DEV)
        out["cublas_tensor_us"] = time_fn(lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.float32))
    except Exception as e:  # noqa: BLE001
        out["cublas_tensor_err"] = repr(e)[:200]
    return out


def v5_shapes():
    """The weight-gradient shapes (recipe (1,1,128), FP32 out with C) of the v5 sweep."""
    return [("wgrad", m, n, k, "1d1d", torch.float32, True) for m, n, k in WGRAD_DEEPGEMM_US]


def v5_configs(desc, facts):
    """v5: per-channel RHS scales in the ring (sfb_tma) at 128 and 256 rows, against the v4 pick."""
    rep = dataclasses.replace
    mk = make_config
    out = [("v4", rep(mk(desc, facts, 128, 128), pipe_mma=False)),
           ("128 sfb", rep(mk(desc, facts, 128, 128, sfb_tma=True), pipe_mma=False)),
           ("128 sfa sfb", rep(mk(desc, facts, 128, 128, sfa_tma=True, sfb_tma=True), pipe_mma=False)),
           ("128 sfa sfb pipe", rep(mk(desc, facts, 128, 128, sfa_tma=True, sfb_tma=True), pipe_mma=True)),
           ("256 se sfb", mk(desc, facts, 256, 128, small_epi=True, sfb_tma=True)),
           ("256 se sfa sfb", mk(desc, facts, 256, 128, small_epi=True, sfa_tma=True, sfb_tma=True)),
           ("256 se sfa sfb g16", rep(mk(desc, facts, 256, 128, small_epi=True, sfa_tma=True, sfb_tma=True),
                                      group_m=16)),
           ("128x64 sfa sfb pipe", rep(mk(desc, facts, 128, 64, sfa_tma=True, sfb_tma=True), pipe_mma=True))]
    heur = get_sm90_config(desc, facts)
    if heur not in [c for _, c in out]:
        out.append(("heuristic", heur))
    return out


def v6_shapes():
    """The 18 dense shapes (BF16 out) and the 7 weight-gradient shapes of the v6 (paired PIPE_MMA) sweep."""
    out = [("small" if m <= 128 else "large", m, n, k, "1d2d", torch.bfloat16, False)
           for m in (64, 128, 4096) for n, k in SHAPES_NK]
    return out + v5_shapes()


def v6_configs(desc, facts):
    """v6: PIPE_MMA as K-block pairs (gemm_1d2d._one_wave_loop) on and off, beside the heuristic's pick."""
    rep = dataclasses.replace
    mk = make_config
    out = [("heuristic", get_sm90_config(desc, facts))]
    wgrad = desc.kind == "fp8_1d1d"
    tiles = [(128, 128), (128, 64)] if desc.m > 256 else [(64, 32), (64, 64), (64, 128), (128, 64), (128, 128)]
    for bm, bn in tiles:
        if bm == 128 and desc.m <= 64:
            continue
        base = mk(desc, facts, bm, bn, 1, sfa_tma=True, sfb_tma=wgrad)
        for pipe in (True, False):
            out.append((f"{bm}x{bn}{' pipe' if pipe else ''}", rep(base, pipe_mma=pipe)))
        split = _fill_split(desc, facts, bm, bn)
        if desc.m <= 128 and split > 1:
            out.append((f"{bm}x{bn} s{split} pipe", rep(mk(desc, facts, bm, bn, split, sfa_tma=True), pipe_mma=True)))
    return _distinct(out)


def v7_shapes():
    """The 12 decode shapes (M = 64 and 128, BF16 out) of the v7 narrow-tile sweep."""
    return [("small", m, n, k, "1d2d", torch.bfloat16, False) for m in (64, 128) for n, k in SHAPES_NK]


def v7_configs(desc, facts):
    """v7: BLOCK_N 16 (DeepGEMM's 64x16, 16 stages at 64x2112x7168: 132 tiles, one full round, no split-K)
    beside 32 / 64 and the heuristic's pick, all 64-row, pipelined, scales by TMA."""
    out = [("heuristic", get_sm90_config(desc, facts))]
    for bn in (16, 32, 64):
        out.append((f"64x{bn} pipe", dataclasses.replace(make_config(desc, facts, 64, bn, 1, sfa_tma=True),
                                                           pipe_mma=True)))
    return _distinct(out)


def v8_configs(desc, facts):
    """v8: split-K with the reduction fused into the GEMM (``splitk_fused``) at M <= 128: every 64/128-row
    tile of BLOCK_N 32-128 with each split (2-8, dividing K/128) whose units fit one round and keep >= 4 K
    blocks, beside the heuristic's pick and, where it splits, the same split with the separate reduction."""
    rep = dataclasses.replace
    heur = get_sm90_config(desc, facts)
    out = [("heuristic", heur)]
    if heur.split_k > 1:
        out.append(("heuristic fused", rep(heur, splitk_fused=True)))
    num_kb = desc.k // 128
    for bm, bn in ((64, 32), (64, 64), (64, 128), (128, 64), (128, 128)):
        if bm == 128 and desc.m <= 64:
            continue
        tiles = math.ceil(desc.m / bm) * math.ceil(desc.n / bn)
        for split in range(2, 9):
            if num_kb % split or num_kb // split < 4 or tiles * split > facts.num_sms:
                continue
            cfg = rep(make_config(desc, facts, bm, bn, split, sfa_tma=True), pipe_mma=True, splitk_fused=True)
            out.append((f"{bm}x{bn} s{split} fused", cfg))
    return _distinct(out)


def v9_shapes():
    """v9: the large-M shapes whose last tile round is nearly empty at 128- or 64-row tiles (dense 4096x2112x7168,
    weight gradients 2112x4096x7168 and 576x4096x7168)."""
    return [("large", 4096, 2112, 7168, "1d2d", torch.bfloat16, False),
            ("wgrad", 2112, 4096, 7168, "1d1d", torch.float32, True),
            ("wgrad", 576, 4096, 7168, "1d1d", torch.float32, True)]


def v9_configs(desc, facts):
    """v9: ``split_tail`` (only the last partial round's tiles split K, summed in the kernel) at 128x128 and
    64x128, every split of 2-8 dividing K/128 whose tail units fill at most two rounds, beside the heuristic's
    pick and the same tiles unsplit; pipelined or not as the heuristic's rule for the recipe."""
    rep = dataclasses.replace
    wgrad = desc.kind == "fp8_1d1d"
    out = [("heuristic", get_sm90_config(desc, facts))]
    num_kb = desc.k // 128
    for bm, bn in ((128, 128), (64, 128)):
        base = rep(make_config(desc, facts, bm, bn, 1, sfa_tma=True, sfb_tma=wgrad), pipe_mma=wgrad or bm == 64,
                   c_tma=wgrad)
        out.append((f"{bm}x{bn}", base))
        tiles = math.ceil(desc.m / bm) * math.ceil(desc.n / bn)
        tail = tiles % facts.num_sms
        for split in range(2, 9):
            if num_kb % split or num_kb // split < 4 or tail * split > 2 * facts.num_sms or tail == 0:
                continue
            # the fused reduction stages D in its own dtype: the unsplit tile's stages fit
            cfg = rep(make_config(desc, facts, bm, bn, split, sfa_tma=True, sfb_tma=wgrad), pipe_mma=base.pipe_mma,
                      splitk_fused=True, split_tail=True, c_tma=wgrad, stages=base.stages)
            out.append((f"{bm}x{bn} tail s{split}", cfg))
    return _distinct(out)


def v11_shapes():
    """v11: the 1d2d shape whose split tail lost in v9 (4096x2112x7168, 16 tiles in the last round at 128x128)."""
    return v9_shapes()[:1]


def v11_configs(desc, facts):
    """v11: v9's 128x128 split tails again and 256x64 tiles (4096x2112: 16 x 33 = 528 tiles, exactly four
    rounds of 132). Run once on a tree whose split-tail kernel released the whole tiles without the proxy fence
    (no faster: benchmarks/NOTES.md v11; that change was not kept)."""
    out = [(name, cfg) for name, cfg in v9_configs(desc, facts) if not name.startswith("64x")]
    return out + [("256x64", make_config(desc, facts, 256, 64, 1, sfa_tma=True))]


def v12_shapes():
    """v12: the decode shapes with K >= 7168, where splitting K can fill the SMs (M = 64 and 128)."""
    return [("small", m, n, k, "1d2d", torch.bfloat16, False) for m in (64, 128) for n, k in SHAPES_NK if k >= 7168]


def v12_configs(desc, facts):
    """v12: split-K with the reduction launched by programmatic dependent launch (its launch off the critical
    path): 64-row (and at M = 128, 128-row) tiles of 64 / 128 columns, every split of 2-8 that divides K/128,
    leaves >= 8 K blocks a split and keeps the units within one round, beside the heuristic's pick."""
    out = [("heuristic", get_sm90_config(desc, facts))]
    num_kb = desc.k // 128
    for bm in (64, 128) if desc.m > 64 else (64,):
        for bn in (64, 128):
            tiles = math.ceil(desc.m / bm) * math.ceil(desc.n / bn)
            for split in (2, 4, 7, 8):
                if num_kb % split or num_kb // split < 8 or tiles * split > facts.num_sms:
                    continue
                out.append((f"{bm}x{bn} s{split}", make_config(desc, facts, bm, bn, split, sfa_tma=True)))
    return _distinct(out)


def v13_shapes():
    """v13: the six M = 4096 1d2d shapes (BF16 out)."""
    return [("large", 4096, n, k, "1d2d", torch.bfloat16, False) for n, k in SHAPES_NK]


def v13_configs(desc, facts):
    """v13: BLOCK_M 192, three math warpgroups (one 64-row wave each, 152 registers, one partial), against the
    heuristic's pick: 192x128 and 192x64 with the per-token scales in the ring or from global memory."""
    out = [("heuristic", get_sm90_config(desc, facts))]
    for bn in (128, 64):
        out.append((f"192x{bn}", make_config(desc, facts, 192, bn, sfa_tma=True)))
    out.append(("192x128 gmem sf", make_config(desc, facts, 192, 128, sfa_tma=False)))
    return _distinct(out)


def v14_shapes():
    """v14: shapes where the BLOCK_M 192 rule (heuristics_sm90._large_m_config) fires beyond v13's one."""
    return [("large", m, n, k, "1d2d", torch.bfloat16, False)
            for m, n, k in ((4096, 576, 7168), (1024, 2112, 7168), (333, 7168, 2048), (333, 24576, 1536),
                            (577, 4096, 7168), (4096, 2112, 7168))]


def v14_configs(desc, facts):
    """v14: the heuristic's pick (BLOCK_M 192 on these shapes) against what the rule chose before it (256 rows
    unless 128 fill the SMs 10 points better; TMA scales, unpipelined; GROUP_M 16 at 256 rows and K < 2048)."""
    from finegemm.jit.heuristics_sm90 import _wave_efficiency
    bm = 128 if _wave_efficiency(desc, facts, 128, 128) > _wave_efficiency(desc, facts, 256, 128) + 0.1 else 256
    old = dataclasses.replace(make_config(desc, facts, bm, 128, sfa_tma=True), pipe_mma=False)
    if bm == 256 and desc.k < 2048:
        old = dataclasses.replace(old, group_m=16)
    return _distinct([("heuristic", get_sm90_config(desc, facts)), (f"before ({bm}x128)", old)])


def v15_shapes():
    """v15 (prepared, not yet run): FP32-out 1d2d with C at the shapes where BLOCK_M 192 fills the SMs best."""
    return [("large", m, n, k, "1d2d", torch.float32, True)
            for m, n, k in ((4096, 2112, 7168), (4096, 576, 7168), (1024, 2112, 7168), (4096, 7168, 2048))]


def v15_configs(desc, facts):
    """v15: the heuristic's pick (256 rows with the shared D staging, FP32 out) against 192x128 (three
    warpgroups, C staged by TMA per warpgroup, 3 stages beside the FP32 D staging)."""
    return _distinct([("heuristic", get_sm90_config(desc, facts)),
                      ("192x128", make_config(desc, facts, 192, 128, sfa_tma=True))])


def v17_shapes():
    """v17: FP32-out 1d2d (with C, and without) where the v15-extended BLOCK_M 192 rule fires below M = 1024, and
    the M = 4096 shapes the rule leaves at 128 or 256 rows."""
    out = []
    for m, n, k in ((333, 7168, 2048), (333, 24576, 1536), (577, 4096, 7168), (4096, 4096, 7168),
                    (4096, 7168, 16384), (4096, 24576, 1536)):
        out.append(("large", m, n, k, "1d2d", torch.float32, True))
    out += [("large", m, n, k, "1d2d", torch.float32, False) for m, n, k in ((4096, 2112, 7168), (577, 4096, 7168))]
    return out


def v17_configs(desc, facts):
    """v17: the heuristic's pick against 192x128, 256 rows with the shared D staging, and 128x128 (TMA scales)."""
    return _distinct([("heuristic", get_sm90_config(desc, facts)),
                      ("192x128", make_config(desc, facts, 192, 128, sfa_tma=True)),
                      ("256x128 small_epi", make_config(desc, facts, 256, 128, sfa_tma=True, small_epi=True)),
                      ("128x128", make_config(desc, facts, 128, 128, sfa_tma=True))])


def v18_shapes():
    """v18 (session 20, NOTES v22): shapes where DeepGEMM's configs are widths that are not powers of two (128x192
    at 4096x2112 and 128x24576; 64x96 at 64x24576; 64x112 at 128x7168) and one where 128x192 should not matter."""
    return [("large", 4096, 2112, 7168, "1d2d", torch.bfloat16, False),
            ("large", 4096, 24576, 1536, "1d2d", torch.bfloat16, False),
            ("large", 4096, 7168, 2048, "1d2d", torch.bfloat16, False),
            ("small", 64, 24576, 1536, "1d2d", torch.bfloat16, False),
            ("small", 128, 24576, 1536, "1d2d", torch.bfloat16, False),
            ("small", 128, 7168, 16384, "1d2d", torch.bfloat16, False),
            ("small", 128, 7168, 2048, "1d2d", torch.bfloat16, False)]


def v18_configs(desc, facts):
    """v18: the heuristic's pick against tiles of two column blocks (gemm_1d2d's BLOCK_N1; scales by TMA, pipelined
    where registers allow, i.e. 64x96): 128x192 / 128x160 at M > 128, 64x96 / 64x144 / 64x160 at M <= 128."""
    widths = ((128, 192), (128, 160)) if desc.m > 128 else ((64, 96), (64, 144), (64, 160))
    out = [("heuristic", get_sm90_config(desc, facts))]
    out += [(f"{bm}x{bn}", make_config(desc, facts, bm, bn, sfa_tma=True)) for bm, bn in widths]
    return _distinct(out)


def v19_shapes():
    """v19 (session 21, NOTES v23): the FP32-out picks moved off spilling tiles: recipe (1, 128, 128) without C (256
    rows spilled 104 bytes), and the weight gradients of the 128-row split tail and of the 128x64 K = 512 tile."""
    out = [("large", m, n, k, "1d2d", torch.float32, False)
           for m, n, k in ((4096, 4096, 7168), (4096, 7168, 16384), (1024, 4096, 7168))]
    out += [("large", 4096, 2112, 7168, "1d1d", torch.float32, True),
            ("large", 32768, 4096, 512, "1d1d", torch.float32, True)]
    return out


def v19_configs(desc, facts):
    """v19: the heuristic's pick against the tiles the rules took before (256 rows with the shared D staging for
    recipe (1, 128, 128); the split tail with C by TMA for recipe (1, 1, 128)) and the 192 / 128-row alternatives."""
    out = [("heuristic", get_sm90_config(desc, facts))]
    if desc.kind == "fp8_1d2d":
        out += [("256x128 small_epi", make_config(desc, facts, 256, 128, sfa_tma=True, small_epi=True)),
                ("192x128", make_config(desc, facts, 192, 128, sfa_tma=True)),
                ("128x128", dataclasses.replace(make_config(desc, facts, 128, 128, sfa_tma=True), pipe_mma=False))]
    else:
        pick = out[0][1]
        if pick.split_tail:
            out.append(("split tail + C by TMA", dataclasses.replace(pick, c_tma=True)))
            out.append(("no split tail", dataclasses.replace(pick, split_k=1, splitk_fused=False, split_tail=False,
                                                             c_tma=True)))
    return _distinct(out)


def phase_v4(result, path, shapes=None, configs=None, key="v4"):
    shapes, configs = shapes or v4_shapes, configs or v4_configs
    t_start = time.time()
    deadline = float(os.environ.get("V4_DEADLINE_S", "140"))
    facts = device_facts(DEV)
    result[f"{key}_precompile"] = _v4_precompile(int(os.environ.get("V4_WORKERS", "8")), shapes, configs)
    rows = result.setdefault(key, [])
    for label, m, n, k, recipe, out, with_c in shapes():
        desc = desc_for(m, n, k, recipe, False, out, with_c)
        t = inputs(m, n, k, recipe, False, with_c, out)
        a, sfa, sfa_k, b, sfb, sfb_k, c, d = t
        ref = reference.fp8_gemm_nt((a, sfa), (b, sfb), c, recipe=(1, 128, 128) if recipe == "1d2d" else (1, 1, 128))
        op_bytes = m * k + n * k + m * n * (4 if out == torch.float32 else 2) * (2 if with_c else 1)
        row = dict(label=label, M=m, N=n, K=k, recipe=recipe, out=str(out), with_c=with_c, configs=[],
                   deepgemm_us=(WGRAD_DEEPGEMM_US if label == "wgrad" else DEEPGEMM_US).get((m, n, k)),
                   hbm_floor_us=op_bytes / (HBM_TBPS * 1e6))
        flops = 2 * m * n * k
        for name, cfg in configs(desc, facts):
            entry = dict(name=name, cfg=cfg.__dict__, heuristic=cfg == get_sm90_config(desc, facts))
            if time.time() - t_start > deadline:
                entry["skipped"] = "deadline"
                row["configs"].append(entry)
                continue
            try:
                d.fill_(float("nan"))
                run_direct(desc, cfg, t)
                torch.cuda.synchronize()
                entry["diff"] = reference.calc_diff(d, ref)
                first = d.clone()
                d.fill_(float("nan"))
                run_direct(desc, cfg, t)
                torch.cuda.synchronize()
                entry["repeat_equal"] = bool(torch.equal(first, d))
                entry["ok"] = bool(entry["diff"] < 1e-3 and entry["repeat_equal"])
                entry["us"] = time_fn(lambda cfg=cfg, desc=desc, t=t: run_direct(desc, cfg, t))
                entry["TFLOPS"] = flops / entry["us"] / 1e6
                entry["pct_hbm_floor"] = 100 * row["hbm_floor_us"] / entry["us"]
            except Exception as e:  # noqa: BLE001
                entry["error"] = repr(e)[:300]
            row["configs"].append(entry)
            print("V4", label, m, n, k, name, {k2: (round(v, 4) if isinstance(v, float) else v)
                                              for k2, v in entry.items() if k2 in ("us", "diff", "ok", "error")},
                  flush=True)
        if time.time() - t_start < deadline + 15:
            row.update(cublas_times(m, n, k) if out == torch.bfloat16 else cublas_fp32_times(m, n, k))
        rows.append(row)
        del t, a, b, c, d, ref
        json.dump(result, open(path, "w"), indent=1, default=str)
    print(f"{'shape':>24} {'v3 us':>7} {'best us':>7} {'best':>18} {'DG':>6} {'cuBLASb':>7} {'x DG':>5} {'%HBM':>5}")
    for r in rows:
        timed = [c for c in r["configs"] if c.get("ok") and "us" in c]
        if not timed:
            continue
        v3 = next((c["us"] for c in timed if c["name"] in ("v3", "v4")), float("nan"))
        best = min(timed, key=lambda c: c["us"])
        dg = r.get("deepgemm_us") or float("nan")
        print(f"{r['label']:>9} {r['M']:>5}x{r['N']:>5}x{r['K']:>5} {v3:7.1f} {best['us']:7.1f} {best['name']:>18} "
              f"{dg:6.1f} {r.get('cublas_block_us', float('nan')):7.1f} {dg / best['us']:5.2f} "
              f"{100 * r['hbm_floor_us'] / best['us']:5.1f}")


def phase_host():
    """Host time per cached public call (no sync inside the loop)."""
    out = {}
    for m, n, k in ((64, 2112, 7168), (128, 7168, 2048)):
        a, sfa, sfa_k, b, sfb, sfb_k, c, d = inputs(m, n, k)
        for _ in range(20):
            finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d)
        torch.cuda.synchronize()
        n_calls = 2000
        t0 = time.perf_counter()
        for _ in range(n_calls):
            finegemm.fp8_gemm_nt((a, sfa_k), (b, sfb_k), d)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        desc = desc_for(m, n, k, "1d2d", False, torch.bfloat16, False)
        cfg = get_sm90_config(desc, device_facts(DEV))
        t2 = time.perf_counter()
        for _ in range(n_calls):
            sm90.fp8_gemm(desc, cfg, a, sfa_k, b, sfb_k, d, None)
        t3 = time.perf_counter()
        torch.cuda.synchronize()
        out[f"{m}x{n}x{k}"] = dict(public_us=(t1 - t0) / n_calls * 1e6, direct_us=(t3 - t2) / n_calls * 1e6,
                                   split_k=cfg.split_k)
        print("HOST", m, n, k, out[f"{m}x{n}x{k}"], flush=True)
    return out


def main():
    global FLUSH
    args = set(sys.argv[1:])
    if "v4compile" in args:  # CPU only
        json.dump(phase_v4compile(), open(os.path.join(os.environ.get("OUT", "."), "sm90_v4_compile.json"), "w"),
                  indent=1, default=str)
        return
    full = "--full" in args
    os.environ.setdefault("FINEGEMM_BACKEND", "auto")
    FLUSH = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
    torch.manual_seed(0)
    anchors = {key: {"deepgemm_us": us} for key, us in DEEPGEMM_US.items()}
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M"))
    import triton
    result["triton"] = triton.__version__
    if os.path.exists(".commit"):
        result["commit"] = open(".commit").read().strip()
    outdir = os.environ.get("OUT", ".")
    path = os.path.join(outdir, "sm90_dev.json")
    if "check" in args:
        result["check"] = phase_check(full)
        json.dump(result, open(path, "w"), indent=1, default=str)
    if "bench" in args:
        result["bench"] = phase_bench(full, anchors)
        json.dump(result, open(path, "w"), indent=1, default=str)
    if "host" in args:
        result["host"] = phase_host()
    if "v3" in args:
        phase_v3(result, path)
    # sweep name -> (JSON file, shapes, configs); run in this order when named on the command line
    sweeps = {
        "v4": ("sm90_v4_smallm_wgrad_sweep.json", v4_shapes, v4_configs),
        "v5": ("sm90_v5_wgrad_sweep.json", v5_shapes, v5_configs),
        "v6": ("sm90_v6_pipe_sweep.json", v6_shapes, v6_configs),
        "v7": ("sm90_v7_narrow_sweep.json", v7_shapes, v7_configs),
        "v9": ("sm90_v9_split_tail_sweep.json", v9_shapes, v9_configs),
        "v11": ("sm90_v11_split_tail_sweep.json", v11_shapes, v11_configs),
        "v12": ("sm90_v12_pdl_split_sweep.json", v12_shapes, v12_configs),
        "v13": ("sm90_v13_three_warpgroups_sweep.json", v13_shapes, v13_configs),
        "v14": ("sm90_v14_bm192_rule_sweep.json", v14_shapes, v14_configs),
        "v15": ("sm90_v15_bm192_fp32_sweep.json", v15_shapes, v15_configs),
        "v17": ("sm90_v17_fp32_out_sweep.json", v17_shapes, v17_configs),
        "v18": ("sm90_v18_split_n_sweep.json", v18_shapes, v18_configs),
        "v19": ("sm90_v19_fp32_spill_sweep.json", v19_shapes, v19_configs),
        "v8": ("sm90_v8_splitk_fused_sweep.json", v7_shapes, v8_configs),
    }
    for name, (filename, shapes, configs) in sweeps.items():
        if name in args:
            phase_v4(result, os.path.join(outdir, filename), shapes, configs, name)
    json.dump(result, open(path, "w"), indent=1, default=str)
    if "check" in args:
        bad = [r for r in result["check"] if not r["ok"]]
        print(f"CHECK SUMMARY: {len(result['check']) - len(bad)} ok, {len(bad)} bad")
    if "bench" in args:
        print(f"{'M':>5} {'N':>6} {'K':>6} {'heur':>7} {'best':>7} {'DG':>7} {'cuBLASb':>7} {'cuBLASt':>7} "
              f"{'h/DG':>5} {'b/DG':>5}  best cfg")
        for r in result["bench"]:
            if r.get("recipe") == "1d1d":
                continue
            dg = r.get("deepgemm_us")
            h, b = r.get("heur_us"), r.get("best_us")
            bc = r.get("best_cfg") or {}

            def f(v):
                return f"{v:7.1f}" if isinstance(v, float) else f"{'-':>7}"
            print(f"{r['M']:>5} {r['N']:>6} {r['K']:>6} {f(h)} {f(b)} {f(dg)} {f(r.get('cublas_block_us'))} "
                  f"{f(r.get('cublas_tensor_us'))} {dg / h if dg and h else 0:5.2f} {dg / b if dg and b else 0:5.2f}  "
                  f"{bc.get('block_m')}x{bc.get('block_n')} s{bc.get('split_k')} st{bc.get('stages')} "
                  f"p{int(bool(bc.get('pipe_mma')))}")


if __name__ == "__main__":
    main()
