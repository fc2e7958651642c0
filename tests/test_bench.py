"""The benchmark harness's code paths on the CPU (Triton interpreter, tiny shapes, GPU-only peers skipped).

Ops that finegemm does not have yet (grouped, k-grouped, MQA) are stood in for by small fakes built
from finegemm's dense GEMM or plain torch, monkeypatched onto the module, so the harness's inputs,
references, calls and reports for those suites are exercised before the real kernels exist.
"""

from __future__ import annotations

import argparse
import json

import pytest
import torch

import finegemm
from finegemm.bench import cli, suites
from finegemm.bench.inputs import make_inputs
from finegemm.bench.peers import FinegemmPeer, make_peers
from finegemm.bench.runner import RunOptions, run_cases
from finegemm.bench.timer import Timing, time_wall

CPU = torch.device("cpu")


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    return p.parse_args(list(argv))


# --- pure parts -------------------------------------------------------------------------------------------


def test_dense_suite_is_the_18_deepseek_shapes():
    cases = suites.suite_cases("dense")
    assert len(cases) == 18
    assert {(c.n, c.k) for c in cases} == set(suites.DEEPSEEK_V3_NK)
    c = next(c for c in cases if (c.m, c.n, c.k) == (4096, 7168, 16384))
    assert c.flops == 2 * 4096 * 7168 * 16384
    # FP8 A and B, fp32 1x128 and 128x128 scales, BF16 D.
    assert c.bytes == 4096 * 16384 + 7168 * 16384 + 4 * (4096 * 128 + 56 * 128) + 2 * 4096 * 7168


def test_other_suites_have_counts():
    for name in suites.SUITES:
        for case in suites.suite_cases(name):
            assert case.flops > 0 and case.bytes > 0, case
    kg = suites.k_grouped_cases()
    assert all(k % 128 == 0 for c in kg for k in c.ks)
    assert suites.k_grouped_cases() == kg  # ks drawn from a fixed seed
    # each case has the total K of DeepGEMM's anchored case (same work), at least 128 a group
    assert {(c.groups, c.m, c.n): c.k for c in kg} == suites.K_GROUPED_ANCHOR_TOTALS
    assert all(sum(c.ks) == c.k and len(c.ks) == c.groups and min(c.ks) >= 128 for c in kg)
    assert sum(suites._k_grouped_ks(4, 1, total=4 * 128)) == 512  # moved down to the floor
    with pytest.raises(ValueError, match="not a multiple of 128"):
        suites._k_grouped_ks(4, 1, total=1000)
    masked = [c for c in suites.grouped_cases() if c.kind == "m_grouped_masked"]
    assert all(c.flops == 2 * sum(c.ms) * c.n * c.k for c in masked)


def test_parse_shapes():
    assert suites.parse_shapes("64,2112,7168; 4096x7168x2048") == [(64, 2112, 7168), (4096, 7168, 2048)]
    with pytest.raises(ValueError, match="M,N,K"):
        suites.parse_shapes("64,2112")


def test_unknown_peer_and_suite_are_usage_errors(capsys):
    assert cli.main(_args("--smoke", "--peers", "cutlass")) == 2
    assert cli.main(_args("--smoke", "--suite", "nope")) == 2


def test_mqa_ranges():
    assert suites.mqa_ranges(4, 8, "causal") == [(0, 4), (0, 5), (0, 6), (0, 7)]
    assert suites.mqa_pairs(4, 8, "causal") == 22
    # cp: 8 / 4 = 2 ranks, rank 0; chunks of 2 rows end at 0 + i and (2 * 2 - 1 - 0) * 2 + i
    assert suites.mqa_ranges(4, 8, "cp") == [(0, 0), (0, 1), (0, 6), (0, 7)]
    with pytest.raises(ValueError, match="window"):
        suites.mqa_ranges(4, 8, "window")


