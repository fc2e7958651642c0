"""kernels/sm90/dispatch.py fp8_gemm on the CPU: the plan/replay cache (what is keyed, what is replayed).

The plan builder and the first launch are replaced by recorders: these tests are about the host path.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton.experimental.gluon")
from finegemm.jit.heuristics import GemmDesc  # noqa: E402
from finegemm.jit.heuristics_sm90 import Sm90Config  # noqa: E402
from finegemm.kernels.sm90 import dispatch  # noqa: E402


class Recorder:
    def __init__(self) -> None:
        self.plans = 0
        self.launches: list[tuple] = []  # (kernel name, grid) per normal first launch
        self.replays: list[str] = []

    def build_plan(self, desc, config, a, sfa, b, sfb, d, c):
        self.plans += 1
        reduce = ((a.shape[0], 1), ("ws", d), {"SPLIT_K": config.split_k}) if config.split_k > 1 else None
        return (7,), (a, b, d), {"N": desc.n}, reduce

    def launch(self, kernel, grid, args, kwargs):
        name = kernel.fn.__name__
        self.launches.append((name, grid))
        return lambda: self.replays.append(name)


@pytest.fixture
def rec(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(dispatch, "_build_plan", r.build_plan)
    monkeypatch.setattr(dispatch.launcher, "launch", r.launch)
    dispatch._plans.clear()
    dispatch._replays.clear()
    yield r
    dispatch._plans.clear()
    dispatch._replays.clear()


def _tensors(m=64, n=256, k=512):
    a = torch.empty(m, k, dtype=torch.float8_e4m3fn)
    sfa = torch.empty(k // 128, m).t()
    b = torch.empty(n, k, dtype=torch.float8_e4m3fn)
    sfb = torch.empty(n // 128, k // 128)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    return a, sfa, b, sfb, d


def _call(t, split=1, c=None):
    desc = GemmDesc("fp8_1d2d", t[0].shape[0], t[2].shape[0], t[0].shape[1], with_c=c is not None)
    dispatch.fp8_gemm(desc, Sm90Config(64, 128, 4, split_k=split), *t[:4], t[4], c)


def test_first_call_launches_then_replays(rec):
    t = _tensors()
    _call(t)
    assert rec.plans == 1 and rec.launches == [("fp8_gemm_kernel", (7,))] and rec.replays == []
    _call(t)
    _call(t)
    assert rec.plans == 1 and len(rec.launches) == 1 and rec.replays == ["fp8_gemm_kernel"] * 2


def test_split_k_replays_gemm_then_reduce(rec):
    t = _tensors()
    _call(t, split=4)
    _call(t, split=4)
    assert [n for n, _ in rec.launches] == ["fp8_gemm_kernel", "_splitk_reduce_kernel"]
    assert rec.replays == ["fp8_gemm_kernel", "_splitk_reduce_kernel"]


def test_new_pointer_stride_dtype_or_c_builds_a_new_plan(rec):
    t = _tensors()
    _call(t)
    a, sfa, b, sfb, d = t
    _call((a.clone(), sfa, b, sfb, d))  # new pointer
    wide = torch.empty(64, 512, dtype=torch.bfloat16)
    _call((a, sfa, b, sfb, wide[:, :256]))  # new d
    _call((a, sfa, b, sfb, torch.as_strided(wide, (64, 256), (384, 1))))  # same pointer, new strides
    _call((a.view(torch.float8_e5m2), sfa, b, sfb, d))  # same pointer, new dtype
    _call(t, c=torch.empty(64, 256))  # with C
    assert rec.plans == 6 and rec.replays == []
    _call(t)
    assert rec.plans == 6 and rec.replays == ["fp8_gemm_kernel"]


def test_cache_is_bounded_and_cleared_together(rec):
    keep = [_tensors() for _ in range(17)]
    for t in keep:
        _call(t)
    assert len(dispatch._plans) == len(dispatch._replays) == 1  # cleared at 16, then the 17th added
    _call(keep[0])
    assert rec.plans == 18
