"""fp8_gemm_nt's hot path on the CPU: the recording it keeps per (pointers + signature) key.

The sm90 module is replaced by a recorder and plans are forced to the sm90 backend after the real
validation, so these tests are about api/gemm.py's host path: what a repeated call skips, and that
any argument its key does not prove unchanged is validated (and wrong input raises) before a launch.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from finegemm.api import gemm, plan_cache


class FakeSm90:
    """Stands in for kernels/sm90/dispatch.py: fp8_gemm launches (counted) and returns a recording."""

    def __init__(self) -> None:
        self.launches = 0  # calls of fp8_gemm (first launches and fallbacks)
        self.replays = 0
        self.replayable = True  # False: recordings decline (e.g. a launch hook was registered)
        self.recordable = True  # False: fp8_gemm returns None (nothing the api may replay)

    def fp8_gemm(self, desc, config, a, sfa, b, sfb, d, c):
        self.launches += 1
        if not self.recordable:
            return None

        def recording() -> bool:
            if self.replayable:
                self.replays += 1
            return self.replayable
        return recording


def _install(monkeypatch, fake, plan_name: str):
    """Make ``fake`` the sm90 module and force the plans that ``gemm.<plan_name>`` validates to sm90 (counted)."""
    plans = []
    real_plan = getattr(gemm, plan_name)

    def plan(*args):
        plans.append(1)
        return dataclasses.replace(real_plan(*args), backend="sm90", config="cfg")

    monkeypatch.setattr(gemm, plan_name, plan)
    monkeypatch.setattr(gemm, "_sm90_module", lambda: fake)
    monkeypatch.delenv("FINEGEMM_DEBUG", raising=False)
    fake.plans = plans
    plan_cache.clear_all()
    return fake


@pytest.fixture
def sm90(monkeypatch):
    yield _install(monkeypatch, FakeSm90(), "_plan_fp8")
    plan_cache.clear_all()


def _tensors(m=64, n=256, k=512):
    a = torch.empty(m, k, dtype=torch.float8_e4m3fn)
    sfa = torch.empty(k // 128, m).t()  # MN-major: already in the required layout
    b = torch.empty(n, k, dtype=torch.float8_e4m3fn)
    sfb = torch.empty(n // 128, k // 128)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    return a, sfa, b, sfb, d


def _call(t, c=None):
    a, sfa, b, sfb, d = t
    gemm.fp8_gemm_nt((a, sfa), (b, sfb), d, c)


def test_repeated_call_replays_without_validation_or_dispatch(sm90):
    t = _tensors()
    _call(t)
    assert len(sm90.plans) == 1 and sm90.launches == 1 and sm90.replays == 0
    _call(t)
    _call(t)
    assert len(sm90.plans) == 1 and sm90.launches == 1 and sm90.replays == 2


def test_new_addresses_reuse_the_plan_and_record_again(sm90):
    t = _tensors()
    _call(t)
    a, sfa, b, sfb, d = t
    _call((a, sfa, b, sfb, torch.empty_like(d)))  # same signature, new d address
    assert len(sm90.plans) == 1 and sm90.launches == 2 and sm90.replays == 0


def test_same_addresses_with_another_signature_validate_before_any_launch(sm90):
    t = _tensors()
    _call(t)
    a, sfa, b, sfb, d = t
    with pytest.raises(TypeError):  # same pointer, fp16 view: d must be bf16 or fp32
        _call((a, sfa, b, sfb, d.view(torch.float16)))
    with pytest.raises(ValueError):  # same pointer, wrong shape of d
        _call((a, sfa, b, sfb, d[:32]))
    with pytest.raises(ValueError):  # same pointer, a no longer matches b's K
        _call((a[:, :256], sfa, b, sfb, d))
    assert sm90.launches == 1 and sm90.replays == 0
    sfa32 = torch.empty(sfa.shape[1], 32).t()  # MN-major scales of 32 rows (a view of sfa is not aligned)
    _call((a[:32], sfa32, b, sfb, d[:32]))  # same a and d pointers, smaller valid M: a new plan
    assert len(sm90.plans) == 5 and sm90.launches == 2 and sm90.replays == 0


def test_recording_that_declines_falls_back_to_the_sm90_dispatch(sm90):
    t = _tensors()
    _call(t)
    sm90.replayable = False
    _call(t)
    assert sm90.launches == 2 and len(sm90.plans) == 1  # plan reused, launched through dispatch
    sm90.replayable = True
    _call(t)
    assert sm90.replays >= 1 and sm90.launches == 2


def test_unreplayable_launch_is_not_kept(sm90):
    sm90.recordable = False
    t = _tensors()
    _call(t)
    _call(t)
    assert sm90.launches == 2 and len(sm90.plans) == 1


def test_debug_switch_misses_the_hot_path(sm90, monkeypatch):
    t = _tensors()
    _call(t)
    monkeypatch.setenv("FINEGEMM_DEBUG", "1")  # part of the key: the recording above is not used
    _call(t)
    _call(t)
    assert sm90.replays == 0 and sm90.launches == 3  # and none stored while debugging
    monkeypatch.delenv("FINEGEMM_DEBUG")
    _call(t)
    assert sm90.replays == 1 and sm90.launches == 3


def test_non_tensor_arguments_still_raise_clear_errors(sm90):
    a, sfa, b, sfb, d = _tensors()
    _call((a, sfa, b, sfb, d))
    with pytest.raises((TypeError, ValueError)):
        gemm.fp8_gemm_nt((a, sfa), (b, sfb), "d")
    with pytest.raises((TypeError, ValueError)):
        gemm.fp8_gemm_nt((a,), (b, sfb), d)
    assert sm90.launches == 1


def test_debug_is_part_of_the_dispatch_state(monkeypatch):
    monkeypatch.delenv("FINEGEMM_DEBUG", raising=False)
    key = plan_cache.dispatch_state()
    monkeypatch.setenv("FINEGEMM_DEBUG", "1")
    assert plan_cache.dispatch_state() != key
    monkeypatch.setenv("FINEGEMM_BACKEND", "portable")
    assert plan_cache.dispatch_state()[0] == b"portable"


class FakeSm90Bf16(FakeSm90):
    """The same recorder for bf16_gemm_nt's hot path (its sm90 entry is dispatch.bf16_gemm)."""

    def bf16_gemm(self, desc, config, a, b, d, c):
        return self.fp8_gemm(desc, config, a, None, b, None, d, c)


