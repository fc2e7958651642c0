"""The FP8 training layer (finegemm.fp8_linear) against a BF16 torch linear on the H200, forward and forward +
backward, and its quantization alone (benchmarks/NOTES.md v14).

Per DeepSeek-V3 shape at M = 4096 tokens: fp8_linear with the one-pass Triton casts (what it runs on a GPU),
fp8_linear with finegemm.quant's torch casts (the A/B of the casts), and torch.nn.functional.linear on BF16
weights (cuBLAS); forward, then forward + backward (input and weight gradients, ``y.backward(dy)``). Each
fp8_linear result is first checked against float64 (calc_diff of y, dx, dW < 2e-3 against the exact products).
Then the per-token cast of the activations alone: one-pass kernel vs torch. Fresh random data, CUDA events,
1 GiB L2 flush before each call, 3 warm-ups, median of 20 (the harness's timer).
Usage: PYTHONPATH=. python3 scripts/train_linear_bench.py [SHAPES] (JSON to $OUT/train_linear_bench.json).

``... train_linear_bench.py grouped [SHAPES]``: the mixture-of-experts layer (finegemm.fp8_grouped_linear) instead,
8 experts of ~M x U(0.7, 1.3) tokens each (seeded) at (N, K) = (4096, 7168) and (7168, 2048): its training step
(forward + backward; ``fp8_grouped_step_us``), after expert 0's weight gradient is checked against float64 (JSON to
``$OUT/train_grouped_linear_bench.json``).
"""

from __future__ import annotations

import os
import random
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
EXPERTS = 8
EXPERT_NK = [(4096, 7168), (7168, 2048)]


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


def grouped_probe(m: int, n: int, k: int, dev: torch.device, flush: L2Flush, facts) -> dict:
    """fp8_grouped_linear's training step with EXPERTS experts of ~``m`` tokens each."""
    del facts
    gen = torch.Generator(device=dev).manual_seed(m + n + k)
    rng = random.Random(m + n + k)
    sizes = [int(m * rng.uniform(0.7, 1.3)) for _ in range(EXPERTS)]
    alignment = finegemm.get_k_alignment_for_k_grouped()
    rows = sum(finegemm.align(size, alignment) for size in sizes)
    x = torch.randn(rows, k, generator=gen, device=dev).bfloat16().requires_grad_()
    w = (torch.randn(EXPERTS, n, k, generator=gen, device=dev) * 0.02).requires_grad_()
    dy = torch.randn(rows, n, generator=gen, device=dev).bfloat16()
    row = dict(experts=EXPERTS, tokens=sizes, N=n, K=k)

    finegemm.fp8_grouped_linear(x, w, sizes).backward(dy)
    exact = dy[:sizes[0]].double().t() @ x.detach()[:sizes[0]].double()  # expert 0's rows start at row 0
    row["calc_diff_dW0"] = float(calc_diff(w.grad[0], exact))
    assert row["calc_diff_dW0"] < 2e-3, row["calc_diff_dW0"]
    del exact

    def step():
        x.grad = w.grad = None
        finegemm.fp8_grouped_linear(x, w, sizes).backward(dy)

    row["fp8_grouped_step_us"] = round(time_cuda(step, flush, 3, 20).median_us, 1)
    print(f"{EXPERTS} x ~{m} x ({n}, {k}): step {row['fp8_grouped_step_us']} us; diff dW0 {row['calc_diff_dW0']:.2e}",
          flush=True)
    return row


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "grouped":
        count = int(args[1]) if len(args) > 1 else len(EXPERT_NK)
        run_shapes("fp8_grouped_linear's training step (scripts/train_linear_bench.py grouped)", grouped_probe,
                   [(4096, n, k) for n, k in EXPERT_NK[:count]], "train_grouped_linear_bench.json")
    else:
        count = int(args[0]) if args else len(NK)
        run_shapes(__doc__.splitlines()[0], probe, [(4096, n, k) for n, k in NK[:count]], "train_linear_bench.json")
