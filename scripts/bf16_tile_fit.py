"""Per-tile rates of the sm90 BF16 GEMM from `scripts/sm90_bf16_bench.py` sweeps (CPU, no GPU needed).

Usage: ``python scripts/bf16_tile_fit.py SWEEP.json [SWEEP.json ...] [--num-sms 132] [--ref 128x256 --ref-eff 0.92]``.

For every tile (BLOCK_M x BLOCK_N, whole K) timed on at least two shapes, a least-squares fit of

    time = rounds x (fixed + K slices x per_slice),   rounds = ceil(tiles / SMs),  K slices = ceil(K / 64)

gives the tile's fixed cost a round (us), its time per 64-deep K slice, the chip rate that implies (TFLOPS) and that
rate as a fraction scaled so the reference tile has ``--ref-eff`` (the form of ``heuristics_sm90.BF16_TILE_EFF`` /
``BF16_SPLIT_N_EFF``), then each shape's measured / fitted time. This is how NOTES v26 derived the M = 4096 rates.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict


def load(paths: list[str]) -> dict[tuple[int, int], list[tuple[int, int, float, str]]]:
    """(BLOCK_M, BLOCK_N) -> [(rounds placeholder 0, K slices, us, shape)] of whole-K configs, fastest per shape."""
    best: dict[tuple[tuple[int, int], tuple[int, int, int]], float] = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for row in doc["rows"]:
            shape = (row["M"], row["N"], row["K"])
            for entry in row["configs"]:
                cfg = entry["cfg"]
                if "us" not in entry or cfg["split_k"] != 1:
                    continue
                key = ((cfg["block_m"], cfg["block_n"]), shape)
                best[key] = min(best.get(key, math.inf), entry["us"])
    out: dict[tuple[int, int], list] = defaultdict(list)
    for (tile, shape), us in sorted(best.items()):
        out[tile].append((shape, us))
    return out


def fit(samples: list[tuple[tuple[int, int, int], float]], tile: tuple[int, int], num_sms: int
        ) -> tuple[float, float]:
    """(fixed us a round, us a K slice) minimizing the squared error of rounds x (fixed + slices x per_slice)."""
    xs = []
    for (m, n, k), us in samples:
        rounds = math.ceil(math.ceil(m / tile[0]) * math.ceil(n / tile[1]) / num_sms)
        xs.append((rounds, rounds * math.ceil(k / 64), us))
    # normal equations of the 2-parameter least squares
    saa = sum(a * a for a, _, _ in xs)
    sab = sum(a * b for a, b, _ in xs)
    sbb = sum(b * b for _, b, _ in xs)
    say = sum(a * y for a, _, y in xs)
    sby = sum(b * y for _, b, y in xs)
    det = saa * sbb - sab * sab
    if abs(det) < 1e-12:  # every shape has the same K: only the sum is known; put it all in the slice rate
        return 0.0, sum(y for _, _, y in xs) / sum(b for _, b, _ in xs)
    return (say * sbb - sby * sab) / det, (saa * sby - sab * say) / det


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--num-sms", type=int, default=132)
    ap.add_argument("--ref", default="128x256", help="the tile whose rate --ref-eff names")
    ap.add_argument("--ref-eff", type=float, default=0.92)
    args = ap.parse_args()
    tiles = load(args.sweeps)
    rates = {}
    rows = []
    for tile, samples in sorted(tiles.items()):
        if len(samples) < 2:
            continue
        fixed, per_slice = fit(samples, tile, args.num_sms)
        tflops = 2 * tile[0] * tile[1] * 64 / (per_slice * 1e-6) / 1e12 * args.num_sms
        rates[tile] = tflops
        rows.append((tile, fixed, per_slice, tflops, samples))
    ref = tuple(int(v) for v in args.ref.split("x"))
    scale = args.ref_eff / rates[ref] if ref in rates else None
    for tile, fixed, per_slice, tflops, samples in sorted(rows, key=lambda r: -r[3]):
        eff = f"{tflops * scale:.3f}" if scale else "-"
        fitted = []
        for (m, n, k), us in samples:
            rounds = math.ceil(math.ceil(m / tile[0]) * math.ceil(n / tile[1]) / args.num_sms)
            fitted.append(f"{m}x{n}x{k} {us:.1f}/{rounds * (fixed + math.ceil(k / 64) * per_slice):.1f}")
        print(f"{tile[0]}x{tile[1]}: fixed {fixed:.2f} us, {per_slice * 1e3:.1f} ns a slice, {tflops:.0f} TFLOPS, "
              f"eff {eff} | " + ", ".join(fitted))


if __name__ == "__main__":
    main()
