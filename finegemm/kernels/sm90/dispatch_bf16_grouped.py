"""Host side of the sm90 m-grouped BF16 GEMMs (contiguous and masked): support rule, config, TMA views, launch.

Called by :mod:`finegemm.api.dispatch` (``run_sm90("m_grouped_bf16_gemm_contiguous", ...)`` and
``..._masked``) with tensors that api/grouped.py validated (bf16, shapes and devices checked; the
``sfa``/``sfb`` slots of the shared call signature are None). The kernel is
:func:`.gemm_bf16.bf16_grouped_gemm_kernel` with ``GROUPING`` 1 / 2; the views it takes:

- contiguous: A bf16 ``[M_total, K]`` K-major (descriptor over A) or M-major (over ``A^T [K, M_total]``);
  B bf16 ``[G, N, K]`` K-major seen as ``[G * N, K]``, or N-major (the ``nn`` form's ``[G, K, N]``
  transposed, strides ``(K * N, 1, N)``) seen as ``[G * K, N]`` in place, no copy; D bf16 ``[M_total, N]``
  row-major; ``grouped_layout`` int32 (``[M_total]`` ids or ``[G]`` PSUM ends).
- masked: A bf16 ``[G, max_m, K]`` packed (``[G * max_m, K]``), D likewise ``[G * max_m, N]``,
  ``masked_m`` int32 ``[G]`` read by the kernel only; B as above.

Imports cleanly on a CPU-only machine. Launches are recorded (:func:`.launcher.record`) under a key of
every tensor's pointer, strides and dtype; a repeat call replays the raw launch. Nothing here reads
device memory, so the masked form is CUDA-graph capturable once compiled. Tensors TMA cannot address
(a base or row stride not a multiple of 16 bytes) run the portable kernel instead, as in
:mod:`.dispatch_bf16`: the shape-only rule in :func:`unsupported_reason` cannot see pointers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton

from ...jit.device import DeviceFacts
from ...jit.heuristics import BF16_BLOCK_K, GemmDesc, get_portable_config
from ...jit.heuristics_sm90 import Sm90Bf16Config
from ...jit.heuristics_sm90_bf16_grouped import (
    GROUPED_LAYOUTS,
    get_sm90_bf16_grouped_config,
    make_bf16_grouped_config,
)
from ..portable.m_grouped import contiguous_config, launch_m_grouped_contiguous, launch_m_grouped_masked
from . import gemm_bf16, launcher, layouts
from .dispatch_bf16 import _desc, _facts_of, _tma_ready
from .dispatch_grouped import contiguous_alignment_reason, head_batched_reason, head_block_n, masked_layout_reason


def unsupported_reason(desc: GemmDesc, facts: DeviceFacts) -> str | None:
    """None when the sm90 grouped BF16 kernel runs ``desc`` (an m-grouped bf16 layout); else a short reason."""
    if desc.layout not in GROUPED_LAYOUTS:
        return f"layout {desc.layout} is not m-grouped"
    if desc.kind != "bf16":
        return f"kind {desc.kind} is not a BF16 GEMM"
    if desc.out_fp32 or desc.with_c:
        return "the m-grouped sm90 BF16 kernel writes BF16 without C"
    if desc.k < 1:
        return "K=0 needs no kernel"
    # TMA: every row stride a multiple of 16 bytes (8 bf16 along the contiguous dim).
    if (desc.a_k_major or desc.b_k_major) and desc.k % 8:
        return f"K={desc.k}: K-major rows are not 16-byte aligned for TMA (K % 8 != 0)"
    if desc.n % 8:
        return f"N={desc.n}: rows of D (and of an N-major B) are not 16-byte aligned for TMA (N % 8 != 0)"
    if not desc.a_k_major:
        if desc.layout == "m_grouped_masked":
            return "the masked sm90 BF16 kernel needs K-major A (the packed [G * max_m, K] view)"
        if desc.m % 8:
            return f"M-major A with M_total={desc.m}: rows are not 16-byte aligned for TMA (M % 8 != 0)"
    if not desc.b_k_major and desc.k % BF16_BLOCK_K:
        # the [G * K, N] view: a partial last K slice would read the next group's rows
        return f"N-major B with K={desc.k}: K must be a multiple of {BF16_BLOCK_K} for the [G * K, N] view"
    rows = desc.num_groups * desc.m if desc.layout == "m_grouped_masked" else desc.m
    if rows >= 2**31 or desc.num_groups * max(desc.n, desc.k) >= 2**31:
        return "row indices of the grouped views overflow int32"
    return contiguous_alignment_reason(desc)


def get_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Bf16Config:
    return get_sm90_bf16_grouped_config(desc, facts)


def grouped_constexprs(desc: GemmDesc, use_psum: bool = False) -> dict:
    """The kernel's grouped constexprs for ``desc`` (every one named: ASTSource applies no defaults)."""
    if desc.layout == "m_grouped_contiguous":
        return dict(GROUPING=1, NUM_GROUPS=desc.num_groups, GROUP_ROWS=0, USE_PSUM=bool(use_psum), ALIGN=desc.alignment)
    if desc.layout == "m_grouped_masked":
        return dict(GROUPING=2, NUM_GROUPS=desc.num_groups, GROUP_ROWS=desc.m, USE_PSUM=False, ALIGN=desc.alignment)
    raise ValueError(f"grouped_constexprs takes an m-grouped desc, got layout {desc.layout!r}")