@pytest.fixture
def sm90_bf16(monkeypatch):
    yield _install(monkeypatch, FakeSm90Bf16(), "_plan_bf16")
    plan_cache.clear_all()


def test_bf16_repeated_call_replays_and_new_signatures_validate_first(sm90_bf16):
    """bf16_gemm_nt keeps the sm90 recording per (pointers + signature) as fp8_gemm_nt does: a repeat replays
    without validation or dispatch; a new address reuses the plan and records again; the same addresses with
    another signature are validated (and wrong input raises) before any launch."""
    a, b = torch.empty(64, 512, dtype=torch.bfloat16), torch.empty(256, 512, dtype=torch.bfloat16)
    d = torch.empty(64, 256, dtype=torch.bfloat16)
    gemm.bf16_gemm_nt(a, b, d)
    gemm.bf16_gemm_nt(a, b, d)
    gemm.bf16_gemm_nt(a, b, d)
    assert len(sm90_bf16.plans) == 1 and sm90_bf16.launches == 1 and sm90_bf16.replays == 2
    gemm.bf16_gemm_nt(a, b, torch.empty_like(d))
    assert len(sm90_bf16.plans) == 1 and sm90_bf16.launches == 2
    with pytest.raises(TypeError):  # same pointer, fp16 view of d
        gemm.bf16_gemm_nt(a, b, d.view(torch.float16))
    with pytest.raises(ValueError):  # same pointers, a no longer matches b's K
        gemm.bf16_gemm_nt(a[:, :256], b, d)
    assert sm90_bf16.launches == 2 and len(sm90_bf16.plans) == 3  # both validated, neither launched
    sm90_bf16.replayable = False  # e.g. a launch hook: the plan is reused and the dispatch launches
    gemm.bf16_gemm_nt(a, b, d)
    assert sm90_bf16.launches == 3 and len(sm90_bf16.plans) == 3
