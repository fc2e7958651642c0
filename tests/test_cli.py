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