def kernel_meta(desc: GemmDesc, config: Sm90Bf16Config, use_psum: bool = False) -> dict:
    """Every constexpr of :func:`.gemm_bf16.bf16_grouped_gemm_kernel` for ``desc`` under ``config``."""
    return dict(
        N=desc.n, K=desc.k, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        STAGES=config.stages, GROUP_M=config.group_m, A_MN_MAJOR=not desc.a_k_major,
        B_MN_MAJOR=not desc.b_k_major, **grouped_constexprs(desc, use_psum),
        PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.MATH_REGS, B_PREFETCH=config.b_prefetch,
    )


def a_block(desc: GemmDesc, config: Sm90Bf16Config) -> list[int]:
    """TMA box of one math warpgroup's A rows: ``[64, BLOCK_K]`` (K-major) or ``[BLOCK_K, 64]`` (M-major)."""
    return [64, config.block_k] if desc.a_k_major else [config.block_k, 64]


def b_block(desc: GemmDesc, config: Sm90Bf16Config) -> list[int]:
    """TMA box of B: ``[BLOCK_N, BLOCK_K]`` (K-major) or ``[BLOCK_K, BLOCK_N]`` (N-major)."""
    return [config.block_n, config.block_k] if desc.b_k_major else [config.block_k, config.block_n]


def a_view(desc: GemmDesc, a: torch.Tensor) -> torch.Tensor:
    """Contiguous A ``[M_total, K]`` as the descriptor's source: itself (K-major) or ``A^T`` (M-major)."""
    return a if desc.a_k_major else a.T


