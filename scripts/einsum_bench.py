"""finegemm.einsum / fp8_einsum against torch.einsum (cuBLAS batched BF16) on DeepSeek MLA's per-head projections.

Cases (128 heads, latent rank r = 512, head dim d = 128): ``bhd,hdr->bhr`` (q_nope into the latent space) and
``bhr,hdr->bhd`` (the latent attention output back per head) at b = 64, 512 and 4096 tokens, and the weight
gradient ``bhd,bhr->hdr`` at 4096 and 16384 tokens. Each finegemm result is first checked against float64
(calc_diff < 1e-4 BF16, < 1e-3 FP8); at b = 64 the host time per call is measured too. The per-head BF16
expressions (and FP8 ``bhr,hdr->bhd``) are timed on the head-batched sm90 kernels as well (``api/einsum.py``
``HEAD_BATCHED_SM90`` forced on); the plain ``finegemm_*`` rows force it off, so they time the Triton kernel
whatever ``head_batched_wanted`` would dispatch. Fresh random data, CUDA events, 1 GiB L2 flush before
each call, 3 warm-ups, median of 20 (the harness's timer). Usage: PYTHONPATH=. python3 scripts/einsum_bench.py
(JSON to $OUT/einsum_bench.json, with GPU, versions, commit and date).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

import finegemm
from finegemm.api import einsum as einsum_api
from finegemm.bench.sysinfo import probe_record
from finegemm.bench.timer import L2Flush, host_overhead, time_cuda
from finegemm.reference import calc_diff
from finegemm.reference.einsum import einsum as ref_einsum
from finegemm.reference.einsum import fp8_einsum as ref_fp8_einsum

H, R, D = 128, 512, 128
CASES = [("bhd,hdr->bhr", b) for b in (64, 512, 4096)] + [("bhr,hdr->bhd", b) for b in (64, 128, 256, 512, 4096)]
CASES += [("bhd,bhr->hdr", b) for b in (4096, 16384)]


def _shapes(expr: str, b: int) -> tuple[tuple[int, ...], ...]:
    """Shapes of a, b and d."""
    sizes = dict(b=b, h=H, r=R, d=D)
    lhs, out = expr.split("->")
    return tuple(tuple(sizes[c] for c in letters) for letters in (*lhs.split(","), out))


def _fp8_pair_a(x: torch.Tensor):
    q, sf = finegemm.per_token_cast_to_fp8(x.reshape(-1, x.shape[-1]))
    return q.view(x.shape), sf.view(*x.shape[:-1], -1)


def _fp8_pair_b(w: torch.Tensor):
    heads = [finegemm.per_block_cast_to_fp8(w[h]) for h in range(w.shape[0])]
    return torch.stack([q for q, _ in heads]), torch.stack([s for _, s in heads])


def _head_batched(row: dict, kind: str, call, d: torch.Tensor, ref: torch.Tensor, bound: float, us) -> None:
    """``call`` once more with the head-batched sm90 kernels forced on (``HEAD_BATCHED_SM90``): whether that path
    was taken, its accuracy against ``ref`` (< ``bound``), its time."""
    einsum_api.HEAD_BATCHED_SM90 = True
    einsum_api._PLANS.clear()
    try:
        d.fill_(float("nan"))
        call()
        row[f"sm90_{kind}_path_taken"] = any(plan.sm90 is not None for plan in einsum_api._PLANS.values())
        row[f"calc_diff_sm90_{kind}"] = calc_diff(d, ref)
        assert row[f"calc_diff_sm90_{kind}"] < bound, row
        row[f"finegemm_sm90_{kind}_us"] = us(call)
    finally:
        einsum_api.HEAD_BATCHED_SM90 = False
        einsum_api._PLANS.clear()


def probe(expr: str, b: int, dev: torch.device, flush: L2Flush) -> dict:
    a_shape, b_shape, out_shape = _shapes(expr, b)
    gen = torch.Generator(device=dev).manual_seed(b)
    a = torch.randn(a_shape, generator=gen, device=dev).bfloat16()
    w = torch.randn(b_shape, generator=gen, device=dev).bfloat16()
    out_dtype = torch.float32 if expr == "bhd,bhr->hdr" else torch.bfloat16
    d = torch.empty(out_shape, device=dev, dtype=out_dtype)
    flops = 2 * b * H * R * D  # every expression here multiplies over all four indices once
    row = dict(expr=expr, b=b, h=H, r=R, d=D, flops=flops)

    finegemm.einsum(expr, a, w, d)
    row["calc_diff_bf16"] = calc_diff(d, ref_einsum(expr, a, w))
    assert row["calc_diff_bf16"] < 1e-4, row  # a bf16 d alone costs ~5e-6

    def us(fn):
        return round(time_cuda(fn, flush, 3, 20).median_us, 1)

    row["finegemm_bf16_us"] = us(lambda: finegemm.einsum(expr, a, w, d))
    row["torch_bf16_us"] = us(lambda: torch.einsum(expr, a, w))
    if b == 64:  # decode-sized: the host time per call (recorded launches) against the device time
        row["finegemm_bf16_host"] = host_overhead(lambda: finegemm.einsum(expr, a, w, d), dev)
    if expr in einsum_api.HEAD_EXPRESSIONS and out_dtype == torch.bfloat16:
        _head_batched(row, "bf16", lambda: finegemm.einsum(expr, a, w, d), d, ref_einsum(expr, a, w), 1e-4, us)
    if expr in ("bhd,hdr->bhr", "bhr,hdr->bhd"):
        fa, fw = _fp8_pair_a(a.float()), _fp8_pair_b(w.float())
        finegemm.fp8_einsum(expr, fa, fw, d)
        row["calc_diff_fp8"] = calc_diff(d, ref_fp8_einsum(expr, fa, fw))
        assert row["calc_diff_fp8"] < 1e-3, row
        row["finegemm_fp8_us"] = us(lambda: finegemm.fp8_einsum(expr, fa, fw, d))
        if expr == "bhr,hdr->bhd" and out_dtype == torch.bfloat16:
            _head_batched(row, "fp8", lambda: finegemm.fp8_einsum(expr, fa, fw, d), d, ref_fp8_einsum(expr, fa, fw),
                          1e-3, us)
    for key in [k for k in row if k.endswith("_us")]:
        row[key.replace("_us", "_tflops")] = round(flops / row[key] / 1e6, 1)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    dev = torch.device("cuda")
    flush = L2Flush(dev)
    einsum_api.HEAD_BATCHED_SM90 = False  # the plain rows time the Triton kernel
    result = probe_record(__doc__.splitlines()[0], dev, "CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, "
                          "median of 20")
    out = Path(os.environ.get("OUT", ".")) / "einsum_bench.json"
    for expr, b in CASES:
        result["rows"].append(probe(expr, b, dev, flush))
        out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
