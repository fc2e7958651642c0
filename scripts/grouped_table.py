"""Markdown table of a ``bench --suite grouped`` JSON against the DeepGEMM anchors (shared/anchors/*.json).

Usage: python3 scripts/grouped_table.py RESULTS.json [ANCHORS.json]
Per case: finegemm-sm90 and cublas-block us / TFLOPS, DeepGEMM's anchor us where the anchors have the
shape (masked: every group full, expected_m = m), and the ratios (peer time / our time: > 1 means faster).
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    res = json.load(open(sys.argv[1]))
    anchors = json.load(open(sys.argv[2] if len(sys.argv) > 2 else "../shared/anchors/h200-2026-12-02.json"))
    dg = {}
    for a in anchors["grouped"]:
        dg[(a["kind"], a["groups"], a["m_per_group"], a["N"], a["K"])] = a["deepgemm_us"]
    print("| case | finegemm-sm90 us | TFLOPS | cuBLAS loop us | DeepGEMM us | x DeepGEMM | x cuBLAS loop |")
    print("|---|---|---|---|---|---|---|")
    for c in res["cases"]:
        ours, blk = c["peers"].get("finegemm-sm90", {}), c["peers"].get("cublas-block", {})
        full = len(set(c["ms"])) == 1
        kind = "contig" if c["kind"] == "m_grouped_contiguous" else "masked"
        key = (kind, c["groups"], c["ms"][0], c["N"], c["K"])
        anchor = dg.get(key) if full else None
        us, bus = ours.get("us"), blk.get("us")
        row = [c["name"], f"{us:.1f}" if us else "-", f"{ours.get('TFLOPS', 0):.0f}" if us else "-",
               f"{bus:.1f}" if bus else "-", f"{anchor:.1f}" if anchor else "-",
               f"{anchor / us:.2f}" if anchor and us else "-", f"{bus / us:.2f}" if bus and us else "-"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