def test_mqa_suite_reproduces_the_anchors_work():
    """Each mqa case is one of the anchors' prefill entries, and its (query, key) pairs give DeepGEMM's
    anchored TFLOPS from its anchored time (within 1 %): the ranges are the ones DeepGEMM measured."""
    import json
    import pathlib

    from finegemm.bench import anchors

    path = pathlib.Path(__file__).resolve().parents[2] / "shared" / "anchors" / "h200-2026-12-02.json"
    if path.exists():
        anch = json.loads(path.read_text())
    else:  # the CI machine has no workspace: three entries of that file, copied
        anch = {"mqa": [
            {"kind": "prefill", "logits": "FP32", "compressed": 0, "seq_len": 2048, "seq_len_kv": 8192, "heads": 32,
             "head_dim": 64, "cp_ranges": 1, "deepgemm_TFLOPS": 561, "deepgemm_us": 61},
            {"kind": "prefill", "logits": "BF16", "compressed": 1, "seq_len": 2048, "seq_len_kv": 65536, "heads": 64,
             "head_dim": 32, "cp_ranges": 1, "deepgemm_TFLOPS": 379, "deepgemm_us": 725},
            {"kind": "prefill", "logits": "FP32", "compressed": 0, "seq_len": 8192, "seq_len_kv": 8192, "heads": 64,
             "head_dim": 128, "cp_ranges": 1, "deepgemm_TFLOPS": 1092, "deepgemm_us": 503}]}
    matched = 0
    for case in suites.mqa_cases():
        hit = anchors.anchor_for(case.params(), anch)
        if hit is None:
            assert not path.exists(), f"{case.name} is not an anchors case"
            continue
        entry = hit[1]
        tflops = case.flops / (entry["deepgemm_us"] * 1e-6) / 1e12
        assert abs(tflops / entry["deepgemm_TFLOPS"] - 1) < 0.01, (case.name, tflops, entry)
        matched += 1
    assert matched == (14 if path.exists() else 3)


def test_torch_mqa_peer_matches_the_reference():
    """The torch-mqa peer (the straightforward torch form the MQA target compares with): full and
    compact forms against the float64 reference of finegemm.reference.mqa."""
    from finegemm.bench.peers import torch_mqa_logits
    from finegemm.reference import mqa as ref

    g = torch.Generator().manual_seed(0)
    s, skv, h, d = 24, 200, 32, 64
    q = torch.randn(s, h, d, generator=g).to(torch.float8_e4m3fn)
    kv = torch.randn(skv, d, generator=g).to(torch.float8_e4m3fn)
    sf = torch.rand(skv, generator=g) * 0.02 + 0.001
    w = torch.randn(s, h, generator=g)
    st = torch.randint(0, skv, (s,), generator=g, dtype=torch.int32)
    en = torch.minimum(st + torch.randint(0, 120, (s,), generator=g, dtype=torch.int32), torch.tensor(skv)).int()
    for max_k in (0, int((en - st).max())):
        want = ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k)
        got = torch_mqa_logits(q, (kv, sf), w, st, en, max_k, torch.empty(want.shape))
        assert torch.equal(torch.isneginf(got), torch.isneginf(want))
        finite = ~torch.isneginf(want)
        assert finegemm.calc_diff(got[finite].double(), want[finite]) < 1e-6


def test_wall_timer():
    t = time_wall(lambda: None, warmup=1, repeats=3)
    assert isinstance(t, Timing) and t.samples == 3 and t.method == "wall"


def test_inputs_are_fresh_and_nonzero():
    case = suites.Case("dense", "fp8_gemm", 8, 64, 128)
    a = make_inputs(case, CPU, seed=1).t["a_bf"]
    b = make_inputs(case, CPU, seed=2).t["a_bf"]
    assert bool((a != 0).all()) and not torch.equal(a, b)


# --- whole harness on the CPU --------------------------------------------------------------------------------


def test_smoke_dense_json_plot(tmp_path, capsys):
    js, png = tmp_path / "r.json", tmp_path / "r.png"
    rc = cli.main(_args("--smoke", "--suite", "dense,bf16,grouped", "--plain", "--no-progress", "--json", str(js),
                        "--plot", str(png), "--repeats", "1", "--warmup", "0", "--commit", "feedbee"))
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.loads(js.read_text())
    assert doc["complete"] and doc["versions"]["torch"]
    # --commit names the tree even where a .git is found beside the package (a lent GPU's stale copy)
    assert doc["git"]["commit"] == "feedbee" and doc["git"]["source"] == "--commit"
    cases = {(c["suite"], c["name"]): c for c in doc["cases"]}
    dense = cases[("dense", "33x96x256")]["peers"]
    assert dense["finegemm-portable"]["status"] == "ok"
    assert dense["finegemm-portable"]["calc_diff"] < 1e-3
    assert dense["cublas-block"]["status"] == "skipped" and "CUDA" in dense["cublas-block"]["reason"]
    assert dense["finegemm-sm90"]["status"] == "skipped"
    if not hasattr(finegemm, "m_grouped_fp8_gemm_nt_contiguous"):
        assert any(u["suite"] == "grouped" for u in doc["unavailable"])
        assert "unavailable" in out
    assert "finegemm-portable" in out and "calc_diff" in out
    try:
        import matplotlib  # noqa: F401
        assert png.stat().st_size > 0
    except ImportError:
        pass


