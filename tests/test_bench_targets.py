"""``python -m finegemm.bench.targets``: each speed target's kernel family, cases, figures, bars and verdicts from
bench JSON."""

from __future__ import annotations

import json

import pytest

from finegemm.bench import targets
from finegemm.bench.suites import SUITES


def _peer(us, ours=False, kernel_us=None):
    r = {"status": "ok", "us": us, "finegemm": ours}
    if kernel_us is not None:
        r["kernel_us"] = kernel_us
    return r


ANCHORS = {
    "dense": [{"M": 4096, "N": 2112, "K": 7168, "deepgemm_us": 100.0},
              {"M": 4096, "N": 4096, "K": 7168, "deepgemm_us": 200.0}],
    "fp8_gemm_test_sweep": [{"M": 576, "N": 4096, "K": 7168, "kernel": "1D1D", "accumulate": 1, "deepgemm_us": 60.0}],
}


def _dense(name, m, n, k, ours, **peers):
    return {"suite": "dense", "kind": "fp8_gemm", "name": name, "M": m, "N": n, "K": k,
            "peers": {"finegemm-sm90": _peer(ours, True),
                      **{p.replace("_", "-"): _peer(us) for p, us in peers.items()}}}


def _target(prefix):
    (t,) = [t for t in targets.TARGETS if t.name.startswith(prefix)]
    return t


def test_targets_are_named_by_kernel_family_and_grouped_by_it():
    """Every target's family is a bench suite's name, each family's targets sit together (the table groups by
    family), and every suite the harness times has at least one target."""
    families = [t.family for t in targets.TARGETS]
    assert set(families) == set(SUITES)
    runs = [f for i, f in enumerate(families) if i == 0 or f != families[i - 1]]
    assert len(runs) == len(set(runs)), runs
    assert len({t.name for t in targets.TARGETS}) == len(targets.TARGETS)


def test_deepgemm_target_needs_every_case_and_the_mean():
    """dense M = 4096: 1.05x and 1.0x clear 'each >= 1.0' but miss 'mean >= 1.05'; a case of another M is not
    counted; a case the anchors lack gives no figure."""
    doc = {"cases": [_dense("4096x2112x7168", 4096, 2112, 7168, 100.0 / 1.05),
                     _dense("4096x4096x7168", 4096, 4096, 7168, 200.0),
                     _dense("64x2112x7168", 64, 2112, 7168, 10.0),
                     _dense("4096x7168x16384", 4096, 7168, 16384, 700.0)]}
    t = _target("dense M = 4096 vs DeepGEMM")
    figs = targets.figures(t, targets.merge_cases([doc]), ANCHORS)
    assert sorted((n, round(v, 6)) for n, v, _ in figs) == [("4096x2112x7168", 1.05), ("4096x4096x7168", 1.0)]
    r = targets.evaluate(t, figs)
    assert (r["cases"], r["cleared"], r["met"]) == (2, 2, False)
    assert r["worst"][0] == "4096x4096x7168" and abs(r["mean"] - 1.05 ** 0.5) < 1e-9
    doc["cases"][1]["peers"]["finegemm-sm90"]["us"] = 200.0 / 1.06
    r = targets.evaluate(t, targets.figures(t, targets.merge_cases([doc]), ANCHORS))
    assert r["met"] is True and r["misses"] == []


def test_live_peer_target_compares_within_the_run_and_prefers_kernel_time():
    """vs cuBLAS blockwise: the peer's time over ours from the same case; kernel time only when both have it."""
    case = _dense("4096x2112x7168", 4096, 2112, 7168, 100.0, cublas_block=110.0)
    t = _target("dense M = 4096 vs cuBLAS")
    [(_, v, timer)] = targets.figures(t, targets.merge_cases([{"cases": [case]}]), ANCHORS)
    assert (round(v, 6), timer) == (1.1, "events")
    case["peers"]["finegemm-sm90"]["kernel_us"] = 90.0
    [(_, v, timer)] = targets.figures(t, targets.merge_cases([{"cases": [case]}]), ANCHORS)
    assert (round(v, 6), timer) == (1.1, "events")  # cuBLAS has no kernel time: events for both
    case["peers"]["cublas-block"]["kernel_us"] = 108.0
    [(_, v, timer)] = targets.figures(t, targets.merge_cases([{"cases": [case]}]), ANCHORS)
    assert (round(v, 6), timer) == (1.2, "kernel")
    assert not targets.evaluate(t, [("x", 1.1, "events")])["met"]


