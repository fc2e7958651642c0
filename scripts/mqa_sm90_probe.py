"""Time the Gluon MQA-logits kernel against the Triton one on the H200, each in its variants.

Prefill anchor shapes (S=2048, S_kv=8192; H/D as in the anchors' ``mqa`` field), fresh random data,
CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20; every variant checked against
the float64 reference first (-inf positions and calc_diff). Both kernels are called directly (the API
picks one per shape). Variants: the Triton kernel (kv_sf after the head sum); the Gluon kernel with the
head sum on the CUDA cores and on the tensor cores at three CTA shapes (at H=64/D=128 also with negative
scales, the signed path, at the API's config).
Usage: PYTHONPATH=. python3 scripts/mqa_sm90_probe.py (JSON to $OUT/mqa_sm90_probe.json).
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from test_mqa import MqaCase, generate_mqa  # noqa: E402

from finegemm.bench.timer import L2Flush, time_cuda  # noqa: E402
from finegemm.jit.device import device_facts  # noqa: E402
from finegemm.kernels.portable.mqa_logits import get_mqa_logits_config, launch_mqa_logits  # noqa: E402
from finegemm.kernels.sm90 import mqa_logits as gluon_mqa  # noqa: E402
from finegemm.reference import mqa as ref  # noqa: E402
from finegemm.reference.dense import calc_diff  # noqa: E402

FLUSH = L2Flush(torch.device("cuda"))


def time_us(fn):
    return time_cuda(fn, FLUSH, warmup=3, repeats=20).median_us


rows = []
FACTS = device_facts(torch.device("cuda"))


def check(row, name, out, ref, fin):
    row[name + "_same_neg_inf"] = bool(torch.equal(torch.isneginf(out), ~fin))
    row[name + "_calc_diff"] = float(calc_diff(out[fin].double(), ref[fin].double()))


for heads, dim, ranges in ((64, 128, "causal"), (64, 128, "cp"), (32, 128, "causal"), (16, 128, "causal"),
                           (128, 128, "causal"), (128, 128, "cp"), (32, 64, "cp"), (64, 32, "causal"),
                           (64, 64, "causal"), (32, 32, "causal"), (16, 64, "causal"), (128, 64, "causal")):
    case = MqaCase(2048, 8192, heads, dim, ranges)
    q, kv, sf, w, st, en = generate_mqa(case, seed=0, device="cuda")
    out = torch.empty(2048, 8192, device="cuda")
    ref64 = ref.fp8_mqa_logits(q, (kv, sf), w, st, en)
    fin = ~torch.isneginf(ref64)
    args = (q, kv, sf, w, st, en)
    row = dict(heads=heads, head_dim=dim, ranges=ranges, api_config=gluon_mqa.prefill_config(heads, dim))
    # the Triton kernel called directly (the API dispatches the Gluon one where prefill_supported says so)
    tcfg = get_mqa_logits_config(2048, 8192, heads, dim, FACTS, True)

    def triton_call(a=args, o=out, cfg=tcfg):
        launch_mqa_logits(*a, o, True, 0, cfg, sf_after_sum=True)

    out.fill_(float("nan"))
    triton_call()
    torch.cuda.synchronize()
    check(row, "triton", out, ref64, fin)
    row["triton_us"] = time_us(triton_call)
    # Gluon: the CUDA-core head sum (one tile at a time, kv_sf after the sum) and the tensor-core one
    # Gluon: the FP32 CUDA-core head sum; the tensor-core sum at 128 rows a CTA (four CTAs an SM), at 128
    # rows with 96 registers and 3 stages (five), at 256 rows (two) and with 168 registers (three)
    for name, extra in (("gluon_fp32_sum", dict(head_sum_mma=False)),
                        ("gluon_mma_sum", dict(block_q=max(1, 128 // heads))),
                        ("gluon_mma_sum_r96_s3", dict(block_q=max(1, 128 // heads), maxnreg=96, stages=3)),
                        ("gluon_mma_sum_wide", dict(block_q=256 // heads)),
                        ("gluon_mma_sum_wide_168", dict(block_q=256 // heads, maxnreg=168))):
        def gluon_call(a=args, o=out, extra=extra):
            gluon_mqa.launch(*a, o, True, **extra)

        out.fill_(float("nan"))
        gluon_call()
        torch.cuda.synchronize()
        check(row, name, out, ref64, fin)
        row[name + "_us"] = time_us(gluon_call)
    if (heads, dim) == (64, 128):  # the signed path of the tensor-core head sum: every third scale negated
        signed = sf * torch.where(torch.arange(sf.numel(), device="cuda") % 3 == 0, -1.0, 1.0)
        want = ref.fp8_mqa_logits(q, (kv, signed), w, st, en)
        out.fill_(float("nan"))
        gluon_mqa.launch(q, kv, signed, w, st, en, out, True)
        torch.cuda.synchronize()
        check(row, "gluon_mma_sum_signed", out, want, ~torch.isneginf(want))
        row["gluon_mma_sum_signed_us"] = time_us(
            lambda a=(q, kv, signed, w, st, en), o=out: gluon_mqa.launch(*a, o, True))
        del want
    del ref64, fin
    rows.append(row)
    print(json.dumps(row), flush=True)
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows,
               commit=open(".commit").read().strip() if os.path.exists(".commit") else None),
          open(os.path.join(os.environ.get("OUT", "."), "mqa_sm90_probe.json"), "w"), indent=1)
