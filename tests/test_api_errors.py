"""Every bad argument gets a clear exception before launch, naming the argument, what it got and needs."""

from __future__ import annotations

import pytest
import torch

import finegemm

M, N, K = 16, 64, 256


@pytest.fixture
def ops():
    a = finegemm.per_token_cast_to_fp8(torch.randn(M, K))
    b = finegemm.per_block_cast_to_fp8(torch.randn(N, K))
    bc = finegemm.per_token_cast_to_fp8(torch.randn(N, K))
    d = torch.empty(M, N, dtype=torch.bfloat16)
    return a, b, bc, d


def test_wrong_operand_dtype(ops):
    a, b, _, d = ops
    with pytest.raises(TypeError, match=r"a\[0\] must have dtype"):
        finegemm.fp8_gemm_nt((a[0].float(), a[1]), b, d)


def test_not_a_pair(ops):
    a, b, _, d = ops
    with pytest.raises(TypeError, match="a must be a pair"):
        finegemm.fp8_gemm_nt(a[0], b, d)


def test_mismatched_k(ops):
    a, _, _, d = ops
    b = finegemm.per_block_cast_to_fp8(torch.randn(N, K + 128))
    with pytest.raises(ValueError, match=r"b\[0\] must be \[N, K\] with a's K=256"):
        finegemm.fp8_gemm_nt(a, b, d)


def test_wrong_d_shape_and_dtype(ops):
    a, b, _, _ = ops
    with pytest.raises(ValueError, match=r"d must have shape \(16, 64\)"):
        finegemm.fp8_gemm_nt(a, b, torch.empty(M, N + 1, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="d must have dtype"):
        finegemm.fp8_gemm_nt(a, b, torch.empty(M, N, dtype=torch.float16))


def test_d_must_be_row_major(ops):
    a, b, _, _ = ops
    d = torch.empty(N, M, dtype=torch.bfloat16).T
    with pytest.raises(ValueError, match=r"d must be row-major"):
        finegemm.fp8_gemm_nt(a, b, d)


def test_operand_with_bad_strides(ops):
    a, b, _, d = ops
    strided = torch.empty(M, K * 2, dtype=torch.float8_e4m3fn)[:, ::2]
    with pytest.raises(ValueError, match=r"a\[0\] must be row-major .* or column-major"):
        finegemm.fp8_gemm_nt((strided, a[1]), b, d)


def test_wrong_scale_shape(ops):
    a, b, _, d = ops
    with pytest.raises(ValueError, match=r"a\[1\]: expected float32 scales of shape \(16, 2\)"):
        finegemm.fp8_gemm_nt((a[0], a[1][:, :1]), b, d)
    with pytest.raises(ValueError, match=r"b\[1\]: expected"):
        finegemm.fp8_gemm_nt(a, (b[0], torch.rand(2, 2)), d, recipe=(1, 128, 128))


def test_scale_rows_that_fit_no_recipe(ops):
    # without recipe=, b[1]'s rows pick it: ceil(N/128) per-block, N per-channel; anything else names b[1]
    a, b, _, d = ops
    with pytest.raises(ValueError, match=r"b\[1\] must hold per-block scales .* for N=64; got shape \(2, 2\)"):
        finegemm.fp8_gemm_nt(a, (b[0], torch.rand(2, 2)), d)
    with pytest.raises(ValueError, match=r"b\[1\] must hold .* got shape \(2,\)"):
        finegemm.fp8_gemm_nt(a, (b[0], torch.rand(2)), d)


def test_wrong_scale_dtype(ops):
    a, b, _, d = ops
    with pytest.raises(TypeError, match="float32 or both int32"):
        finegemm.fp8_gemm_nt(a, (b[0], b[1].to(torch.int32)), d)
    with pytest.raises(TypeError, match=r"a\[1\] must be float32 scales or int32"):
        finegemm.fp8_gemm_nt((a[0], a[1].double()), (b[0], b[1].double()), d)


def test_packed_scales_in_wrong_layout():
    a = finegemm.per_token_cast_to_fp8(torch.randn(M, 1024), use_ue8m0=True)
    b = finegemm.per_block_cast_to_fp8(torch.randn(N, 1024), use_ue8m0=True)
    packed_row_major = finegemm.pack_ue8m0(a[1])  # [16, 2] row-major; the kernels need MN-major
    d = torch.empty(M, N, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"a\[1\]: int32 packed UE8M0 scales must already be in the required layout"):
        finegemm.fp8_gemm_nt((a[0], packed_row_major), (b[0], finegemm.pack_ue8m0(b[1])), d)


def test_bad_recipe(ops):
    a, b, _, d = ops
    with pytest.raises(ValueError, match="recipe must be"):
        finegemm.fp8_gemm_nt(a, b, d, recipe=(1, 64, 128))


def test_1d1d_requires_c_and_fp32_d(ops):
    a, _, bc, _ = ops
    d = torch.empty(M, N)
    with pytest.raises(ValueError, match="c is required with recipe"):
        finegemm.fp8_gemm_nt(a, bc, d, recipe=(1, 1, 128))
    with pytest.raises(TypeError, match="d must have dtype torch.float32"):
        finegemm.fp8_gemm_nt(a, bc, torch.empty(M, N, dtype=torch.bfloat16), c=d, recipe=(1, 1, 128))
    with pytest.raises(TypeError, match="c must have dtype torch.float32"):
        finegemm.fp8_gemm_nt(a, bc, d, c=torch.empty(M, N, dtype=torch.bfloat16), recipe=(1, 1, 128))


def test_c_shape_mismatch(ops):
    a, b, _, d = ops
    with pytest.raises(ValueError, match="c must have d's shape"):
        finegemm.fp8_gemm_nt(a, b, d, c=torch.empty(M, N + 1))


def test_tensors_on_different_devices(ops):
    a, b, _, d = ops
    with pytest.raises(ValueError, match=r"is on meta but a\[0\] is on cpu"):
        finegemm.fp8_gemm_nt(a, b, torch.empty(M, N, dtype=torch.bfloat16, device="meta"))


def test_bf16_errors():
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="b must have dtype torch.bfloat16"):
        finegemm.bf16_gemm_nt(a, b.float(), torch.empty(M, N))
    with pytest.raises(ValueError, match="b must be \\[N, K\\] with a's K=256"):
        finegemm.bf16_gemm_nt(a, b[:, :128], torch.empty(M, N))
    with pytest.raises(ValueError, match="a must be 2-D"):
        finegemm.bf16_gemm_nt(a[None], b, torch.empty(M, N))


def test_forced_sm90_backend_on_cpu_is_a_clear_error(ops, monkeypatch):
    from finegemm.api.dispatch import BackendError

    a, b, _, d = ops
    monkeypatch.setenv("FINEGEMM_BACKEND", "sm90")
    with pytest.raises(BackendError, match="FINEGEMM_BACKEND=sm90 cannot run"):
        finegemm.fp8_gemm_nt(a, b, d)
    monkeypatch.setenv("FINEGEMM_BACKEND", "fastest")
    with pytest.raises(ValueError, match="FINEGEMM_BACKEND must be one of"):
        finegemm.fp8_gemm_nt(a, b, d)
