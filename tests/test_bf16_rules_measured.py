"""The sm90 BF16 rules against recorded GPU sweeps: where a sweep timed the tile the rules pick today, that tile is
within 10 % of the fastest tile the sweep timed, and within 3 % in geometric mean.

The sweeps are runs of the sm90 BF16 tile sweep in `benchmarks/results/` (H100, 2026-12-06, at the stage caps the
rules use now; commit 3e186bc): the M = 4096 tile sweep, the 8 / 13-stage sweeps at M = 64 / 128 (the 13-stage
ones), and the mid-M picks. A rule change that moves a pick onto a tile a sweep measured slow fails here (e.g. split-K
past 128 rows: 333x7168x16384 at 128x192 split 8 took 254 us against 143 whole-K)."""

from __future__ import annotations

import glob
import json
import math
import os

import pytest

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_bf16_config

RESULTS = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results")
SWEEPS = ["sm90-bf16-tile-sweep-m4096-h100-2026-12-06-*.json", "sm90-bf16-stages16-m64-128-h100-2026-12-06-*.json",
          "sm90-bf16-picks-v26-*h100-2026-12-06-*.json", "sm90-bf16-picks-h100-2026-12-06-0111e46.json"]


def _measured():
    """[(file, (M, N, K), {(BLOCK_M, BLOCK_N, split): best us})] of every sweep row."""
    rows = []
    for pattern in SWEEPS:
        files = sorted(glob.glob(os.path.join(RESULTS, pattern)))
        assert files, pattern
        for path in files:
            with open(path) as f:
                for row in json.load(f)["rows"]:
                    times: dict[tuple[int, int, int], float] = {}
                    for entry in row["configs"]:
                        if "us" in entry:
                            cfg = entry["cfg"]
                            key = (cfg["block_m"], cfg["block_n"], cfg["split_k"])
                            times[key] = min(times.get(key, math.inf), entry["us"])
                    rows.append((os.path.basename(path), (row["M"], row["N"], row["K"]), times))
    return rows


MEASURED = _measured()


def _regret(shape, times):
    cfg = get_sm90_bf16_config(GemmDesc("bf16", *shape), H200)
    pick = (cfg.block_m, cfg.block_n, cfg.split_k)
    return None if pick not in times else times[pick] / min(times.values())


@pytest.mark.parametrize("name,shape,times", MEASURED, ids=[f"{n[:34]}-{'x'.join(map(str, s))}"
                                                            for n, s, _ in MEASURED])
def test_pick_within_ten_percent_of_the_best_timed(name, shape, times):
    regret = _regret(shape, times)
    assert regret is None or regret <= 1.10, (name, shape, regret)


def test_picks_near_the_best_in_geometric_mean():
    regrets = [r for _, shape, times in MEASURED if (r := _regret(shape, times)) is not None]
    assert len(regrets) >= 40  # the sweeps time most picks
    assert math.exp(sum(map(math.log, regrets)) / len(regrets)) <= 1.03
