"""FP8 casts and UE8M0 helpers: property tests over shapes and value ranges."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import finegemm
from finegemm import quant
from finegemm.reference import dequantize_rows

dims = st.integers(min_value=1, max_value=300)
scales = st.sampled_from([1e-6, 1e-2, 1.0, 37.0, 1e4])


def _randn(shape, seed, scale):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


@settings(max_examples=40, deadline=None)
@given(m=dims, k=dims, seed=st.integers(0, 2**16), scale=scales, ue8m0=st.booleans())
def test_per_token_cast_round_trips_within_fp8_precision(m, k, seed, scale, ue8m0):
    x = _randn((m, k), seed, scale)
    q, sf = quant.per_token_cast_to_fp8(x, use_ue8m0=ue8m0)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (m, k)
    assert sf.dtype == torch.float32 and sf.shape == (m, math.ceil(k / 128))
    assert torch.isfinite(sf).all() and (sf > 0).all()
    assert q.float().abs().max() <= 448
    back = dequantize_rows(q, sf, 1)
    # e4m3 keeps 3 mantissa bits: relative error <= 2**-4 of the block's amax (plus the 1e-4 amax floor).
    bound = (x.abs().view(m, -1).amax(dim=1, keepdim=True).clamp(min=1e-4) * 2.0**-3).double()
    assert ((back - x.double()).abs() <= bound).all()
    if ue8m0:
        bits = sf.view(torch.int32)
        assert ((bits & 0x807FFFFF) == 0).all(), "UE8M0 scales must be powers of two"


@settings(max_examples=30, deadline=None)
@given(n=dims, k=dims, seed=st.integers(0, 2**16), scale=scales, ue8m0=st.booleans())
def test_per_block_cast_shapes_and_error(n, k, seed, scale, ue8m0):
    x = _randn((n, k), seed, scale)
    q, sf = quant.per_block_cast_to_fp8(x, use_ue8m0=ue8m0)
    assert q.shape == (n, k) and sf.shape == (math.ceil(n / 128), math.ceil(k / 128))
    back = dequantize_rows(q, sf, 128)
    rel = (back - x.double()).abs().max() / x.abs().max().clamp(min=1e-4).double()
    assert rel <= 2.0**-3


@settings(max_examples=20, deadline=None)
@given(k=dims, n=dims, seed=st.integers(0, 2**16))
def test_per_channel_cast_blocks_run_along_dim0(k, n, seed):
    x = _randn((k, n), seed, 3.0)
    q, sf = quant.per_channel_cast_to_fp8(x)
    assert q.shape == (k, n) and sf.shape == (math.ceil(k / 128), n)
    back = dequantize_rows(q.T.contiguous(), sf.T, 1).T
    assert ((back - x.double()).abs() <= x.abs().max().double() * 2.0**-3).all()


def test_all_zero_blocks_get_finite_scales_and_zero_values():
    q, sf = quant.per_token_cast_to_fp8(torch.zeros(3, 200))
    assert torch.isfinite(sf).all() and (sf > 0).all()
    assert (q.float() == 0).all()
    q, sf = quant.per_block_cast_to_fp8(torch.zeros(130, 130), use_ue8m0=True)
    assert torch.isfinite(sf).all() and (q.float() == 0).all()


def test_values_saturate_at_448():
    x = torch.randn(4, 128)
    x[0, 0] = 1e30
    q, sf = quant.per_token_cast_to_fp8(x)
    assert q.float().abs().max() == 448 and torch.isfinite(q.float()).all()


def test_nan_and_inf_inputs_give_non_finite_blocks_as_documented():
    x = torch.ones(2, 256)
    x[0, 3] = float("nan")
    x[1, 200] = float("inf")
    q, sf = quant.per_token_cast_to_fp8(x)
    assert torch.isnan(sf[0, 0]) and torch.isnan(q[0, :128].float()).all()
    assert torch.isinf(sf[1, 1])
    assert torch.isnan(q[1, 200].float()) and (q[1, 128:200].float() == 0).all()
    assert torch.isfinite(sf[0, 1]) and torch.isfinite(sf[1, 0])


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_ue8m0_pack_round_trip(rows, cols, seed):
    gen = torch.Generator().manual_seed(seed)
    exps = torch.randint(1, 255, (rows, cols), generator=gen)
    sf = quant.ue8m0_to_fp32(exps)
    packed = quant.pack_ue8m0(sf)
    assert packed.dtype == torch.int32 and packed.shape == (rows, math.ceil(cols / 4))
    # little-endian: column 4w + j is byte j of word w
    assert ((packed[:, 0] & 0xFF) == exps[:, 0]).all()
    assert torch.equal(quant.unpack_ue8m0(packed, cols), sf)


def test_ceil_to_ue8m0_rounds_up_to_powers_of_two():
    x = torch.tensor([1.0, 1.5, 3.0, 0.3, 1e-8])
    y = quant.ceil_to_ue8m0(x)
    assert torch.equal(y, torch.tensor([1.0, 2.0, 4.0, 0.5, 2.0**-26]))


def test_pack_rejects_non_power_of_two_scales():
    with pytest.raises(ValueError, match="power-of-two"):
        quant.pack_ue8m0(torch.tensor([[1.5, 2.0]]))


def test_cast_rejects_non_2d_input():
    with pytest.raises(ValueError, match="2-D"):
        quant.per_token_cast_to_fp8(torch.randn(2, 3, 4))


# ---------------------------------------------------------------------------- DeepGEMM's utils names
def test_deepgemm_utils_signatures():
    """DeepGEMM's ``per_token_cast_to_fp8(x, use_ue8m0, gran_k, use_packed_ue8m0)`` and its other utils: the same
    arithmetic at any scale granularity, packed scales equal to pack_ue8m0 of the plain ones."""
    x = torch.randn(33, 300) * 5
    q, sf = finegemm.per_token_cast_to_fp8(x, True, gran_k=32)
    assert sf.shape == (33, 10)
    back = q.float() * sf.repeat_interleave(32, dim=1)[:, :300]
    assert torch.allclose(back, x, rtol=0.07, atol=1e-3)
    q128, sf128 = finegemm.per_token_cast_to_fp8(x, True)
    qp, packed = finegemm.per_token_cast_to_fp8(x, True, 128, use_packed_ue8m0=True)
    assert torch.equal(qp.view(torch.uint8), q128.view(torch.uint8))
    assert torch.equal(packed, finegemm.pack_ue8m0(sf128)) and packed.dtype == torch.int32
    with pytest.raises(ValueError, match="use_packed_ue8m0 needs use_ue8m0=True"):
        finegemm.per_token_cast_to_fp8(x, False, use_packed_ue8m0=True)
    with pytest.raises(ValueError, match="gran_k must be an int >= 1; got 0"):
        finegemm.per_block_cast_to_fp8(x, gran_k=0)
    qb, sfb = finegemm.per_block_cast_to_fp8(x, gran_k=64)
    assert sfb.shape == (1, 5)
    assert torch.allclose(qb.float() * sfb.repeat_interleave(64, 0).repeat_interleave(64, 1)[:33, :300], x,
                          rtol=0.07, atol=1e-2)
    _, sfc = finegemm.per_channel_cast_to_fp8(x, gran_k=16)
    assert sfc.shape == (3, 300)
    assert finegemm.ceil_div(300, 128) == 3 and finegemm.align(300, 128) == 384


def test_per_custom_dims_cast():
    kv = torch.randn(50, 64) * torch.linspace(0.1, 10, 50)[:, None]
    q, sf = finegemm.per_custom_dims_cast_to_fp8(kv, (0,), False)
    assert q.dtype == torch.float8_e4m3fn and q.shape == kv.shape and sf.shape == (50,)
    assert torch.allclose(sf, kv.abs().amax(dim=1).clamp(min=1e-4) / 448)
    assert torch.allclose(q.float() * sf[:, None], kv, rtol=0.07, atol=1e-3)
    q3, sf3 = finegemm.per_custom_dims_cast_to_fp8(torch.randn(4, 6, 8), (0, -1), True)
    assert sf3.shape == (4, 8) and bool((finegemm.ceil_to_ue8m0(sf3) == sf3).all())
    with pytest.raises(ValueError, match="distinct dims"):
        finegemm.per_custom_dims_cast_to_fp8(kv, (0, 0), False)
    with pytest.raises(TypeError, match="tuple of ints"):
        finegemm.per_custom_dims_cast_to_fp8(kv, 0, False)


def test_pack_ue8m0_to_int_round_trip():
    sf = finegemm.ceil_to_ue8m0(torch.rand(7, 8) + 0.01)
    packed = finegemm.pack_ue8m0_to_int(sf)
    assert packed.shape == (7, 2) and torch.equal(finegemm.unpack_ue8m0_from_int(packed), sf)
    with pytest.raises(ValueError, match="multiple of 4"):
        finegemm.pack_ue8m0_to_int(sf[:, :6])
