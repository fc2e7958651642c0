"""Host time per call of the MQA ops on the H200: the public API and the direct Gluon launch, next to the
Triton kernels' launch, each with the same tensors every call (so the sm90 launches replay their recording).

``finegemm.bench.timer.host_overhead``: 10 warm-up calls, then 3 rounds of 100 back-to-back calls without a
sync; ``enqueue_us`` is the host time to issue one call. Shapes: prefill 2048x8192 H64/D128 causal, paged
B=256 next_n=1 H=64 ctx 8192 (pages of 64).
Usage: PYTHONPATH=. python3 scripts/mqa_host_overhead.py (JSON to $OUT/mqa_host_overhead.json).
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from mqa_bench import paged_inputs  # noqa: E402
from test_mqa import MqaCase, generate_mqa  # noqa: E402

import finegemm  # noqa: E402
from finegemm.bench.timer import host_overhead  # noqa: E402
from finegemm.jit.device import device_facts  # noqa: E402
from finegemm.kernels.portable.mqa_logits import get_mqa_logits_config, launch_mqa_logits  # noqa: E402
from finegemm.kernels.portable.paged_mqa_logits import get_paged_mqa_logits_config, launch_paged_mqa_logits  # noqa: E402
from finegemm.kernels.sm90 import mqa_logits as gluon_mqa  # noqa: E402
from finegemm.kernels.sm90 import paged_mqa_logits as gluon_paged  # noqa: E402

DEV = torch.device("cuda")
FACTS = device_facts(DEV)


def enqueue_us(fn) -> float:
    return host_overhead(fn, DEV, calls=100, rounds=3)["enqueue_us"]


q, kv, sf, w, st, en = generate_mqa(MqaCase(2048, 8192, 64, 128, "causal"), seed=0, device="cuda")
out = torch.empty(2048, 8192, device=DEV)
cfg = get_mqa_logits_config(2048, 8192, 64, 128, FACTS, True)
row = {"prefill_api": enqueue_us(lambda: finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)),
       "prefill_gluon_direct": enqueue_us(lambda: gluon_mqa.launch(q, kv, sf, w, st, en, out, True)),
       "prefill_triton_direct": enqueue_us(lambda: launch_mqa_logits(q, kv, sf, w, st, en, out, True, 0, cfg))}
pq, cache, pw, ctx, table, max_len = paged_inputs(256, 1, 64, 128, 8192)
meta = finegemm.get_paged_mqa_logits_metadata(ctx, 64, FACTS.num_sms)
pout = torch.empty(256, max_len, device=DEV)
pcfg = get_paged_mqa_logits_config(1, 64, 128, FACTS, True)
row.update(paged_api=enqueue_us(lambda: finegemm.fp8_paged_mqa_logits(pq, cache, pw, ctx, table, meta, max_len)),
           paged_gluon_direct=enqueue_us(lambda: gluon_paged.launch(pq, cache, pw, ctx, table, meta, pout)),
           paged_triton_direct=enqueue_us(lambda: launch_paged_mqa_logits(pq, cache, pw, ctx, table, meta, pout,
                                                                          False, pcfg)))
print(json.dumps({k: round(v, 1) for k, v in row.items()}))
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, enqueue_us=row,
               commit=open(".commit").read().strip() if os.path.exists(".commit") else None),
          open(os.path.join(os.environ.get("OUT", "."), "mqa_host_overhead.json"), "w"), indent=1)
