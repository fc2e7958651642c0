"""Test cases apart from checks: ``enumerate_*`` lists cases, ``generate_*`` builds inputs plus reference."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import torch

import finegemm
from finegemm import reference

DEEPSEEK_V3_NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DEEPSEEK_V3_M = [64, 128, 4096]
LAYOUTS = ("nt", "nn", "tn", "tt")
RECIPES = ((1, 128, 128), (1, 1, 128))


def enumerate_deepseek_v3_dense() -> list[tuple[int, int, int]]:
    return [(m, n, k) for m in DEEPSEEK_V3_M for n, k in DEEPSEEK_V3_NK]


def enumerate_awkward_gpu() -> list[tuple[int, int, int]]:
    """Sizes that break tile assumptions: M not a multiple of anything, N not a multiple of 128."""
    return [(1, 2112, 7168), (77, 2112, 7168), (333, 576, 7168), (4095, 2112, 128), (130, 576, 576)]


@dataclass
class Fp8Case:
    layout: str
    recipe: tuple[int, int, int]
    ue8m0: bool
    m: int
    n: int
    k: int


def enumerate_portable_cpu() -> list[Fp8Case]:
    """Every layout x recipe x scale format, with the awkward sizes spread over them.

    Trimmed for the interpreter (every 64x64x128 tile step costs ~15 ms on a CPU): each combination
    gets one shape, and N=2112 (not a multiple of 128) appears once per recipe.
    """
    shapes = [(1, 130, 576), (77, 200, 256), (130, 96, 300), (77, 2112, 128)]
    cases = []
    for i, (layout, recipe, ue8m0) in enumerate(itertools.product(LAYOUTS, RECIPES, (False, True))):
        m, n, k = shapes[i % len(shapes)]
        cases.append(Fp8Case(layout, recipe, ue8m0, m, n, k))
    return cases


def quantize_operands(a_bf: torch.Tensor, b_bf: torch.Tensor, recipe, ue8m0: bool):
    """(A, B) pairs for ``nt``: A per-token, B per-block (1d2d) or per-channel (1d1d)."""
    a = finegemm.per_token_cast_to_fp8(a_bf, use_ue8m0=ue8m0)
    b = (finegemm.per_block_cast_to_fp8 if recipe[1] == 128 else finegemm.per_token_cast_to_fp8)(b_bf, use_ue8m0=ue8m0)
    return a, b


def pack_scales(pair, gran_mn: int):
    """Replace fp32 power-of-two scales with their int32 packed UE8M0 form in the required layout."""
    x, sf = pair
    packed = finegemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf) if gran_mn == 1 else finegemm.pack_ue8m0(sf)
    return x, packed


def as_layout(pair, transposed: bool, mn_major: bool):
    """The operand as the public ``fp8_gemm_{layout}`` wants it.

    ``transposed``: pass ``[K, MN]`` with transposed scales (the ``t`` letter for A, ``n`` for B).
    ``mn_major``: store the data MN-major (column-major for ``[MN, K]``), exercising strided loads.
    """
    x, sf = pair
    if mn_major:
        x = x.T.contiguous().T
    if transposed:
        x, sf = x.T, sf.T
    return x, sf


def generate_fp8(case: Fp8Case, device: str = "cpu", seed: int = 0, mn_major: bool = False):
    """Inputs for ``fp8_gemm_{case.layout}`` plus the float64 reference of ``d``.

    Returns ``(a, b, d, c, ref)``; ``d`` is poisoned with NaN so an unwritten element fails.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a_bf = torch.randn((case.m, case.k), generator=gen).to(device=device, dtype=torch.bfloat16)
    b_bf = torch.randn((case.n, case.k), generator=gen).to(device=device, dtype=torch.bfloat16)
    a, b = quantize_operands(a_bf, b_bf, case.recipe, case.ue8m0)
    out_dtype = torch.float32 if case.recipe[1] == 1 else torch.bfloat16
    c = torch.randn((case.m, case.n), generator=gen).to(device) if case.recipe[1] == 1 else None
    ref = reference.fp8_gemm_nt(a, b, c, case.recipe)
    if case.ue8m0:
        a, b = pack_scales(a, 1), pack_scales(b, case.recipe[1])
    a = as_layout(a, case.layout[0] == "t", mn_major)
    b = as_layout(b, case.layout[1] == "n", mn_major)
    d = torch.full((case.m, case.n), float("nan"), dtype=out_dtype, device=device)
    return a, b, d, c, ref


