"""Time the Gluon MQA prefill kernel's CTA order and key split on DeepGEMM's uncompressed anchor cases (H200).

In launch order, CTA ``x`` takes query block ``x``; with ``last_first`` it takes block ``n - 1 - x``, so
the blocks with the longest ranges (the last queries, in causal and context-parallel prefill) start first
instead of forming the tail. ``tiles_per_split`` caps the key tiles of one CTA (more, shorter CTAs);
``wide_clean`` the form of the ``-inf`` stores; ``rows*`` the CTA shape (query-head rows, registers).
The harness's ranges, fresh random data, CUDA events, 1 GiB L2 flush before each call, 3 warm-ups,
median of 20; each variant's logits (every 8th query) checked against float64 first.
Usage: PYTHONPATH=. python3 scripts/mqa_schedule_probe.py (JSON to $OUT/mqa_schedule_probe.json).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

from mqa_compact_probe import probe, shape_variants  # noqa: E402

# (S, S_kv, H, D, ranges, logits dtype, DeepGEMM us)
CASES = ((2048, 8192, 32, 64, "cp", torch.float32, 61), (2048, 8192, 64, 128, "causal", torch.float32, 222),
         (2048, 8192, 64, 128, "cp", torch.bfloat16, 131), (8192, 8192, 64, 128, "cp", torch.float32, 503),
         (8192, 8192, 32, 128, "cp", torch.float32, 290), (8192, 8192, 32, 64, "cp", torch.float32, 231),
         (8192, 8192, 64, 128, "causal", torch.bfloat16, 500), (8192, 8192, 64, 64, "causal", torch.float32, 390),
         (2048, 8192, 64, 32, "causal", torch.float32, 157))
# the API's schedule (last block first, key_splits) against launch order and fixed key runs; the 70ec4ea
# results were taken when the default was in order with the old split (about 4 CTAs an SM, no longer here),
# and their variants were named for that default
VARIANTS = {"api": {}, "in_order": dict(last_first=False), "t32": dict(tiles_per_split=32),
            "t16": dict(tiles_per_split=16), "in_order_t32": dict(last_first=False, tiles_per_split=32),
            "narrow_clean": dict(wide_clean=False), "wide_clean": dict(wide_clean=True)}


def main() -> None:
    probe(CASES, lambda h: {**VARIANTS, **shape_variants(h)}, False, "mqa_schedule_probe.json")


if __name__ == "__main__":
    main()