def test_markdown_table_carries_the_json_numbers():
    """The README's result table is rendered from a bench JSON: every case gets a row with its numbers."""
    from finegemm.bench import markdown

    ok = {"status": "ok", "finegemm": True, "us": 12.34, "TFLOPS": 456.7, "speedup_vs": {"cublas-block": 1.234}}
    peer = {"status": "ok", "finegemm": False, "us": 15.2, "TFLOPS": 370.0}
    doc = {"cases": [
        {"suite": "dense", "name": "64x2112x7168", "peers": {"finegemm-sm90": ok, "cublas-block": peer}},
        {"suite": "dense", "name": "1x8x128", "peers": {"finegemm-sm90": ok, "cublas-block": {"status": "refused"}}},
        {"suite": "bf16", "name": "other", "peers": {"finegemm-sm90": ok}},
    ], "device": {"name": "GPU"}, "versions": {"torch": "t", "triton": "3.6.0"}, "git": {"commit": "abc1234"},
        "date": "2026-12-02T00:00:00", "options": {"repeats": 30, "flush_bytes": 1 << 30, "graph": False}}
    lines = markdown.table(doc, "dense").splitlines()
    assert lines[0] == ("| case | finegemm-sm90 µs | cublas-block µs | finegemm-sm90 TFLOPS | "
                        "finegemm-sm90 / cublas-block |")
    assert lines[2] == "| 64x2112x7168 | 12.3 | 15.2 | 457 | 1.23x |"
    assert lines[3].startswith("| 1x8x128 | 12.3 | refused |")
    assert len(lines) == 4  # the bf16 case is not in the dense table
    assert "abc1234" in markdown.caption(doc) and "L2 flushed" in markdown.caption(doc)
    # a --kernel-time run: each peer's kernel span beside its event time, and the caption says so
    ok["kernel_us"], peer["kernel_us"] = 9.87, 12.0
    doc["options"].update(kernel_time=True, flush_mode="read")
    lines = markdown.table(doc, "dense").splitlines()
    assert lines[0] == ("| case | finegemm-sm90 µs | cublas-block µs | finegemm-sm90 kernel µs | "
                        "cublas-block kernel µs | finegemm-sm90 TFLOPS | finegemm-sm90 / cublas-block |")
    assert lines[2] == "| 64x2112x7168 | 12.3 | 15.2 | 9.9 | 12.0 | 457 | 1.23x |"
    assert "kernel spans from the profiler" in markdown.caption(doc) and "(read flush)" in markdown.caption(doc)


def test_wrong_result_fails_the_exit_code(monkeypatch, capsys):
    real = finegemm.fp8_gemm_nt

    def broken(a, b, d, *args, **kwargs):
        real(a, b, d, *args, **kwargs)
        d.mul_(1.5)

    monkeypatch.setattr(finegemm, "fp8_gemm_nt", broken)
    rc = cli.main(_args("--smoke", "--suite", "dense", "--shapes", "8,64,128", "--plain", "--no-progress",
                        "--repeats", "1", "--warmup", "0", "--peers", "finegemm-portable"))
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL" in out


def test_host_overhead_and_weight_grad(capsys):
    rc = cli.main(_args("--smoke", "--suite", "weight-grad", "--plain", "--no-progress", "--repeats", "1",
                        "--warmup", "0", "--host-overhead", "--peers", "finegemm"))
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "host overhead" in out


# --- suites whose ops do not exist yet, through fakes ------------------------------------------------------


def _fake_contiguous(a, b, d, layout):
    """Per-expert dense calls (what the real op must equal)."""
    for e in range(b[0].shape[0]):
        rows = (layout == e).nonzero().flatten()
        if rows.numel():
            s, t = int(rows[0]), int(rows[-1]) + 1
            out = torch.empty(t - s, d.shape[1], dtype=d.dtype)
            finegemm.fp8_gemm_nt((a[0][s:t], a[1][s:t]), (b[0][e], b[1][e]), out)
            d[s:t] = out


