"""tools/warmup_bench.py's steps, its child processes stubbed: DeepGEMM is run again until a process compiles
nothing, so the record ends with its fully warm start."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load():
    spec = importlib.util.spec_from_file_location("warmup_bench", os.path.join(ROOT, "tools", "warmup_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _args(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("dense 2112 7168\n")
    return argparse.Namespace(preset=None, shapes=str(shapes), m="1,64", groups=8, max_m=256, num_sms=None, jobs=2,
                              timeout=55.0, skip_deepgemm=False)


def _stub_child(new_kernels: list[int], timed_out: set[int]):
    """A ``_child`` whose DeepGEMM serving processes add ``new_kernels[i]`` kernel directories on their i-th run
    (and end by the timeout on the runs in ``timed_out``)."""
    runs = {"deepgemm": 0}

    def child(argv, env_extra, timeout):
        out = argv[argv.index("--json") + 1] if "--json" in argv else argv[argv.index("--serve-out") + 1]
        if "--serve" in argv and argv[argv.index("--serve") + 1] == "deepgemm":
            i = runs["deepgemm"]
            runs["deepgemm"] += 1
            cache = os.path.join(env_extra["DG_JIT_CACHE_DIR"], "cache")
            os.makedirs(cache, exist_ok=True)
            start = len(os.listdir(cache))
            for k in range(new_kernels[i]):
                os.makedirs(os.path.join(cache, f"kernel.{start + k}"))
            if i in timed_out:
                return timeout, -1, "timed out"
        with open(out, "w") as f:
            json.dump({"pairs": 2}, f)
        return 1.0, 0, ""

    return child, runs


def test_deepgemm_runs_until_a_process_compiles_nothing(tmp_path, monkeypatch):
    wb = _load()
    child, runs = _stub_child([13, 6, 0, 0], timed_out={0})
    monkeypatch.setattr(wb, "_child", child)
    result = wb.bench(_args(tmp_path))
    assert runs["deepgemm"] == 3
    steps = [(k, result[k]["compiled_by_this_step"], result[k]["compiled_kernels_in_cache"], result[k]["rc"])
             for k in ("deepgemm_cold", "deepgemm_warm", "deepgemm_warm_2")]
    assert steps == [("deepgemm_cold", 13, 13, -1), ("deepgemm_warm", 6, 19, 0), ("deepgemm_warm_2", 0, 19, 0)]
    assert "deepgemm_warm_3" not in result
    assert {"finegemm_cold", "finegemm_warm", "finegemm_serve"} <= set(result)


def test_deepgemm_steps_are_bounded(tmp_path, monkeypatch):
    wb = _load()
    child, runs = _stub_child([5, 5, 5, 5], timed_out={0, 1, 2, 3})
    monkeypatch.setattr(wb, "_child", child)
    result = wb.bench(_args(tmp_path))
    assert runs["deepgemm"] == len(wb.DEEPGEMM_STEPS)
    assert result["deepgemm_warm_3"]["compiled_kernels_in_cache"] == 20
