"""Per-CTA timeline of the dense sm90 FP8 GEMM: where a launch's time goes, unit by unit.

Usage (on the H200): ``PYTHONPATH=. python3 scripts/trace_probe.py [case ...]`` (default: every case below).
Each case launches ``gemm_1d2d.fp8_gemm_kernel`` with ``TRACE`` (every math warpgroup stores ``%globaltimer``
at its entry, at each work unit's start, after the unit's main loop and after its epilogue is issued; see
``gemm_1d2d._stamp``), the plan otherwise exactly the dense dispatch's (``dispatch._build_plan``), behind a
1 GiB L2 flush, 7 times; the launch whose span is the median is summarized. Beside it the untraced launch
is timed with CUDA events (same flush, median of 30) to show what the stamps cost.

Summary per case (us, relative to the earliest entry stamp of the launch): when the CTAs enter (first /
last), when their first unit's main loop ends, the main-loop and epilogue time of each unit (median, and
by round: the n-th unit of every CTA), when the CTAs finish their last unit, and the span. Writes
``$OUT/trace_probe.json`` (or ./).

``--waves`` (256-row tiles only: ``TRACE`` 2, ``gemm_1d2d._wave_stamp``): each math warpgroup also stamps the SM's
clock at five points of its first unit's first ``TRACE_KB`` K blocks, and the summary adds, in SM clocks: the K
block's period per warpgroup, each wave's issue-to-done time, the promotions between, the wait for the next full
slot, and per SM the share of the stamped span in which at least one of the two warpgroups had a wave in flight
(an upper bound on the tensor pipe's busy share: whether the two warpgroups' WGMMAs keep it fed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import sm90_dev  # noqa: E402  (inputs, desc_for: the sweep script's data)

from finegemm.jit.device import device_facts  # noqa: E402
from finegemm.jit.heuristics_sm90 import get_sm90_config, make_config  # noqa: E402
from finegemm.kernels.sm90 import dispatch, gemm_1d2d  # noqa: E402

DEV = torch.device("cuda")
UNITS = int(gemm_1d2d.TRACE_UNITS)


def cases():
    """(name, (m, n, k, recipe, out, with_c), config or None for the heuristic's)."""
    facts = device_facts(DEV)
    big = (4096, 2112, 7168, "1d2d", torch.bfloat16, False)
    desc_big = sm90_dev.desc_for(*big[:4], False, big[4], big[5])
    tail = dataclasses.replace(make_config(desc_big, facts, 128, 128, 2, sfa_tma=True), pipe_mma=False,
                               splitk_fused=True, split_tail=True)
    return [
        ("4096x2112x7168", big, None),
        ("4096x2112x7168 tail s2", big, tail),
        ("4096x2112x7168 tail s7", big, dataclasses.replace(tail, split_k=7)),
        ("4096x7168x16384", (4096, 7168, 16384, "1d2d", torch.bfloat16, False), None),
        ("4096x4096x7168", (4096, 4096, 7168, "1d2d", torch.bfloat16, False), None),
        ("4096x7168x2048", (4096, 7168, 2048, "1d2d", torch.bfloat16, False), None),
        ("64x2112x7168", (64, 2112, 7168, "1d2d", torch.bfloat16, False), None),
        ("64x7168x2048", (64, 7168, 2048, "1d2d", torch.bfloat16, False), None),
        ("128x4096x7168", (128, 4096, 7168, "1d2d", torch.bfloat16, False), None),
        ("576x4096x7168 wgrad", (576, 4096, 7168, "1d1d", torch.float32, True), None),
        # the weight gradients at 256-row tiles (issue 5's 1.2x DeepGEMM target; 0.88-0.89x at 26f8c93)
        ("4096x4096x7168 wgrad", (4096, 4096, 7168, "1d1d", torch.float32, True), None),
        ("7168x4096x16384 wgrad", (7168, 4096, 16384, "1d1d", torch.float32, True), None),
    ]


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarize(stamps: torch.Tensor, num_wg: int) -> dict:
    """``stamps`` int64 [grid, UNITS, num_wg, 3] (0 = not written) -> the summary described above."""
    s = stamps.view(-1, UNITS, num_wg, 3).cpu().double()
    entry = s[:, UNITS - 1, :, 0]
    t0 = entry[entry > 0].min()
    us = (s - t0) / 1e3
    grid = s.shape[0]
    # per (CTA, unit): the later warpgroup (a unit is done when both are)
    done = (s[:, : UNITS - 1, :, 2] > 0).all(dim=2)
    start = us[:, : UNITS - 1, :, 0].min(dim=2).values
    loop_end = us[:, : UNITS - 1, :, 1].max(dim=2).values
    epi_end = us[:, : UNITS - 1, :, 2].max(dim=2).values
    units_per_cta = done.sum(dim=1)
    main, epi, by_round = [], [], {}
    for c in range(grid):
        for u in range(int(units_per_cta[c])):
            m = float(loop_end[c, u] - start[c, u])
            e = float(epi_end[c, u] - loop_end[c, u])
            main.append(m)
            epi.append(e)
            by_round.setdefault(u, []).append((m, e, float(start[c, u]), float(epi_end[c, u])))
    last_end = [float(epi_end[c, int(units_per_cta[c]) - 1]) for c in range(grid) if units_per_cta[c] > 0]
    entries = [float(v) for v in (entry[entry > 0] - t0) / 1e3]
    out = dict(
        grid=grid, units=int(units_per_cta.sum()), units_per_cta=sorted(set(int(v) for v in units_per_cta)),
        entry_first_last=[min(entries), max(entries)],
        first_loop_end_median=statistics.median(float(loop_end[c, 0]) for c in range(grid) if units_per_cta[c]),
        main_median=statistics.median(main), main_p10_p90=[_pct(main, 0.1), _pct(main, 0.9)],
        epi_median=statistics.median(epi), epi_p90=_pct(epi, 0.9),
        cta_end_min_median_max=[min(last_end), statistics.median(last_end), max(last_end)],
        span=max(last_end),
        rounds=[dict(round=u, ctas=len(v), main_median=statistics.median(x[0] for x in v),
                     epi_median=statistics.median(x[1] for x in v), start_min=min(x[2] for x in v),
                     start_max=max(x[2] for x in v), end_max=max(x[3] for x in v))
                for u, v in sorted(by_round.items())],
    )
    return out


def summarize_waves(stamps: torch.Tensor, grid: int, num_wg: int) -> dict:
    """The ``--waves`` summary (module doc) of int64 %clock64 stamps [grid, num_wg, TRACE_KB, 5] (0 = unwritten)."""
    kb, ev = int(gemm_1d2d.TRACE_KB), int(gemm_1d2d.WAVE_EVENTS)
    s = stamps.view(grid, num_wg, kb, ev).cpu().double()
    period, wave0, wave1, promote0, promote1, slot_wait, busy = [], [], [], [], [], [], []
    for c in range(grid):
        written = (s[c] > 0).all(dim=2).all(dim=0)  # K blocks both warpgroups stamped
        n = int(written.sum())
        if n < 4:
            continue
        t = s[c, :, :n]
        for w in range(num_wg):
            e = t[w]
            period += (e[1:, 0] - e[:-1, 0]).tolist()
            wave0 += (e[:, 1] - e[:, 0]).tolist()
            wave1 += (e[:, 3] - e[:, 2]).tolist()
            promote0 += (e[:, 2] - e[:, 1]).tolist()
            promote1 += (e[:, 4] - e[:, 3]).tolist()
            slot_wait += (e[1:, 0] - e[:-1, 4]).tolist()
        # union of the in-flight intervals of both warpgroups over the stamped span
        spans = sorted([(float(t[w, i, 0]), float(t[w, i, 1])) for w in range(num_wg) for i in range(n)]
                       + [(float(t[w, i, 2]), float(t[w, i, 3])) for w in range(num_wg) for i in range(n)])
        covered, end = 0.0, -1.0
        for a, b in spans:
            if b <= end:
                continue
            covered += b - max(a, end)
            end = b
        total = float(t[:, n - 1, 4].max() - t[:, 0, 0].min())
        busy.append(covered / total if total > 0 else 0.0)

    def med(v):
        return statistics.median(v) if v else None

    return dict(ctas=len(busy), kb_period_clk=med(period), wave0_clk=med(wave0), wave1_clk=med(wave1),
                promote0_clk=med(promote0), promote1_release_clk=med(promote1), slot_wait_clk=med(slot_wait),
                wave_in_flight_share=dict(median=med(busy), min=min(busy) if busy else None,
                                          max=max(busy) if busy else None))


def main() -> None:
    waves = "--waves" in sys.argv[1:]
    wanted = set(a for a in sys.argv[1:] if a != "--waves")
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
    sm90_dev.FLUSH = flush
    facts = device_facts(DEV)
    result = dict(what=__doc__.split("\n")[0], gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  date=time.strftime("%Y-%m-%d %H:%M"), commit=open(".commit").read().strip()
                  if os.path.exists(".commit") else "unknown", cases=[])
    path = os.path.join(os.environ.get("OUT", "."), "trace_probe.json")
    for name, (m, n, k, recipe, out, with_c), cfg in cases():
        if wanted and name not in wanted:
            continue
        torch.manual_seed(0)
        desc = sm90_dev.desc_for(m, n, k, recipe, False, out, with_c)
        cfg = cfg or get_sm90_config(desc, facts)
        t = sm90_dev.inputs(m, n, k, recipe, False, with_c, out)
        a, sfa, sfa_k, b, sfb, sfb_k, c, d = t
        grid, args, meta, reduce = dispatch._build_plan(desc, cfg, a, sfa_k, b, sfb_k, d, c)
        num_wg = gemm_1d2d.num_math_warpgroups(cfg.block_m)
        if waves and cfg.block_m != 256:
            continue  # the wave stamps live in the 256-row loop only
        unit_words = grid[0] * UNITS * num_wg * 3
        wave_words = grid[0] * num_wg * int(gemm_1d2d.TRACE_KB) * int(gemm_1d2d.WAVE_EVENTS) if waves else 0
        buf = torch.zeros(unit_words + wave_words, dtype=torch.int64, device=DEV)
        traced = dict(meta, TRACE=2 if waves else True, trace_ptr=buf)

        def launch(m_=traced, grid=grid, args=args, reduce=reduce):
            gemm_1d2d.fp8_gemm_kernel[grid](*args, **m_)
            if reduce is not None:
                rgrid, rargs, rmeta = reduce
                gemm_1d2d._splitk_reduce_kernel[rgrid](*rargs, **rmeta)

        runs = []
        for i in range(9):
            buf.zero_()
            flush.zero_()
            launch()
            torch.cuda.synchronize()
            if i >= 2:
                runs.append(summarize(buf[:unit_words], num_wg))
                if waves:
                    runs[-1]["waves"] = summarize_waves(buf[unit_words:], grid[0], num_wg)
        runs.sort(key=lambda r: r["span"])
        summary = runs[len(runs) // 2]
        untraced_us = sm90_dev.time_fn(lambda meta=meta: launch(meta))
        traced_us = sm90_dev.time_fn(launch)
        row = dict(name=name, M=m, N=n, K=k, recipe=recipe, cfg=cfg.__dict__, grid=grid[0],
                   events_us=dict(untraced=untraced_us, traced=traced_us),
                   spans_us=[r["span"] for r in runs], summary=summary)
        result["cases"].append(row)
        json.dump(result, open(path, "w"), indent=1, default=str)
        sm = summary
        print(f"{name:>24} grid {grid[0]:3d} units {sm['units']:4d} | events {untraced_us:7.1f} (traced "
              f"{traced_us:7.1f}) | span {sm['span']:7.1f} entry {sm['entry_first_last'][0]:.1f}-"
              f"{sm['entry_first_last'][1]:.1f} first loop end {sm['first_loop_end_median']:.1f} | main "
              f"{sm['main_median']:.1f} [{sm['main_p10_p90'][0]:.1f}, {sm['main_p10_p90'][1]:.1f}] epi "
              f"{sm['epi_median']:.2f} | CTA end {sm['cta_end_min_median_max']}", flush=True)
        if waves:
            print(f"{'':>26} waves (SM clocks): {sm['waves']}", flush=True)
        for r in sm["rounds"]:
            print(f"{'':>26} round {r['round']}: {r['ctas']:3d} CTAs start {r['start_min']:.1f}-{r['start_max']:.1f} "
                  f"main {r['main_median']:.1f} epi {r['epi_median']:.2f} end<= {r['end_max']:.1f}", flush=True)


if __name__ == "__main__":
    main()
