"""Public ops called from several Python threads at once give the single-threaded results.

CPU: Triton's interpreter keeps one process-wide grid position, so finegemm serializes interpreted launches
(jit/interpret.py); before that, 4 threads x 40 fp8_gemm_nt calls raised InterpreterError on ~60 of 160 calls.
GPU (``-m gpu``): threads on different shapes and streams share the plan caches and the recorded launches
(api/plan_cache.py, kernels/sm90/launcher.py); each thread's results must match the float64 reference.
"""

from __future__ import annotations

import threading
import traceback

import pytest
import torch

import finegemm
from finegemm import reference
from finegemm.reference.dense import calc_diff


class _Raised(Exception):
    """What a thread raised, with its traceback as text (the assertion message shows where it came from)."""


def _in_threads(work, count: int) -> list:
    """Run ``work(i)`` in ``count`` threads started together; the list of what each returned or raised (as
    :class:`_Raised`, whose message holds the traceback)."""
    results: list = [None] * count
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException:  # noqa: BLE001 - reported by the test
            results[i] = _Raised(traceback.format_exc())
    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _case(m: int, n: int, k: int, device: str, seed: int):
    gen = torch.Generator().manual_seed(seed)
    a = finegemm.per_token_cast_to_fp8(torch.randn(m, k, generator=gen).to(device))
    b = finegemm.per_block_cast_to_fp8(torch.randn(n, k, generator=gen).to(device))
    return a, b, reference.fp8_gemm_nt(a, b, None, (1, 128, 128))


def test_threads_on_the_cpu_interpreter_get_correct_results():
    cases = [_case(8 + 8 * i, 64 + 32 * (i % 2), 128, "cpu", i) for i in range(4)]

    def work(i: int) -> list[float]:
        a, b, want = cases[i]
        diffs = []
        for _ in range(6):
            d = torch.full(want.shape, float("nan"), dtype=torch.bfloat16)
            finegemm.fp8_gemm_nt(a, b, d)
            diffs.append(calc_diff(d, want))
        return diffs

    for i, result in enumerate(_in_threads(work, 4)):
        assert not isinstance(result, BaseException), f"thread {i}:\n{result}"
        assert max(result) < 1e-3, result


@pytest.mark.gpu
def test_threads_on_streams_of_one_gpu_get_correct_results():
    """Threads on their own streams, on the default stream together, and one shape shared by two threads (one plan,
    recordings of both): every call matches the reference (split-K and transposed operands use per-stream scratch,
    whose allocation and multi-launch sequences launcher.py serializes)."""
    shapes = [(1, 2112, 7168), (77, 576, 2048), (128, 4096, 7168), (77, 576, 2048), (4096, 7168, 2048),
              (64, 24576, 1536), (5, 7168, 16384), (1, 2112, 7168)]
    cases = [_case(m, n, k, "cuda", i) for i, (m, n, k) in enumerate(shapes)]
    torch.cuda.synchronize()

    def work(i: int) -> list[float]:
        a, b, want = cases[i]
        stream = torch.cuda.Stream() if i % 2 else torch.cuda.current_stream()
        diffs = []
        with torch.cuda.stream(stream):
            for t in range(20):
                nn = t % 2 == 1  # the nn form reads B transposed: a per-stream copy on the sm90 path
                d = torch.full(want.shape, float("nan"), dtype=torch.bfloat16, device="cuda")
                if nn:
                    finegemm.fp8_gemm_nn(a, (b[0].T.contiguous(), b[1].T.contiguous()), d)
                else:
                    finegemm.fp8_gemm_nt(a, b, d)
                stream.synchronize()
                diffs.append(calc_diff(d, want))
        return diffs

    for i, result in enumerate(_in_threads(work, len(cases))):
        assert not isinstance(result, BaseException), f"thread {i}:\n{result}"
        assert max(result) < 1e-3, (shapes[i], result)
