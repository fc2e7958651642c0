"""Side-by-side summary of Nsight Compute raw-page CSVs (``ncu --page raw --csv``, as tools/ncu_profile.sh
exports them): per profiled kernel, the clock, time, DRAM / L2 / issue / tensor-pipe activity, occupancy and the
warp-stall reasons (warps stalled on each reason per issued instruction, largest first).

Usage: python3 tools/ncu_summary.py raw.csv [raw.csv ...] [--all-stalls]
"""

from __future__ import annotations

import csv
import sys

# (label, metric name) in the order printed; a metric missing from a report prints as '-'
HEADLINE = [
    ("time us", "gpu__time_duration.sum"),
    ("SM GHz", "sm__cycles_elapsed.avg.per_second"),
    ("DRAM %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2 %", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("issue %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("tensor %", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("FMA %", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
    ("warps/SM", "sm__warps_active.avg.per_cycle_active"),
    ("regs", "launch__registers_per_thread"),
    ("grid", "launch__grid_size"),
    ("instrs", "smsp__inst_executed.sum"),
]
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read(path: str) -> list[dict[str, str]]:
    """The kernel rows of one raw CSV (its second line holds the units)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows[1:] if r.get("Kernel Name")]


def summarize(row: dict[str, str], all_stalls: bool) -> list[str]:
    lines = [f"{row['Kernel Name'][:60]}  (ID {row.get('ID', '?')})"]
    for label, name in HEADLINE:
        value = row.get(name)
        lines.append(f"  {label:<10} {value if value is not None else '-'}")
    stalls = [(name[len(STALL_PREFIX):-len(STALL_SUFFIX)], _number(v)) for name, v in row.items()
              if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX) and _number(v)]
    stalls.sort(key=lambda kv: -kv[1])
    total = sum(v for _, v in stalls) or 1.0
    shown = stalls if all_stalls else stalls[:8]
    lines.append("  stalls (warps stalled per issue, 'selected' is the issuing one): " + ", ".join(
        f"{k} {v:.2f} ({100 * v / total:.0f}%)" for k, v in shown))
    return lines


def main(argv: list[str]) -> None:
    all_stalls = "--all-stalls" in argv
    for path in [a for a in argv if not a.startswith("--")]:
        print(f"== {path}")
        for row in read(path):
            print("\n".join(summarize(row, all_stalls)))


if __name__ == "__main__":
    main(sys.argv[1:])
