"""Host side of the sm90 m-grouped FP8 GEMMs (contiguous and masked, recipe 1d2d, BF16 out).

Called by :mod:`finegemm.api.dispatch` (``run_sm90("m_grouped_fp8_1d2d_gemm_contiguous", ...)`` and
``..._masked``) with tensors that api/grouped.py validated and whose scales are in the required
layout. The kernel is :func:`.gemm_1d2d.fp8_gemm_kernel` with ``GROUPING`` 1 / 2; the tensor views it
takes (its docstring):

- contiguous: A ``[M_total, K]``, B ``[G, N, K]`` seen as ``[G * N, K]``, D ``[M_total, N]``,
  ``grouped_layout`` int32 (``[M_total]`` ids or ``[G]`` PSUM ends); sfa MN-major ``[M_total, SFK]``
  (TMA view ``[SFK, M_total]``), sfb ``[G, ceil(N/128), SFK]`` row-major.
- masked: A ``[G, max_m, K]`` seen as ``[G * max_m, K]``, D likewise ``[G * max_m, N]``, ``masked_m``
  int32 ``[G]``; sfa MN-major ``[G, max_m, SFK]`` (TMA view ``[G * SFK, max_m_aligned]``).

``SFK`` is ``ceil(K/128)`` fp32 scales, or ``ceil(K/512)`` int32 words of packed UE8M0.
Imports cleanly on a CPU-only machine. Launches are recorded (:func:`.launcher.record`) under a key
of every tensor's pointer, strides and dtype; a repeat call replays the raw launch. Nothing here
reads device memory, so the masked form is CUDA-graph capturable once compiled.
"""

from __future__ import annotations

import math

import torch
import triton
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ...jit import ptxas
from ...jit.device import DeviceFacts
from ...jit.heuristics import GemmDesc
from ...jit.heuristics_sm90 import Sm90Config
from ...jit.heuristics_sm90_grouped import GROUPED_LAYOUTS, get_sm90_grouped_config, make_grouped_config
from . import gemm_1d2d, launcher, layouts
from .dispatch import _desc, _scale_desc
from .dispatch_bf16 import _tma_ready


def unsupported_reason(desc: GemmDesc, facts: DeviceFacts) -> str | None:
    """None when the sm90 grouped kernel runs ``desc`` (an m-grouped layout); else a short reason."""
    if desc.layout not in GROUPED_LAYOUTS:
        return f"layout {desc.layout} is not m-grouped"
    if desc.kind != "fp8_1d2d":
        return f"m-grouped kind {desc.kind} has no sm90 kernel yet (FP8 recipe (1, 128, 128) only)"
    if desc.out_fp32 or desc.with_c:
        return "the m-grouped sm90 kernel writes BF16 without C"
    if not (desc.a_k_major and desc.b_k_major):
        return "the m-grouped sm90 kernel needs K-major A and B"
    if desc.k % 128:
        return f"K={desc.k} is not a multiple of 128"
    if (desc.n * 2) % 16:
        return f"N={desc.n} rows of the BF16 D are not 16-byte aligned for the TMA store"
    if desc.layout == "m_grouped_masked" and desc.num_groups * desc.m >= 2**31:
        return "G * max_m rows overflow int32 row indices"
    return contiguous_alignment_reason(desc)


def contiguous_alignment_reason(desc: GemmDesc) -> str | None:
    """Why the sm90 grouped kernels cannot tile a contiguous ``desc``'s segments (None: they can): their tiles
    are at least 64 rows (one WGMMA) and must not straddle two segments."""
    if desc.layout == "m_grouped_contiguous" and desc.alignment % 64:
        return (f"contiguous segments aligned to {desc.alignment} rows: the sm90 tiles (64 rows or more) would "
                "straddle two experts")
    return None


def get_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Config:
    return get_sm90_grouped_config(desc, facts)


def sf_cols(k: int, packed: bool) -> int:
    """Columns of a scale tensor along K: ceil(K/128) fp32, or ceil(K/512) packed int32 words."""
    sfk = math.ceil(k / 128)
    return math.ceil(sfk / 4) if packed else sfk


