"""The harness's kernel-time timer (bench/timer.time_kernels) on the GPU (``pytest -m gpu``)."""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device

import finegemm
from finegemm.bench.timer import L2Flush, time_cuda, time_kernels

pytestmark = pytest.mark.gpu


def test_kernel_span_covers_each_calls_kernels_without_launch_latency():
    """One matmul's kernel span is positive and at most its event time; two back-to-back matmuls span about
    twice one; a split-K FP8 call (GEMM, then its reduction by programmatic dependent launch: two kernels a
    call) is timed without the calls running into each other, within its event time."""
    dev = sm90_device()
    flush = L2Flush(dev)
    x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    one = time_kernels(lambda: torch.mm(x, x), flush, 2, 10)
    two = time_kernels(lambda: (torch.mm(x, x), torch.mm(x, x)), flush, 2, 10)
    events = time_cuda(lambda: torch.mm(x, x), flush, 2, 10)
    assert one.method == "kernel-span" and one.samples == 10
    assert 0 < one.median_us <= events.median_us, (one, events)
    assert 1.7 * one.median_us < two.median_us < 2.6 * one.median_us, (one, two)

    m, n, k = 64, 2112, 7168  # split K 4: the GEMM and the reduction kernel
    a, sfa = finegemm.per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16))
    b, sfb = finegemm.per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16))
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    sfa = finegemm.get_mn_major_tma_aligned_tensor(sfa)
    call = lambda: finegemm.fp8_gemm_nt((a, sfa), (b, sfb), d)  # noqa: E731
    span = time_kernels(call, flush, 3, 10)
    ev = time_cuda(call, flush, 3, 10)
    assert 2.0 < span.median_us <= ev.median_us, (span, ev)
