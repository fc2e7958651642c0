"""A/B: Gluon FP8 1d2d GEMM with 1-CTA vs 2-CTA cluster + TMA multicast of A (mc_gemm.py), and finegemm.fp8_gemm_nt.

  python run_ab.py OUT.json          # on an H100/H200: check + time all shapes (each variant in a child process
                                     # with a timeout, so a hang or crash of one variant does not stop the rest)
  python run_ab.py --compile-only    # CPU: compile both variants for sm_90, print regs/smem/spills, PTX checks
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..")))  # the repository root (finegemm)

SHAPES = [(4096, 2112, 7168), (4096, 24576, 1536), (4096, 7168, 16384), (4096, 4096, 7168), (4096, 7168, 2048),
          (128, 7168, 16384), (128, 24576, 1536)]
VARIANTS = ["cluster1", "cluster2_mc", "finegemm"]
CHILD_TIMEOUT = int(os.environ.get("AB_CHILD_TIMEOUT", "100"))


def ptxas_usage(ptx: str) -> dict:
    import re
    import tempfile
    ptxas = os.environ.get("TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas")
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(ptx)
        r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", p, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    txt = r.stdout + r.stderr
    out = {}
    m = re.search(r"Used (\d+) registers", txt)
    out["regs"] = int(m.group(1)) if m else None
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", txt)
    out["spill_stores"], out["spill_loads"] = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    m = re.search(r"(\d+) bytes stack frame", txt)
    out["stack"] = int(m.group(1)) if m else None
    out["wgmma_serialized"] = "wgmma.mma_async instructions are serialized" in txt
    return out


def compile_only():
    import mc_gemm
    res = {}
    for cl in (1, 2):
        t = time.time()
        ck = mc_gemm.compile_cpu(cl)
        rep = mc_gemm.report(ck)
        rep.pop("remote_arrive_addrs", None)
        rep.update(ptxas_usage(ck.asm["ptx"]))
        rep["compile_s"] = round(time.time() - t, 1)
        res[f"cluster{cl}"] = rep
        print(f"cluster {cl}: " + json.dumps(rep), flush=True)
    ok = (res["cluster2"]["multicast_tma"] > 0 and res["cluster2"]["reqnctapercluster"]
          and res["cluster2"]["remote_arrive_addr_ok"]
          and all(r["spill_stores"] == 0 and not r["local_mem"] for r in res.values()))
    print("COMPILE-ONLY", "OK" if ok else "PROBLEM")
    return res


# ------------------------------------------------------------------------------------------------------------ GPU

def calc_diff(x, y):
    x, y = x.double(), y.double()
    denom = (x * x + y * y).sum()
    return float(1 - 2 * (x * y).sum() / denom) if denom > 0 else 0.0


def make_inputs(M, N, K, seed=0):
    import torch
    from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g)
    a8, sfa = per_token_cast_to_fp8(a)          # [M, K] e4m3, [M, K/128] fp32
    b8, sfb = per_block_cast_to_fp8(b)          # [N, K] e4m3, [N/128, K/128] fp32
    sfa_t = sfa.t().contiguous()                # [K/128, M]: MN-major, what the prototype reads
    # reference in float64 from the quantized operands
    rows = torch.arange(M, device="cuda") if M <= 256 else torch.randperm(M, device="cuda", generator=g)[:256]
    af = (a8[rows].double().view(-1, K // 128, 128) * sfa[rows].double()[:, :, None]).view(-1, K)
    bf = (b8.double().view(N // 128 if N % 128 == 0 else -1, 128, K // 128, 128) if N % 128 == 0 else None)
    if bf is not None:
        bf = (bf * sfb.double()[:, None, :, None]).view(N, K)
    else:
        sfb_rows = sfb.double().repeat_interleave(128, dim=0)[:N]
        bf = (b8.double().view(N, K // 128, 128) * sfb_rows[:, :, None]).view(N, K)
    ref = af @ bf.t()
    return a8, sfa, sfa_t, b8, sfb, ref, rows


def child(variant, M, N, K):
    import torch
    a8, sfa, sfa_t, b8, sfb, ref, rows = make_inputs(M, N, K)
    d = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    if variant == "finegemm":
        import finegemm
        sfa_mn = sfa_t.t()  # same MN-major scales, as a [M, K/128] view (no transform inside the timed call)
        fn = lambda: finegemm.fp8_gemm_nt((a8, sfa_mn), (b8, sfb), d)  # noqa: E731
    else:
        import mc_gemm
        cl = 1 if variant == "cluster1" else 2
        fn = lambda: mc_gemm.mc_gemm(a8, sfa_t, b8, sfb, d, cluster=cl)  # noqa: E731
    t0 = time.time()
    fn()
    torch.cuda.synchronize()
    first_s = time.time() - t0
    diff = calc_diff(d[rows], ref)  # float64 reference on 256 random rows (all rows for M <= 256)
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    for _ in range(5):
        fn()
    times = []
    for _ in range(30):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    us = times[len(times) // 2]
    return {"diff": diff, "ok": diff < 1e-3, "us": us, "tflops": 2 * M * N * K / us * 1e-6,
            "first_call_s": round(first_s, 2), "device": torch.cuda.get_device_name()}


def main(out_path):
    results = {shape: {"M": shape[0], "N": shape[1], "K": shape[2]} for shape in SHAPES}
    t_start = time.time()
    for v in VARIANTS:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", v]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT)
            out, err = r.stdout, f"rc={r.returncode}: " + (r.stderr or "")[-1500:]
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = f"timeout after {CHILD_TIMEOUT}s (hang?)"
        for line in out.splitlines():
            if line.startswith("RESULT "):
                rec = json.loads(line[7:])
                results[tuple(rec.pop("shape"))][v] = rec
        for shape in SHAPES:
            results[shape].setdefault(v, {"error": err})
        print(f"{v} done at {time.time() - t_start:.0f}s", flush=True)
    rows = [results[s] for s in SHAPES]
    for row in rows:
        print(fmt_row(row))
    print(f"total {time.time() - t_start:.0f}s")
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)


def fmt_row(row):
    cells = [f"M={row['M']:5d} N={row['N']:5d} K={row['K']:5d}"]
    for v in VARIANTS:
        r = row.get(v, {})
        if "error" in r:
            cells.append(f"{v}: ERROR {r['error'].splitlines()[-1][:80] if r['error'] else ''}")
        else:
            cells.append(f"{v}: {r['us']:8.1f}us {r['tflops']:6.0f}TF diff={r['diff']:.1e}{'' if r['ok'] else ' BAD'}")
    return " | ".join(cells)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--compile-only":
        os.environ.setdefault("TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas")
        os.environ.setdefault("TRITON_PTXAS_BLACKWELL_PATH", os.environ["TRITON_PTXAS_PATH"])
        compile_only()
    elif len(sys.argv) > 1 and sys.argv[1] == "--child":
        v = sys.argv[2]
        for (M, N, K) in SHAPES:
            try:
                rec = child(v, M, N, K)
            except Exception as e:  # noqa: BLE001
                import traceback
                rec = {"error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"}
            rec["shape"] = [M, N, K]
            print("RESULT " + json.dumps(rec), flush=True)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "ab_mc.json")
