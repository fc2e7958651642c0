"""FINEGEMM_PTXAS (finegemm/jit/ptxas.py): which ptxas the kernels are compiled with, chosen on the CPU."""

from __future__ import annotations

import os
import stat

import pytest

from finegemm.jit import ptxas


def _fake_ptxas(tmp_path, name: str, release: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _clear_caches() -> None:
    """Forget the versions and options read so far: a test's fake ptxas or faked bundled version must not outlive
    it (a cached ``_fp8_gemm_options`` of a faked 12.8 took level 10 from later compiles under 3.9's 13.4)."""
    ptxas.ptxas_version.cache_clear()
    ptxas._fp8_gemm_options.cache_clear()


@pytest.fixture
def fakes(tmp_path):
    _clear_caches()
    yield {r: _fake_ptxas(tmp_path, f"ptxas-{r}", r) for r in ("12.8", "12.9", "13.0")}
    _clear_caches()


def test_versions_are_read_from_the_binary(fakes, tmp_path):
    assert ptxas.ptxas_version(fakes["12.9"]) == (12, 9)
    assert ptxas.ptxas_version(str(tmp_path / "missing")) is None


def test_auto_takes_the_newest_interleaving_ptxas_the_driver_supports(fakes):
    paths = list(fakes.values())
    assert ptxas.choose("auto", paths, None) == fakes["13.0"]
    assert ptxas.choose("auto", paths, (12, 9)) == fakes["12.9"]  # a 13.0 cubin may not load on a 12.9 driver
    assert ptxas.choose(" AUTO ", paths, (13, 0)) == fakes["13.0"]
    # 12.8 (Triton 3.6's own) does not interleave the FFMA yield bits: auto leaves Triton's choice alone
    assert ptxas.choose("auto", [fakes["12.8"]], None) is None
    assert ptxas.choose("auto", paths, (12, 8)) is None
    # never below what Triton bundles: a later Triton bundling 13.0 keeps its own
    assert ptxas.choose("auto", paths, None, bundled=(13, 0)) is None
    assert ptxas.choose("auto", paths, None, bundled=(12, 8)) == fakes["13.0"]


def test_empty_keeps_tritons_and_a_path_must_run(fakes, tmp_path):
    assert ptxas.choose("", list(fakes.values()), None) is None
    assert ptxas.choose(fakes["12.8"], [], None) == fakes["12.8"]  # an explicit path is taken as given
    with pytest.raises(ValueError, match="FINEGEMM_PTXAS"):
        ptxas.choose(str(tmp_path / "missing"), [], None)


@pytest.mark.parametrize("version, variable", [
    ("3.6.0", "TRITON_PTXAS_PATH"), ("3.7.1", "TRITON_PTXAS_PATH"), ("3.8.0", "TRITON_PTXAS_PATH"),
    ("3.9.0", "TRITON_PTXAS_BLACKWELL_PATH"), ("3.10.0", "TRITON_PTXAS_BLACKWELL_PATH"),
])
def test_the_variable_follows_the_release(monkeypatch, version, variable):
    import triton

    monkeypatch.setattr(triton, "__version__", version)
    assert ptxas.sm90_variable() == variable


def test_the_installed_triton_runs_the_chosen_ptxas_for_sm90(fakes, monkeypatch):
    """The variable :func:`ptxas.apply` sets is the one the installed release's compiler reads for sm_90 (3.9 runs
    ptxas-blackwell from sm_90 on; 3.6-3.8 ptxas), and sm_80 keeps the other tool on 3.9."""
    from triton.backends.nvidia.compiler import get_ptxas

    other = ({"TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"} - {ptxas.sm90_variable()}).pop()
    monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(ptxas.sm90_variable(), fakes["13.0"])
    assert get_ptxas(90).path == fakes["13.0"] == ptxas.in_use()
    assert ptxas.version_at(ptxas.in_use()) == (13, 0)
    monkeypatch.delenv(ptxas.sm90_variable())
    assert get_ptxas(90).path.endswith(os.path.join("bin", ptxas._bundled_name()))
    assert ptxas.in_use() is None and ptxas.version_at(None) == ptxas.bundled_version()


def test_apply_leaves_a_user_set_triton_ptxas_path(fakes, monkeypatch):
    var = ptxas.sm90_variable()
    monkeypatch.setenv(var, fakes["12.8"])
    assert ptxas.apply("auto") == fakes["12.8"]
    assert os.environ[var] == fakes["12.8"]
    monkeypatch.delenv(var)
    monkeypatch.setattr(ptxas, "candidates", lambda: list(fakes.values()))
    monkeypatch.setattr(ptxas, "driver_cuda_version", lambda: (12, 9))
    monkeypatch.setattr(ptxas, "bundled_version", lambda: (12, 8))
    assert ptxas.apply("auto") == fakes["12.9"] == os.environ[var]
    monkeypatch.delenv(var)
    assert ptxas.apply("") is None and var not in os.environ


def test_fp8_gemm_options_add_level_10_only_under_an_interleaving_ptxas(fakes, monkeypatch):
    """ptxas 13.0 at --register-usage-level=10 is the measured win (commit 26f8c93); 12.8 at level 10 lost 4 % at
    4096x2112x7168, so the bundled ptxas keeps the default level. The user's PTXAS_OPTIONS are kept."""
    monkeypatch.delenv("PTXAS_OPTIONS", raising=False)
    var = ptxas.sm90_variable()
    monkeypatch.setenv(var, fakes["13.0"])
    assert ptxas.fp8_gemm_options() == ptxas.REGISTER_USAGE_LEVEL == "--register-usage-level=10"
    assert ptxas.fp8_gemm_options(per_channel=True) is None  # recipe (1, 1, 128): ptxas's default level
    monkeypatch.setenv(var, fakes["12.8"])
    assert ptxas.fp8_gemm_options() is None
    monkeypatch.setenv("PTXAS_OPTIONS", "-v")
    assert ptxas.fp8_gemm_options() == "-v"
    monkeypatch.setenv(var, fakes["12.9"])
    assert ptxas.fp8_gemm_options() == "-v --register-usage-level=10"
    assert ptxas.fp8_gemm_options(per_channel=True) == "-v"
    monkeypatch.setenv("PTXAS_OPTIONS", "--register-usage-level=7")  # the user's own level wins
    assert ptxas.fp8_gemm_options() == "--register-usage-level=7"
    monkeypatch.delenv(var)
    monkeypatch.delenv("PTXAS_OPTIONS")
    monkeypatch.setattr(ptxas, "bundled_version", lambda: (12, 8))
    ptxas._fp8_gemm_options.cache_clear()
    assert ptxas.fp8_gemm_options() is None


def test_the_dense_and_grouped_launches_carry_the_fp8_options(monkeypatch):
    """The per-launch ``ptx_options`` reach the FP8 GEMM kernels' compile (CPU: the compile_check path, which
    passes the same function's value) and change the SASS: level 10 is not a no-op."""

    from finegemm.jit.device import H200
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.kernels.sm90 import compile_check
    from finegemm.kernels.sm90.dispatch import get_config

    version = ptxas.version_at(ptxas.in_use())
    if version is None or version < ptxas.MIN_VERSION:
        pytest.skip(f"needs a ptxas >= 12.9 in use (FINEGEMM_PTXAS=auto found none; in use: {version})")
    desc = GemmDesc("fp8_1d2d", 4096, 4096, 7168)
    config = get_config(desc, H200)
    monkeypatch.delenv("PTXAS_OPTIONS", raising=False)
    with_level = compile_check.compile_variant(desc, config)
    assert with_level.metadata.ptx_options == ptxas.REGISTER_USAGE_LEVEL
    monkeypatch.setenv("PTXAS_OPTIONS", "--register-usage-level=5")
    default_level = compile_check.compile_variant(desc, config)
    assert default_level.metadata.ptx_options == "--register-usage-level=5"
    assert compile_check.sass(with_level) != compile_check.sass(default_level)


def test_choosing_a_ptxas_at_import_keeps_the_cpu_interpreter(fakes):
    """Regression: applying FINEGEMM_PTXAS at import once read the bundled ptxas's version through ``import triton``
    before finegemm had turned the interpreter on, and every portable kernel then failed on a CPU ("Cannot call
    @triton.jit'd outside of the scope of a kernel"). Any ptxas choice must leave the interpreter path working."""
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("the interpreter path is the CPU's")
    code = (
        "import os, torch, finegemm\n"
        "from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8\n"
        "from finegemm.reference import calc_diff\n"
        "var = os.environ['EXPECT_VARIABLE']\n"
        "assert os.environ.get(var) == os.environ['EXPECT_PTXAS'], os.environ.get(var)\n"
        "assert os.environ.get('TRITON_INTERPRET') == '1'\n"
        "g = torch.Generator().manual_seed(0)\n"
        "a, b = torch.randn(64, 256, generator=g), torch.randn(128, 256, generator=g)\n"
        "d = torch.empty(64, 128, dtype=torch.bfloat16)\n"
        "finegemm.fp8_gemm_nt(per_token_cast_to_fp8(a), per_block_cast_to_fp8(b), d)\n"
        "diff = calc_diff(d.double(), a.double() @ b.double().T)\n"
        "assert diff < 2e-3, diff\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_INTERPRET")}
    env.update(FINEGEMM_PTXAS=fakes["13.0"], EXPECT_PTXAS=fakes["13.0"], EXPECT_VARIABLE=ptxas.sm90_variable())
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
