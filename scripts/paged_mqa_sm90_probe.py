"""Time the Gluon paged MQA-logits kernel against the Triton one on the H200, on DeepGEMM's paged anchors.

Inputs as scripts/mqa_bench.py builds them (context lengths avg x U(0.7, 1.3), shuffled block table, pages
of 64 keys, fresh random data); the harness timer (CUDA events, 1 GiB L2 flush before each call, calls
enqueued back to back), median of 10. Until the 2026-12-03 6th session this used mqa_bench.bench, which
synchronizes after every call, so the Gluon launch's host work (descriptors, ~100 us of Python) landed
inside the timing whenever it outlasted the 256 MB flush. Each kernel is
called directly (no clean-up pass, as DeepGEMM's default ``clean_logits=False``) and checked against the
float64 reference on the first 16 sequences. DeepGEMM's figure is the anchors file's.
Usage: PYTHONPATH=. python3 scripts/paged_mqa_sm90_probe.py (JSON to $OUT/paged_mqa_sm90_probe.json).
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

from mqa_bench import finite_diff, paged_inputs  # noqa: E402

from finegemm.api.attention import get_paged_mqa_logits_metadata  # noqa: E402
from finegemm.bench.timer import L2Flush, host_overhead, time_cuda  # noqa: E402
from finegemm.jit.device import device_facts  # noqa: E402
from finegemm.kernels.portable.paged_mqa_logits import get_paged_mqa_logits_config, launch_paged_mqa_logits  # noqa: E402
from finegemm.kernels.sm90 import paged_mqa_logits as gluon_paged  # noqa: E402
from finegemm.reference import mqa as ref  # noqa: E402

ANCHORS = os.environ.get("ANCHORS", "/work/shared/anchors/h200-2026-12-02.json")
# PAGED_HOT=n: every block-table entry taken modulo n, so the keys read come from n pages (n * 8.4 KB: L2-resident
# for n up to ~4000) -- what the kernels cost when HBM is not the limit (an H100 then behaves like the H200's
# compute-bound 128-row cases)
HOT_PAGES = int(os.environ.get("PAGED_HOT", "0"))
# PAGED_WS_STAGES=3,4,5: also time the warp-specialized form at those key-tile slots a warpgroup (is depth the limit?)
WS_STAGES = [int(x) for x in os.environ.get("PAGED_WS_STAGES", "").split(",") if x]
CASES = [(256, 1, 64, 8192, "BF16"), (256, 2, 64, 8192, "FP32"), (256, 1, 32, 8192, "FP32"),
         (256, 2, 32, 65536, "FP32"), (256, 1, 64, 65536, "FP32"), (256, 2, 64, 65536, "FP32"),
         (4096, 1, 32, 8192, "FP32"), (4096, 2, 64, 8192, "BF16"), (4096, 2, 32, 8192, "FP32")]


def deepgemm_us(batch, next_n, heads, avg, logits):
    try:
        rows = json.load(open(ANCHORS))["mqa"]
    except OSError:
        return None
    for r in rows:
        if (r["kind"], r.get("batch"), r.get("next_n"), r["heads"], r.get("avg_context"), r["logits"]) == \
                ("paged", batch, next_n, heads, avg, logits):
            return r["deepgemm_us"]
    return None


facts = device_facts(torch.device("cuda"))
FLUSH = L2Flush(torch.device("cuda"))


def bench(fn, runs):
    """The harness timer: 1 GiB flush and events around each call, calls enqueued back to back (no sync
    between them, so the host's launch work runs under the previous flush instead of inside the timing)."""
    return time_cuda(fn, FLUSH, 3, runs).median_us

rows = []
for batch, next_n, heads, avg, logits in CASES:
    dtype = torch.bfloat16 if logits == "BF16" else torch.float32
    q, cache, w, ctx, table, max_len = paged_inputs(batch, next_n, heads, 128, avg)
    if HOT_PAGES:
        table = table % HOT_PAGES
    meta = get_paged_mqa_logits_metadata(ctx, 64, facts.num_sms)
    check = slice(0, 16 * next_n)
    expected = ref.fp8_paged_mqa_logits(q[:16], cache, w[check], ctx[:16], table[:16], None, max_len)
    cfg = get_paged_mqa_logits_config(next_n, heads, 128, facts, True)
    row = dict(batch=batch, next_n=next_n, heads=heads, avg_context=avg, logits=logits, hot_pages=HOT_PAGES,
               deepgemm_us=deepgemm_us(batch, next_n, heads, avg, logits))
    args = (q, cache, w, ctx, table, meta)
    calls = {"triton": lambda o, a=args, c=cfg: launch_paged_mqa_logits(*a, o, False, c),
             "gluon": lambda o, a=args: gluon_paged.launch(*a, o),
             "gluon_ctas": lambda o, a=args: gluon_paged.launch(*a, o, ws=False),
             "gluon_ws": lambda o, a=args: gluon_paged.launch(*a, o, ws=True)}
    for st in WS_STAGES:
        calls[f"gluon_ws_st{st}"] = lambda o, a=args, st=st: gluon_paged.launch(*a, o, ws=True, ws_stages=st)
    for name, call in calls.items():
        out = torch.full((batch * next_n, max_len), float("nan"), device="cuda", dtype=dtype)
        call(out)
        torch.cuda.synchronize()
        written = ~torch.isnan(out[check])
        row[name + "_calc_diff"] = float(finite_diff(torch.where(written, out[check], expected.to(dtype)), expected))
        row[name + "_missing"] = int((~written & ~torch.isneginf(expected)).sum())
        row[name + "_us"] = bench(lambda c=call, o=out: c(o), 10)
        if (batch, next_n, heads, avg) == (256, 1, 64, 8192):  # host time to issue one call
            row[name + "_enqueue_us"] = host_overhead(lambda c=call, o=out: c(o), torch.device("cuda"), 50, 3)[
                "enqueue_us"]
    if row["deepgemm_us"]:
        for name in ("gluon", "gluon_ctas", "gluon_ws"):
            row[name + "_vs_deepgemm"] = row["deepgemm_us"] / row[name + "_us"]
    rows.append(row)
    print(json.dumps(row), flush=True)
    del q, cache, w, ctx, table, expected, args, calls
    torch.cuda.empty_cache()
name = f"paged_mqa_sm90_probe{'_hot' if HOT_PAGES else ''}.json"
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows,
               commit=open(".commit").read().strip() if os.path.exists(".commit") else None),
          open(os.path.join(os.environ.get("OUT", "."), name), "w"), indent=1)
