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


def test_check_runs():
    out = _run("check")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(" ok") == 8


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
