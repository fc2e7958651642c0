"""Time the Gluon MQA-logits kernel against the Triton one on the H200, each in its variants.

Prefill anchor shapes (S=2048, S_kv=8192; H/D as in the anchors' ``mqa`` field), fresh random data,
CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20; every variant checked against
the API's logits first. Both kernels are called directly (the API picks one per shape). Variants: the
Triton kernel with kv_sf before the ReLU and after the head sum (``sf_after_sum``); the Gluon kernel
with kv_sf before the ReLU, and after the sum with and without the in-CTA overlap.
Usage: PYTHONPATH=. python3 scripts/mqa_sm90_probe.py (JSON to $OUT/mqa_sm90_probe.json).
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from test_mqa import MqaCase, generate_mqa  # noqa: E402

import finegemm  # noqa: E402
from finegemm.bench.timer import L2Flush, time_cuda  # noqa: E402
from finegemm.jit.device import device_facts  # noqa: E402
from finegemm.kernels.portable.mqa_logits import get_mqa_logits_config, launch_mqa_logits  # noqa: E402
from finegemm.kernels.sm90 import mqa_logits as gluon_mqa  # noqa: E402
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
                           (128, 128, "causal"), (128, 128, "cp"), (32, 64, "cp"), (64, 32, "causal")):
    case = MqaCase(2048, 8192, heads, dim, ranges)
    q, kv, sf, w, st, en = generate_mqa(case, seed=0, device="cuda")
    out = torch.empty(2048, 8192, device="cuda")
    ref = finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)
    fin = ~torch.isneginf(ref)
    args = (q, kv, sf, w, st, en)
    row = dict(heads=heads, head_dim=dim, ranges=ranges)
    # the Triton kernel called directly (the API dispatches the Gluon one where prefill_supported says so)
    tcfg = get_mqa_logits_config(2048, 8192, heads, dim, FACTS, True)
    for after in (False, True):
        name = "triton" + ("_sf_after_sum" if after else "")

        def triton_call(a=args, o=out, after=after, cfg=tcfg):
            launch_mqa_logits(*a, o, True, 0, cfg, sf_after_sum=after)

        out.fill_(float("nan"))
        triton_call()
        torch.cuda.synchronize()
        check(row, name, out, ref, fin)
        row[name + "_us"] = time_us(triton_call)
    # Gluon variants: (queries per CTA, next tile's WGMMA issued before this tile's epilogue, kv_sf after
    # the head sum)
    base = gluon_mqa.block_q_for(heads)
    for bq, overlap, after in ((base, False, False), (base, False, True), (base, True, True)):
        if bq * heads > 256:
            continue
        out.fill_(float("nan"))
        gluon_mqa.launch(q, kv, sf, w, st, en, out, True, block_q=bq, overlap=overlap, sf_after_sum=after)
        torch.cuda.synchronize()
        name = f"gluon_q{bq}{'_overlap' if overlap else ''}{'_sf_after_sum' if after else ''}"
        check(row, name, out, ref, fin)

        def gluon_call(a=args, o=out, bq=bq, overlap=overlap, after=after):
            gluon_mqa.launch(*a, o, True, block_q=bq, overlap=overlap, sf_after_sum=after)

        row[name + "_us"] = time_us(gluon_call)
    rows.append(row)
    print(json.dumps(row), flush=True)
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows,
               commit=open(".commit").read().strip() if os.path.exists(".commit") else None),
          open(os.path.join(os.environ.get("OUT", "."), "mqa_sm90_probe.json"), "w"), indent=1)
