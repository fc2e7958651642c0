"""Time the experimental Gluon MQA-logits kernel against the dispatched Triton one on the H200.

Prefill anchor shapes (S=2048, S_kv=8192; H/D as in the anchors' ``mqa`` field), fresh random data,
CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20; checks the two agree first.
Variants: the default queries per CTA with and without the in-CTA overlap, and twice the queries
(one accumulator of 256 columns) without it.
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
from finegemm.kernels.sm90 import mqa_logits as gluon_mqa  # noqa: E402
from finegemm.reference.dense import calc_diff  # noqa: E402

FLUSH = L2Flush(torch.device("cuda"))


def time_us(fn):
    return time_cuda(fn, FLUSH, warmup=3, repeats=20).median_us


rows = []
for heads, dim, ranges in ((64, 128, "causal"), (64, 128, "cp"), (32, 128, "causal"), (16, 128, "causal"),
                           (128, 128, "causal"), (128, 128, "cp")):
    case = MqaCase(2048, 8192, heads, dim, ranges)
    q, kv, sf, w, st, en = generate_mqa(case, seed=0, device="cuda")
    out = torch.empty(2048, 8192, device="cuda")
    ref = finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)
    fin = ~torch.isneginf(ref)
    args = (q, kv, sf, w, st, en)

    def triton_call(a=args):
        return finegemm.fp8_mqa_logits(a[0], (a[1], a[2]), a[3], a[4], a[5])

    row = dict(heads=heads, head_dim=dim, ranges=ranges, triton_us=time_us(triton_call))
    # Gluon variants: (queries per CTA, next tile's WGMMA issued before this tile's epilogue)
    base = gluon_mqa.block_q_for(heads)
    for bq, overlap in ((base, True), (base, False), (2 * base, False)):
        if bq * heads > 256:
            continue
        out.fill_(float("nan"))
        gluon_mqa.launch(q, kv, sf, w, st, en, out, True, block_q=bq, overlap=overlap)
        torch.cuda.synchronize()
        name = f"gluon_q{bq}{'_overlap' if overlap else ''}"
        row[name + "_same_neg_inf"] = bool(torch.equal(torch.isneginf(out), ~fin))
        row[name + "_calc_diff"] = float(calc_diff(out[fin].double(), ref[fin].double()))

        def gluon_call(a=args, o=out, bq=bq, overlap=overlap):
            gluon_mqa.launch(*a, o, True, block_q=bq, overlap=overlap)

        row[name + "_us"] = time_us(gluon_call)
    rows.append(row)
    print(json.dumps(row), flush=True)
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows,
               commit=open(".commit").read().strip() if os.path.exists(".commit") else None),
          open(os.path.join(os.environ.get("OUT", "."), "mqa_sm90_probe.json"), "w"), indent=1)
