"""A/B of the per-warp slot release of the dense FP8 kernel (NOTES v19-v20), in alternating processes, bitwise
checked.

Variants (each process compiles one of them; the kernel reads the switch at import):
  base      the dispatched config as main runs it
  warp      ``FINEGEMM_PROBE_EMPTY_SMEM``: lane 0 of every math warp releases a ring slot by inline PTX, without
            Triton's warpgroup-wide ``BAR.SYNC`` before thread 0's arrive (offset read from a CPU compile of the
            same config by ``compile_check.empty_barrier_offset``; a wrong one would hang, hence the timeout)

Per shape and variant: events around each call with L2 flushed (the harness timer), median of ``REPEATS``;
the output's bytes hashed (every variant must give the same bits: same WGMMAs, same promotion order) and its
calc_diff against the float64 reference. Usage (GPU):
  PYTHONPATH=. python3 -P scripts/warp_release_probe.py [--variants base,warp] [--rounds 2]
      [--shapes 4096,7168,16384;...]      (writes $OUT/warp_release_probe.json)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys

SHAPES = "4096,7168,16384;4096,4096,7168;4096,7168,2048;4096,24576,1536;4096,2112,7168;128,4096,7168;64,7168,2048"
REPEATS = 30
ENV_KEYS = ("FINEGEMM_PROBE_EMPTY_SMEM",)


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in part.split(",")) for part in text.split(";") if part]


def variant_env(variant: str, m: int, n: int, k: int) -> dict[str, str]:
    """The switches of ``variant`` for shape (m, n, k): the release offset comes from a CPU compile of the config
    that process will dispatch."""
    from finegemm.jit.device import H200
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.kernels.sm90 import compile_check
    from finegemm.kernels.sm90.dispatch import get_config

    if variant == "base":
        return {"FINEGEMM_PROBE_EMPTY_SMEM": "0"}
    if variant != "warp":
        raise ValueError(f"variant must be base or warp, got {variant!r}")
    desc = GemmDesc("fp8_1d2d", m, n, k)
    return {"FINEGEMM_PROBE_EMPTY_SMEM": str(compile_check.empty_barrier_offset(desc, get_config(desc, H200)))}


def child(shape: tuple[int, int, int]) -> None:
    import torch

    from finegemm.bench.inputs import make_inputs
    from finegemm.bench.peers import make_peers
    from finegemm.bench.suites import dense_cases
    from finegemm.bench.timer import L2Flush, time_cuda

    dev = torch.device("cuda")
    (peer,) = make_peers(["finegemm-sm90"])
    (case,) = dense_cases([shape])
    inp = make_inputs(case, dev, seed=0)
    prepared = peer.prepare(case, inp)
    with prepared.context():
        prepared.reset()
        prepared.fn()
        torch.cuda.synchronize()
        out = prepared.output()
        digest = hashlib.sha1(out.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]
        diff = inp.check(out, prepared.family, prepared.with_c)
        timing = time_cuda(prepared.fn, L2Flush(dev), warmup=5, repeats=REPEATS)
    print(json.dumps(dict(us=timing.median_us, digest=digest, calc_diff=diff)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", default="")
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--variants", default="base,warp")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=90)
    args = parser.parse_args()
    if args.child:
        child(parse_shapes(args.child)[0])
        return
    variants = args.variants.split(",")
    path = os.path.join(os.environ.get("OUT", "."), "warp_release_probe.json")
    commit = open(".commit").read().strip() if os.path.exists(".commit") else "unknown"
    import datetime

    import torch
    import triton

    result: dict = dict(commit=commit, gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
                        torch=torch.__version__, triton=triton.__version__,
                        date=datetime.datetime.now(datetime.timezone.utc).isoformat(), repeats=REPEATS, rows=[])
    for m, n, k in parse_shapes(args.shapes):
        envs = {v: variant_env(v, m, n, k) for v in variants}
        times: dict[str, list[float]] = {v: [] for v in variants}
        digests: dict[str, set[str]] = {v: set() for v in variants}
        row = dict(shape=f"{m}x{n}x{k}", env=envs)
        for _ in range(args.rounds):
            for v in variants:
                env = {key: value for key, value in os.environ.items() if key not in ENV_KEYS}
                env.update(envs[v])
                try:
                    proc = subprocess.run([sys.executable, "-P", __file__, "--child", f"{m},{n},{k}"], env=env,
                                          capture_output=True, text=True, timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    row["hang"] = v
                    print(f"{m}x{n}x{k} {v}: TIMEOUT (a hang: wrong barrier count or offset); stopping", flush=True)
                    result["rows"].append(row)
                    json.dump(result, open(path, "w"), indent=1)
                    return
                lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
                if proc.returncode or not lines:
                    row.setdefault("errors", {})[v] = (proc.stderr or proc.stdout)[-600:]
                    print(f"{m}x{n}x{k} {v}: error {(proc.stderr or proc.stdout)[-300:]}", flush=True)
                    continue
                rec = json.loads(lines[-1])
                times[v].append(rec["us"])
                digests[v].add(rec["digest"])
                row.setdefault("calc_diff", {})[v] = rec["calc_diff"]
        row["us"] = times
        row["digests"] = {v: sorted(d) for v, d in digests.items()}
        row["bitwise_equal"] = len(set().union(*digests.values())) == 1
        base = statistics.median(times["base"]) if times.get("base") else None
        summary = " ".join(f"{v} {statistics.median(t):7.1f}" + (f" ({base / statistics.median(t):.3f}x)"
                                                                 if base and v != "base" else "")
                           for v, t in times.items() if t)
        print(f"{m}x{n}x{k}: {summary} bitwise {'same' if row['bitwise_equal'] else 'DIFFERENT'}", flush=True)
        result["rows"].append(row)
        json.dump(result, open(path, "w"), indent=1)


if __name__ == "__main__":
    main()
