"""Time the Gluon MQA kernel's compact form (``max_seqlen_k > 0``, unclean) at several CTA shapes on the H200.

DeepGEMM's compressed prefill anchors (the harness's ranges, ``finegemm.bench.suites.mqa_ranges``), fresh
random data, CUDA events, 1 GiB L2 flush before each call, 3 warm-ups, median of 20; each variant's
in-range logits checked against float64 first. Variants: the API's config (``prefill_config``), 256
query-head rows at the compiler's register count (two CTAs an SM), at 168 registers (three; spills in
the signed-scale loop only), and 128 rows (four).
Usage: PYTHONPATH=. python3 scripts/mqa_compact_probe.py (JSON to $OUT/mqa_compact_probe.json).
"""

from __future__ import annotations

import json
import os

import torch

from finegemm.bench.suites import mqa_ranges
from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.kernels.sm90 import mqa_logits as gluon_mqa
from finegemm.reference import mqa as ref
from finegemm.reference.dense import calc_diff

FLUSH = L2Flush(torch.device("cuda"))
# (S, S_kv, H, D, ranges, logits dtype, DeepGEMM us)
CASES = ((2048, 8192, 64, 32, "causal", torch.bfloat16, 167), (2048, 8192, 32, 128, "causal", torch.float32, 136),
         (2048, 65536, 64, 32, "cp", torch.bfloat16, 725), (8192, 8192, 32, 128, "causal", torch.bfloat16, 313))


def inputs(s, skv, h, d, ranges, seed=0):
    """``(q, kv, kv_sf, weights, start, end)`` on the GPU with the harness's ranges (``mqa_ranges``)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(s, h, d, device="cuda", generator=g).to(torch.float8_e4m3fn)
    kv = torch.randn(skv, d, device="cuda", generator=g).to(torch.float8_e4m3fn)
    sf = torch.rand(skv, device="cuda", generator=g) * 0.02 + 0.001
    st, en = (torch.tensor(col, dtype=torch.int32, device="cuda") for col in zip(*mqa_ranges(s, skv, ranges)))
    return q, kv, sf, torch.randn(s, h, device="cuda", generator=g), st, en


def time_variants(row, variants, call, out, check_rows, want, inside, clean=True):
    """For each ``name: extra`` of ``variants``: ``call(extra)`` into the poisoned ``out``, the calc_diff of
    ``out[check_rows]`` on ``inside`` against ``want`` (and, ``clean``, whether ``-inf`` is exactly outside),
    then its median time; into ``row``."""
    for name, extra in variants.items():
        out.fill_(float("nan"))
        call(extra)
        torch.cuda.synchronize()
        got = out[check_rows]
        if clean:
            row[name + "_same_neg_inf"] = bool(torch.equal(torch.isneginf(got), ~inside))
        row[name + "_calc_diff"] = float(calc_diff(got[inside].double(), want[inside]))
        row[name + "_us"] = time_cuda(lambda e=extra: call(e), FLUSH, warmup=3, repeats=20).median_us


def write_rows(rows, name):
    json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows,
                   commit=open(".commit").read().strip() if os.path.exists(".commit") else None),
              open(os.path.join(os.environ.get("OUT", "."), name), "w"), indent=1)


def shape_variants(heads):
    """The CTA shapes: 128 query-head rows, 256 at the compiler's registers, 256 at 168."""
    return {"rows128": dict(block_q=max(1, 128 // heads)), "rows256": dict(block_q=256 // heads),
            "rows256_168": dict(block_q=256 // heads, maxnreg=168)}


def probe(cases, variants_for, compact, name):
    """For each ``(S, S_kv, H, D, ranges, dtype, DeepGEMM us)`` of ``cases``: the launches of
    ``variants_for(H)`` (the full form cleaned, or ``compact`` the compact form unclean with ``max_seqlen_k``
    the longest range), checked on every 8th query against float64 and timed; rows printed and written to
    ``$OUT/name``."""
    rows = []
    for s, skv, h, d, ranges, dtype, dg_us in cases:
        q, kv, sf, w, st, en = inputs(s, skv, h, d, ranges)
        max_k = int((en - st).max()) if compact else 0
        out = torch.empty(s, max_k or skv, device="cuda", dtype=dtype)
        check_rows = torch.arange(0, s, 8, device="cuda")
        want = ref.fp8_mqa_logits(q[check_rows], (kv, sf), w[check_rows], st[check_rows], en[check_rows],
                                  max_seqlen_k=max_k)
        inside = ~torch.isneginf(want)
        row = dict(seq_len=s, seq_len_kv=skv, heads=h, head_dim=d, ranges=ranges, logits=str(dtype)[6:],
                   **({"max_seqlen_k": max_k} if compact else {}), deepgemm_us=dg_us,
                   api_config=gluon_mqa.prefill_config(h, d))
        time_variants(row, variants_for(h), lambda extra, a=(q, kv, sf, w, st, en, out), max_k=max_k: gluon_mqa.launch(
            *a, not compact, max_seqlen_k=max_k, **extra), out, check_rows, want, inside, clean=not compact)
        del want, inside
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_rows(rows, name)


def main() -> None:
    probe(CASES, lambda h: {"api": {}, **shape_variants(h)}, True, "mqa_compact_probe.json")


if __name__ == "__main__":
    main()
