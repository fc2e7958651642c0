"""Wrong argument types and values get a named TypeError / ValueError, never another exception.

A table of the cases a hostile-input fuzz found (each raised AttributeError, a bare TypeError from deep inside,
a RuntimeError from a reshape, or was silently accepted), then a hypothesis search that calls every public
function of ``finegemm.__all__`` with arguments drawn from a pool of wrong types and values and accepts only a
return or ``TypeError`` / ``ValueError``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import finegemm
from finegemm import runtime as _runtime
from finegemm.jit import device as _device
from finegemm.layout import get_mk_alignment_for_contiguous_layout


@pytest.fixture(autouse=True)
def _restore_process_state():
    """Setters among the public names (num_sms, alignment, pdl, ...) may succeed on a drawn value: undo them."""
    cap, align, pdl = _device._num_sms_cap, get_mk_alignment_for_contiguous_layout(), finegemm.get_pdl()
    tc_util, block_multiple = list(_runtime._TC_UTIL), list(_runtime._BLOCK_SIZE_MULTIPLE_OF)
    yield
    _runtime._TC_UTIL[:], _runtime._BLOCK_SIZE_MULTIPLE_OF[:] = tc_util, block_multiple
    _device._num_sms_cap = cap
    finegemm.set_mk_alignment_for_contiguous_layout(align)
    finegemm.set_pdl(pdl)
    finegemm.set_ignore_compile_dims(False)


def _fp8_pair(m=16, k=256):
    return finegemm.per_token_cast_to_fp8(torch.randn(m, k))


def _w_pair(n=64, k=256):
    return finegemm.per_block_cast_to_fp8(torch.randn(n, k))


def _contiguous_args(**kw):
    a = _fp8_pair(128)
    bq, bs = _w_pair()
    return dict(a=a, b=(bq[None], bs[None]), d=torch.empty(128, 64, dtype=torch.bfloat16),
                grouped_layout=torch.zeros(128, dtype=torch.int32), **kw)


def _masked_args(expected_m):
    a = _fp8_pair(32)
    bq, bs = _w_pair()
    return ((a[0].view(2, 16, 256), a[1].view(2, 16, 2)), (torch.stack([bq, bq]), torch.stack([bs, bs])),
            torch.empty(2, 16, 64, dtype=torch.bfloat16), torch.tensor([16, 3], dtype=torch.int32), expected_m)


# (call, exception type, words the message must hold: the argument's name and what it got)
CASES = {
    "recipe=5": (lambda: finegemm.fp8_gemm_nt(_fp8_pair(), _w_pair(), torch.empty(16, 64, dtype=torch.bfloat16),
                                              recipe=5), TypeError, ("recipe", "5")),
    "transform_sf recipe None": (lambda: finegemm.transform_sf_into_required_layout(torch.ones(64, 2), 64, 256, None,
                                                                                    is_sfa=True),
                                 TypeError, ("recipe", "None")),
    "transform_sf sf list": (lambda: finegemm.transform_sf_into_required_layout([[1.0, 2.0]], 1, 256, (1, 128, 128),
                                                                                is_sfa=True),
                             TypeError, ("sf", "list")),
    "transform_sf num_groups str": (lambda: finegemm.transform_sf_into_required_layout(
        torch.ones(2, 64, 2), 64, 256, (1, 128, 128), num_groups="2", is_sfa=True), TypeError, ("num_groups", "'2'")),
    "transform_sf is_sfa str": (lambda: finegemm.transform_sf_into_required_layout(
        torch.ones(64, 2), 64, 256, (1, 128, 128), is_sfa="yes"), TypeError, ("is_sfa", "'yes'")),
    "transform_sf mn float": (lambda: finegemm.transform_sf_into_required_layout(
        torch.ones(64, 2), 64.0, 256, (1, 128, 128), is_sfa=True), TypeError, ("mn", "64.0")),
    "per_token_cast list": (lambda: finegemm.per_token_cast_to_fp8([[1.0, 2.0]]), TypeError, ("x", "list")),
    "per_token_cast use_ue8m0 None": (lambda: finegemm.per_token_cast_to_fp8(torch.randn(2, 128), use_ue8m0=None),
                                      TypeError, ("use_ue8m0", "None")),
    "use_psum_layout str": (lambda: finegemm.m_grouped_fp8_gemm_nt_contiguous(**_contiguous_args(use_psum_layout="no")),
                            TypeError, ("use_psum_layout", "'no'")),
    "expected_m bool": (lambda: finegemm.m_grouped_fp8_gemm_nt_masked(*_masked_args(True)), TypeError,
                        ("expected_m", "True")),
    "num_sms float": (lambda: finegemm.set_num_sms(2.0), TypeError, ("num_sms", "2.0")),
    "ceil_div by 0": (lambda: finegemm.ceil_div(3, 0), ValueError, ("y", "0")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_named_error(case):
    call, exc, words = CASES[case]
    with pytest.raises(exc) as err:
        call()
    for word in words:
        assert word in str(err.value), str(err.value)


def test_fp8_linear_with_empty_k_is_zero_plus_bias():
    bias = torch.randn(48)
    y = finegemm.fp8_linear(torch.randn(4, 0), torch.randn(48, 0), bias)
    assert y.shape == (4, 48) and torch.equal(y, bias.expand(4, 48))


def test_numpy_integers_count_as_ints():
    """expected_m, ks, num_sms: numpy integers are ints (operator.index), bool is not."""
    finegemm.set_num_sms(np.int64(4))
    assert finegemm.get_num_sms() == 4
    meta = finegemm.get_paged_mqa_logits_metadata(torch.tensor([5, 70], dtype=torch.int32), 64, np.int32(4))
    assert tuple(meta.shape) == (5, 2)
    a, b, d, masked_m, _ = _masked_args(None)
    finegemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, np.int64(16))
    from finegemm.reference import grouped as ref
    want = ref.m_grouped_fp8_gemm_nt_masked(a, b, masked_m)
    assert finegemm.calc_diff(d[0].float(), want[0]) < 1e-3 and finegemm.calc_diff(d[1, :3].float(), want[1, :3]) < 1e-3
    ks = [np.int64(128), np.int64(0)]
    x = finegemm.per_channel_cast_to_fp8(torch.randn(128, 16))
    y = finegemm.per_channel_cast_to_fp8(torch.randn(128, 64))
    c = torch.zeros(2, 16, 64)
    out = torch.empty(2, 16, 64)
    finegemm.k_grouped_fp8_gemm_tn_contiguous(x, y, out, ks, torch.tensor([128, 0], dtype=torch.int32), c)
    want = ref.k_grouped_fp8_gemm_tn_contiguous(x, y, [128, 0], c)
    assert finegemm.calc_diff(out, want) < 1e-3


def test_dense_n_zero_is_a_no_op_as_in_deepgemm():
    a = _fp8_pair()
    b = (torch.empty(0, 256, dtype=torch.float8_e4m3fn), torch.empty(0, 2))
    finegemm.fp8_gemm_nt(a, b, torch.empty(16, 0, dtype=torch.bfloat16))
    finegemm.bf16_gemm_nt(torch.randn(16, 32).bfloat16(), torch.empty(0, 32, dtype=torch.bfloat16),
                          torch.empty(16, 0, dtype=torch.bfloat16))


# ------------------------------------------------------------------------------------------ hypothesis

_JUNK = [None, True, False, 0, -3, 7, 2.5, float("nan"), "nk", "x", b"x", [], [1, 2], ["a"], (None, None), {},
         object(), np.int64(3), np.float32(1.0), torch.float32, torch.device("cpu")]


def _tensors() -> list:
    return [torch.empty(0), torch.randn(4), torch.randn(2, 3), torch.zeros(2, 3, dtype=torch.int32),
            torch.empty(2, 128, dtype=torch.float8_e4m3fn), torch.randn(2, 128).bfloat16(),
            torch.randn(3, 2, 4), (torch.empty(2, 128, dtype=torch.float8_e4m3fn), torch.ones(2, 1)),
            (torch.randn(2, 3), "s")]


PUBLIC = sorted(name for name in finegemm.__all__ if callable(getattr(finegemm, name)) and name != "FP8Linear")


@pytest.mark.parametrize("name", PUBLIC)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_wrong_types_get_type_or_value_errors(name, data):
    fn = getattr(finegemm, name)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    pool = _JUNK + _tensors()
    args = [data.draw(st.sampled_from(pool), label=p.name)
            for p in params if p.default is p.empty or data.draw(st.booleans())]
    try:
        fn(*args)
    except (TypeError, ValueError):
        pass
