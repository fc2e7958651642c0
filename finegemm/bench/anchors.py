"""Compare a bench JSON with an anchors file: ``python -m finegemm.bench.anchors BENCH.json ANCHORS.json``.

An anchors file (``shared/anchors/h200-*.json`` in the project's workspace) holds peers measured on the
same kind of GPU by the same method in another run: DeepGEMM (which finegemm never installs), cuBLAS
blockwise and per-tensor FP8, cuBLAS BF16. Two uses:

- **finegemm vs DeepGEMM**: DeepGEMM is only importable where someone installed it, so its anchored
  kernel time stands in for it; the ratio is ``anchor µs / finegemm µs`` (> 1: finegemm faster).
- **live vs anchored cuBLAS**: the cuBLAS peers are measured live in every bench run; agreeing with
  the anchors (within ``TOLERANCE``) says the run's GPU and timer behave like the anchors' — a case
  outside it is flagged, and the ratios to DeepGEMM of that run deserve a second look.

Timers: the anchors' ``dense`` and ``grouped`` lists were timed like the harness (CUDA events around each
call, launch latency included); ``fp8_gemm_test_sweep``, ``bf16_gemm``, ``mqa`` and ``k_grouped`` come from
DeepGEMM's own tests, which report kernel time from the profiler. Against those the comparison uses the run's
kernel time (``kernel_us``, ``bench --kernel-time``) where it has one, and says when it had to use events.

Matching is by case: dense ``fp8_gemm`` cases by (M, N, K) in the anchors' ``dense`` list, weight-grad
cases in ``fp8_gemm_test_sweep`` (accumulate = 1), BF16 cases in ``bf16_gemm`` (same accumulate), MQA
logits cases in ``mqa``'s prefill entries (sequence lengths, heads, head_dim, context-parallel ranges or
not, compressed or not, logits dtype) and its paged entries (batch, next_n, heads, head_dim, average context,
logits dtype), k-grouped cases in ``k_grouped`` by (groups, M, N, total K), m-grouped contiguous and masked
cases in ``grouped`` by (kind, groups, rows per group, N, K) when every group has the same rows (the anchors'
masked figures are for full groups).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

TOLERANCE = 0.10  # live cuBLAS within 10 % of the anchored figure counts as agreeing

# bench peer name -> anchors key of its kernel µs, per anchors list
_PEER_KEYS = {
    "dense": {"cublas-block": "cublas_block_us", "cublas-tensor": "cublas_tensorwise_us", "cublas-bf16": "bf16_us",
              "deepgemm": "deepgemm_us"},
    "fp8_gemm_test_sweep": {"deepgemm": "deepgemm_us"},
    "bf16_gemm": {"deepgemm": "deepgemm_us"},
    "mqa": {"deepgemm": "deepgemm_us"},
    "k_grouped": {"deepgemm": "deepgemm_us"},
    "grouped": {"deepgemm": "deepgemm_us"},
}
# bench m-grouped case kind -> the anchors' ``grouped`` kind
_GROUPED_KINDS = {"m_grouped_contiguous": "contig", "m_grouped_masked": "masked"}


# anchors lists whose DeepGEMM figures are profiler kernel times (the anchors' notes), not CUDA events
KERNEL_TIME_FIELDS = frozenset({"fp8_gemm_test_sweep", "bf16_gemm", "mqa", "k_grouped"})


def _find(anchors: dict[str, Any], field: str, keys: tuple[str, ...], want: tuple,
          kind: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """(``field``, its first entry whose ``keys`` hold ``want`` and, given one, whose kind is ``kind``), or None."""
    for entry in anchors.get(field) or []:
        if (kind is None or entry.get("kind") == kind) and tuple(entry.get(k) for k in keys) == want:
            return field, entry
    return None


def _mqa_anchor(case: dict[str, Any], anchors: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    want = (case.get("M"), case.get("N"), case.get("heads"), case.get("K"), int(case.get("ranges") == "cp"),
            int(bool(case.get("compressed"))), str(case.get("out", "")).upper())
    keys = ("seq_len", "seq_len_kv", "heads", "head_dim", "cp_ranges", "compressed", "logits")
    return _find(anchors, "mqa", keys, want, "prefill")


def _paged_anchor(case: dict[str, Any], anchors: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    want = (case.get("M"), case.get("next_n"), case.get("heads"), case.get("K"), case.get("N"),
            str(case.get("out", "")).upper())
    keys = ("batch", "next_n", "heads", "head_dim", "avg_context", "logits")
    return _find(anchors, "mqa", keys, want, "paged")


def _grouped_anchor(case: dict[str, Any], anchors: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    ms = case.get("ms") or []
    if not ms or len(set(ms)) != 1 or len(ms) != case.get("groups"):
        return None  # uneven or empty groups: the anchors time equal full ones only
    want = (case.get("groups"), ms[0], case.get("N"), case.get("K"))
    return _find(anchors, "grouped", ("groups", "m_per_group", "N", "K"), want, _GROUPED_KINDS[case["kind"]])


def anchor_for(case: dict[str, Any], anchors: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(anchors list name, its entry) matching ``case``, or None when the anchors do not hold it."""
    shape = (case.get("M"), case.get("N"), case.get("K"))
    kind = case.get("kind")
    if kind == "fp8_gemm":
        field, want = "dense", None
    elif kind == "fp8_gemm_wgrad":
        field, want = "fp8_gemm_test_sweep", 1
    elif kind == "bf16_gemm":
        field, want = "bf16_gemm", int(bool(case.get("accumulate")))
    elif kind == "mqa_logits":
        return _mqa_anchor(case, anchors)
    elif kind == "paged_mqa_logits":
        return _paged_anchor(case, anchors)
    elif kind in _GROUPED_KINDS:
        return _grouped_anchor(case, anchors)
    elif kind == "k_grouped":
        return _find(anchors, "k_grouped", ("groups", "M", "N", "K_total"), (case.get("groups"), *shape))
    else:
        return None
    for entry in anchors.get(field) or []:
        if (entry.get("M"), entry.get("N"), entry.get("K")) != shape:
            continue
        if want is not None and int(entry.get("accumulate", 0)) != want:
            continue
        if field == "fp8_gemm_test_sweep" and entry.get("kernel") != "1D1D":
            continue
        return field, entry
    return None