def _fake_masked(a, b, d, masked_m, expected_m):
    for e in range(b[0].shape[0]):
        r = int(masked_m[e])
        out = torch.empty(r, d.shape[2], dtype=d.dtype)
        finegemm.fp8_gemm_nt((a[0][e, :r], a[1][e, :r]), (b[0][e], b[1][e]), out)
        d[e, :r] = out


def _fake_k_grouped(a, b, d, ks, ks_tensor, c=None):
    start, sf_start = 0, 0
    for e, kg in enumerate(ks):
        kb = -(-kg // 128)
        xa, sa = a[0][start:start + kg], a[1][sf_start:sf_start + kb]
        xb, sb = b[0][start:start + kg], b[1][sf_start:sf_start + kb]
        finegemm.fp8_gemm_nt((xa.T, sa.T), (xb.T, sb.T), d[e], c=d[e], recipe=(1, 1, 128))
        start, sf_start = start + kg, sf_start + kb


def _fake_mqa(q, kv, weights, ks, ke, clean_logits=True, max_seqlen_k=0, logits_dtype=torch.float32):
    kv64 = kv[0].float() * kv[1][:, None]
    score = torch.relu(torch.einsum("ihd,jd->ihj", q.float(), kv64))
    logits = torch.einsum("ihj,ih->ij", score, weights)
    cols = torch.arange(max_seqlen_k or kv64.shape[0])
    if max_seqlen_k:
        logits = torch.gather(logits, 1, (ks[:, None].long() + cols[None]).clamp(max=kv64.shape[0] - 1))
        inside = cols[None] < (ke - ks)[:, None]
    else:
        inside = (cols[None] >= ks[:, None]) & (cols[None] < ke[:, None])
    return torch.where(inside, logits, torch.full_like(logits, float("-inf"))).to(logits_dtype)


@pytest.mark.parametrize("suite,op,fake", [
    ("grouped", "m_grouped_fp8_gemm_nt_contiguous", _fake_contiguous),
    ("k-grouped", "k_grouped_fp8_gemm_tn_contiguous", _fake_k_grouped),
    ("mqa", "fp8_mqa_logits", _fake_mqa),
])
def test_future_suites_with_fakes(monkeypatch, suite, op, fake):
    monkeypatch.setattr(finegemm, op, fake, raising=False)
    if suite == "grouped":
        monkeypatch.setattr(finegemm, "m_grouped_fp8_gemm_nt_masked", _fake_masked, raising=False)
    cases = suites.suite_cases(suite, smoke=True)
    peers = [p for p in make_peers() if isinstance(p, FinegemmPeer)]
    results = run_cases(cases, peers, CPU, RunOptions(warmup=0, repeats=1, flush=False), None)
    for cr in results:
        r = cr.results["finegemm-portable"]
        assert r.status == "ok", (cr.case.name, r.status, r.reason)
        assert r.calc_diff < cr.case.tolerance
        assert cr.results["finegemm-sm90"].status == "skipped"


def test_future_suites_through_the_real_api_modules(monkeypatch):
    """The harness's calls against finegemm.api.grouped / attention, before __init__ exports them."""
    grouped = pytest.importorskip("finegemm.api.grouped")
    attention = pytest.importorskip("finegemm.api.attention")
    ops = ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked", "k_grouped_fp8_gemm_tn_contiguous")
    for name in ops:
        monkeypatch.setattr(finegemm, name, getattr(grouped, name), raising=False)
    monkeypatch.setattr(finegemm, "fp8_mqa_logits", attention.fp8_mqa_logits, raising=False)
    cases = [c for s in ("grouped", "k-grouped", "mqa", "paged-mqa") for c in suites.suite_cases(s, smoke=True)]
    peers = make_peers(["finegemm-portable"])
    for cr in run_cases(cases, peers, CPU, RunOptions(warmup=0, repeats=1, flush=False), None):
        r = cr.results["finegemm-portable"]
        assert r.status == "ok", (cr.case.name, r.status, r.reason)


def test_anchors_compare_matches_cases_and_flags_disagreement():
    """Live cuBLAS 20 % off its anchored figure is flagged; finegemm vs DeepGEMM = anchored µs / live µs."""
    from finegemm.bench import anchors

    anch = {
        "dense": [{"M": 64, "N": 2112, "K": 7168, "deepgemm_us": 12.0, "cublas_block_us": 24.0, "bf16_us": 20.0}],
        "fp8_gemm_test_sweep": [
            {"M": 576, "N": 4096, "K": 7168, "kernel": "1D2D", "accumulate": 0, "deepgemm_us": 1.0},
            {"M": 576, "N": 4096, "K": 7168, "kernel": "1D1D", "accumulate": 1, "deepgemm_us": 60.0}],
        "bf16_gemm": [{"M": 64, "N": 2112, "K": 7168, "accumulate": 1, "deepgemm_us": 30.0}],
        "k_grouped": [{"groups": 4, "M": 4096, "N": 7168, "K_total": 34304, "deepgemm_us": 1942}],
    }

    def peer(us, ours=False):
        return {"status": "ok", "us": us, "finegemm": ours}

    doc = {"cases": [
        {"suite": "dense", "kind": "fp8_gemm", "name": "a", "M": 64, "N": 2112, "K": 7168,
         "peers": {"finegemm-sm90": peer(10.0, True), "cublas-block": peer(28.8), "cublas-bf16": peer(20.4)}},
        {"suite": "weight-grad", "kind": "fp8_gemm_wgrad", "name": "b", "M": 576, "N": 4096, "K": 7168,
         "peers": {"finegemm-sm90": peer(50.0, True)}},
        {"suite": "bf16", "kind": "bf16_gemm", "name": "c", "M": 64, "N": 2112, "K": 7168, "accumulate": False,
         "peers": {"finegemm-sm90": peer(5.0, True)}},  # anchors hold only accumulate=1: no match
        {"suite": "dense", "kind": "fp8_gemm", "name": "d", "M": 1, "N": 8, "K": 128, "peers": {}},
        {"suite": "k-grouped", "kind": "k_grouped", "name": "e", "M": 4096, "N": 7168, "K": 34304, "groups": 4,
         "peers": {"finegemm-sm90": peer(1900.0, True)}},
        {"suite": "k-grouped", "kind": "k_grouped", "name": "f", "M": 4096, "N": 7168, "K": 30000, "groups": 4,
         "peers": {"finegemm-sm90": peer(1900.0, True)}},  # another total K: no match
    ]}
    rows = anchors.compare(doc, anch)
    assert [r["name"] for r in rows] == ["a", "b", "e"]
    e = rows.pop()
    assert e["vs_deepgemm"] == {"finegemm-sm90": 1942 / 1900.0} and e["basis"] == {"finegemm-sm90": "events/kernel"}
    a, b = rows
    assert a["vs_deepgemm"] == {"finegemm-sm90": 12.0 / 10.0}
    assert abs(a["live_over_anchor"]["cublas-block"] - 1.2) < 1e-12 and a["disagree"] == ["cublas-block"]
    assert abs(a["live_over_anchor"]["cublas-bf16"] - 1.02) < 1e-12
    assert b["vs_deepgemm"] == {"finegemm-sm90": 60.0 / 50.0}  # the 1D1D accumulate entry, not the 1D2D one
    # DeepGEMM's weight-gradient figure is a profiler kernel time; this run has only events
    assert a["basis"] == {"finegemm-sm90": "events"} and b["basis"] == {"finegemm-sm90": "events/kernel"}
    text = anchors.report(rows)
    assert text.splitlines()[2] == "| a | 12.0 | 1.20x | events | 1.02 | 1.20 (!) |"
    assert text.splitlines()[3] == "| b | 60.0 | 1.20x | events/kernel | - | - |"
    assert "geometric mean 1.20x over 2 cases" in text
    assert "1 of them compare finegemm-sm90's event time" in text
    assert "1 of 2 figures; outside: a cublas-block" in text
    # with the run's kernel time (bench --kernel-time) the kernel-time anchors compare like for like; the
    # event-timed dense anchors keep the event time
    doc["cases"][0]["peers"]["finegemm-sm90"]["kernel_us"] = 8.0
    doc["cases"][1]["peers"]["finegemm-sm90"]["kernel_us"] = 48.0
    a, b, _ = anchors.compare(doc, anch)
    assert a["vs_deepgemm"] == {"finegemm-sm90": 12.0 / 10.0} and a["basis"] == {"finegemm-sm90": "events"}
    assert b["vs_deepgemm"] == {"finegemm-sm90": 60.0 / 48.0} and b["basis"] == {"finegemm-sm90": "kernel"}
    assert "compare finegemm-sm90's event time" not in anchors.report([a, b])


def test_grouped_cases_match_deepgemms_grouped_anchors():
    """The grouped suite's equal, full groups match the anchors' ``grouped`` entries of their kind (contiguous /
    masked), groups, rows per group, N and K; the 16- and 32-group decode cases and the half-empty ones none."""
    from finegemm.bench import anchors

    anch = {"grouped": [dict(kind=kind, groups=g, m_per_group=m, N=n, K=k, deepgemm_us=100.0)
                        for kind, gms in (("contig", suites.CONTIGUOUS_GM), ("masked", suites.MASKED_GM[:3]))
                        for g, m in gms for n, k in suites.MOE_NK]}
    matched = []
    for c in suites.grouped_cases():
        found = anchors.anchor_for(c.params(), anch)
        if found is None:
            assert c.groups >= 16, c.name
            continue
        field, entry = found
        want = "contig" if c.kind == "m_grouped_contiguous" else "masked"
        assert field == "grouped" and entry["kind"] == want and (entry["N"], entry["K"]) == (c.n, c.k)
        assert [entry["m_per_group"]] * entry["groups"] == list(c.ms)
        matched.append((entry["kind"], entry["groups"], entry["N"]))
    assert len(matched) == len(set(matched)) == len(anch["grouped"])


def test_paged_mqa_cases_match_deepgemms_paged_anchors():
    """The paged-mqa suite is DeepGEMM's paged anchors (same batch, next_n, heads, head_dim, average context and
    logits dtype), each matched by the anchors tool, then short-context / small-batch cases no anchor matches;
    contexts avg x U(0.7, 1.3); FLOPs over the keys each row sees (token t of next_n sees len - next_n + t + 1)."""
    from finegemm.bench import anchors

    cases = suites.paged_mqa_cases()
    assert len(suites.MQA_PAGED) == 14 and len(cases) == 14 + len(suites.MQA_PAGED_SHORT)
    anch = {"mqa": [dict(kind="paged", logits=out.upper(), batch=b, next_n=nn, heads=h, head_dim=128,
                         avg_context=avg, deepgemm_us=100.0) for b, nn, h, avg, out in suites.MQA_PAGED]}
    for i, c in enumerate(cases):
        assert len(c.ms) == c.m and all(int(0.7 * c.n) <= n <= int(1.3 * c.n) for n in c.ms)
        assert c.flops == 2 * c.heads * c.k * sum(n - c.next_n + t + 1 for n in c.ms for t in range(c.next_n))
        found = anchors.anchor_for(c.params(), anch)
        if i < 14:
            field, entry = found
            assert field == "mqa" and (entry["batch"], entry["avg_context"]) == (c.m, c.n)
        else:  # the short-context / small-batch cases beyond the anchors
            assert found is None
    assert "ms" not in cases[0].params() and cases[0].params()["context_total"] == sum(cases[0].ms)


def test_call_spans_separates_calls_at_each_flush():
    """timer.call_spans: each call's span from its first activity's start to its last one's end (overlapping
    launches once, launch latency not at all), calls told apart by the flush's activities in start order."""
    from finegemm.bench.timer import call_spans

    us = 1000  # ns
    run = [("fill", 0, 300 * us), ("gemm", 305 * us, 315 * us), ("reduce", 312 * us, 318 * us),  # PDL overlap
           ("fill", 320 * us, 620 * us), ("gemm", 630 * us, 641 * us), ("reduce", 640 * us, 642 * us)]
    assert call_spans(list(reversed(run)), ["fill"], 2) == [13.0, 12.0]
    assert call_spans([("fill", 0, 5), ("fill", 10, 15)], ["fill"], 0) == [0.0, 0.0]  # a call with no work
    with pytest.raises(ValueError, match="not calls of"):
        call_spans(run[:-1], ["fill"], 2)
    with pytest.raises(ValueError, match="expected the flush"):
        call_spans(run, ["memset"], 2)


def test_flush_modes():
    from finegemm.bench.timer import L2Flush

    with pytest.raises(ValueError, match="flush mode must be one of"):
        L2Flush(CPU, mode="evict")
    for mode in ("zero", "read"):
        flush = L2Flush(CPU, mode=mode)  # a no-op off the GPU
        flush()
        assert flush.mode == mode and flush.buf is None


def test_kernel_time_needs_the_flush(capsys):
    assert cli.main(_args("--smoke", "--kernel-time", "--no-flush")) == 2
    assert "--kernel-time needs the L2 flush" in capsys.readouterr().err


def test_cases_filter_keeps_matching_names_in_order():
    args = _args("--suite", "bf16", "--cases", "4096x*+c,4096x576x7168")
    args.smoke = False
    cases, _ = cli.build_cases(args)
    names = [c.name for c in cases]
    assert names and all(n == "4096x576x7168" or (n.startswith("4096x") and n.endswith("+c")) for n in names)
    assert "4096x576x7168" in names and "4096x576x7168+c" in names and "4096x7168x16384+c" in names
    full = [c.name for c in suites.bf16_cases()]
    assert names == [n for n in full if n in names]  # the suite's order


def test_cases_filter_rejects_a_pattern_matching_nothing(capsys):
    args = _args("--suite", "bf16", "--cases", "4096x*+c,9x9x9")
    args.smoke = False
    with pytest.raises(ValueError, match=r"--cases: \['9x9x9'\] match no case"):
        cli.build_cases(args)
    assert cli.main(_args("--smoke", "--cases", "nothing-like-this")) == 2
    assert "--cases" in capsys.readouterr().err


def _deepgemm_by_its_signatures():
    """A stand-in ``deep_gemm`` whose functions take exactly DeepGEMM 2.6.1's parameters (names, order, defaults:
    tests/data/deepgemm_api.json) and run finegemm's; a call DeepGEMM would refuse raises TypeError here too."""
    import types

    from deepgemm_api import API_TABLE, signature_of

    fake = types.ModuleType("deep_gemm")
    for name, entry in API_TABLE["entries"].items():
        if entry["module"] != "deep_gemm" or entry["sm100_only"] or "params" not in entry or entry.get("kind"):
            continue
        if any(spec.get("kind") for spec in entry["params"]) or not hasattr(finegemm, name):
            continue
        sig = signature_of(entry)
        setattr(fake, name, _bound_to(sig, getattr(finegemm, name)))
    schedule = fake.get_paged_mqa_logits_metadata

    def sm90_schedule(context_lens, *args, **kwargs):  # DeepGEMM 2.6.1's host check (csrc/apis/attention.hpp)
        if context_lens.dim() != 2:
            raise RuntimeError("Assertion error (csrc/apis/attention.hpp:200): context_lens.dim() == 2")
        return schedule(context_lens, *args, **kwargs)
    fake.get_paged_mqa_logits_metadata = sm90_schedule
    return fake


def _bound_to(sig, fn):
    """``fn`` called only with arguments that bind to ``sig`` (else the TypeError DeepGEMM's binding raises)."""
    def strict(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        return fn(*bound.args, **bound.kwargs)
    return strict


def test_deepgemm_peer_calls_take_deepgemms_own_signatures(monkeypatch):
    """Every suite's call by the ``deepgemm`` peer binds to DeepGEMM 2.6.1's signatures (not finegemm's wider
    ones: a ``logits_dtype`` passed to ``fp8_mqa_logits`` made DeepGEMM refuse all 14 mqa cases on the card) and
    gives the right result, here through finegemm's CPU path behind those signatures."""
    from finegemm.bench.peers import DeepGemmPeer

    peer = DeepGemmPeer()
    peer._mod = _deepgemm_by_its_signatures()
    monkeypatch.setattr(peer, "available", lambda device: None)
    # the peer sizes DeepGEMM's paged schedule by the GPU's SM count
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: argparse.Namespace(multi_processor_count=4))
    cases = [c for s in ("dense", "grouped", "k-grouped", "mqa", "paged-mqa", "hc-prenorm")
             for c in suites.suite_cases(s, smoke=True)]
    assert any(c.kind == "mqa_logits" and c.out != "fp32" for c in cases)
    for cr in run_cases(cases, [peer], CPU, RunOptions(warmup=0, repeats=1, flush=False), None):
        r = cr.results["deepgemm"]
        assert r.status == "ok", (cr.case.name, r.status, r.reason)
        assert r.calc_diff < cr.case.tolerance, (cr.case.name, r.calc_diff)


def test_tree_commit_prefers_the_commit_file(tmp_path):
    """A device's copy of the tree carries the commit in ``.commit`` (its git, if any, is not the tree's); outside
    git and without the file the commit is "unknown"."""
    from finegemm.bench.sysinfo import tree_commit

    assert tree_commit(tmp_path) == "unknown"
    (tmp_path / ".commit").write_text("abc1234\n")
    assert tree_commit(tmp_path) == "abc1234"
