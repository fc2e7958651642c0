"""Time finegemm's lightning-indexer kernels on a GPU against a plain torch implementation and DeepGEMM's anchors.

Kernel time: CUDA events around one call, L2 flushed (256 MiB written) before each, median of ``--runs``.
TFLOPS = 2 x valid (query, key) pairs x heads x head_dim (DeepGEMM's count); GB/s = inputs + valid
logits written. Each prefill/paged shape also checks ``calc_diff`` against the float64 reference once.
Sweeps a few kernel configs on the headline shapes. Writes a JSON file (``--out``).

    PYTHONPATH=. python3 scripts/mqa_bench.py --out benchmarks/results/mqa_h200.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import triton

from finegemm.api.attention import (
    fp8_mqa_logits,
    fp8_paged_mqa_logits,
    get_paged_mqa_logits_metadata,
    pack_paged_kv_cache,
)
from finegemm.jit.device import device_facts
from finegemm.kernels.portable.mqa_logits import MqaLogitsConfig, get_mqa_logits_config, launch_mqa_logits
from finegemm.kernels.portable.paged_mqa_logits import (
    PagedMqaLogitsConfig,
    get_paged_mqa_logits_config,
    launch_paged_mqa_logits,
)
from finegemm.reference import mqa as ref
from finegemm.reference.dense import calc_diff

ANCHORS_FILE = "shared/anchors/h200-2026-12-02.json"  # field "mqa"; embedded below for machines without shared/
_flush = None
ANCHORS = [  # the entries of the anchors file this script uses
    {"kind": "prefill", "logits": "FP32", "compressed": 0, "seq_len": 2048, "seq_len_kv": 8192,
     "heads": 64, "head_dim": 128, "cp_ranges": 0, "deepgemm_TFLOPS": 1085, "deepgemm_us": 222, "deepgemm_GBps": 348},
    {"kind": "prefill", "logits": "FP32", "compressed": 0, "seq_len": 2048, "seq_len_kv": 8192,
     "heads": 32, "head_dim": 64, "cp_ranges": 1, "deepgemm_TFLOPS": 561, "deepgemm_us": 61, "deepgemm_GBps": 630},
    {"kind": "prefill", "logits": "BF16", "compressed": 0, "seq_len": 2048, "seq_len_kv": 8192,
     "heads": 64, "head_dim": 128, "cp_ranges": 1, "deepgemm_TFLOPS": 1050, "deepgemm_us": 131, "deepgemm_GBps": 269},
    {"kind": "prefill", "logits": "FP32", "compressed": 0, "seq_len": 2048, "seq_len_kv": 8192,
     "heads": 64, "head_dim": 32, "cp_ranges": 0, "deepgemm_TFLOPS": 382, "deepgemm_us": 157, "deepgemm_GBps": 405},
    {"kind": "prefill", "logits": "FP32", "compressed": 0, "seq_len": 8192, "seq_len_kv": 8192,
     "heads": 64, "head_dim": 128, "cp_ranges": 1, "deepgemm_TFLOPS": 1092, "deepgemm_us": 503, "deepgemm_GBps": 407},
    {"kind": "paged", "logits": "BF16", "batch": 256, "next_n": 1, "heads": 64,
     "head_dim": 128, "avg_context": 8192, "deepgemm_TFLOPS": 435, "deepgemm_us": 79, "deepgemm_GBps": 3614},
    {"kind": "paged", "logits": "FP32", "batch": 256, "next_n": 2, "heads": 64,
     "head_dim": 128, "avg_context": 8192, "deepgemm_TFLOPS": 809, "deepgemm_us": 87, "deepgemm_GBps": 3555},
    {"kind": "paged", "logits": "FP32", "batch": 256, "next_n": 1, "heads": 32,
     "head_dim": 128, "avg_context": 8192, "deepgemm_TFLOPS": 219, "deepgemm_us": 78, "deepgemm_GBps": 3655},
]


def bench(fn, runs: int) -> float:
    """Median microseconds of ``fn()`` with L2 flushed before every run."""
    global _flush
    if _flush is None:
        _flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        _flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def finite_diff(out: torch.Tensor, expected: torch.Tensor) -> float:
    inside = ~torch.isneginf(expected)
    return calc_diff(out[inside], expected[inside])


def prefill_inputs(s, s_kv, h, d, cp, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(s, h, d, device="cuda", generator=g).to(torch.float8_e4m3fn)
    kv = torch.randn(s_kv, d, device="cuda", generator=g).to(torch.float8_e4m3fn)
    sf = torch.rand(s_kv, device="cuda", generator=g) * 0.02 + 0.001
    w = torch.randn(s, h, device="cuda", generator=g)
    i = torch.arange(s, device="cuda")
    if cp:  # DeepGEMM's context-parallel pattern: two chunks of a CP rank
        chunk, cp_size = s // 2, s_kv // s
        cp_id = cp_size // 3
        st = torch.zeros(s, dtype=torch.int32, device="cuda")
        en = torch.where(i < chunk, cp_id * chunk + i, (cp_size * 2 - 1 - cp_id) * chunk + (i - chunk))
    else:  # causal
        st = torch.zeros(s, dtype=torch.int32, device="cuda")
        en = i + (s_kv - s)
    return q, kv, sf, w, st, en.to(torch.int32)


def torch_mqa_logits(q, kv, sf, w, st, en, dtype):
    s, h, d = q.shape
    scores = (q.reshape(s * h, d).to(torch.bfloat16) @ kv.to(torch.bfloat16).T).float()
    scores = (scores * sf[None, :]).relu_().view(s, h, -1)
    out = (scores * w[:, :, None]).sum(dim=1)
    cols = torch.arange(kv.shape[0], device=q.device)
    inside = (cols[None, :] >= st[:, None]) & (cols[None, :] < en[:, None])
    return out.masked_fill_(~inside, float("-inf")).to(dtype)


def run_prefill(shape: dict, runs: int, sweep: list[MqaLogitsConfig], with_torch: bool) -> list[dict]:
    s, s_kv, h, d = shape["seq_len"], shape["seq_len_kv"], shape["heads"], shape["head_dim"]
    dtype = torch.bfloat16 if shape["logits"] == "BF16" else torch.float32
    q, kv, sf, w, st, en = prefill_inputs(s, s_kv, h, d, shape["cp_ranges"])
    compressed = bool(shape.get("compressed"))
    max_k = int((en - st).max()) if compressed else 0
    pairs = int((en - st).clamp(min=0).sum())
    flops = 2 * pairs * h * d
    nbytes = q.numel() + kv.numel() + 4 * (sf.numel() + w.numel() + 2 * s) + pairs * dtype.itemsize
    out = fp8_mqa_logits(q, (kv, sf), w, st, en, clean_logits=not compressed, max_seqlen_k=max_k, logits_dtype=dtype)
    diff = finite_diff(out, ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k))
    facts = device_facts(q.device)
    default = get_mqa_logits_config(s, s_kv, h, d, facts, facts.is_sm90)
    rows = []
    for config in [default] + sweep:
        if config is not default:
            tiles = triton.cdiv(s_kv, config.block_kv)
            q_blocks = triton.cdiv(s, config.block_q)
            splits = min(tiles, max(1, triton.cdiv(4 * facts.num_sms, q_blocks)))
            config = MqaLogitsConfig(config.block_q, config.block_kv, triton.cdiv(tiles, splits), config.num_warps,
                                     config.num_stages)
        try:
            o = torch.empty_like(out)
            launch_mqa_logits(q, kv, sf, w, st, en, o, not compressed, max_k, config)
            d_cfg = finite_diff(o, ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k)) \
                if config is not default else diff
            us = bench(lambda c=config, o=o: launch_mqa_logits(q, kv, sf, w, st, en, o, not compressed, max_k, c), runs)
        except Exception as e:  # a config that does not compile or fit is reported, not fatal
            rows.append(dict(shape, config=repr(config), error=repr(e)[:300]))
            continue
        rows.append(dict(shape, config=repr(config), default=config is default, calc_diff=d_cfg, finegemm_us=us,
                         finegemm_TFLOPS=flops / us / 1e6, finegemm_GBps=nbytes / us / 1e3,
                         vs_deepgemm=shape["deepgemm_us"] / us))
    api_us = bench(lambda: fp8_mqa_logits(q, (kv, sf), w, st, en, clean_logits=not compressed, max_seqlen_k=max_k,
                                           logits_dtype=dtype), runs)
    rows[0]["api_us"] = api_us
    if with_torch and not compressed:
        rows[0]["torch_us"] = bench(lambda: torch_mqa_logits(q, kv, sf, w, st, en, dtype), max(3, runs // 5))
        rows[0]["vs_torch"] = rows[0]["torch_us"] / rows[0]["finegemm_us"]
    return rows


def paged_inputs(batch, next_n, h, d, avg, block_kv=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(int(0.7 * avg), int(1.3 * avg), (batch,), generator=g)
    blocks = (lens + block_kv - 1) // block_kv
    num_blocks = int(blocks.sum()) + 8
    values = torch.randn(num_blocks, block_kv, d, device="cuda").to(torch.float8_e4m3fn)
    scales = torch.rand(num_blocks, block_kv, device="cuda") * 0.02 + 0.001
    cache = pack_paged_kv_cache(values, scales)
    del values
    max_blocks = int(blocks.max())
    pool = torch.randperm(num_blocks, generator=g).to(torch.int32)
    table = torch.zeros(batch, max_blocks, dtype=torch.int32)
    used = 0
    for b in range(batch):
        k = int(blocks[b])
        table[b, :k] = pool[used:used + k]
        used += k
    q = torch.randn(batch, next_n, h, d, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(batch * next_n, h, device="cuda")
    return q, cache, w, lens.to(torch.int32).cuda(), table.cuda(), int(lens.max())


def torch_paged(q, cache, w, ctx, table, max_len):
    """Plain torch: gather every sequence's keys through the block table, then the dense formula."""
    b, n, h, d = q.shape
    nb, bkv = cache.shape[:2]
    flat = cache.view(nb, -1)
    vals = flat[:, :bkv * d].view(torch.float8_e4m3fn).view(nb, bkv, d)
    sfs = flat[:, bkv * d:].view(torch.float32)
    kv = vals[table.long()].reshape(b, -1, d)[:, :max_len].to(torch.bfloat16)  # [B, L, D]
    sf = sfs[table.long()].reshape(b, -1)[:, :max_len]
    s = torch.einsum("bnhd,bld->bnhl", q.to(torch.bfloat16), kv).float()
    s = (s * sf[:, None, None, :]).relu_()
    out = (s * w.view(b, n, h)[..., None]).sum(dim=2).reshape(b * n, -1)
    rows = ref.paged_row_context_lens(ctx, n)
    cols = torch.arange(max_len, device=q.device)
    return out.masked_fill_(cols[None, :] >= rows[:, None], float("-inf"))