def test_suites_that_share_case_names_are_kept_apart_and_later_runs_win():
    dense = _dense("4096x2112x7168", 4096, 2112, 7168, 100.0, cublas_bf16=80.0)
    bf16 = {"suite": "bf16", "kind": "bf16_gemm", "name": "4096x2112x7168", "M": 4096, "N": 2112, "K": 7168,
            "peers": {"finegemm-sm90": _peer(150.0, True), "cublas-bf16": _peer(160.0)}}
    newer = json.loads(json.dumps(bf16))
    newer["peers"]["finegemm-sm90"]["us"] = 128.0
    cases = targets.merge_cases([{"cases": [dense, bf16]}, {"cases": [newer]}])
    assert len(cases) == 2 and cases[("bf16", "4096x2112x7168")][1] == 1
    [(_, v, _)] = targets.figures(_target("BF16 vs live cuBLAS"), cases, ANCHORS)
    assert v == 160.0 / 128.0  # the bf16 suite's newer case, not the dense suite's FP8 time
    [(_, v, _)] = targets.figures(_target("dense M = 4096 vs DeepGEMM"), cases, ANCHORS)
    assert v == 1.0


def test_half_empty_ratio_and_stated_tflops_targets():
    """Masked half-empty: its time over the all-full case of the same suite, at most 0.6; 16 x 64 x (7168, 2048)
    against the 401 TFLOPS stated for DeepGEMM, at least 1.2x."""
    def masked(name, ms, us, n=7168, k=2048):
        return {"suite": "grouped", "kind": "m_grouped_masked", "name": name, "M": 64, "N": n, "K": k,
                "groups": len(ms), "ms": ms, "flops": 2 * sum(ms) * n * k, "peers": {"finegemm-sm90": _peer(us, True)}}

    full = masked("masked 16x64x7168x2048", [64] * 16, 76.0)
    half = masked("masked 16x64x7168x2048 half-empty", [64, 0] * 8, 44.8)
    other = masked("masked 16x64x4096x7168", [64] * 16, 138.7, 4096, 7168)
    cases = targets.merge_cases([{"cases": [full, half, other]}])
    t = _target("masked half the groups empty")
    [(name, v, _)] = targets.figures(t, cases, ANCHORS)
    assert name == half["name"] and v == pytest.approx(44.8 / 76.0)
    assert targets.evaluate(t, [(name, v, "events")])["met"] is True
    assert targets.evaluate(t, [(name, 0.61, "events")])["met"] is False  # lower is better: 0.61 misses 0.6
    t = _target("masked 16 x 64 x (7168, 2048)")
    [(name, v, _)] = targets.figures(t, cases, ANCHORS)
    assert name == full["name"] and v == pytest.approx(full["flops"] / 76.0e-6 / 1e12 / 401)


