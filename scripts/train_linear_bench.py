"""The FP8 training layer (finegemm.fp8_linear) against a BF16 torch linear on the H200, forward and forward +
backward, and its quantization alone (benchmarks/NOTES.md v14).

Per DeepSeek-V3 shape at M = 4096 tokens: fp8_linear with the one-pass Triton casts (what it runs on a GPU),
fp8_linear with finegemm.quant's torch casts (the A/B of the casts), and torch.nn.functional.linear on BF16
weights (cuBLAS); forward, then forward + backward (input and weight gradients, ``y.backward(dy)``). Each
fp8_linear result is first checked against float64 (calc_diff of y, dx, dW < 2e-3 against the exact products).
Then the per-token cast of the activations alone: one-pass kernel vs torch. Fresh random data, CUDA events,
1 GiB L2 flush before each call, 3 warm-ups, median of 20 (the harness's timer).
Usage: PYTHONPATH=. python3 scripts/train_linear_bench.py [SHAPES] (JSON to $OUT/train_linear_bench.json).
"""

from __future__ import annotations

import os
import sys
from unittest import mock

import torch

import finegemm
import finegemm.autograd as fa
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.kernels.portable.quant import cast_to_fp8
from finegemm.reference.dense import calc_diff

sys.path.insert(0, os.path.dirname(__file__))
from c_epilogue_probe import run_shapes  # noqa: E402

NK = [(7168, 16384), (4096, 7168), (7168, 2048), (2112, 7168), (24576, 1536), (32768, 512)]


def _torch_cast(x, group_rows, use_ue8m0):
    return (finegemm.per_token_cast_to_fp8 if group_rows == 1 else finegemm.per_block_cast_to_fp8)(x, use_ue8m0)


def probe(m: int, n: int, k: int, dev: torch.device, flush: L2Flush, facts) -> dict:
    del facts
    gen = torch.Generator(device=dev).manual_seed(m + n + k)
    x = torch.randn(m, k, generator=gen, device=dev).bfloat16().requires_grad_()
    w = (torch.randn(n, k, generator=gen, device=dev) * 0.02).requires_grad_()
    w_bf16 = w.detach().bfloat16().requires_grad_()
    dy = torch.randn(m, n, generator=gen, device=dev).bfloat16()
    row = dict(M=m, N=n, K=k)

    y = finegemm.fp8_linear(x, w)
    y.backward(dy)
    exact = (x.detach().double() @ w.detach().double().t(), dy.double() @ w.detach().double(),
             dy.double().t() @ x.detach().double())
    row["calc_diff"] = {name: float(calc_diff(got, ref)) for name, got, ref in
                        zip(("y", "dx", "dW"), (y.detach(), x.grad, w.grad), exact)}
    assert all(v < 2e-3 for v in row["calc_diff"].values()), row["calc_diff"]
    del exact

    def fwd_fp8():
        return finegemm.fp8_linear(x, w)

    def step_fp8():
        x.grad = w.grad = None
        finegemm.fp8_linear(x, w).backward(dy)

    def fwd_bf16():
        return torch.nn.functional.linear(x, w_bf16)

    def step_bf16():
        x.grad = w_bf16.grad = None
        torch.nn.functional.linear(x, w_bf16).backward(dy)

    def us(fn):
        return round(time_cuda(fn, flush, 3, 20).median_us, 1)

    row["fp8_fwd_us"], row["fp8_step_us"] = us(fwd_fp8), us(step_fp8)
    with mock.patch.object(fa, "cast_to_fp8", _torch_cast):  # the torch casts inside fp8_linear
        row["fp8_torch_casts_fwd_us"], row["fp8_torch_casts_step_us"] = us(fwd_fp8), us(step_fp8)
    row["bf16_fwd_us"], row["bf16_step_us"] = us(fwd_bf16), us(step_bf16)
    xd = x.detach()
    row["cast_kernel_us"] = us(lambda: cast_to_fp8(xd, 1))
    row["cast_torch_us"] = us(lambda: finegemm.per_token_cast_to_fp8(xd))
    q, sf = cast_to_fp8(xd, 1)
    rq, rsf = finegemm.per_token_cast_to_fp8(xd)
    row["cast_bitwise"] = bool(torch.equal(q.view(torch.uint8), rq.view(torch.uint8)) and torch.equal(sf, rsf))
    print(f"{m}x{n}x{k}: fwd fp8 {row['fp8_fwd_us']} (torch casts {row['fp8_torch_casts_fwd_us']}) bf16 "
          f"{row['bf16_fwd_us']} us; step fp8 {row['fp8_step_us']} (torch casts {row['fp8_torch_casts_step_us']}) "
          f"bf16 {row['bf16_step_us']} us; cast {row['cast_kernel_us']} vs {row['cast_torch_us']} us "
          f"bitwise={row['cast_bitwise']}; diff {row['calc_diff']}", flush=True)
    return row


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else len(NK)
    run_shapes(__doc__.splitlines()[0], probe, [(4096, n, k) for n, k in NK[:count]], "train_linear_bench.json")
