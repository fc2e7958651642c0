"""Scale-factor layouts: TMA alignment, MN-major transforms, path A (transform) and path B (no copy)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import finegemm
from finegemm import layout


@pytest.mark.parametrize("x,elem,want", [(1, 4, 4), (4, 4, 4), (5, 4, 8), (77, 4, 80), (3, 1, 16), (9, 2, 16)])
def test_get_tma_aligned_size(x, elem, want):
    assert finegemm.get_tma_aligned_size(x, elem) == want


def test_get_tma_aligned_size_rejects_bad_element_size():
    with pytest.raises(ValueError, match="element_size"):
        finegemm.get_tma_aligned_size(8, 3)


@settings(max_examples=30, deadline=None)
@given(mn=st.integers(1, 300), sfk=st.integers(1, 20), groups=st.sampled_from([None, 1, 3]))
def test_mn_major_tensor_has_aligned_strides_and_same_values(mn, sfk, groups):
    shape = (mn, sfk) if groups is None else (groups, mn, sfk)
    sf = torch.rand(shape)
    out = finegemm.get_mn_major_tma_aligned_tensor(sf)
    aligned = finegemm.get_tma_aligned_size(mn, 4)
    assert torch.equal(out, sf)
    assert out.stride(-2) == 1 or mn == 1
    assert out.stride(-1) == aligned or sfk == 1
    if groups is not None and groups > 1:
        assert out.stride(0) == aligned * sfk


def test_packed_ue8m0_tensor_layout_and_values():
    sf = finegemm.ceil_to_ue8m0(torch.rand(77, 9) + 0.01)
    packed = finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    assert packed.dtype == torch.int32 and packed.shape == (77, 3)
    assert packed.stride() == (1, 80)
    assert torch.equal(finegemm.unpack_ue8m0(packed, 9), sf)


def test_path_a_transforms_row_major_sfa():
    sfa = torch.rand(77, 4)
    out = finegemm.transform_sf_into_required_layout(sfa, 77, 512, (1, 128, 128), is_sfa=True)
    assert out.stride() == (1, 80) and torch.equal(out, sfa)
    assert out.data_ptr() != sfa.data_ptr()


def test_path_b_returns_prepared_tensor_without_copy():
    sfa = finegemm.get_mn_major_tma_aligned_tensor(torch.rand(77, 4))
    out = finegemm.transform_sf_into_required_layout(sfa, 77, 512, (1, 128, 128), is_sfa=True)
    assert out is sfa and out.data_ptr() == sfa.data_ptr()
    sfb = torch.rand(3, 4)
    assert finegemm.transform_sf_into_required_layout(sfb, 300, 512, (1, 128, 128), is_sfa=False) is sfb


def test_path_b_inside_the_gemm_does_not_copy(monkeypatch):
    """The GEMM hands the caller's prepared scale tensors to the kernel as they are."""
    from finegemm.api import gemm as gemm_api

    seen = {}

    def spy(a, sfa, b, sfb, d, c, per_block, config, head_splits=None):
        seen["sfa"], seen["sfb"] = sfa.data_ptr(), sfb.data_ptr()

    monkeypatch.setattr(gemm_api, "launch_fp8_gemm", spy)
    a = finegemm.per_token_cast_to_fp8(torch.randn(10, 256))
    b = finegemm.per_block_cast_to_fp8(torch.randn(64, 256))
    sfa = finegemm.get_mn_major_tma_aligned_tensor(a[1])
    finegemm.fp8_gemm_nt((a[0], sfa), b, torch.empty(10, 64, dtype=torch.bfloat16))
    assert seen == {"sfa": sfa.data_ptr(), "sfb": b[1].data_ptr()}


def test_grouped_scales_transform():
    sf = torch.rand(3, 40, 2)
    out = finegemm.transform_sf_into_required_layout(sf, 40, 256, (1, 128, 128), num_groups=3, is_sfa=True)
    assert out.stride() == (2 * 40, 1, 40) and torch.equal(out, sf)


@pytest.mark.parametrize("bad,match", [
    (torch.rand(77, 3), r"expected float32 scales of shape \(77, 4\)"),
    (torch.rand(77, 4, dtype=torch.float64), "must be float32 scales or int32"),
    (torch.zeros(154, 1, dtype=torch.int32)[::2], "must already be in the required layout"),
])
def test_transform_rejects_bad_scales(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        finegemm.transform_sf_into_required_layout(bad, 77, 512, (1, 128, 128), is_sfa=True, name="a[1]")


def test_transform_needs_is_sfa_and_valid_recipe():
    with pytest.raises(ValueError, match="is_sfa"):
        finegemm.transform_sf_into_required_layout(torch.rand(4, 4), 4, 512, (1, 128, 128))
    with pytest.raises(ValueError, match="granularities"):
        finegemm.transform_sf_into_required_layout(torch.rand(4, 4), 4, 512, (1, 64, 128), is_sfa=False)


def test_mk_alignment_and_num_sms():
    assert finegemm.get_mk_alignment_for_contiguous_layout() == 128
    before = finegemm.get_num_sms()
    finegemm.set_num_sms(1)
    try:
        assert finegemm.get_num_sms() == 1
    finally:
        layout.set_num_sms(before) if before > 0 else None
    with pytest.raises(ValueError, match="positive int"):
        finegemm.set_num_sms(0)
