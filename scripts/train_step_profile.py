"""Where an FP8 training step's GPU time goes: torch profiler kernel table of five ``fp8_linear`` forward + backward
steps (after three warm-ups) at 4096x7168x2048 and 4096x7168x16384 on the H200 (benchmarks/NOTES.md v16).

Usage: PYTHONPATH=. python3 scripts/train_step_profile.py
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

import finegemm

SHAPES = [(4096, 7168, 2048), (4096, 7168, 16384)]


def main() -> None:
    dev = torch.device("cuda")
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device=dev).bfloat16().requires_grad_()
        w = torch.randn(n, k, device=dev).bfloat16().requires_grad_()
        dy = torch.randn(m, n, device=dev).bfloat16()
        for _ in range(3):
            finegemm.fp8_linear(x, w).backward(dy)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(5):
                finegemm.fp8_linear(x, w).backward(dy)
            torch.cuda.synchronize()
        print(f"{m}x{n}x{k}: 5 steps", flush=True)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=70))


if __name__ == "__main__":
    main()
