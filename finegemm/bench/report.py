"""The terminal table (rich when installed, plain text otherwise), the summary, and the JSON document."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, TextIO

from .runner import CEILING_PEER, CaseResult

SHORT = {"cublas-block": "blk", "cublas-tensor": "tens", "cublas-bf16": "bf16", "deepgemm": "dg",
         "torch-mqa": "torch"}


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _others(results: list[CaseResult]) -> list[str]:
    """Non-finegemm peers that produced a correct timing somewhere in ``results``."""
    names: list[str] = []
    for cr in results:
        for name, ours in cr.ours.items():
            if not ours and name not in names and cr.results[name].status == "ok":
                names.append(name)
    return names


def skipped(results: list[CaseResult]) -> dict[str, str]:
    """Peer -> reason, for peers skipped on every case of ``results``."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(n for cr in results for n in cr.results):
        rs = [cr.results[name] for cr in results if name in cr.results]
        if rs and all(r.status == "skipped" for r in rs):
            out[name] = rs[0].reason
    return out


def table_rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows, row styles) for one suite: one row per case x peer that was not skipped."""
    others = _others(results)
    kernel = any(r.kernel_timing for cr in results for r in cr.results.values())
    header = ["case", "peer", "us"] + (["kern us"] if kernel else []) + [
        "TFLOPS", "GB/s", "calc_diff", "%ceil", "%HBM"] + [f"x{SHORT.get(o, o)}" for o in others]
    rows, styles = [], []
    for cr in results:
        first = True
        for name, r in cr.results.items():
            if r.status == "skipped":
                continue
            m = cr.metrics(name)
            label = cr.case.name if first else ""
            first = False
            if r.status in ("refused", "error"):
                rows.append([label, name, r.status.upper() if r.status == "error" else "refused", r.reason[:60]]
                            + [""] * (len(header) - 4))
                styles.append("red" if r.status == "error" else "dim")
                continue
            ratios = [_fmt(cr.speedup(name, o), ".2f") if cr.ours.get(name) else "" for o in others]
            diff = _fmt(r.calc_diff, ".1e") + (" FAIL" if r.status == "fail" else "")
            hbm = _fmt(m["pct_hbm_floor"], ".0f") if cr.memory_bound else "-"
            ceil = _fmt(m["pct_ceiling"], ".0f") if name != CEILING_PEER else ""
            rows.append([label, name, _fmt(m["us"], ".1f")] + ([_fmt(r.kernel_us, ".1f")] if kernel else [])
                        + [_fmt(m["TFLOPS"], ".1f"), _fmt(m["GBps"], ".0f"), diff, ceil, hbm] + ratios)
            styles.append("red" if r.status == "fail" else "bold" if cr.ours.get(name) else "")
    return header, rows, styles


def _plain(header: list[str], rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(header), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print(line(r), file=out)


def print_table(title: str, results: list[CaseResult], out: TextIO = sys.stdout, plain: bool = False) -> None:
    header, rows, styles = table_rows(results)
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            plain = True
    skip = skipped(results)
    skip_line = "skipped: " + "; ".join(f"{n} ({why})" for n, why in skip.items()) if skip else ""
    if plain:
        print(f"\n== {title} ==", file=out)
        _plain(header, rows, out)
        if skip_line:
            print(skip_line, file=out)
        return
    table = Table(title=title, show_lines=False, header_style="bold")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i < 2 else "right", no_wrap=i < 2)
    for r, s in zip(rows, styles):
        table.add_row(*r, style=s or None)
    console = Console(file=out, width=max(160, len(header) * 10))
    console.print(table)
    if skip_line:
        console.print(skip_line, style="dim", markup=False)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(results: list[CaseResult]) -> dict[str, Any]:
    """Geometric-mean speedups of each finegemm peer over each other peer, failures and refusals."""
    ours = sorted({n for cr in results for n, o in cr.ours.items() if o})
    others = _others(results)
    speedups = {}
    for a in ours:
        for b in others:
            vals = [s for cr in results if (s := cr.speedup(a, b)) is not None]
            if vals:
                speedups[f"{a} vs {b}"] = {"geomean": geomean(vals), "cases": len(vals), "min": min(vals),
                                           "max": max(vals)}
    bad = [(cr, n, r) for cr in results for n, r in cr.results.items() if r.status in ("fail", "error")]
    failures = [f"{cr.case.suite}/{cr.case.name}/{n}: {r.status} {r.reason}" for cr, n, r in bad]
    ours_failures = [f"{cr.case.suite}/{cr.case.name}/{n}: {r.status} {r.reason}" for cr, n, r in bad if cr.ours.get(n)]
    refused = [f"{cr.case.suite}/{cr.case.name}/{n}: {r.reason}" for cr in results for n, r in cr.results.items()
               if r.status == "refused"]
    return {"speedups": speedups, "failures": failures, "finegemm_failures": ours_failures, "refused": refused}


def print_summary(s: dict[str, Any], host: dict[str, Any] | None, copy_gbps: float | None, out: TextIO) -> None:
    print("", file=out)
    if copy_gbps:
        print(f"device-to-device copy: {copy_gbps:.0f} GB/s (read + write; the HBM floor uses it)", file=out)
    for key, v in s["speedups"].items():
        print(f"{key}: geomean {v['geomean']:.3f}x over {v['cases']} cases (min {v['min']:.2f}, max {v['max']:.2f})",
              file=out)
    if host:
        parts = [f"{n} {v['enqueue_us']:.1f}/{v['wall_us']:.1f}" for n, v in host.items()
                 if isinstance(v, dict) and v.get("status") == "ok"]
        if parts:
            print("host overhead us/call (enqueue/wall): " + ", ".join(parts), file=out)
    if s["refused"]:
        print(f"{len(s['refused'])} refused (not failures), e.g. {s['refused'][0]}", file=out)
    for f in s["failures"]:
        print(f"FAIL {f}", file=out)


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf become strings so the file stays valid JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def case_json(cr: CaseResult) -> dict[str, Any]:
    peers = {}
    for name, r in cr.results.items():
        entry: dict[str, Any] = {"status": r.status, "finegemm": cr.ours.get(name, False)}
        if r.reason:
            entry["reason"] = r.reason
        if r.note:
            entry["note"] = r.note
        if r.calc_diff is not None:
            entry["calc_diff"] = r.calc_diff
        if r.timing:
            entry["timing"] = r.timing.as_dict()
            entry.update(cr.metrics(name))
        if r.kernel_timing:
            entry["kernel_timing"] = r.kernel_timing.as_dict()
            entry["kernel_us"] = r.kernel_timing.median_us
        speed = {o: cr.speedup(name, o) for o, ours in cr.ours.items() if not ours and cr.ours.get(name)}
        speed = {k: v for k, v in speed.items() if v is not None}
        if speed:
            entry["speedup_vs"] = speed
        peers[name] = entry
    return {**cr.case.params(), "flops": cr.case.flops, "bytes": cr.case.bytes, "tolerance": cr.case.tolerance,
            "hbm_floor_us": cr.hbm_floor_us, "memory_bound": cr.memory_bound, "peers": peers}


def document(meta: dict[str, Any], options: dict[str, Any], copy_gbps: float | None, results: list[CaseResult],
             unavailable: list[dict[str, Any]], host: dict[str, Any] | None, complete: bool) -> dict[str, Any]:
    return _clean({
        "what": "finegemm bench: every peer in one process with one timer",
        "complete": complete,
        **meta,
        "options": options,
        "copy_bandwidth_GBps": copy_gbps,
        "cases": [case_json(cr) for cr in results],
        "unavailable": unavailable,
        "host_overhead": host,
        "summary": summary(results),
    })


def write_json(path: str, doc: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
