"""Which kernels cuBLAS runs for the BF16 GEMMs finegemm is compared with (their names carry tile, cluster and
schedule: e.g. ``tilesize128x256x64``, ``cluster2x1x1``, ``stream_k`` / ``segment_k``), and how long each takes.

Usage (GPU): ``PYTHONPATH=. python3 scripts/cublas_kernels.py [--shapes 'M,N,K;...']``. Per shape: fresh random
normal bf16 ``a`` (M, K) and ``b`` (N, K); ``torch.mm(a, b.T)`` three times warm, then five under
``torch.profiler``; prints each CUDA kernel's name and mean time. Writes ``$OUT/cublas_kernels.json``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

DEFAULT_SHAPES = ";".join(f"{m},{n},{k}" for m in (64, 128, 4096) for n, k in
                          ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)))


def kernels_of(a: torch.Tensor, b: torch.Tensor, reps: int = 5) -> list[tuple[str, float]]:
    """(kernel name, mean us per call) of ``reps`` calls of ``a @ b.T``."""
    for _ in range(3):
        torch.mm(a, b.T)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            torch.mm(a, b.T)
        torch.cuda.synchronize()
    total: dict[str, float] = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            total[ev.name] += ev.device_time
    return [(name, us / reps) for name, us in total.items()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    args = ap.parse_args()
    dev = torch.device("cuda")
    rows = []
    for item in args.shapes.split(";"):
        m, n, k = (int(v) for v in item.split(","))
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        for name, us in kernels_of(a, b):
            rows.append(dict(m=m, n=n, k=k, kernel=name, us=round(us, 2)))
            print(f"{m}x{n}x{k} {us:8.1f} us  {name}", flush=True)
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda)
    with open(os.path.join(os.environ.get("OUT", "."), "cublas_kernels.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
