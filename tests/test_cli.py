"""The command line: info and demo run end to end (the demo through the interpreter on a CPU)."""

from __future__ import annotations

import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finegemm", *args], capture_output=True, text=True, timeout=300)


def test_info_reports_versions_and_backend():
    out = _run("info")
    assert out.returncode == 0, out.stderr
    for key in ("torch", "triton", "device", "backend", "cache dir", "FINEGEMM_BACKEND"):
        assert key in out.stdout


def test_demo_runs_and_passes():
    out = _run("demo", "--shape", "40,130,256")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(" yes") == 3 and "FAIL" not in out.stdout


def test_check_runs_every_family_and_passes():
    out = _run("check")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "FAIL" not in out.stdout and sum(line.startswith("PASS") for line in lines) == 28
    for op in ("fp8_gemm_tt recipe=(1, 1, 128)", "bf16_gemm_nn", "m_grouped_fp8_gemm_nt_masked",
               "k_grouped_fp8_gemm_nt_contiguous", "fp8_paged_mqa_logits", "fp8_einsum", "per_block_cast_to_fp8"):
        assert any(op in line for line in lines), op
    assert "28 passed, 0 failed" in lines[-1]


def test_check_fails_when_an_op_is_broken(monkeypatch):
    """A broken op (bf16_gemm_nn ignoring that b is [K, N]) and a raising one each give a FAIL line and exit 1; the
    same family unbroken exits 0."""
    import finegemm
    from finegemm import selftest

    lines: list[str] = []
    assert selftest.run(families=["dense_bf16"], out=lines.append) == 0
    assert "4 passed, 0 failed" in lines[-1]
    # b [K, N] read as if it were [N, K]: right shapes, wrong values
    monkeypatch.setattr(finegemm, "bf16_gemm_nn",
                        lambda a, b, d, c=None: finegemm.bf16_gemm_nt(a, b.reshape(b.shape[1], b.shape[0]), d, c))

    def raising(*args, **kwargs):
        raise RuntimeError("kernel config rejected")
    monkeypatch.setattr(finegemm, "bf16_gemm_tt", raising)
    lines.clear()
    assert selftest.run(families=["dense_bf16"], out=lines.append) == 1
    assert any(line.startswith("FAIL  bf16_gemm_nn") for line in lines)
    assert any(line.startswith("FAIL  bf16_gemm_tt") and "kernel config rejected" in line for line in lines)
    assert "2 passed, 2 failed" in lines[-1]


def test_bad_shape_argument():
    out = _run("demo", "--shape", "1,2")
    assert out.returncode != 0 and "M,N,K" in out.stderr


def test_info_names_the_ptxas_its_version_and_the_fp8_options(tmp_path):
    """info says which ptxas compiles the kernels (as FINEGEMM_PTXAS chose it), its release, and the FP8 GEMM
    kernels' extra ptxas options: level 10 under a ptxas >= 12.9, none under an older one."""
    import os
    import stat

    fakes = {}
    for release in ("12.8", "13.0"):
        path = tmp_path / f"ptxas-{release}"
        path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
        fakes[release] = str(path)
    for release, options in (("13.0", "--register-usage-level=10"), ("12.8", "(none)")):
        env = {k: v for k, v in os.environ.items()
               if k not in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "PTXAS_OPTIONS")}
        env["FINEGEMM_PTXAS"] = fakes[release]
        out = subprocess.run([sys.executable, "-m", "finegemm", "info"], capture_output=True, text=True, timeout=300,
                             env=env)
        assert out.returncode == 0, out.stderr
        line = next(x for x in out.stdout.splitlines() if x.startswith("ptxas "))
        assert fakes[release] in line and f"({release})" in line and options in line, line
