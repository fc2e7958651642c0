"""Where finegemm's speed targets stand in a set of bench runs:
``python -m finegemm.bench.targets ANCHORS.json BENCH.json [BENCH.json ...]``.

Each speed target belongs to a kernel family, named like the bench suite that times it (``dense``, ``weight-grad``,
``bf16``, ``grouped``, ``k-grouped``, ``mqa``, ``paged-mqa``, ``hc-prenorm``), and is a rule over bench cases: which
cases it covers, the figure compared (finegemm-sm90 against DeepGEMM's anchored time, against a live peer of the same
run, or one case against another), the bar every case must clear and, for some, the bar of the geometric mean. The
table says per target how many cases cleared it, the worst case, the geometric mean and whether the target is met, then
lists the cases that miss.

Figures: against DeepGEMM through :func:`.anchors.compare` (kernel time where the anchor is one and the run
has it, column ``timers``); against a live peer by kernel time when both have one, else CUDA events. Later
files override earlier ones case by case, so pass runs oldest first. A target with no case in the runs is
reported as not measured; nothing is inferred for it. DeepGEMM's figures (the anchors', and those DeepGEMM states)
belong to the card the anchors name: a run on another kind of card (an H100 against H200 anchors) gives them no
figure, and the target says so; targets against a live peer of the same run hold on any card.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .anchors import compare, geomean

OURS = "finegemm-sm90"


def _kind(kind: str) -> Callable[[dict], bool]:
    return lambda c: c.get("kind") == kind


@dataclass(frozen=True)
class Target:
    """One speed target of the kernel family ``family`` (a bench suite's name, :data:`.suites.SUITES`):
    ``select`` picks its cases, ``against`` names the figure (``"deepgemm"``: DeepGEMM's anchored time over ours;
    ``"tflops:<x>"``: our TFLOPS over a figure DeepGEMM states; a peer name: that live peer's time over ours;
    ``"ratio:<suffix>"``: this case's time over the time of the case of the same suite named like it without
    ``<suffix>``, lower is better), ``each`` the bar for every case (>= for speed-ups, <= for ratios), ``mean`` the
    bar of the geometric mean (or None)."""

    family: str
    name: str
    select: Callable[[dict], bool]
    against: str
    each: float
    mean: float | None = None

    @property
    def lower_is_better(self) -> bool:
        return self.against.startswith("ratio:")


def _m_in(*ms: int) -> Callable[[dict], bool]:
    return lambda c: c.get("kind") == "fp8_gemm" and c.get("M") in ms


def _masked(groups_rows: set[tuple[int, int]]) -> Callable[[dict], bool]:
    def sel(c: dict) -> bool:
        ms = c.get("ms") or []
        return (c.get("kind") == "m_grouped_masked" and "half-empty" not in c["name"] and len(set(ms)) == 1
                and (c.get("groups"), ms[0] if ms else None) in groups_rows)
    return sel


def _groups(g: int) -> Callable[[dict], bool]:
    """Grouped cases (m-grouped contiguous or masked, k-grouped) of ``g`` groups, half-empty variants aside."""
    kinds = ("m_grouped_contiguous", "m_grouped_masked", "k_grouped")
    return lambda c: c.get("kind") in kinds and c.get("groups") == g and not c["name"].endswith(" half-empty")


def _decode_16x64(c: dict) -> bool:
    return _masked({(16, 64)})(c) and (c.get("N"), c.get("K")) == (7168, 2048)


TARGETS: tuple[Target, ...] = (
    Target("dense", "dense M = 4096 vs DeepGEMM (each >= 1.0, mean >= 1.05)", _m_in(4096), "deepgemm", 1.0, 1.05),
    Target("dense", "dense M = 4096 vs cuBLAS blockwise (each >= 1.15)", _m_in(4096), "cublas-block", 1.15),
    Target("dense", "dense M = 64 / 128 vs DeepGEMM (each >= 1.0, mean >= 1.3)", _m_in(64, 128), "deepgemm", 1.0, 1.3),
    Target("weight-grad", "weight gradients (1, 1, 128), FP32 d = c + a @ b, vs DeepGEMM (each >= 1.2)",
           _kind("fp8_gemm_wgrad"), "deepgemm", 1.2),
    Target("bf16", "BF16 vs live cuBLAS BF16 (each >= 1.0)", _kind("bf16_gemm"), "cublas-bf16", 1.0),
    Target("grouped", "contiguous m-grouped vs DeepGEMM (each >= 1.0)", _kind("m_grouped_contiguous"), "deepgemm", 1.0),
    Target("grouped", "masked 1 x 1024, 2 x 512, 4 x 256 vs DeepGEMM (each >= 1.0)",
           _masked({(1, 1024), (2, 512), (4, 256)}), "deepgemm", 1.0),
    # not in the anchors' grouped list: DeepGEMM's stated figure (401 TFLOPS, events)
    Target("grouped", "masked 16 x 64 x (7168, 2048) vs DeepGEMM's 401 TFLOPS (>= 1.2)", _decode_16x64,
           "tflops:401", 1.2),
    Target("grouped", "masked half the groups empty: time / all-full time (<= 0.6)",
           lambda c: c.get("kind") == "m_grouped_masked" and c["name"].endswith(" half-empty"),
           "ratio: half-empty", 0.6),
    Target("grouped", "8 groups vs a loop of cuBLAS blockwise calls (each >= 1.5)", _groups(8), "cublas-block", 1.5),
    Target("k-grouped", "k-grouped vs DeepGEMM (each >= 1.0)", _kind("k_grouped"), "deepgemm", 1.0),
    Target("mqa", "MQA prefill vs DeepGEMM (each >= 1.0)", _kind("mqa_logits"), "deepgemm", 1.0),
    Target("mqa", "MQA prefill vs torch (each >= 10)", _kind("mqa_logits"), "torch-mqa", 10.0),
    Target("paged-mqa", "paged MQA decode vs DeepGEMM (each >= 1.0)", _kind("paged_mqa_logits"), "deepgemm", 1.0),
    Target("hc-prenorm", "hc pre-norm GEMM vs torch's TF32 matmul and square-sum (each >= 1.0)", _kind("hc_prenorm"),
           "cublas-tf32", 1.0),
)


def card(text: str | None) -> str | None:
    """The kind of card a device name or description names (``H100``, ``H200``, ...), or None."""
    found = re.search(r"\b([A-Z]\d{2,3})\b", text or "")
    return found.group(1) if found else None


def run_card(doc: dict[str, Any]) -> str | None:
    """The card a bench JSON ran on (its ``device.name``), or None when it does not say."""
    device = doc.get("device")
    return card(device.get("name") if isinstance(device, dict) else device)


def anchors_card(anchors: dict[str, Any]) -> str | None:
    """The card the anchors were measured on (a ``device`` field, else the first card their ``what`` names)."""
    return card(anchors.get("device") or anchors.get("what"))


def _anchored(target: Target) -> bool:
    """Whether the target's figure is DeepGEMM's (anchored or stated by DeepGEMM), i.e. tied to the anchors' card."""
    return target.against == "deepgemm" or target.against.startswith("tflops:")


def _time(peer: dict, other: dict | None = None) -> tuple[float, str] | None:
    """(µs, timer) of a peer result: kernel time when it (and ``other``, if given) has one, else events."""
    if peer.get("status") != "ok" or not peer.get("us"):
        return None
    if peer.get("kernel_us") and (other is None or other.get("kernel_us")):
        return peer["kernel_us"], "kernel"
    return peer["us"], "events"


def merge_cases(docs: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[dict, int]]:
    """(suite, case name) -> (case, index of the doc it came from); a later doc's case replaces an earlier one's
    (suites reuse names: the dense and bf16 suites both have ``4096x2112x7168``)."""
    cases: dict[tuple[str, str], tuple[dict, int]] = {}
    for i, doc in enumerate(docs):
        for case in doc.get("cases", []):
            cases[(case.get("suite", ""), case["name"])] = (case, i)
    return cases


def figures(target: Target, cases: dict[tuple[str, str], tuple[dict, int]], anchors: dict,
            cards: list[str | None] | None = None) -> list[tuple[str, float, str]]:
    """(case name, figure, timer basis) for every case of ``target`` that the runs and anchors can answer.
    ``cards``: each run's card (:func:`run_card`, by doc index); a DeepGEMM figure needs the anchors' card."""
    out = []
    for (suite, name), (case, i) in cases.items():
        if not target.select(case) or (_anchored(target) and _other_card(cards, i, anchors)):
            continue
        ours = case["peers"].get(OURS) or {}
        if target.against == "deepgemm":
            rows = compare({"cases": [case]}, anchors)
            if rows and OURS in rows[0]["vs_deepgemm"]:
                out.append((name, rows[0]["vs_deepgemm"][OURS], rows[0]["basis"][OURS]))
        elif target.against.startswith("tflops:"):
            mine = _time(ours)
            if mine:
                out.append((name, case["flops"] / mine[0] / 1e6 / float(target.against.removeprefix("tflops:")),
                            mine[1]))
        elif target.lower_is_better:
            full = cases.get((suite, name[: -len(target.against.removeprefix("ratio:"))]))
            mine = _time(ours, (full[0]["peers"].get(OURS) or {}) if full else None)
            theirs = _time(full[0]["peers"].get(OURS) or {}, ours) if full else None
            if mine and theirs:
                out.append((name, mine[0] / theirs[0], mine[1]))
        else:
            peer = case["peers"].get(target.against) or {}
            mine, theirs = _time(ours, peer), _time(peer, ours)
            if mine and theirs:
                out.append((name, theirs[0] / mine[0], mine[1]))
    return out


def _other_card(cards: list[str | None] | None, i: int, anchors: dict) -> bool:
    """Whether run ``i`` is known to be on another kind of card than the anchors."""
    mine, theirs = (cards[i] if cards else None), anchors_card(anchors)
    return mine is not None and theirs is not None and mine != theirs


def evaluate(target: Target, figs: list[tuple[str, float, str]]) -> dict[str, Any]:
    """Summary of one target: cases, how many clear the bar, worst case, geometric mean, met (None: no case)."""
    if not figs:
        return dict(cases=0, cleared=0, worst=None, mean=None, met=None, misses=[])
    better = (lambda v: v <= target.each) if target.lower_is_better else (lambda v: v >= target.each)
    worst = max(figs, key=lambda f: f[1]) if target.lower_is_better else min(figs, key=lambda f: f[1])
    mean = geomean([f[1] for f in figs])
    misses = [f for f in figs if not better(f[1])]
    met = not misses and (target.mean is None or mean >= target.mean)
    return dict(cases=len(figs), cleared=len(figs) - len(misses), worst=worst, mean=mean, met=met, misses=misses)


def report(docs: list[dict[str, Any]], anchors: dict[str, Any], sources: list[str]) -> str:
    """Markdown: one table row per target, grouped by kernel family, then each target's missing cases."""
    cases = merge_cases(docs)
    cards = [run_card(doc) for doc in docs]
    lines = ["| family | target | cases | cleared | worst | geomean | timers | status |",
             "|---|---|---|---|---|---|---|---|"]
    detail, timers_seen = [], set()
    for t in TARGETS:
        figs = figures(t, cases, anchors, cards)
        timers_seen |= {f[2] for f in figs}
        r = evaluate(t, figs)
        timers = ", ".join(sorted({f[2] for f in figs})) or "-"
        if r["met"] is None:
            others = sorted({cards[i] for c, i in cases.values() if t.select(c) and _anchored(t)
                             and _other_card(cards, i, anchors)})
            status = (f"not measured (runs on {', '.join(others)}; DeepGEMM's figures are {anchors_card(anchors)}'s)"
                      if others else "not measured")
            lines.append(f"| {t.family} | {t.name} | 0 | - | - | - | - | {status} |")
            continue
        worst = f"{r['worst'][1]:.2f} ({r['worst'][0]})"
        status = "met" if r["met"] else "missed"
        lines.append(f"| {t.family} | {t.name} | {r['cases']} | {r['cleared']} | {worst} | {r['mean']:.2f} | "
                     f"{timers} | {status} |")
        if r["misses"]:
            detail.append(f"- {t.family}, {t.name}: " + ", ".join(f"{n} {v:.2f}" for n, v, _ in r["misses"]))
    used = sorted({i for _, i in cases.values()})
    lines += ["", "Cases that miss:" if detail else "No case misses its bar.", *detail, "",
              "Runs: " + ", ".join(sources[i] for i in used)]
    if "events/kernel" in timers_seen:
        lines.append("(timers events/kernel: our event time against DeepGEMM's kernel time; run the bench with "
                     "--kernel-time for like-for-like figures)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m finegemm.bench.targets", description=__doc__.splitlines()[0])
    p.add_argument("anchors_json", help="an anchors file (DeepGEMM's figures on the same kind of GPU)")
    p.add_argument("bench_json", nargs="+",
                   help="JSON files written by `python -m finegemm bench --json`, oldest first")
    args = p.parse_args(argv)
    with open(args.anchors_json) as f:
        anchors = json.load(f)
    docs = []
    for path in args.bench_json:
        with open(path) as f:
            docs.append(json.load(f))
    print(report(docs, anchors, args.bench_json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
