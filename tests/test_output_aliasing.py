"""Outputs that share memory: every public op refuses, before launch, a ``d`` whose elements overlap each other or
an input (naming both), and accepts ``c is d`` and disjoint views of one buffer with correct results.

Each refused case below ran before these checks and gave a wrong ``d`` (calc_diff 0.005 to 0.955, or one row
written M times).
"""

from __future__ import annotations

import pytest
import torch

import finegemm
from finegemm import reference
from finegemm.api.checks import shares_memory
from finegemm.reference.dense import calc_diff

M, N, K = 16, 64, 128


def _fp8_1d2d():
    gen = torch.Generator().manual_seed(0)
    return (finegemm.per_token_cast_to_fp8(torch.randn(M, K, generator=gen)),
            finegemm.per_block_cast_to_fp8(torch.randn(N, K, generator=gen)))


def _fp8_1d1d():
    gen = torch.Generator().manual_seed(1)
    return (finegemm.per_token_cast_to_fp8(torch.randn(M, K, generator=gen)),
            finegemm.per_token_cast_to_fp8(torch.randn(N, K, generator=gen)))


def _refused(fn, *names: str, d: torch.Tensor | None = None) -> None:
    """``fn()`` raises ValueError naming each of ``names`` and leaves ``d`` (poisoned here) unwritten."""
    if d is not None:
        d.view(torch.uint8).fill_(0x7F)
        before = d.clone()
    with pytest.raises(ValueError) as err:
        fn()
    for name in names:
        assert name in str(err.value), str(err.value)
    if d is not None:
        assert torch.equal(d.view(torch.uint8), before.view(torch.uint8))


def test_expanded_d_is_refused():
    a, b = _fp8_1d2d()
    d = torch.empty(N, dtype=torch.bfloat16).expand(M, N)
    _refused(lambda: finegemm.fp8_gemm_nt(a, b, d), "d", "stride 0")


def test_d_partly_over_c_is_refused():
    a, b = _fp8_1d1d()
    buf = torch.randn(M + 1, N)
    _refused(lambda: finegemm.fp8_gemm_nt(a, b, buf[1:], c=buf[:M], recipe=(1, 1, 128)), "d overlaps c")


def test_d_is_a_is_refused():
    a = torch.randn(64, 64).bfloat16()
    b = torch.randn(64, 64).bfloat16()
    _refused(lambda: finegemm.bf16_gemm_nt(a, b, a), "d overlaps a")


def test_fp8_d_over_a_bytes_is_refused():
    a, b = _fp8_1d2d()
    wide = torch.empty(M, 2 * N, dtype=torch.float8_e4m3fn)  # a[0] is wide[:, :K]; d (bf16) is laid over it
    wide[:, :K] = a[0]
    a_in = (wide[:, :K], a[1])
    d = wide.view(torch.bfloat16)
    _refused(lambda: finegemm.fp8_gemm_nt(a_in, b, d), "d overlaps a[0]")


def test_overlap_is_checked_on_every_call_not_once_per_signature():
    """The plan of a signature is cached; the pointers are not part of it, so a later call with the same shapes and
    strides but overlapping addresses is refused too."""
    a, b = _fp8_1d1d()
    c, d = torch.randn(M, N), torch.empty(M, N)
    finegemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))
    buf = torch.randn(M + 1, N)
    _refused(lambda: finegemm.fp8_gemm_nt(a, b, buf[1:], c=buf[:M], recipe=(1, 1, 128)), "d overlaps c")


def test_c_is_d_accumulates_and_disjoint_views_of_one_buffer_are_accepted():
    a, b = _fp8_1d1d()
    c = torch.randn(M, N)
    want = reference.fp8_gemm_nt(a, b, c, (1, 1, 128))
    acc = c.clone()
    finegemm.fp8_gemm_nt(a, b, acc, c=acc, recipe=(1, 1, 128))
    assert calc_diff(acc, want) < 1e-3
    buf = torch.empty(M, 2 * N)  # c and d interleave in one buffer: byte ranges meet, elements do not
    buf[:, N:] = c
    finegemm.fp8_gemm_nt(a, b, buf[:, :N], c=buf[:, N:], recipe=(1, 1, 128))
    assert calc_diff(buf[:, :N], want) < 1e-3 and torch.equal(buf[:, N:], c)