def grouped_constexprs(desc: GemmDesc, use_psum: bool = False) -> dict:
    """The kernel's grouped constexprs for ``desc`` (every one named: ASTSource applies no defaults).

    Strides follow the required scale layout (finegemm.layout): sfb ``[G, ceil(N/128), SFK]`` contiguous;
    masked sfa ``[G, max_m, SFK]`` MN-major with ``max_m`` padded to 4 words (16 bytes).
    """
    cols = sf_cols(desc.k, desc.sf_packed)
    sfb_stride_g = math.ceil(desc.n / 128) * cols
    if desc.layout == "m_grouped_contiguous":
        return dict(GROUPING=1, NUM_GROUPS=desc.num_groups, GROUP_ROWS=0, SFK_ROWS=0, SFA_STRIDE_G=0,
                    SFB_STRIDE_G=sfb_stride_g, USE_PSUM=bool(use_psum), ALIGN=desc.alignment)
    if desc.layout == "m_grouped_masked":
        m_aligned = (desc.m + 3) // 4 * 4
        return dict(GROUPING=2, NUM_GROUPS=desc.num_groups, GROUP_ROWS=desc.m, SFK_ROWS=cols,
                    SFA_STRIDE_G=cols * m_aligned, SFB_STRIDE_G=sfb_stride_g, USE_PSUM=False, ALIGN=desc.alignment)
    raise ValueError(f"grouped_constexprs takes an m-grouped desc, got layout {desc.layout!r}")


def _meta(desc: GemmDesc, config: Sm90Config, sfa: torch.Tensor, use_psum: bool, sfa_tma: bool, layout_ptr,
          d_ptr) -> dict:
    """Keyword arguments of the launch: the grouped pointers come after the constexprs in the signature."""
    return dict(
        layout_ptr=layout_ptr, d_ptr=d_ptr,
        N=desc.n, K=desc.k, BLOCK_M=config.block_m, BLOCK_N=config.block_n, STAGES=config.stages,
        GROUP_M=config.group_m, SPLIT_K=1, SF_PACKED=sfa.dtype == torch.int32, SFB_PER_CHANNEL=False,
        HAS_C=False, PIPE_MMA=config.pipe_mma, PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.MATH_REGS,
        SMALL_EPI=False, SFA_TMA=sfa_tma, num_warps=config.num_warps, B_PREFETCH=config.b_prefetch,
        ptx_options=ptxas.fp8_gemm_options(), **grouped_constexprs(desc, use_psum),
    )


def _b_packed(b: torch.Tensor) -> bool:
    """``[G, N, K]`` B stored as one packed ``[G * N, K]`` block (readable in place by one TMA descriptor)."""
    g, n, k = b.shape
    return b.stride(2) == 1 and b.stride(1) == k and b.stride(0) == n * k


def _rows_of(b: torch.Tensor) -> torch.Tensor:
    """``[G, N, K]`` K-major B as one ``[G * N, K]`` TMA source (a copy only when the groups are not packed)."""
    g, n, k = b.shape
    if not _b_packed(b):
        b = b.contiguous()
    return b.view(g * n, k)


def _check_sf(name: str, sf: torch.Tensor, strides: tuple[int, ...]) -> None:
    if tuple(sf.stride()) != strides:
        raise ValueError(f"{name}: the sm90 m-grouped kernel needs scale strides {strides}, got {tuple(sf.stride())} "
                         "(api/grouped.py passes scales in the required layout)")


def _sfb_stride(desc: GemmDesc, sfb: torch.Tensor) -> int:
    cols = sf_cols(desc.k, desc.sf_packed)
    _check_sf("b[1]", sfb, (math.ceil(desc.n / 128) * cols, cols, 1))
    return cols


def _contiguous_plan(desc, config, a, sfa, b, sfb, d, grouped_layout, use_psum):
    m, _ = a.shape
    bm, bn = config.block_m, config.block_n
    stride_sfb = _sfb_stride(desc, sfb)
    sfa_desc = _scale_desc(sfa, bm, config.sfa_tma)
    sfa_tma = config.sfa_tma
    if sfa_desc is None:  # not TMA-addressable: per-token scales from global memory
        sfa_tma = False
        sfa_desc = _scale_desc(sfa, bm, False)
    stride_sfa_k = sfa.stride(1) if sfa.shape[1] > 1 else (m + 3) // 4 * 4
    tiles = triton.cdiv(m, bm) * triton.cdiv(desc.n, bn)
    grid = (max(1, min(tiles, config.num_sms)),)
    args = (_desc(a, [bm, 128]), _desc(_rows_of(b), [bn, 128]), _desc(d, [64, bn]), sfa, sfb, d, m, stride_sfa_k,
            stride_sfb, 0, sfa_desc)
    return grid, args, _meta(desc, config, sfa, use_psum, sfa_tma, grouped_layout, d)