def run_paged(shape: dict, runs: int, sweep: list[PagedMqaLogitsConfig], with_torch: bool) -> list[dict]:
    batch, next_n, h, d, avg = shape["batch"], shape["next_n"], shape["heads"], shape["head_dim"], shape["avg_context"]
    dtype = torch.bfloat16 if shape["logits"] == "BF16" else torch.float32
    q, cache, w, ctx, table, max_len = paged_inputs(batch, next_n, h, d, avg)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    meta = get_paged_mqa_logits_metadata(ctx, 64, num_sms)
    sum_lens = int(ctx.long().sum())
    flops = 2 * sum_lens * next_n * h * d
    nbytes = q.numel() + 4 * w.numel() + sum_lens * (d + 4) + sum_lens * next_n * dtype.itemsize
    out = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len, logits_dtype=dtype)
    check_rows = slice(0, min(batch, 16) * next_n)  # the float64 reference on the first 16 sequences
    expected = ref.fp8_paged_mqa_logits(q[:16], cache, w[check_rows], ctx[:16], table[:16], None, max_len)
    diff = finite_diff(out[check_rows], expected)
    facts = device_facts(q.device)
    default = get_paged_mqa_logits_config(next_n, h, d, facts, facts.is_sm90)
    rows = []
    for config in [default] + sweep:
        try:
            o = torch.empty_like(out)
            launch_paged_mqa_logits(q, cache, w, ctx, table, meta, o, False, config)
            d_cfg = finite_diff(o[check_rows], expected)
            us = bench(lambda c=config, o=o: launch_paged_mqa_logits(q, cache, w, ctx, table, meta, o, False, c), runs)
        except Exception as e:
            rows.append(dict(shape, config=repr(config), error=repr(e)[:300]))
            continue
        rows.append(dict(shape, config=repr(config), default=config is default, calc_diff=d_cfg, finegemm_us=us,
                         finegemm_TFLOPS=flops / us / 1e6, finegemm_GBps=nbytes / us / 1e3,
                         vs_deepgemm=shape["deepgemm_us"] / us if "deepgemm_us" in shape else None))
    rows[0]["calc_diff_api"] = diff
    rows[0]["api_us"] = bench(lambda: fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len,
                                                           logits_dtype=dtype), runs)
    if with_torch:
        rows[0]["torch_us"] = bench(lambda: torch_paged(q, cache, w, ctx, table, max_len), max(3, runs // 5))
        rows[0]["vs_torch"] = rows[0]["torch_us"] / rows[0]["finegemm_us"]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results/mqa_h200.json")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=150.0, help="skip the remaining shapes after this long")
    args = parser.parse_args()
    t0 = time.time()
    try:
        anchors = json.load(open(ANCHORS_FILE))["mqa"]
    except OSError:
        anchors = ANCHORS

    def pick(**kw):
        return next(a for a in anchors if all(a.get(k) == v for k, v in kw.items()))

    prefill = [
        (pick(kind="prefill", seq_len=2048, heads=64, head_dim=128, cp_ranges=0, logits="FP32"), True, True),
        (pick(kind="prefill", seq_len=2048, heads=32, head_dim=64, cp_ranges=1, logits="FP32"), True, False),
        (pick(kind="prefill", seq_len=2048, heads=64, head_dim=128, cp_ranges=1, logits="BF16"), False, False),
        (pick(kind="prefill", seq_len=2048, heads=64, head_dim=32, cp_ranges=0, logits="FP32"), True, False),
        (pick(kind="prefill", seq_len=8192, heads=64, head_dim=128, cp_ranges=1, logits="FP32"), False, False),
    ]
    paged = [
        (pick(kind="paged", batch=256, next_n=1, heads=64, logits="BF16", avg_context=8192), True, False),
        (pick(kind="paged", batch=256, next_n=2, heads=64, logits="FP32", avg_context=8192), True, False),
        (pick(kind="paged", batch=256, next_n=1, heads=32, logits="FP32", avg_context=8192), False, False),
        (dict(kind="paged", logits="FP32", batch=64, next_n=2, heads=64, head_dim=128, avg_context=4096), False, True),
    ]
    prefill_sweep = [MqaLogitsConfig(128 // 64, 64, 1, 4, 3), MqaLogitsConfig(1, 128, 1, 4, 3),
                     MqaLogitsConfig(2, 256, 1, 8, 2), MqaLogitsConfig(2, 128, 1, 8, 4)]
    paged_sweep = [PagedMqaLogitsConfig(64, 4, 4, 2), PagedMqaLogitsConfig(64, 8, 4, 2),
                   PagedMqaLogitsConfig(128, 2, 8, 2), PagedMqaLogitsConfig(256, 2, 8, 1)]
    results = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, triton=triton.__version__,
                   date=time.strftime("%Y-%m-%d"), method="CUDA events, 256 MiB L2 flush, median", rows=[])
    for shape, do_sweep, with_torch in prefill:
        if time.time() - t0 > args.budget_s:
            break
        h = shape["heads"]
        sweep = [MqaLogitsConfig(max(1, c.block_q * 64 // h), c.block_kv, 1, c.num_warps, c.num_stages)
                 for c in prefill_sweep] if do_sweep else []
        results["rows"] += run_prefill(shape, args.runs, sweep, with_torch)
        print(json.dumps(results["rows"][-1 - len(sweep):], default=str), flush=True)
    for shape, do_sweep, with_torch in paged:
        if time.time() - t0 > args.budget_s:
            break
        results["rows"] += run_paged(shape, args.runs, paged_sweep if do_sweep else [], with_torch)
        print(json.dumps(results["rows"][-1 - (len(paged_sweep) if do_sweep else 0):], default=str), flush=True)
    results["elapsed_s"] = time.time() - t0
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