def test_report_lists_misses_and_unmeasured_targets(tmp_path, capsys):
    doc = {"cases": [_dense("4096x2112x7168", 4096, 2112, 7168, 125.0),
                     {"suite": "weight-grad", "kind": "fp8_gemm_wgrad", "name": "576x4096x7168", "M": 576,
                      "N": 4096, "K": 7168, "peers": {"finegemm-sm90": _peer(52.0, True, kernel_us=50.0)}}]}
    (tmp_path / "a.json").write_text(json.dumps(ANCHORS))
    (tmp_path / "run.json").write_text(json.dumps(doc))
    assert targets.main([str(tmp_path / "a.json"), str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("| family | target | cases |")
    row = {line.split(" | ")[1]: line for line in out.splitlines() if line.startswith("| ")}
    assert row[_target("weight gradients").name].startswith("| weight-grad | ")
    assert row[_target("dense M = 4096 vs DeepGEMM").name].endswith("| 1 | 0 | 0.80 (4096x2112x7168) | 0.80 | events "
                                                                    "| missed |")
    assert row[_target("weight gradients").name].endswith("| 1 | 1 | 1.20 (576x4096x7168) | 1.20 | kernel | met |")
    assert row[_target("paged MQA decode").name].endswith("| 0 | - | - | - | - | not measured |")
    assert "- dense, dense M = 4096 vs DeepGEMM (each >= 1.0, mean >= 1.05): 4096x2112x7168 0.80" in out
    assert "Runs: " + str(tmp_path / "run.json") in out


def test_deepgemm_figures_need_the_anchors_card(tmp_path, capsys):
    """A run on another kind of card than the anchors (an H100 against H200 anchors) gives DeepGEMM's targets no
    figure and says why; a live peer's target still counts its cases; a run that names no card is compared."""
    assert targets.card("NVIDIA H100 80GB HBM3") == "H100" and targets.card(None) is None
    anchors = dict(ANCHORS, what="Peers measured on one NVIDIA H200 (132 SMs)")
    assert targets.anchors_card(anchors) == "H200"
    case = _dense("4096x2112x7168", 4096, 2112, 7168, 100.0, cublas_block=110.0)
    h100 = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "cases": [case]}
    cases = targets.merge_cases([h100])
    dg, live = _target("dense M = 4096 vs DeepGEMM"), _target("dense M = 4096 vs cuBLAS")
    assert targets.figures(dg, cases, anchors, [targets.run_card(h100)]) == []
    assert len(targets.figures(live, cases, anchors, [targets.run_card(h100)])) == 1
    assert len(targets.figures(dg, cases, anchors, [None])) == 1  # no card named: compared as before
    h200 = dict(h100, device={"name": "NVIDIA H200"})
    assert len(targets.figures(dg, targets.merge_cases([h200]), anchors, ["H200"])) == 1
    (tmp_path / "a.json").write_text(json.dumps(anchors))
    (tmp_path / "run.json").write_text(json.dumps(h100))
    assert targets.main([str(tmp_path / "a.json"), str(tmp_path / "run.json")]) == 0
    row = {line.split(" | ")[1]: line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")}
    assert row[dg.name].endswith("| 0 | - | - | - | - | not measured (runs on H100; DeepGEMM's figures are H200's) |")
    assert row[live.name].endswith("| 1 | 0 | 1.10 (4096x2112x7168) | 1.10 | events | missed |")


def test_eight_group_target_takes_every_grouped_kind_of_eight_groups():
    """The cuBLAS-loop target of the grouped GEMMs: 8-group cases of any grouped kind against the cublas-block peer's
    loop; other group counts and the half-empty variants are not counted."""
    def case(kind, name, groups, ours, loop):
        return {"suite": "grouped", "kind": kind, "name": name, "groups": groups,
                "peers": {"finegemm-sm90": _peer(ours, True), "cublas-block": _peer(loop)}}

    doc = {"cases": [case("m_grouped_contiguous", "contig 8x4096", 8, 100.0, 110.0),
                     case("k_grouped", "kgrp 8x4096", 8, 100.0, 160.0),
                     case("m_grouped_masked", "masked 16x64", 16, 100.0, 200.0),
                     case("m_grouped_masked", "masked 8x64 half-empty", 8, 100.0, 100.0)]}
    t = _target("8 groups vs a loop")
    figs = targets.figures(t, targets.merge_cases([doc]), {})
    assert sorted((n, round(v, 6)) for n, v, _ in figs) == [("contig 8x4096", 1.1), ("kgrp 8x4096", 1.6)]
    r = targets.evaluate(t, figs)
    assert (r["cases"], r["cleared"], r["met"]) == (2, 1, False) and r["worst"][0] == "contig 8x4096"
