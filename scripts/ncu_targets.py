"""One launch of each sm90 kernel whose gap to DeepGEMM is open, for Nsight Compute to profile on the H200.

Run under ``ncu`` (``scripts/ncu_profile.sh``); outside it, this just calls each kernel once. Inputs are the
harness's fresh random data. Targets: dense 1d2d 4096x7168x16384 (compute-bound main loop, 0.85x) and
4096x2112x7168 (0.79x), MQA prefill H64/D128 S=2048 S_kv=8192 causal (0.89x; also its FP32-sum and 256-row
variants), paged MQA B=256 ctx 8192 next_n 2 H64 (0.79x; ``paged_n1h32``, next_n 1 H32 at 95 % of HBM, beside it;
``paged_b8``, 8 sequences, the small-batch case), masked decode 16 groups x 64 rows x (7168, 2048)
(0.98x); masked 4 x 256 and 1 x 1024 x (4096, 7168) at explicit 256x128 / 128x128 tiles (``masked4x256_256``,
``masked1x1024_256``, ``masked4x256_128``: NOTES v13 asked why one CTA a B panel streamed B so slowly; their
profile answered it in v19: every group's walk started at CTA 0, so a quarter of the CTAs did all the work).
Usage: PYTHONPATH=. python3 scripts/ncu_targets.py [target ...]
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from mqa_bench import paged_inputs  # noqa: E402
from test_mqa import MqaCase, generate_mqa  # noqa: E402

import finegemm  # noqa: E402
from finegemm.bench.inputs import make_inputs  # noqa: E402
from finegemm.bench.suites import dense_cases, grouped_cases  # noqa: E402

DEV = torch.device("cuda")


def dense(m: int, n: int, k: int) -> None:
    t = make_inputs(dense_cases([(m, n, k)])[0], DEV, seed=1).t
    d = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt(t["a"], t["b"], d)


def mqa(**extra) -> None:
    q, kv, sf, w, st, en = generate_mqa(MqaCase(2048, 8192, 64, 128, "causal"), seed=0, device="cuda")
    if extra:
        from finegemm.kernels.sm90 import mqa_logits as gluon_mqa
        out = torch.empty(2048, 8192, device=DEV)
        gluon_mqa.launch(q, kv, sf, w, st, en, out, True, **extra)
    else:
        finegemm.fp8_mqa_logits(q, (kv, sf), w, st, en)


def paged(batch: int = 256, next_n: int = 2, heads: int = 64, context: int = 8192, ws: bool | None = None) -> None:
    from finegemm.kernels.sm90 import paged_mqa_logits as sm90_paged

    if ws is not None:
        sm90_paged.WARP_SPECIALIZED = ws
    q, cache, w, ctx, table, max_len = paged_inputs(batch, next_n, heads, 128, context)
    meta = finegemm.get_paged_mqa_logits_metadata(ctx, 64, torch.cuda.get_device_properties(0).multi_processor_count)
    finegemm.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len, clean_logits=False)


def masked() -> None:
    case = next(c for c in grouped_cases() if c.kind == "m_grouped_masked" and c.groups == 16 and c.n == 7168
                and min(c.ms) > 0)
    t = make_inputs(case, DEV, seed=2).t
    d = torch.empty(case.groups, t["a"][0].shape[1], case.n, device=DEV, dtype=torch.bfloat16)
    finegemm.m_grouped_fp8_gemm_nt_masked(t["a"], t["b"], d, t["masked_m"], case.ms[0])


def masked_tile(groups: int, rows: int, bm: int, bn: int, pipe: bool) -> None:
    """Masked ``groups`` x ``rows`` x (4096, 7168) at an explicit tile (NOTES v13's question, why 4 x 256 at 256x128
    took 165 us against 49 for 1 x 1024; answered in v19: the group walk started every group at CTA 0)."""
    from finegemm.jit.device import device_facts
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90_grouped import make_grouped_config
    from finegemm.kernels.sm90 import dispatch_grouped

    n, k = 4096, 7168
    w = torch.randn(groups, n, k, device=DEV, dtype=torch.bfloat16)
    parts = [finegemm.per_block_cast_to_fp8(w[i]) for i in range(groups)]
    b, sfb = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    x = torch.randn(groups, rows, k, device=DEV, dtype=torch.bfloat16)
    parts = [finegemm.per_token_cast_to_fp8(x[i]) for i in range(groups)]
    a, sfa = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    masked_m = torch.full((groups,), rows, device=DEV, dtype=torch.int32)
    desc = GemmDesc("fp8_1d2d", rows, n, k, layout="m_grouped_masked", num_groups=groups, expected_m=rows)
    cfg = make_grouped_config(device_facts(DEV), bm, bn, True, pipe_mma=pipe)
    d = torch.empty(groups, rows, n, device=DEV, dtype=torch.bfloat16)
    dispatch_grouped.m_grouped_fp8_1d2d_gemm_masked(desc, cfg, a, finegemm.get_mn_major_tma_aligned_tensor(sfa), b,
                                                    sfb.contiguous(), d, masked_m, rows)


# "mqa" is the API's choice (the tensor-core head sum); the other two are its variants
TARGETS = {"dense16384": lambda: dense(4096, 7168, 16384), "dense2112": lambda: dense(4096, 2112, 7168),
           "mqa": mqa, "mqa_fp32_sum": lambda: mqa(head_sum_mma=False),
           "mqa_mma_sum_wide": lambda: mqa(head_sum_mma=True, block_q=4), "paged": paged, "masked": masked,
           "paged_n1h32": lambda: paged(256, 1, 32), "paged_b8": lambda: paged(8, 2, 64),
           "paged_ws": lambda: paged(ws=True), "paged_ctas": lambda: paged(ws=False),
           "paged_n1h64_ws": lambda: paged(256, 1, 64, ws=True),
           "paged_n1h64_ctas": lambda: paged(256, 1, 64, ws=False),
           "masked4x256_256": lambda: masked_tile(4, 256, 256, 128, False),
           "masked1x1024_256": lambda: masked_tile(1, 1024, 256, 128, False),
           "masked4x256_128": lambda: masked_tile(4, 256, 128, 128, True)}
DEFAULT = ["dense16384", "dense2112", "mqa", "paged", "masked"]  # with no names on the command line

if __name__ == "__main__":
    for name in sys.argv[1:] or DEFAULT:
        TARGETS[name]()
        torch.cuda.synchronize()
        print("ran", name, flush=True)
