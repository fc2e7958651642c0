"""``python -m finegemm warmup``: the kernels it enumerates are the ones the public API picks, its inputs, its output,
and a real sm_90 compile into a cache that a second run finds (CPU)."""

from __future__ import annotations

import json

import pytest
import torch

import finegemm
from finegemm import warmup, warmup_run
from finegemm.__main__ import main
from finegemm.api import dispatch as api_dispatch
from finegemm.jit import releases
from finegemm.jit.device import H200
from finegemm.kernels.sm90 import dispatch as sm90_dispatch
from finegemm.kernels.sm90 import dispatch_grouped as sm90_grouped

# the tests that expect sm90 picks: on an untested Triton dispatch may fall back to the portable kernels
needs_sm90 = pytest.mark.skipif(not releases.is_tested(),
                                reason=f"Triton {releases.triton_version()} is not a tested release")

FP8 = torch.float8_e4m3fn
# M values around every rule boundary of the dense and grouped sm90 rules (64, 128, 256 rows), the Triton
# specialization boundaries (1, multiples of 16, M whose 4-aligned scale stride is a multiple of 16), and one large M
DENSE_MS = [*range(1, 19), 31, 32, 63, 64, 65, 77, 80, 127, 128, 129, 141, 255, 256, 257, 272, 4096]
CALLS = [warmup.WarmupCall("dense", 7168, 2048), warmup.WarmupCall("masked", 7168, 2048, 4, 256),
         warmup.WarmupCall("contiguous", 7168, 2048, 4)]


@pytest.fixture
def api_picks(monkeypatch):
    """The public API run on CPU tensors as on an H200: every sm90 launch recorded as (desc, config), none run."""
    picks = []
    monkeypatch.setattr(api_dispatch, "device_facts", lambda device: H200)
    monkeypatch.setattr(sm90_dispatch, "fp8_gemm", lambda desc, config, *args: picks.append((desc, config)))
    for name in ("m_grouped_fp8_1d2d_gemm_masked", "m_grouped_fp8_1d2d_gemm_contiguous"):
        monkeypatch.setattr(sm90_grouped, name, lambda desc, config, *args: picks.append((desc, config)))
    return picks


