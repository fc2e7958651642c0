"""DeepGEMM's process-wide switches (``finegemm.runtime``): ``set_pdl`` is ``FINEGEMM_PDL`` and drops the recorded
launches that baked the old value in; the two switches finegemm has no use for accept a bool and reject anything
else."""

from __future__ import annotations

import os

import pytest
import torch

import finegemm
from finegemm.api import gemm, plan_cache
from finegemm.kernels.sm90 import launcher


@pytest.fixture
def restore_pdl():
    """FINEGEMM_PDL unset during the test (set_pdl writes os.environ), put back as it was afterwards."""
    saved = os.environ.pop("FINEGEMM_PDL", None)
    yield
    os.environ.pop("FINEGEMM_PDL", None)
    if saved is not None:
        os.environ["FINEGEMM_PDL"] = saved
    launcher.clear_recordings()
    plan_cache.clear_all()


def test_pdl_defaults_on_and_follows_the_environment(restore_pdl, monkeypatch):
    assert finegemm.get_pdl() is True
    monkeypatch.setenv("FINEGEMM_PDL", "0")
    assert finegemm.get_pdl() is False


@pytest.mark.parametrize("enable", [False, True])
def test_set_pdl_sets_the_switch_the_launch_plans_read(enable, restore_pdl):
    from finegemm.jit.device import H200
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import make_config
    from finegemm.kernels.sm90 import dispatch

    finegemm.set_pdl(enable)
    assert finegemm.get_pdl() is enable
    cfg = make_config(GemmDesc("fp8_1d2d", 64, 256, 1024), H200, 64, 128, 2, sfa_tma=True)
    a = torch.zeros(64, 1024, dtype=torch.float8_e4m3fn)
    b = torch.zeros(256, 1024, dtype=torch.float8_e4m3fn)
    sfa = torch.ones(8, 64).T
    sfb = torch.ones(2, 8)
    d = torch.zeros(64, 256, dtype=torch.bfloat16)
    _, _, meta, reduce = dispatch._build_plan(GemmDesc("fp8_1d2d", 64, 256, 1024), cfg, a, sfa, b, sfb, d, None)
    assert meta["launch_pdl"] is enable and reduce[2]["launch_pdl"] is enable


def test_set_pdl_drops_every_recording(restore_pdl):
    from finegemm.kernels.sm90 import dispatch, dispatch_bf16

    dispatch._recordings["k"] = object()
    dispatch_bf16._recordings["k"] = object()
    gemm._FP8_RECORDINGS["k"] = object()
    finegemm.set_pdl(False)
    assert not dispatch._recordings and not dispatch_bf16._recordings and not gemm._FP8_RECORDINGS


@pytest.mark.parametrize("fn", [finegemm.set_pdl, finegemm.use_deterministic_algorithms,
                                finegemm.set_ignore_compile_dims])
def test_switches_take_a_bool_only(fn, restore_pdl):
    for bad in (1, "true", None):
        with pytest.raises(TypeError, match="must be a bool"):
            fn(bad)
    fn(True)  # accepted


def test_deterministic_and_compile_dims_switches_leave_results_as_they_are(restore_pdl):
    a = finegemm.per_token_cast_to_fp8(torch.randn(16, 256))
    b = finegemm.per_block_cast_to_fp8(torch.randn(128, 256))
    before = torch.empty(16, 128, dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt(a, b, before)
    finegemm.use_deterministic_algorithms(True)
    finegemm.set_ignore_compile_dims(True)
    after = torch.empty_like(before)
    finegemm.fp8_gemm_nt(a, b, after, compiled_dims="mnk")
    assert torch.equal(before, after)
    assert finegemm.calc_diff(after.double(), finegemm.reference.fp8_gemm_nt(a, b)) < 1e-3