def compare(doc: dict[str, Any], anchors: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per case the anchors hold: anchored µs per peer, live µs, live/anchor, finegemm vs DeepGEMM.

    Row keys: ``name``, ``suite``, ``anchored`` {peer: µs}, ``live`` {peer: µs}, ``live_over_anchor``
    {peer: ratio}, ``disagree`` [peers outside ``TOLERANCE``], ``vs_deepgemm`` {finegemm peer: anchored
    DeepGEMM µs / its µs}, ``basis`` {finegemm peer: "events", "kernel" or "events/kernel"} (the finegemm
    time used / DeepGEMM's; "events/kernel": the anchor is a kernel time but the run has only events,
    so the ratio charges finegemm its launch latency and DeepGEMM none).
    """
    rows = []
    for case in doc.get("cases", []):
        hit = anchor_for(case, anchors)
        if hit is None:
            continue
        field, entry = hit
        anchored = {peer: entry[key] for peer, key in _PEER_KEYS[field].items() if entry.get(key)}
        live = {name: r["us"] for name, r in case["peers"].items() if r.get("status") == "ok" and r.get("us")}
        ratio = {p: live[p] / us for p, us in anchored.items() if p in live and p != "deepgemm"}
        dg = anchored.get("deepgemm")
        vs_dg, basis = {}, {}
        for name, r in case["peers"].items():
            if not (r.get("finegemm") and name in live and dg):
                continue
            if field in KERNEL_TIME_FIELDS and r.get("kernel_us"):
                vs_dg[name], basis[name] = dg / r["kernel_us"], "kernel"
            else:
                vs_dg[name] = dg / live[name]
                basis[name] = "events/kernel" if field in KERNEL_TIME_FIELDS else "events"
        rows.append(dict(name=case["name"], suite=case.get("suite"), anchored=anchored, live=live,
                         live_over_anchor=ratio, disagree=[p for p, x in ratio.items() if abs(x - 1) > TOLERANCE],
                         vs_deepgemm=vs_dg, basis=basis))
    return rows


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def report(rows: list[dict[str, Any]]) -> str:
    """Markdown: per case finegemm vs DeepGEMM (anchored) and live cuBLAS / anchored cuBLAS, then a summary."""
    ours = sorted({p for r in rows for p in r["vs_deepgemm"]})
    checked = sorted({p for r in rows for p in r["live_over_anchor"]})
    header = ["case", "DeepGEMM µs (anchor)"] + [f"{p} vs DeepGEMM" for p in ours] + ["timers (ours/DeepGEMM)"]
    header += [f"{p} live/anchor" for p in checked]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        dg = r["anchored"].get("deepgemm")
        cells = [r["name"], f"{dg:.1f}" if dg else "-"]
        cells += [f"{r['vs_deepgemm'][p]:.2f}x" if p in r["vs_deepgemm"] else "-" for p in ours]
        cells.append(", ".join(sorted(set(r["basis"].values()))) or "-")
        cells += [(f"{r['live_over_anchor'][p]:.2f}" + (" (!)" if p in r["disagree"] else ""))
                  if p in r["live_over_anchor"] else "-" for p in checked]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for p in ours:
        vals = [r["vs_deepgemm"][p] for r in rows if p in r["vs_deepgemm"]]
        lines.append(f"{p} vs DeepGEMM (anchored): geometric mean {geomean(vals):.2f}x over {len(vals)} cases, "
                     f"min {min(vals):.2f}x, max {max(vals):.2f}x")
        unlike = sum(1 for r in rows if r["basis"].get(p) == "events/kernel")
        if unlike:
            lines.append(f"  {unlike} of them compare {p}'s event time (launch latency included) with DeepGEMM's "
                         "kernel time: run the bench with --kernel-time for like-for-like figures")
    flagged = [(r["name"], p) for r in rows for p in r["disagree"]]
    n = sum(len(r["live_over_anchor"]) for r in rows)
    lines.append(f"live cuBLAS within {TOLERANCE:.0%} of the anchors: {n - len(flagged)} of {n} figures"
                 + (f"; outside: {', '.join(f'{c} {p}' for c, p in flagged)}" if flagged else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m finegemm.bench.anchors", description=__doc__.splitlines()[0])
    p.add_argument("bench_json", help="a JSON file written by `python -m finegemm bench --json`")
    p.add_argument("anchors_json", help="an anchors file (peers measured by the same method)")
    args = p.parse_args(argv)
    with open(args.bench_json) as f:
        doc = json.load(f)
    with open(args.anchors_json) as f:
        anchors = json.load(f)
    rows = compare(doc, anchors)
    if not rows:
        print("no case of the bench JSON is in the anchors file")
        return 1
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
