"""Benchmark of the k-grouped FP8 GEMMs on the H200: the six anchor cases (G = 4, 8, 16; (M, N) = (4096, 7168),
(7168, 2048); per-group K = 32768/G x U(0.7, 1.3) rounded to 128, finegemm.bench.suites' fixed seeds, moved to the
total K of DeepGEMM's anchored case).

Peers, all in this process on fresh random data, timed by CUDA events around each call with a 1 GiB buffer
zeroed before it (L2 flush), 3 warm-up calls (the first compiles), median of 25:

- ``sm90_nt``: ``k_grouped_fp8_gemm_nt_contiguous`` on the sm90 path (per-group dense 1d1d launches), c = d.
- ``portable_nt``: the same call with ``FINEGEMM_BACKEND=portable`` (the portable Triton k-grouped kernel).
- ``sm90_tn`` / ``portable_tn``: ``k_grouped_fp8_gemm_tn_contiguous`` on MN-major ``[sum K, MN]`` operands
  (sm90: one transposing copy per operand, then the nt-style launches); ``transpose``: those two copies alone.
- ``cublas_tensor_loop``: a Python loop of ``torch._scaled_mm`` per group on the same K-major FP8 data with
  per-tensor scales (scalar 1.0), FP32 out, no C accumulation: cuBLAS doing less work (no fine-grained
  scales, no C read) -- a ceiling, not a like-for-like peer.

TFLOPS = 2 * M * N * sum(ks) / t. ``ratio_vs_deepgemm`` = our TFLOPS / the anchored DeepGEMM TFLOPS of the
same (G, M, N) (DeepGEMM's own ks differ: its K_total is in the anchors file). sm90 vs portable is also
checked numerically (calc_diff of one c != d run each). JSON goes to ``$OUT/k_grouped.json`` (rewritten after
every case, so a run cut short keeps what it measured).

``--kernel-time``: also the device span of each sm90 nt call from torch's profiler (``kernel_us``, the kernel
time DeepGEMM's own test reports, which is what the anchors hold) and ``ratio_vs_deepgemm_kernel`` from it;
``--sm90-only``: skip the portable, transpose and cuBLAS peers.

Usage: PYTHONPATH=. python3 scripts/k_grouped_bench.py [--out DIR] [--cases N] [--kernel-time] [--sm90-only]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from generators import flatten_k_major, k_grouped_cast  # noqa: E402

import finegemm  # noqa: E402
from finegemm.bench.peers import env_override  # noqa: E402
from finegemm.bench.suites import k_grouped_cases  # noqa: E402
from finegemm.bench.timer import L2Flush, time_cuda, time_kernels  # noqa: E402
from finegemm.kernels.sm90.transpose import transpose_into  # noqa: E402
from finegemm.reference.dense import calc_diff  # noqa: E402

ANCHORS = Path("/work/shared/anchors/h200-2026-12-02.json")
WARMUP, REPEATS = 3, 25


def _anchors() -> dict[tuple[int, int, int], dict]:
    for path in (ANCHORS, Path(__file__).resolve().parents[1] / "shared/anchors/h200-2026-12-02.json"):
        if path.exists():
            return {(r["groups"], r["M"], r["N"]): r for r in json.loads(path.read_text())["k_grouped"]}
    # the anchored DeepGEMM figures (2026-12-02), in case the anchors file is not on the device machine
    rows = [(4, 4096, 7168, 34304, 1942, 1037), (4, 7168, 2048, 32896, 958, 1008), (8, 4096, 7168, 35968, 2130, 992),
            (8, 7168, 2048, 33920, 1036, 961), (16, 4096, 7168, 34432, 2261, 894), (16, 7168, 2048, 34304, 1119, 900)]
    return {(g, m, n): dict(groups=g, M=m, N=n, K_total=k, deepgemm_us=us, deepgemm_TFLOPS=tf)
            for g, m, n, k, us, tf in rows}


def _timed(fn, flush) -> dict:
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    timing = time_cuda(fn, flush, WARMUP, REPEATS)
    return dict(timing.as_dict(), first_call_s=round(first_s, 2))


def bench_case(case, flush: L2Flush, dev: torch.device, kernel_time: bool = False, sm90_only: bool = False) -> dict:
    g, m, n, ks = case.groups, case.m, case.n, list(case.ks)
    sum_k = sum(ks)
    torch.manual_seed(1000 + g)
    a_q, sfa = k_grouped_cast(torch.randn(sum_k, m, device=dev, dtype=torch.bfloat16), ks)
    b_q, sfb = k_grouped_cast(torch.randn(sum_k, n, device=dev, dtype=torch.bfloat16), ks)
    nt_a, nt_b = (flatten_k_major(a_q, ks), sfa.T), (flatten_k_major(b_q, ks), sfb.T)
    tn_a, tn_b = (a_q, sfa), (b_q, sfb)
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device=dev)
    c0 = torch.randn(g, m, n, device=dev)
    d = c0.clone()
    flops = 2 * m * n * sum_k
    row = dict(groups=g, M=m, N=n, K_total=sum_k, ks=ks)

    def nt():
        finegemm.k_grouped_fp8_gemm_nt_contiguous(nt_a, nt_b, d, ks, ks_tensor, c=d)

    def tn():
        finegemm.k_grouped_fp8_gemm_tn_contiguous(tn_a, tn_b, d, ks, ks_tensor, c=d)

    # numerical cross-check, c apart from d: sm90 vs portable
    outs = {}
    for backend in ("sm90", "portable", "sm90_again"):
        out = torch.full_like(c0, float("nan"))
        with env_override("FINEGEMM_BACKEND", backend.split("_")[0]):
            finegemm.k_grouped_fp8_gemm_nt_contiguous(nt_a, nt_b, out, ks, ks_tensor, c=c0)
        outs[backend] = out
    torch.cuda.synchronize()
    row["calc_diff_sm90_vs_portable"] = calc_diff(outs["sm90"], outs["portable"])
    row["sm90_bitwise_repeat"] = bool(torch.equal(outs["sm90"], outs["sm90_again"]))
    with env_override("FINEGEMM_BACKEND", "sm90"):  # the tn path (transposes) on the same data must give the nt result
        finegemm.k_grouped_fp8_gemm_tn_contiguous(tn_a, tn_b, outs["sm90_again"], ks, ks_tensor, c=c0)
    torch.cuda.synchronize()
    row["calc_diff_tn_vs_nt"] = calc_diff(outs["sm90_again"], outs["sm90"])
    row["sm90_nan"] = bool(torch.isnan(outs["sm90"]).any())
    del outs

    with env_override("FINEGEMM_BACKEND", "sm90"):
        row["sm90_nt"] = _timed(nt, flush)
        row["sm90_tn"] = _timed(tn, flush)
        # host time of a repeated call (plans and recordings cached): enqueue 10 calls, no sync in between
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            nt()
        row["sm90_nt"]["host_us_per_call"] = round((time.perf_counter() - t0) / 10 * 1e6, 1)
        torch.cuda.synchronize()
        if kernel_time:
            row["sm90_nt"]["kernel_us"] = time_kernels(nt, flush, 2, REPEATS).median_us
    if sm90_only:
        for key in ("sm90_nt", "sm90_tn"):
            row[key]["TFLOPS"] = round(flops / (row[key]["median_us"] * 1e-6) / 1e12, 1)
        return row
    with env_override("FINEGEMM_BACKEND", "portable"):
        row["portable_nt"] = _timed(nt, flush)
        row["portable_tn"] = _timed(tn, flush)
    ws_a = torch.empty(m, sum_k, dtype=a_q.dtype, device=dev)
    ws_b = torch.empty(n, sum_k, dtype=b_q.dtype, device=dev)
    row["transpose"] = _timed(lambda: (transpose_into(a_q, ws_a), transpose_into(b_q, ws_b)), flush)

    # cuBLAS per-tensor FP8, a Python loop over the groups (K-major operands, no scales, no C)
    one = torch.ones((), dtype=torch.float32, device=dev)
    views, k0 = [], 0
    for e, k in enumerate(ks):
        views.append((nt_a[0][k0 * m:(k0 + k) * m].view(m, k), nt_b[0][k0 * n:(k0 + k) * n].view(n, k), e))
        k0 += k

    def cublas():
        for av, bv, e in views:
            torch._scaled_mm(av, bv.T, scale_a=one, scale_b=one, out_dtype=torch.float32, out=d[e])

    try:
        row["cublas_tensor_loop"] = _timed(cublas, flush)
    except RuntimeError as err:  # cuBLAS refused the shape
        row["cublas_tensor_loop"] = dict(error=str(err)[:200])

    for key in ("sm90_nt", "sm90_tn", "portable_nt", "portable_tn", "cublas_tensor_loop"):
        t = row[key].get("median_us")
        if t:
            row[key]["TFLOPS"] = round(flops / (t * 1e-6) / 1e12, 1)
    return row


_PIPE_128 = (("bm", 128), ("bn", 128), ("sfa_tma", True), ("sfb_tma", True), ("pipe_mma", True))
_SE_256 = (("bm", 256), ("bn", 128), ("small_epi", True), ("sfa_tma", True), ("sfb_tma", True))
# KGroupedConfig keywords: group_overrides of the dense 1d1d heuristic (make_config keywords), k_dynamic. Runtime K
# only (one compile per tile config; the compile-time-K variants compile once per distinct group K, ~1.3 s each)
SWEEP = {
    "default_kdyn": dict(k_dynamic=True),
    "128x128_tma_pipe_kdyn": dict(group_overrides=_PIPE_128, k_dynamic=True),
    "256x128_se_tma_kdyn": dict(group_overrides=_SE_256, k_dynamic=True),
}


def sweep(cases, flush: L2Flush, dev: torch.device, out: Path, header: dict) -> None:
    """Per-group config sweep through dispatch_k_grouped directly (nt form, c = d), checked against the default."""
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.kernels.sm90 import dispatch_k_grouped as kg

    result = dict(header, what="k-grouped FP8 nt per-group config sweep (dispatch_k_grouped direct)", cases=[])
    facts = device_facts(dev)
    for case in cases:
        g, m, n, ks = case.groups, case.m, case.n, list(case.ks)
        sum_k = sum(ks)
        torch.manual_seed(2000 + g)
        a_q, sfa = k_grouped_cast(torch.randn(sum_k, m, device=dev, dtype=torch.bfloat16), ks)
        b_q, sfb = k_grouped_cast(torch.randn(sum_k, n, device=dev, dtype=torch.bfloat16), ks)
        a, b = flatten_k_major(a_q, ks), flatten_k_major(b_q, ks)
        sfa_nt, sfb_nt = sfa.T, sfb.T
        c0 = torch.randn(g, m, n, device=dev)
        d = c0.clone()
        desc = GemmDesc("fp8_1d1d", m, n, sum_k, True, True, True, True, False, layout="k_grouped", num_groups=g)
        row, ref_out = dict(groups=g, M=m, N=n, K_total=sum_k, ks=ks), None
        for name, kwargs in SWEEP.items():
            cfg = kg.KGroupedConfig(facts, **kwargs)
            out_chk = torch.full_like(c0, float("nan"))
            try:
                kg.k_grouped_fp8_1d1d_gemm(desc, cfg, a, sfa_nt, b, sfb_nt, c0, out_chk, ks, None, True)
                torch.cuda.synchronize()
            except Exception as err:  # noqa: BLE001 - a config that does not compile or launch
                row[name] = dict(error=repr(err)[:300])
                continue
            if ref_out is None:
                ref_out = out_chk
            entry = dict(calc_diff_vs_default=calc_diff(out_chk, ref_out), nan=bool(torch.isnan(out_chk).any()))
            del out_chk
            run = functools.partial(kg.k_grouped_fp8_1d1d_gemm, desc, cfg, a, sfa_nt, b, sfb_nt, d, d, ks, None, True)
            t = time_cuda(run, flush, 2, 12)
            entry.update(t.as_dict(), TFLOPS=round(2 * m * n * sum_k / (t.median_us * 1e-6) / 1e12, 1))
            row[name] = entry
            print(f"sweep G={g} {m}x{n} {name}: {t.median_us:.0f} us {entry['TFLOPS']} TFLOPS "
                  f"diff {entry['calc_diff_vs_default']:.1e}", flush=True)
        result["cases"].append(row)
        out.write_text(json.dumps(result, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--cases", type=int, default=6)
    parser.add_argument("--sweep", action="store_true", help="per-group config sweep instead of the peers")
    parser.add_argument("--kernel-time", action="store_true", help="also the sm90 nt kernel span (profiler)")
    parser.add_argument("--sm90-only", action="store_true", help="skip the portable, transpose and cuBLAS peers")
    args = parser.parse_args()
    dev = torch.device("cuda")
    commit_file = Path(".commit")
    result = dict(
        what="k-grouped FP8 GEMMs, finegemm sm90 (per-group dense 1d1d launches) vs portable vs cuBLAS per-tensor loop",
        gpu=torch.cuda.get_device_name(dev), torch=torch.__version__, triton=triton.__version__,
        commit=commit_file.read_text().strip() if commit_file.exists() else "unknown",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        method=f"CUDA events per call, 1 GiB L2 flush before each, {WARMUP} warm-up, median of {REPEATS}",
        cases=[],
    )
    anchors = _anchors()
    flush = L2Flush(dev)
    out = Path(args.out) / "k_grouped.json"
    cases = sorted(k_grouped_cases(), key=lambda c: c.groups)[:args.cases]
    if args.sweep:  # the worst cases of the first H200 run (G = 16) and one G = 4 case
        picked = [c for c in k_grouped_cases() if c.groups == 16] + [k_grouped_cases()[0]]
        header = {k: v for k, v in result.items() if k != "cases"}
        sweep(picked, flush, dev, Path(args.out) / "k_grouped_sweep.json", header)
        return
    for case in cases:
        t0 = time.perf_counter()
        row = bench_case(case, flush, dev, args.kernel_time, args.sm90_only)
        anchor = anchors.get((case.groups, case.m, case.n))
        if anchor:
            row["deepgemm_anchor"] = anchor
            row["ratio_vs_deepgemm"] = round(row["sm90_nt"]["TFLOPS"] / anchor["deepgemm_TFLOPS"], 3)
            if "kernel_us" in row["sm90_nt"]:
                tflops = 2 * case.m * case.n * row["K_total"] / (row["sm90_nt"]["kernel_us"] * 1e-6) / 1e12
                row["ratio_vs_deepgemm_kernel"] = round(tflops / anchor["deepgemm_TFLOPS"], 3)
        if args.sm90_only:
            result["cases"].append(row)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1))
            nt_us = row["sm90_nt"]["median_us"]
            print(f"G={case.groups:2d} {case.m}x{case.n} K={row['K_total']}: sm90 nt {nt_us:.0f} us"
                  f" (kernel {row['sm90_nt'].get('kernel_us', float('nan')):.0f}) {row.get('ratio_vs_deepgemm')}x DG"
                  f" (kernel time: {row.get('ratio_vs_deepgemm_kernel')}x), tn {row['sm90_tn']['median_us']:.0f} us",
                  flush=True)
            continue
        row["case_wall_s"] = round(time.perf_counter() - t0, 1)
        result["cases"].append(row)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        print(f"G={case.groups:2d} {case.m}x{case.n} K={row['K_total']}: sm90 nt {row['sm90_nt']['median_us']:.0f} us "
              f"{row['sm90_nt']['TFLOPS']} TFLOPS ({row.get('ratio_vs_deepgemm')}x DG), tn "
              f"{row['sm90_tn']['median_us']:.0f} us, portable nt {row['portable_nt']['median_us']:.0f} us / tn "
              f"{row['portable_tn']['median_us']:.0f} us, transpose {row['transpose']['median_us']:.0f} us, cuBLAS "
              f"{row['cublas_tensor_loop'].get('median_us', float('nan')):.0f} us, diff "
              f"{row['calc_diff_sm90_vs_portable']:.2e}, repeat {row['sm90_bitwise_repeat']}, tn-nt "
              f"{row['calc_diff_tn_vs_nt']:.1e}, host {row['sm90_nt']['host_us_per_call']} us, "
              f"{row['case_wall_s']} s", flush=True)


if __name__ == "__main__":
    main()
