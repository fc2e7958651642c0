"""Start-up cost of a serving engine's GEMMs on the GPU: finegemm's warm-up against DeepGEMM's JIT, same shapes.

    python tools/warmup_bench.py --out $OUT/warmup.json [--preset deepseek-v3] [--m 1-8192] [--jobs 16]

Each step runs in a fresh process, so nothing is cached in memory:

1. finegemm cold: ``python -m finegemm warmup`` into fresh ``FINEGEMM_CACHE_DIR`` / ``TRITON_CACHE_DIR``.
2. finegemm warm: the same command again (every kernel should be found in the cache).
3. finegemm serve: a process that calls every (call, M) pair once through the public API over the warm cache, counting
   Triton's compiles (0 means the warm-up covered every M) and cache loads.
4. DeepGEMM cold and warm (when ``import deep_gemm`` works, e.g. after /work/shared/anchors/deepgemm's
   setup_on_device.sh): the same (call, M) pairs through its JIT with a fresh ``DG_JIT_CACHE_DIR``, then again over
   that cache until a process compiles nothing (at most three more; a process cut off by ``--timeout`` leaves the
   rest to the next), so the last step is its fully warm start; its compiled kernels are the ``cache/kernel.*``
   directories its JIT writes there, counted after each step.

Wall seconds include the process start (imports, CUDA context). Writes one JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(argv: list[str], env_extra: dict[str, str], timeout: float) -> tuple[float, int, str]:
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        return time.perf_counter() - start, -1, f"timed out after {timeout} s: " + out.decode(errors="replace")[-4000:]
    return time.perf_counter() - start, proc.returncode, (proc.stdout + proc.stderr)[-4000:]


def _calls(args: argparse.Namespace):
    from finegemm import warmup_run

    return warmup_run.calls_from_args(args)


def serve(args: argparse.Namespace) -> dict:
    """Child: every (call, M) pair once through ``args.api``; Triton's compile events (finegemm) or the DeepGEMM
    cache's kernel directories before and after."""
    import torch

    from finegemm import warmup, warmup_run

    api = None
    if args.api == "deepgemm":
        import deep_gemm as api
    if args.api == "finegemm":
        warmup_run._init_worker(args.num_sms)
    ms = warmup.parse_m_values(args.m)
    start = time.perf_counter()
    pairs = 0
    for call in _calls(args):
        inputs = warmup_run.CallInputs(call, max(ms), api)
        for m in ms:
            if call.op == "masked" and m > call.max_m:
                continue
            inputs.run(m)
            pairs += 1
        torch.cuda.synchronize()
        del inputs
    out = {"api": args.api, "pairs": pairs, "seconds": round(time.perf_counter() - start, 3)}
    if args.api == "finegemm":
        out.update(triton_compiles=warmup_run._events["compiles"], triton_cache_hits=warmup_run._events["hits"])
    return out


def _deepgemm_kernels(cache_dir: str) -> int:
    path = os.path.join(cache_dir, "cache")
    return sum(1 for name in os.listdir(path) if name.startswith("kernel.")) if os.path.isdir(path) else 0


def _shape_args(args: argparse.Namespace) -> list[str]:
    out = ["--m", args.m, "--groups", str(args.groups), "--max-m", str(args.max_m)]
    if args.preset:
        out += ["--preset", args.preset]
    if args.shapes:
        out += ["--shapes", args.shapes]
    if args.num_sms:
        out += ["--num-sms", str(args.num_sms)]
    return out


DEEPGEMM_STEPS = ("cold", "warm", "warm_2", "warm_3")


def bench(args: argparse.Namespace, save=lambda result: None) -> dict:
    """The steps in order; ``save(result)`` after each, so a run cut short keeps the steps it finished."""
    import torch
    import triton

    from finegemm.bench.sysinfo import tree_commit

    result: dict = {
        "what": "start-up compile cost: finegemm warm-up vs DeepGEMM JIT over the same (call, M) pairs",
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "torch": torch.__version__, "triton": triton.__version__,
        "finegemm_commit": tree_commit(ROOT),
        "date": datetime.date.today().isoformat(), "m": args.m, "jobs": args.jobs,
        "calls": [str(c) for c in _calls(args)],
    }
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "finegemm-cache")
        env = {"FINEGEMM_CACHE_DIR": cache, "TRITON_CACHE_DIR": cache}
        for step in ("cold", "warm"):
            summary = os.path.join(tmp, f"{step}.json")
            wall, rc, tail = _child(["-m", "finegemm", "warmup", *_shape_args(args), "--jobs", str(args.jobs),
                                     "--json", summary], env, args.timeout)
            entry = {"wall_seconds": round(wall, 3), "rc": rc}
            entry.update(json.load(open(summary)) if rc == 0 else {"output_tail": tail})
            result[f"finegemm_{step}"] = entry
            save(result)
        for api in ("finegemm", "deepgemm"):
            if api == "deepgemm" and args.skip_deepgemm:
                continue
            dg_cache = os.path.join(tmp, "deepgemm-cache")
            api_env = dict(env) if api == "finegemm" else {"DG_JIT_CACHE_DIR": dg_cache}
            # DeepGEMM: a fresh cache, then again until a process compiles nothing (a step cut off by --timeout
            # leaves kernels for the next), so its last step is the fully warm start
            runs = ("serve",) if api == "finegemm" else DEEPGEMM_STEPS
            kernels = 0
            for step in runs:
                summary = os.path.join(tmp, f"{api}-{step}.json")
                wall, rc, tail = _child([os.path.abspath(__file__), "--serve", api, "--serve-out", summary,
                                         *_shape_args(args)], api_env, args.timeout)
                entry = {"wall_seconds": round(wall, 3), "rc": rc}
                entry.update(json.load(open(summary)) if rc == 0 else {"output_tail": tail})
                if api == "deepgemm":
                    total = _deepgemm_kernels(dg_cache)
                    entry["compiled_kernels_in_cache"], entry["compiled_by_this_step"] = total, total - kernels
                    kernels = total
                result[f"{api}_{step}"] = entry
                save(result)
                if api == "deepgemm" and step != "cold" and rc == 0 and entry["compiled_by_this_step"] == 0:
                    break
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="JSON result path")
    parser.add_argument("--preset", default=None)
    parser.add_argument("--shapes", default=None)
    parser.add_argument("--m", default="1-8192")
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--max-m", type=int, default=1024)
    parser.add_argument("--num-sms", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per child process")
    parser.add_argument("--skip-deepgemm", action="store_true")
    parser.add_argument("--serve", dest="api", default=None, choices=("finegemm", "deepgemm"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.api is not None:
        with open(args.serve_out, "w") as f:
            json.dump(serve(args), f)
        return 0
    if not args.out:
        parser.error("--out is required")
    if not args.skip_deepgemm:
        try:
            import deep_gemm  # noqa: F401
        except ImportError as e:
            print(f"deep_gemm not importable ({e}): DeepGEMM steps skipped", file=sys.stderr)
            args.skip_deepgemm = True

    def save(result: dict) -> None:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    result = bench(args, save)
    save(result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
