"""Compare two ``finegemm bench --json`` files case by case: one peer's time in A and in B (e.g. the same tree under
two Triton releases, or two commits, run on the same card in the same device call).

Usage: ``python3 tools/bench_compare.py A.json B.json [--peer finegemm-sm90]``. Prints, per case both files timed,
A's and B's microseconds (kernel time when the run had ``--kernel-time``, else the call's median) and B / A, then
the geometric mean of B / A over those cases as the last line (below 1: B is faster).
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def peer_times(path: str, peer: str) -> dict[str, float]:
    """{case name: microseconds} of ``peer``'s timed cases in the bench JSON at ``path``."""
    with open(path) as f:
        doc = json.load(f)
    times = {}
    for case in doc.get("cases", []):
        entry = case.get("peers", {}).get(peer, {})
        us = entry.get("kernel_us") or entry.get("timing", {}).get("median_us")
        if us:
            times[f"{case['suite']}:{case['name']}"] = float(us)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--peer", default="finegemm-sm90")
    args = parser.parse_args(argv)
    a, b = peer_times(args.a, args.peer), peer_times(args.b, args.peer)
    common = [name for name in a if name in b]
    for name in common:
        print(f"{name:56s} {a[name]:10.1f} {b[name]:10.1f}  {b[name] / a[name]:6.3f}")
    if not common:
        print(f"{args.peer}: no case timed in both files")
        return 1
    geo = math.exp(sum(math.log(b[n] / a[n]) for n in common) / len(common))
    print(f"{args.peer}: B/A geometric mean {geo:.3f} over {len(common)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