def b_view(b: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(2-D TMA source of B ``[G, N, K]``, whether it is a copy): ``[G * N, K]`` (K-major) or ``[G * K, N]``
    (N-major, the ``nn`` form's ``[G, K, N]``), both in place; a B whose groups are not packed back to
    back is copied into that layout (then the launch is not recorded: the copy lives for one call)."""
    g, n, k = b.shape
    if b.stride(2) == 1 or k == 1:
        if b.stride(1) == k and b.stride(0) == n * k:
            return b.view(g * n, k), False
        return b.contiguous().view(g * n, k), True
    bt = b.transpose(1, 2)  # [G, K, N]
    if bt.stride(2) == 1 and bt.stride(1) == n and bt.stride(0) == n * k:
        return bt.view(g * k, n), False
    return bt.contiguous().view(g * k, n), True


def _plan(desc: GemmDesc, config: Sm90Bf16Config, a2: torch.Tensor, b: torch.Tensor, d2: torch.Tensor,
          layout_ptr: torch.Tensor, m: int, tiles: int, use_psum: bool):
    """(launch, recordable) over the 2-D views ``a2`` / ``d2``, or None where TMA cannot address them."""
    bv, copied = b_view(b)
    if not (_tma_ready(a2) and _tma_ready(bv) and _tma_ready(d2)):
        return None
    grid = (max(1, min(tiles, config.num_sms)),)
    args = (_desc(a2, a_block(desc, config)), _desc(bv, b_block(desc, config)), _desc(d2, [64, config.block_n]),
            layout_ptr, d2, m)
    meta = dict(kernel_meta(desc, config, use_psum), num_warps=config.num_warps)
    return (gemm_bf16.bf16_grouped_gemm_kernel, grid, args, meta), not copied


def _contiguous_plan(desc, config, a, b, d, grouped_layout, use_psum):
    m = a.shape[0]
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(desc.n, config.block_n)
    return _plan(desc, config, a_view(desc, a), b, d, grouped_layout, m, tiles, use_psum)


def _masked_plan(desc, config, a, b, d, masked_m):
    g, max_m, k = a.shape
    reason = masked_layout_reason(a, d)
    if reason is not None:  # api/grouped.py plans the portable kernel for these views
        raise ValueError(f"the sm90 masked BF16 kernel cannot take these views: {reason}")
    # work units: at most every group's full tile count; the kernel walks only the valid ones
    tiles = g * triton.cdiv(max_m, config.block_m) * triton.cdiv(desc.n, config.block_n)
    return _plan(desc, config, a.view(g * max_m, k), b, d.view(g * max_m, desc.n), masked_m, g * max_m, tiles, False)


# key -> recorded launch (recordings hold no tensor, launcher.py), or _PORTABLE for tensors TMA cannot address
_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
_PORTABLE = "portable"
MAX_RECORDINGS = 4096


def _tensor_key(*tensors: torch.Tensor) -> tuple:
    return tuple((t.data_ptr(), t.stride(), t.dtype) for t in tensors)


def _run(key: tuple, build: Callable[[], tuple | None], portable: Callable[[], None]) -> None:
    entry = _recordings.get(key)
    if entry is _PORTABLE:
        portable()
        return
    if entry is not None and entry():
        return
    plan = build()
    if plan is None:
        _recordings[key] = _PORTABLE
        portable()
        return
    launch, recordable = plan
    if entry is not None or not recordable:
        launcher.launch_normally([launch])
        return
    if len(_recordings) >= MAX_RECORDINGS:
        _recordings.clear()
    _recordings[key] = launcher.record([launch])


def _portable_config(desc: GemmDesc, config: Sm90Bf16Config):
    return contiguous_config(get_portable_config(desc, _facts_of(config)), desc.alignment)


def m_grouped_bf16_gemm_contiguous(desc: GemmDesc, config: Sm90Bf16Config, a: torch.Tensor, sfa: None,
                                   b: torch.Tensor, sfb: None, d: torch.Tensor, grouped_layout: torch.Tensor,
                                   use_psum_layout: bool) -> None:
    """Launch the contiguous form on validated tensors (module docstring); ``sfa``/``sfb`` must be None."""
    if sfa is not None or sfb is not None:
        raise ValueError("the m-grouped BF16 GEMM takes no scale factors (sfa and sfb must be None)")
    key = ("contiguous", desc, config, bool(use_psum_layout), a.get_device(),
           _tensor_key(a, b, d, grouped_layout))
    _run(key, lambda: _contiguous_plan(desc, config, a, b, d, grouped_layout, use_psum_layout),
         lambda: launch_m_grouped_contiguous(a, b, d, grouped_layout, None, None, use_psum_layout, desc.alignment,
                                             _portable_config(desc, config)))


def m_grouped_bf16_gemm_masked(desc: GemmDesc, config: Sm90Bf16Config, a: torch.Tensor, sfa: None,
                               b: torch.Tensor, sfb: None, d: torch.Tensor, masked_m: torch.Tensor,
                               expected_m: int) -> None:
    """Launch the masked form on validated tensors; ``masked_m`` is read by the kernel only."""
    del expected_m  # already in desc (the config's hint)
    if sfa is not None or sfb is not None:
        raise ValueError("the m-grouped BF16 GEMM takes no scale factors (sfa and sfb must be None)")
    key = ("masked", desc, config, a.get_device(), _tensor_key(a, b, d, masked_m))
    _run(key, lambda: _masked_plan(desc, config, a, b, d, masked_m),
         lambda: launch_m_grouped_masked(a, b, d, masked_m, None, None, _portable_config(desc, config)))


# ------------------------------------------------------------------------------------------ head-batched
# einsum's per-head BF16 GEMMs (api/einsum.py) on the grouped kernel's GROUPING 3: every head is a group with all
# M rows, A and D read and written in place as [M, heads * K] / [M, heads * N] views


def head_batched_plan(m: int, n: int, k: int, heads: int, b_mn_major: bool,
                      facts: DeviceFacts) -> tuple[GemmDesc, Sm90Bf16Config] | str:
    """(desc, config) of a head-batched GEMM (``heads`` groups of ``[m, k] x [n, k]^T``), or why the kernel
    cannot run it. The tiles are the masked form's rule at ``m`` rows a group, BLOCK_N narrowed to divide N."""
    reason = head_batched_reason(m, n, k, heads, BF16_BLOCK_K)
    if reason is not None:
        return reason
    desc = GemmDesc("bf16", m, n, k, True, not b_mn_major, layout="m_grouped_masked", num_groups=heads,
                    expected_m=m)
    config = get_sm90_bf16_grouped_config(desc, facts)
    if n % config.block_n:
        config = make_bf16_grouped_config(facts, config.block_m, head_block_n(n, config.block_n), config.group_m)
    return desc, config


def head_batched_meta(desc: GemmDesc, config: Sm90Bf16Config) -> dict:
    """Every constexpr of the head-batched launch (``GROUPING`` 3)."""
    return dict(kernel_meta(desc, config), GROUPING=3, GROUP_ROWS=0)


def bf16_head_batched(desc: GemmDesc, config: Sm90Bf16Config, a2: torch.Tensor, b2: torch.Tensor,
                      d2: torch.Tensor) -> bool:
    """Launch the head-batched GEMM on 2-D views: ``a2`` ``[M, heads * K]``, ``b2`` ``[heads * N, K]`` (or, N-major,
    ``[heads * K, N]``), ``d2`` ``[M, heads * N]``, each with unit inner stride. False (nothing launched) where TMA
    cannot address them; a repeated call replays its recorded launch."""
    if not (_tma_ready(a2) and _tma_ready(b2) and _tma_ready(d2)):
        return False
    key = ("heads", desc, config, a2.get_device(), _tensor_key(a2, b2, d2))

    def build() -> list:
        tiles = desc.num_groups * triton.cdiv(desc.m, config.block_m) * triton.cdiv(desc.n, config.block_n)
        args = (_desc(a2, a_block(desc, config)), _desc(b2, b_block(desc, config)), _desc(d2, [64, config.block_n]),
                d2, d2, desc.m)
        meta = dict(head_batched_meta(desc, config), num_warps=config.num_warps)
        return [(gemm_bf16.bf16_grouped_gemm_kernel, (max(1, min(tiles, config.num_sms)),), args, meta)]

    launcher.replay_or_record(_recordings, key, build, MAX_RECORDINGS)
    return True
