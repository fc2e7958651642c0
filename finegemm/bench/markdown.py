"""Render a bench JSON document (``--json``) as a Markdown table: ``python -m finegemm.bench.markdown PATH``.

One row per case, one µs column per peer that timed it, and the speed ratio of each finegemm peer to
each other peer. The README's result table is produced this way from a committed JSON file, so the
numbers there are the measured ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def _peers(cases: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(finegemm peers, other peers) that produced an ``ok`` timing in some case, in first-seen order."""
    ours: list[str] = []
    others: list[str] = []
    for case in cases:
        for name, r in case["peers"].items():
            if r.get("status") != "ok":
                continue
            bucket = ours if r.get("finegemm") else others
            if name not in bucket:
                bucket.append(name)
    return ours, others


def _cell(r: dict[str, Any] | None, key: str, spec: str) -> str:
    if r is None or r.get("status") != "ok" or r.get(key) is None:
        return "-" if r is None or r.get("status") in (None, "skipped") else r["status"]
    return format(r[key], spec)


def table(doc: dict[str, Any], suite: str | None = None) -> str:
    """Markdown table of ``doc``'s cases (optionally one suite): µs per peer, finegemm TFLOPS, ratios."""
    cases = [c for c in doc["cases"] if suite is None or c["suite"] == suite]
    ours, others = _peers(cases)
    # with --kernel-time: the kernel span of each peer that has one, beside its event time
    kernel = [p for p in ours + others if any((c["peers"].get(p) or {}).get("kernel_us") for c in cases)]
    header = ["case"] + [f"{p} µs" for p in ours + others] + [f"{p} kernel µs" for p in kernel]
    header += [f"{p} TFLOPS" for p in ours] + [f"{o} / {p}" for o in ours for p in others]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for case in cases:
        peers = case["peers"]
        row = [case["name"]] + [_cell(peers.get(p), "us", ".1f") for p in ours + others]
        row += [_cell(peers.get(p), "kernel_us", ".1f") for p in kernel]
        row += [_cell(peers.get(p), "TFLOPS", ".0f") for p in ours]
        for o in ours:
            ratios = (peers.get(o) or {}).get("speedup_vs") or {}
            row += [format(ratios[p], ".2f") + "x" if ratios.get(p) is not None else "-" for p in others]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def caption(doc: dict[str, Any]) -> str:
    """One line: GPU, versions, commit, date, timing method (what the table was measured with)."""
    dev, ver, opts = doc["device"], doc["versions"], doc["options"]
    commit = (doc.get("git") or {}).get("commit") or "unknown commit"
    flush = "L2 flushed" if opts.get("flush_bytes") else "no L2 flush"
    if opts.get("flush_bytes") and opts.get("flush_mode", "zero") != "zero":
        flush += f" ({opts['flush_mode']} flush)"
    mode = "CUDA-graph replays" if opts.get("graph") else "eager calls"
    timers = "CUDA events, kernel spans from the profiler" if opts.get("kernel_time") else "CUDA events"
    return (f"{dev.get('name')}, torch {ver.get('torch')}, triton {ver.get('triton')}, finegemm {commit}, "
            f"{doc.get('date', '')[:10]}; median of {opts.get('repeats')} {mode}, {flush}, {timers}.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m finegemm.bench.markdown", description=__doc__.splitlines()[0])
    p.add_argument("json_path", help="a JSON file written by `python -m finegemm bench --json`")
    p.add_argument("--suite", help="only this suite's cases")
    args = p.parse_args(argv)
    with open(args.json_path) as f:
        doc = json.load(f)
    print(caption(doc))
    print()
    print(table(doc, args.suite))
    return 0


if __name__ == "__main__":
    sys.exit(main())
