"""tools/sanitize_cases.py on the CPU: under the default backend (auto, as a user's call runs) dispatch takes, as on an
H200, the sm90 kernel of every sm90 family in at least one case and in every case of the racecheck set; the driver
runs a case and says which backend ran it."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from finegemm.api import attention, dispatch, plan_cache
from finegemm.bench.inputs import make_inputs
from finegemm.bench.peers import FinegemmPeer
from finegemm.jit.device import H200

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the sm90 kernel each family's calls reach (kernels/sm90: gemm_1d2d serves FP8 dense, weight-grad, m- and k-grouped)
SM90_KERNELS = {
    ("dense", "fp8_gemm"): {"fp8_gemm_kernel"}, ("weight-grad", "fp8_gemm_wgrad"): {"fp8_gemm_kernel"},
    ("bf16", "bf16_gemm"): {"bf16_gemm_kernel", "gemv_bf16_kernel"},
    ("grouped", "m_grouped_contiguous"): {"fp8_gemm_kernel"}, ("grouped", "m_grouped_masked"): {"fp8_gemm_kernel"},
    ("k-grouped", "k_grouped"): {"fp8_gemm_kernel"}, ("mqa", "mqa_logits"): {"mqa_logits_kernel"},
    ("paged-mqa", "paged_mqa_logits"): {"paged_mqa_logits_kernel", "paged_mqa_logits_ws_kernel"},
}


def _driver():
    spec = importlib.util.spec_from_file_location("sanitize_cases", os.path.join(ROOT, "tools", "sanitize_cases.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def as_on_an_h200(monkeypatch):
    """Dispatch sees an H200's facts for CPU tensors; the plans resolved so are forgotten before and after."""
    if dispatch.hopper_path_reason() is not None:
        pytest.skip(dispatch.hopper_path_reason())
    for module in (dispatch, attention):
        monkeypatch.setattr(module, "device_facts", lambda device: H200)
    plan_cache.clear_all()
    yield
    plan_cache.clear_all()


def test_every_sm90_family_reaches_its_sm90_kernel_as_on_an_h200(as_on_an_h200):
    """Each case's public call on CPU tensors with an H200's facts, the default backend, sm90 launches built and
    recorded instead of run (portable picks run in the interpreter)."""
    sc = _driver()
    picks = {}
    for case in sc.cases():
        call = FinegemmPeer("auto").prepare(case, make_inputs(case, torch.device("cpu"), 0))
        call.reset()
        with call.context(), sc.sm90_launches(launch=False) as launched:
            call.fn()
        picks[case.name] = (case, set(launched))
    for (suite, kind), kernels in SM90_KERNELS.items():
        reached = [name for name, (case, ran) in picks.items() if (case.suite, case.kind) == (suite, kind) and ran]
        assert reached, f"no {kind} case reaches an sm90 kernel"
        for name in reached:
            assert picks[name][1] <= kernels, (name, picks[name][1])
    assert {(c.suite, c.kind) for c, _ in picks.values()} == set(SM90_KERNELS)  # no family left unchecked
    for name in sc.RACE_SET:  # racecheck / synccheck are for the warp-specialized sm90 kernels
        assert picks[name][1], f"{name}: runs no sm90 kernel under the default backend"
    # FP32 rows of 333 columns are not 16-byte aligned for the sm90 TMA store: dispatch runs the portable kernel
    assert not picks["k-grouped 128x333 ks 0/384/128/0"][1]


def test_driver_runs_a_case_and_names_its_backend(capsys):
    sc = _driver()
    assert sc.main(["--cases", "paged b3 n2 h32 ctx 100/70/130 fp32"]) == 0
    out = capsys.readouterr().out
    assert "pass  portable" in out and "1/1 passed (auto, cpu)" in out, out