def test_masked_expanded_d_is_refused():
    g, max_m = 2, 16
    a = finegemm.per_token_cast_to_fp8(torch.randn(g * max_m, K))
    a = (a[0].view(g, max_m, K), a[1].view(g, max_m, -1))
    bq = [finegemm.per_block_cast_to_fp8(torch.randn(N, K)) for _ in range(g)]
    b = (torch.stack([q for q, _ in bq]), torch.stack([s for _, s in bq]))
    d = torch.empty(max_m, N, dtype=torch.bfloat16).expand(g, max_m, N)
    masked_m = torch.tensor([max_m, 3], dtype=torch.int32)
    _refused(lambda: finegemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, max_m), "d", "groups")


def test_k_grouped_groups_sharing_one_d_are_refused():
    ks, g = [128, 128], 2
    a = finegemm.per_channel_cast_to_fp8(torch.randn(sum(ks), M))
    b = finegemm.per_channel_cast_to_fp8(torch.randn(sum(ks), N))
    d = torch.zeros(M, N).expand(g, M, N)  # both groups' results would land on one [M, N]
    c = torch.zeros(g, M, N)
    ks_tensor = torch.tensor(ks, dtype=torch.int32)
    _refused(lambda: finegemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c), "d", "groups")
    rows = torch.zeros(g * M + 1, N)  # groups overlapping by one row
    d = rows.as_strided((g, M, N), (M * N - N, N, 1))
    _refused(lambda: finegemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c), "d", "groups")


def test_m_grouped_contiguous_d_over_the_layout_is_refused():
    a = finegemm.per_token_cast_to_fp8(torch.randn(128, K))
    bq = finegemm.per_block_cast_to_fp8(torch.randn(N, K))
    b = (bq[0][None], bq[1][None])
    layout = torch.zeros(128 * N // 2, dtype=torch.int32)  # d (bf16 [128, N]) laid over grouped_layout's bytes
    d = layout.view(torch.bfloat16).view(128, N)
    _refused(lambda: finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout[:128]), "d overlaps grouped_layout")


def test_einsum_and_cublaslt_refuse_overlap_and_accept_c_is_d():
    a = torch.randn(4, 8, 32).bfloat16()
    b = torch.randn(4, 16, 32).bfloat16()
    _refused(lambda: finegemm.einsum("bmk,bnk->mn", a, b, a[0, :, :16]), "d overlaps a")
    _refused(lambda: finegemm.einsum("bmk,bnk->mn", a, b, torch.empty(16).expand(8, 16)), "d", "stride 0")
    x, y = torch.randn(8, 32), torch.randn(16, 32)
    _refused(lambda: finegemm.cublaslt_gemm_nt(x, y, x[:, :16]), "d overlaps a")
    c = torch.randn(8, 16)
    acc = c.clone()
    finegemm.cublaslt_gemm_nt(x, y, acc, c=acc)
    assert torch.allclose(acc, c + x @ y.T, atol=1e-4)


@pytest.mark.parametrize("x, y, want", [
    ((slice(0, 5), slice(None)), (slice(5, 10), slice(None)), False),  # row blocks that touch
    ((slice(0, 6), slice(None)), (slice(5, 10), slice(None)), True),
    ((slice(None), slice(0, 4)), (slice(None), slice(4, 8)), False),  # interleaved column blocks
    ((slice(None), slice(0, 5)), (slice(None), slice(4, 8)), True),
    ((slice(None), slice(0, 8, 2)), (slice(None), slice(1, 8, 2)), False),  # even / odd columns
])
def test_shares_memory_is_exact_for_views_of_one_buffer(x, y, want):
    buf = torch.empty(10, 8)
    assert shares_memory(buf[x], buf[y]) is want
    assert shares_memory(buf[y], buf[x]) is want