def run_fp8(case: Fp8Case, a, b, d, c) -> None:
    getattr(finegemm, f"fp8_gemm_{case.layout}")(a, b, d, c=c, recipe=case.recipe)


def contiguous_row_groups(rows: list[int], align: int = 128, extra_padding_blocks: int = 0):
    """The m-grouped contiguous layout of ``rows[g]`` tokens per group, each segment padded to ``align``
    (then ``extra_padding_blocks`` blocks of padding at the end): ``(row_groups int32 [M] with -1 for
    padding rows, ends [G] = each segment's last valid row + 1, M)`` on the CPU."""
    def padded(r: int) -> int:
        return (r + align - 1) // align * align

    m = sum(padded(r) for r in rows) + extra_padding_blocks * align
    row_groups = torch.full((m,), -1, dtype=torch.int32)
    ends, start = [], 0
    for g, r in enumerate(rows):
        row_groups[start:start + r] = g
        ends.append(start + r)
        start += padded(r)
    return row_groups, ends, m


def k_grouped_cast(x: torch.Tensor, ks: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [sum K, MN]`` cast per group for the k-grouped ops: (e4m3 ``[sum K, MN]``, fp32
    ``[sum_g ceil(ks[g] / 128), MN]``), each group's K blocks scaled on their own (empty groups add nothing)."""
    mn = x.shape[1]
    qs, sfs, start = [], [], 0
    for kk in ks:
        if kk:
            q, sf = finegemm.per_channel_cast_to_fp8(x[start:start + kk])
            qs.append(q)
            sfs.append(sf)
        start += kk
    if not qs:
        return (torch.empty((0, mn), dtype=torch.float8_e4m3fn, device=x.device),
                torch.empty((0, mn), dtype=torch.float32, device=x.device))
    return torch.cat(qs), torch.cat(sfs)


def flatten_k_major(q: torch.Tensor, ks: list[int]) -> torch.Tensor:
    """``[sum K, MN]`` -> flat buffer with group g a row-major ``[MN, ks[g]]`` block (DeepGEMM's nt form)."""
    out, start = [], 0
    for kk in ks:
        out.append(q[start:start + kk].T.contiguous().reshape(-1))
        start += kk
    return torch.cat(out) if out else q.reshape(-1)


def capture_graph(fn) -> torch.cuda.CUDAGraph:
    """Run ``fn`` once (compile and record outside the capture), then capture it into a CUDA graph on a
    side stream; replay the returned graph to rerun it."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


def replay_at_once(graphs: list[torch.cuda.CUDAGraph], rounds: int = 10) -> None:
    """Replay each CUDA graph ``rounds`` times on a stream of its own, all streams at once (after the current
    stream's work so far); the current stream then waits for them."""
    streams = [torch.cuda.Stream() for _ in graphs]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    for _ in range(rounds):
        for graph, s in zip(graphs, streams):
            with torch.cuda.stream(s):
                graph.replay()
    for s in streams:
        torch.cuda.current_stream().wait_stream(s)


def sm90_device() -> torch.device:
    """The CUDA device for a GPU test of the sm90 kernels; skips the test unless it is an sm_90 GPU."""
    import pytest

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    return torch.device("cuda")


def random_group_rows(g: int, expected_m: int, seed: int) -> list[int]:
    """Rows of ``g`` groups, each ``expected_m`` x U(0.7, 1.3) (DeepGEMM's test's random group sizes)."""
    rng = random.Random(seed)
    return [int(expected_m * rng.uniform(0.7, 1.3)) for _ in range(g)]
