"""The opt-in ``deep_gemm`` alias: the module paths vLLM, SGLang and DeepGEMM's own tests import, in fresh
interpreters (the alias changes import state), through the ``finegemm-deep-gemm.pth`` line as site runs it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import _finegemm_deep_gemm_hook as hook
from finegemm.jit import env

ROOT = Path(__file__).resolve().parents[1]
PTH = ROOT / "finegemm-deep-gemm.pth"
DEEPGEMM_ARCHIVE = Path("/work/shared/anchors/deepgemm/deepgemm-2.6.1-src.tar.xz")
# DeepGEMM 2.6.1's SM90 test files (tools/run_deepgemm_tests.sh runs them on a GPU)
DEEPGEMM_TESTS = ("generators.py", "test_fp8_fp4.py", "test_bf16.py", "test_attention.py", "test_layout.py",
                  "test_einsum.py", "test_hyperconnection.py", "test_lazy_init.py")


def _run(code: str, switch: str | None, sitedir: Path, extra_path: str | None = None) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter after ``site.addsitedir`` of a directory holding the .pth, as site does for
    site-packages at start-up."""
    environment = {k: v for k, v in os.environ.items() if k != hook.SWITCH}
    if switch is not None:
        environment[hook.SWITCH] = switch
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, str(ROOT)) if p)
    prelude = f"import site; site.addsitedir({str(sitedir)!r})\n"
    return subprocess.run([sys.executable, "-c", prelude + code], env=environment, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def sitedir(tmp_path):
    d = tmp_path / "site"
    d.mkdir()
    (d / PTH.name).write_text(PTH.read_text())
    return d


def test_switch_is_the_documented_one():
    assert hook.SWITCH == env.AS_DEEP_GEMM.name and env.AS_DEEP_GEMM in env.ALL_SWITCHES


def test_off_unless_asked(sitedir):
    for switch in (None, "0", ""):
        out = _run("import importlib.util, sys\n"
                   "assert importlib.util.find_spec('deep_gemm') is None\n"
                   "assert 'finegemm' not in sys.modules and 'torch' not in sys.modules\n", switch, sitedir)
        assert out.returncode == 0, out.stderr


ENGINE_IMPORTS = """
import importlib, importlib.util, sys
assert 'torch' not in sys.modules  # the .pth itself imports nothing heavy
assert importlib.util.find_spec('deep_gemm') is not None  # vLLM's has_deep_gemm()
import deep_gemm
import finegemm
dg = importlib.import_module('deep_gemm')
for name in ('fp8_gemm_nt', 'm_grouped_fp8_gemm_nt_contiguous', 'fp8_m_grouped_gemm_nt_masked',
             'm_grouped_fp8_gemm_nt_masked', 'fp8_mqa_logits', 'fp8_paged_mqa_logits',
             'get_paged_mqa_logits_metadata', 'get_num_sms', 'transform_sf_into_required_layout',
             'get_mk_alignment_for_contiguous_layout', 'bf16_gemm_nt', 'tf32_hc_prenorm_gemm'):
    assert getattr(dg, name) is getattr(finegemm, name), name
from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor  # SGLang
from deep_gemm.utils import get_m_alignment_for_contiguous_layout  # older vLLM
"""


def test_engine_module_paths(sitedir):
    code = ENGINE_IMPORTS + """
import deep_gemm.utils, deep_gemm.utils.layout, deep_gemm.utils.math, deep_gemm.testing
from deep_gemm import ceil_div, get_m_alignment_for_contiguous_layout as f  # lmdeploy's form
assert deep_gemm.utils.get_m_alignment_for_contiguous_layout() == finegemm.get_mk_alignment_for_contiguous_layout()
assert get_mn_major_tma_aligned_tensor is finegemm.get_mn_major_tma_aligned_tensor
assert deep_gemm.utils.layout is sys.modules['deep_gemm.utils.layout'] and deep_gemm.__path__ == []
from deep_gemm.testing import bench_kineto, calc_diff, count_bytes, get_arch_major, test_filter, ignore_env
assert deep_gemm.__version__ == '2.6.1' and deep_gemm.__finegemm_version__ == finegemm.__version__
"""
    out = _run(code, "1", sitedir)
    assert out.returncode == 0, out.stderr


def test_a_real_deep_gemm_wins(sitedir, tmp_path):
    real = tmp_path / "real"
    (real / "deep_gemm" / "utils").mkdir(parents=True)
    (real / "deep_gemm" / "__init__.py").write_text("REAL = True\n")
    (real / "deep_gemm" / "utils" / "__init__.py").write_text("REAL_UTILS = True\n")
    out = _run("import warnings; warnings.simplefilter('always')\n"
               "import deep_gemm, deep_gemm.utils\n"
               "assert deep_gemm.REAL and deep_gemm.utils.REAL_UTILS\n", "1", sitedir, extra_path=str(real))
    assert out.returncode == 0, out.stderr
    assert "a real DeepGEMM is importable" in out.stderr


def test_alias_from_code_refuses_an_imported_deep_gemm(tmp_path):
    real = tmp_path / "real"
    (real / "deep_gemm").mkdir(parents=True)
    (real / "deep_gemm" / "__init__.py").write_text("REAL = True\n")
    code = ("import warnings, deep_gemm, finegemm\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    assert finegemm.alias_as_deep_gemm() is False\n"
            "assert 'does not replace it' in str(w[0].message) and deep_gemm.REAL\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": f"{real}{os.pathsep}{ROOT}"})
    assert out.returncode == 0, out.stderr