def _api_call(call: warmup.WarmupCall, m: int) -> None:
    """The public call a model makes for ``call`` at M = ``m`` (operands in the layouts the API requires)."""
    sfk, sfn = call.k // 128, -(-call.n // 128)
    if call.op == "dense":
        a = (torch.zeros(m, call.k, dtype=FP8), finegemm.get_mn_major_tma_aligned_tensor(torch.ones(m, sfk)))
        b = (torch.zeros(call.n, call.k, dtype=FP8), torch.ones(sfn, sfk))
        finegemm.fp8_gemm_nt(a, b, torch.empty(m, call.n, dtype=torch.bfloat16))
        return
    g = call.groups
    b = (torch.zeros(g, call.n, call.k, dtype=FP8), torch.ones(g, sfn, sfk))
    if call.op == "masked":
        a = (torch.zeros(g, call.max_m, call.k, dtype=FP8),
             finegemm.get_mn_major_tma_aligned_tensor(torch.ones(g, call.max_m, sfk)))
        d = torch.empty(g, call.max_m, call.n, dtype=torch.bfloat16)
        finegemm.m_grouped_fp8_gemm_nt_masked(a, b, d, torch.full((g,), m, dtype=torch.int32), m)
        return
    rows = -(-m // 128) * 128
    a = (torch.zeros(rows, call.k, dtype=FP8), finegemm.get_mn_major_tma_aligned_tensor(torch.ones(rows, sfk)))
    layout = (torch.arange(rows) // 128).clamp(max=g - 1).to(torch.int32)
    finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, torch.empty(rows, call.n, dtype=torch.bfloat16), layout)


@needs_sm90
def test_enumerated_kernels_are_what_the_api_picks_at_each_m(api_picks):
    plans = warmup.enumerate_kernels(CALLS, DENSE_MS, H200, "auto")
    plan_of = {(plan.call, m): plan for plan in plans for m in plan.ms}
    expected = set()
    for call in CALLS:
        for m in DENSE_MS:
            if call.op == "masked" and m > call.max_m:
                assert (call, m) not in plan_of
                continue
            api_picks.clear()
            _api_call(call, m)
            assert len(api_picks) == 1, (call, m)
            desc, config = api_picks[0]
            assert desc == warmup.call_desc(call, m)  # the warm-up builds the API's desc
            plan = plan_of[(call, m)]
            assert plan.kernel.backend == "sm90" and plan.kernel.config == config
            # launch ints that follow M: M itself and the LHS scales' K stride (dense and contiguous calls)
            if call.op != "masked":
                rows = desc.m
                stride = -(-rows // 4) * 4
                classes = tuple("1" if v == 1 else "D" if v % 16 == 0 else "" for v in (rows, stride))
                assert plan.kernel.ints == classes
            expected.add((call, config, plan.kernel.ints))
    # one kernel per distinct (call, config, specialization) the API met, each compiled at the first M needing it
    assert {(p.call, p.kernel.config, p.kernel.ints) for p in plans} == expected
    assert len(plans) == len(expected)
    assert all(p.ms == sorted(p.ms) and plan_of[(p.call, p.ms[0])] is p for p in plans)


def test_many_m_share_few_kernels_in_the_deepseek_preset():
    calls = warmup.preset("deepseek-v3", groups=32, max_m=256)
    assert len(calls) == 10 and {c.op for c in calls} == set(warmup.OPS)
    ms = warmup.parse_m_values("1-512")
    plans = warmup.enumerate_kernels(calls, ms, H200, "auto")
    # every (call, M) maps to exactly one kernel
    covered = [(p.call, m) for p in plans for m in p.ms]
    assert len(covered) == len(set(covered)) == 6 * 512 + 2 * 256 + 2 * 512
    assert len(plans) < len(ms)  # DeepGEMM's JIT compiles one kernel per M per shape
    # dense M in 2-12 (no specialization) share one kernel per dense shape
    for call in calls[:6]:
        assert len({p.kernel for p in plans if p.call == call and {2, 12} <= set(p.ms)}) == 1


def test_parse_m_values():
    assert warmup.parse_m_values("1-4,64, 3") == [1, 2, 3, 4, 64]
    for bad in ("", "0-4", "8-4", "a", "1-", "1,,2"):
        with pytest.raises(ValueError, match="--m"):
            warmup.parse_m_values(bad)


def test_parse_shapes_text_and_json():
    text = "# model\ndense 2112 7168\nmasked 4096 7168 8 128  # decode\ncontiguous 7168 2048 8\n\n"
    calls = warmup.parse_shapes(text)
    assert calls == [warmup.WarmupCall("dense", 2112, 7168), warmup.WarmupCall("masked", 4096, 7168, 8, 128),
                     warmup.WarmupCall("contiguous", 7168, 2048, 8)]
    doc = json.dumps([{"op": "dense", "n": 2112, "k": 7168}, {"op": "masked", "n": 4096, "k": 7168, "groups": 8}])
    assert warmup.parse_shapes(doc) == [warmup.WarmupCall("dense", 2112, 7168),
                                        warmup.WarmupCall("masked", 4096, 7168, 8, warmup.DEFAULT_MAX_M)]


@pytest.mark.parametrize("text, match", [
    ("dense 2112", r"line 1: needs 'op N K"),
    ("dense 2112 7168\nsparse 1 128", r"line 2: op must be one of"),
    ("dense 2112 7k", r"line 1: N, K, groups and max_m must be integers"),
    ("dense 2112 7000", r"k must be a multiple of 128"),
    ("dense 2112 7168 8", r"a dense call has groups=1"),
    ("contiguous 2112 7168 8 64", r"max_m is a positive int of masked calls only"),
    ("masked 0 7168 8", r"n must be a positive int"),
    ("# nothing\n", r"no calls found"),
    ("[{\"op\": \"dense\", \"n\": 1}]", r"item 0: needs an object with op, n, k"),
    ("[{\"op\": \"dense\", \"n\": 1, \"k\": 128, \"m\": 4}]", r"item 0: unknown keys \['m'\]"),
    ("[{\"op\": \"dense\", \"n\": \"1\", \"k\": 128}]", r"item 0: n must be a positive int, got '1'"),
    ("{\"op\": \"dense\"}", r"JSON must be a list"),
    ("[1, 2", r"not valid JSON"),
])
def test_parse_shapes_rejects_bad_input(text, match):
    with pytest.raises(ValueError, match=match):
        warmup.parse_shapes(text, "shapes.txt")


@needs_sm90
def test_dry_run_lists_the_kernels(tmp_path, capsys):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("dense 7168 2048\nmasked 7168 2048 4 64\n")
    summary_path = tmp_path / "summary.json"
    assert main(["warmup", "--shapes", str(shapes), "--m", "1-20,4096", "--dry-run", "--json", str(summary_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    # dense: M 1 / 2-12,17-20 / 13-15 (scale stride 16) / 16 at 64-row tiles, and 4096 -> 5; masked 1-20: one tile
    assert out[0].startswith("finegemm warmup: 2 calls x 21 M values -> 6 distinct kernels (sm90: 6)")
    lines = out[1:]
    assert len(lines) == 6
    assert [line.rsplit("| M ", 1)[1] for line in lines] == ["1", "2-12,17-20", "13-15", "16", "4096", "1-20"]
    assert lines[5].startswith("  masked N=7168 K=2048 groups=4 max_m=64 | sm90 Sm90Config(block_m=64, block_n=64")
    summary = json.loads(summary_path.read_text())
    assert summary["kernels"] == 6 and summary["mode"] == "dry-run" and "compiled_kernels" not in summary


def test_cli_reports_bad_input(tmp_path, capsys):
    shapes = tmp_path / "bad.txt"
    shapes.write_text("dense 2112\n")
    assert main(["warmup", "--shapes", str(shapes), "--dry-run"]) == 2
    assert "bad.txt line 1: needs 'op N K" in capsys.readouterr().err
    assert main(["warmup", "--m", "0-3", "--dry-run"]) == 2
    assert main(["warmup", "--num-sms", "0", "--dry-run"]) == 2


def test_without_gpu_only_dry_run_or_compile_only():
    if torch.cuda.is_available():
        pytest.skip("a GPU machine warms up for real")
    with pytest.raises(ValueError, match="no CUDA GPU here"):
        warmup_run.run([warmup.WarmupCall("dense", 7168, 2048)], [1], jobs=1)


@needs_sm90
def test_compile_only_fills_a_cache_that_a_second_run_finds(tmp_path, monkeypatch, capsys):
    """Two sm90 kernels compiled for sm_90 into a fresh cache; a second run compiles nothing."""
    import triton

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(triton.knobs.compilation, "listener", None)
    calls = [warmup.WarmupCall("dense", 7168, 2048), warmup.WarmupCall("masked", 7168, 2048, 2, 64)]
    first = warmup_run.run(calls, [2, 3], jobs=1, compile_only=True)
    assert (first["kernels"], first["warmed"], first["compiled_kernels"], first["cached_kernels"]) == (2, 2, 2, 0)
    assert first["triton_compiles"] == 2 and first["triton_cache_hits"] == 0
    assert any((tmp_path / "cache").iterdir())
    second = warmup_run.run(calls, [2, 3], jobs=1, compile_only=True)
    assert (second["compiled_kernels"], second["cached_kernels"]) == (0, 2)
    assert second["triton_compiles"] == 0 and second["triton_cache_hits"] == 2
    assert "compiled 0, found in cache 2" in capsys.readouterr().out