def masked_layout_reason(a: torch.Tensor, d: torch.Tensor) -> str | None:
    """Why the masked kernel cannot take these views (it reads ``a`` and writes ``d`` as packed
    ``[G * max_m, K]`` / ``[G * max_m, N]`` TMA sources); None when it can."""
    g, max_m, k = a.shape
    n = d.shape[2]
    if a.stride() != (max_m * k, k, 1):
        return f"a[0] strides {tuple(a.stride())} are not a packed [G, max_m, K]"
    if d.stride() != (max_m * n, n, 1):
        return f"d strides {tuple(d.stride())} are not a packed [G, max_m, N]"
    return None


def _group_scales_desc(sfa: torch.Tensor, bm: int, tma: bool) -> tuple[TensorDescriptor, bool]:
    """(descriptor, whether the ring reads it by TMA) of per-group per-token scales ``[G, rows, SFK]`` MN-major
    (strides ``(SFK * rows_aligned, 1, rows_aligned)``): read as ``[G * SFK, rows]`` rows of stride ``rows_aligned``,
    one K block of one group per row, so a box never crosses into another group's scales. Without TMA (or with
    an unaligned base) a placeholder the kernel never reads."""
    g, rows, cols = sfa.shape
    if tma and sfa.data_ptr() % 16 == 0:
        desc = TensorDescriptor(sfa, [g * cols, rows], [(rows + 3) // 4 * 4, 1], layouts.sfa_box(bm, True),
                                gemm_1d2d.sfa_desc_layout())
        return desc, True
    return _scale_desc(sfa, bm, False), False


def _masked_plan(desc, config, a, sfa, b, sfb, d, masked_m):
    g, max_m, k = a.shape
    n = desc.n
    bm, bn = config.block_m, config.block_n
    stride_sfb = _sfb_stride(desc, sfb)
    cols = sf_cols(k, desc.sf_packed)
    m_aligned = (max_m + 3) // 4 * 4
    _check_sf("a[1]", sfa, (cols * m_aligned, 1, m_aligned))
    reason = masked_layout_reason(a, d)
    if reason is not None:
        raise ValueError(f"the sm90 masked kernel cannot take these views: {reason}")
    a2, d2 = a.view(g * max_m, k), d.view(g * max_m, n)
    sfa_desc, sfa_tma = _group_scales_desc(sfa, bm, config.sfa_tma)
    # work units: at most every group's full tile count; the kernel walks only the valid ones
    tiles = g * triton.cdiv(max_m, bm) * triton.cdiv(n, bn)
    grid = (max(1, min(tiles, config.num_sms)),)
    args = (_desc(a2, [bm, 128]), _desc(_rows_of(b), [bn, 128]), _desc(d2, [64, bn]), sfa, sfb, d2, g * max_m,
            m_aligned, stride_sfb, 0, sfa_desc)
    return grid, args, _meta(desc, config, sfa, False, sfa_tma, masked_m, d2)


# key -> recorded launch; recordings hold no tensor (launcher.py), see dispatch.py's cache
_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
MAX_RECORDINGS = 4096


def _tensor_key(*tensors: torch.Tensor) -> tuple:
    return tuple((t.data_ptr(), t.stride(), t.dtype) for t in tensors)


def _run(key: tuple, build, replayable: bool = True) -> None:
    """Replay the recording of ``key``, or build and launch (recording it when ``replayable``).

    Not replayable: the launch reads a per-call copy (unpacked B), whose pointer a recording would
    keep after the copy is freed; such calls launch normally every time.
    """
    launcher.replay_or_record(_recordings, key, lambda: [(gemm_1d2d.fp8_gemm_kernel, *build())], MAX_RECORDINGS,
                              replayable)


def m_grouped_fp8_1d2d_gemm_contiguous(desc: GemmDesc, config: Sm90Config, a, sfa, b, sfb, d, grouped_layout,
                                       use_psum_layout: bool) -> None:
    """Launch the contiguous form on validated tensors (shapes as in the module docstring)."""
    key = ("contiguous", desc, config, bool(use_psum_layout), a.get_device(),
           _tensor_key(a, sfa, b, sfb, d, grouped_layout))
    _run(key, lambda: _contiguous_plan(desc, config, a, sfa, b, sfb, d, grouped_layout, use_psum_layout),
         _b_packed(b))


def m_grouped_fp8_1d2d_gemm_masked(desc: GemmDesc, config: Sm90Config, a, sfa, b, sfb, d, masked_m,
                                   expected_m: int) -> None:
    """Launch the masked form on validated tensors; ``masked_m`` is read by the kernel only."""
    del expected_m  # already in desc (the config's hint)
    key = ("masked", desc, config, a.get_device(), _tensor_key(a, sfa, b, sfb, d, masked_m))
    _run(key, lambda: _masked_plan(desc, config, a, sfa, b, sfb, d, masked_m), _b_packed(b))


# ------------------------------------------------------------------------------------------ head-batched
# fp8_einsum's bhr,hdr->bhd (api/einsum.py) on GROUPING 3: every head a group with all M rows, A and D read and
# written in place as [M, heads * K] / [M, heads * N] views, the per-token scales in the masked form's layout
# (this module's FP8 form and dispatch_bf16_grouped's BF16 one share the checks and the BLOCK_N rule below)
HEAD_BLOCK_N = (128, 64)


def head_batched_reason(m: int, n: int, k: int, heads: int, k_multiple: int) -> str | None:
    """Why the head-batched sm90 kernels cannot run ``heads`` groups of ``[m, k] x [n, k]^T`` (None: they can):
    every tile must stay inside its own head's columns of A (K a multiple of ``k_multiple``) and of D."""
    if k % k_multiple or n % HEAD_BLOCK_N[-1]:
        return (f"head-batched sm90 GEMM needs K % {k_multiple} == 0 and N % {HEAD_BLOCK_N[-1]} == 0 (a tile must not "
                f"reach into the next head); got K={k}, N={n}")
    if m * heads >= 2**31 or heads * max(n, k) >= 2**31:
        return "row indices of the head-batched views overflow int32"
    return None


def head_block_n(n: int, block_n: int) -> int:
    """``block_n`` when it divides N, else the widest of :data:`HEAD_BLOCK_N` that does."""
    return block_n if n % block_n == 0 else next(b for b in HEAD_BLOCK_N if n % b == 0)


def head_batched_plan(m: int, n: int, k: int, heads: int, facts: DeviceFacts) -> tuple[GemmDesc, Sm90Config] | str:
    """(desc, config) of a head-batched FP8 GEMM (``heads`` groups of ``[m, k] x [n, k]^T``, recipe 1d2d, BF16 D), or
    why the kernel cannot run it: the masked form's tiles at ``m`` rows a group, at most 128 rows, BLOCK_N
    dividing N."""
    reason = head_batched_reason(m, n, k, heads, 128)
    if reason is not None:
        return reason
    desc = GemmDesc("fp8_1d2d", m, n, k, layout="m_grouped_masked", num_groups=heads, expected_m=m)
    config = get_sm90_grouped_config(desc, facts)
    if config.block_m > 128 or n % config.block_n:
        config = make_grouped_config(facts, min(config.block_m, 128), head_block_n(n, config.block_n), sfa_tma=True,
                                     pipe_mma=config.pipe_mma)
    return desc, config


def fp8_head_batched(desc: GemmDesc, config: Sm90Config, a2: torch.Tensor, sfa: torch.Tensor, b2: torch.Tensor,
                     sfb: torch.Tensor, d2: torch.Tensor) -> bool:
    """Launch the head-batched FP8 GEMM on in-place views: ``a2`` e4m3 ``[M, heads * K]``, ``sfa`` fp32
    ``[heads, M, K/128]`` in the masked form's required layout, ``b2`` e4m3 ``[heads * N, K]``, ``sfb`` fp32
    ``[heads, ceil(N/128), K/128]`` contiguous, ``d2`` bf16 ``[M, heads * N]``. False (nothing launched) where TMA
    cannot address the views; a repeated call replays its recorded launch."""
    if not (_tma_ready(a2) and _tma_ready(b2) and _tma_ready(d2)):
        return False
    heads, m, cols = sfa.shape
    m_aligned = (m + 3) // 4 * 4
    _check_sf("a[1]", sfa, (cols * m_aligned, 1, m_aligned))
    key = ("heads", desc, config, a2.get_device(), _tensor_key(a2, sfa, b2, sfb, d2))

    def build():
        bm, bn = config.block_m, config.block_n
        sfa_desc, sfa_tma = _group_scales_desc(sfa, bm, config.sfa_tma)
        tiles = heads * triton.cdiv(m, bm) * triton.cdiv(desc.n, bn)
        args = (_desc(a2, [bm, 128]), _desc(b2, [bn, 128]), _desc(d2, [64, bn]), sfa, sfb, d2, m, m_aligned,
                _sfb_stride(desc, sfb), 0, sfa_desc)
        meta = dict(_meta(desc, config, sfa, False, sfa_tma, d2, d2), GROUPING=3)
        return (max(1, min(tiles, config.num_sms)),), args, meta

    _run(key, build)
    return True