def _imported_names(source: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every ``import deep_gemm...`` / ``from deep_gemm... import name`` in a file."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "deep_gemm":
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] == "deep_gemm"]
    return found


@pytest.mark.skipif(not DEEPGEMM_ARCHIVE.exists(), reason="DeepGEMM 2.6.1's source archive is not here")
def test_deepgemm_test_files_import_through_the_alias(sitedir, tmp_path):
    """Every name DeepGEMM 2.6.1's SM90 test files import from deep_gemm resolves, and each module imports."""
    with tarfile.open(DEEPGEMM_ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith(tuple(f"tests/{f}" for f in DEEPGEMM_TESTS))]
        tar.extractall(tmp_path / "dg", members=members, filter="data")
    tests_dir = next((tmp_path / "dg").rglob("tests"))
    names = sorted({pair for f in DEEPGEMM_TESTS for pair in _imported_names((tests_dir / f).read_text())},
                   key=str)
    assert ("deep_gemm.utils", "per_token_cast_to_fp4") in names and ("deep_gemm.testing", "bench_kineto") in names
    checks = "\n".join(f"importlib.import_module({m!r})" if n is None else
                       f"assert hasattr(importlib.import_module({m!r}), {n!r}), ({m!r}, {n!r})" for m, n in names)
    modules = "\n".join(f"importlib.import_module({Path(f).stem!r})" for f in DEEPGEMM_TESTS)
    out = _run(f"import importlib, sys\nsys.path.insert(0, {str(tests_dir)!r})\n{checks}\n{modules}\n", "1", sitedir)
    assert out.returncode == 0, out.stderr


def _build(hook_name: str, tmp_path: Path) -> list[str]:
    """File names in the wheel that setuptools' PEP 517 / 660 hook ``hook_name`` builds from the repository."""
    out_dir = tmp_path / hook_name
    out_dir.mkdir()
    code = f"import setuptools.build_meta as b; print(b.{hook_name}({str(out_dir)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    wheel = out_dir / done.stdout.strip().splitlines()[-1]
    return zipfile.ZipFile(wheel).namelist()


@pytest.mark.parametrize("hook_name", ["build_wheel", "build_editable"])
def test_wheels_carry_the_pth(hook_name, tmp_path):
    """``pip install .`` and ``pip install -e .`` install what these wheels hold: the .pth at the top level."""
    names = _build(hook_name, tmp_path)
    assert PTH.name in names
    if hook_name == "build_wheel":
        assert "_finegemm_deep_gemm_hook.py" in names and "finegemm/deepgemm_alias/testing/bench.py" in names
