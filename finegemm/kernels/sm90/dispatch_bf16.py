"""Host side of the sm90 BF16 GEMM: support rule, config, TMA descriptors, launch (api/dispatch.py calls it).

Tensors as the API hands them over (``api/gemm.py``'s ``bf16_gemm_nt`` after the nn/tn/tt views):
A bf16 ``[M, K]`` and B bf16 ``[N, K]``, each either K-major (stride ``(K', 1)``) or MN-major
(stride ``(1, M')`` / ``(1, N')``: the ``t``/``n`` layouts, read in place through a descriptor over
the transposed view); D bf16/fp32 ``[M, N]`` row-major; C optional bf16/fp32 ``[M, N]`` any strides.

Imports cleanly on a CPU-only machine. Per call the hot path is one dict lookup of the cached
:class:`~.launcher.Recording` keyed by pointers, shapes and strides, then its replay through Triton's
C launcher (one launch, two with split-K). Tensors TMA cannot address (a base or row stride not a multiple
of 16 bytes) run the portable kernel instead: the shape rule in :func:`unsupported_reason` cannot see
pointers.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ...jit import env
from ...jit.device import DeviceFacts
from ...jit.heuristics import GemmDesc, get_portable_config
from ...jit.heuristics_sm90 import Sm90Bf16Config, Sm90GemvConfig, get_sm90_bf16_config, get_sm90_gemv_config
from . import gemm_bf16, gemv_bf16, launcher, layouts

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}


def unsupported_reason(desc: GemmDesc, facts: DeviceFacts) -> str | None:
    """None when the sm90 BF16 kernels run ``desc`` (any M, N, K >= 1 with TMA-aligned rows; one-row GEMMs the GEMV
    takes at any alignment); else why not."""
    if desc.kind != "bf16":
        return f"kind {desc.kind} is not a BF16 GEMM"
    if desc.layout != "normal":
        return f"layout {desc.layout} has no sm90 BF16 kernel yet"
    if desc.k < 1:
        return "K=0 needs no kernel"
    if get_sm90_gemv_config(desc, facts) is not None:
        return None  # the one-row GEMV reads with plain loads: no TMA alignment needed
    # TMA needs every row stride to be a multiple of 16 bytes: 8 bf16 elements along the contiguous dim.
    if desc.a_k_major and desc.k % 8:
        return f"K-major A with K={desc.k}: rows are not 16-byte aligned for TMA (K % 8 != 0)"
    if not desc.a_k_major and desc.m % 8:
        return f"M-major A with M={desc.m}: rows are not 16-byte aligned for TMA (M % 8 != 0)"
    if desc.b_k_major and desc.k % 8:
        return f"K-major B with K={desc.k}: rows are not 16-byte aligned for TMA (K % 8 != 0)"
    if not desc.b_k_major and desc.n % 8:
        return f"N-major B with N={desc.n}: rows are not 16-byte aligned for TMA (N % 8 != 0)"
    out_bytes = 4 if desc.out_fp32 else 2
    if (desc.n * out_bytes) % 16:
        return f"N={desc.n} rows of D are not 16-byte aligned for the TMA store"
    return None


def get_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Bf16Config | Sm90GemvConfig:
    """The rules' config: the GEMV kernel's for the one-row GEMMs it takes (``get_sm90_gemv_config``), else the
    tensor-core kernel's."""
    return get_sm90_gemv_config(desc, facts) or get_sm90_bf16_config(desc, facts)


_workspaces: dict[tuple, torch.Tensor] = {}


def _workspace(device: torch.device, numel: int) -> torch.Tensor:
    """FP32 split-K partials of the current stream (launcher.stream_scratch)."""
    return launcher.stream_scratch(_workspaces, device, numel, torch.float32)


def _desc(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
    """Descriptor over a 2-D tensor whose last dim is contiguous."""
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[t.dtype])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


def _tma_ready(t: torch.Tensor) -> bool:
    """Base and the non-contiguous stride are multiples of 16 bytes (TMA's requirement)."""
    other = t.stride(0) if t.stride(1) == 1 else t.stride(1)
    return t.data_ptr() % 16 == 0 and (other * t.element_size()) % 16 == 0


def tma_row_major(t: torch.Tensor) -> bool:
    """A 2-D tensor a TMA box can read as D's staging tile reads: row-major, rows that do not overlap (a broadcast
    row, stride 0, is no TMA tensor), base and row stride 16-byte aligned."""
    return (t.dim() == 2 and t.stride(1) == 1 and (t.shape[0] == 1 or t.stride(0) >= t.shape[1])
            and _tma_ready(t))


def c_tma_ok(config: Sm90Bf16Config, c: torch.Tensor | None, d: torch.Tensor) -> bool:
    """Whether this launch stages C by TMA (``config.c_tma``): C of D's dtype and shape that :func:`tma_row_major`
    takes. Otherwise the kernel reads C from global memory in its epilogue (same result)."""
    return (config.c_tma and config.split_k == 1 and c is not None and c.dtype == d.dtype and c.shape == d.shape
            and tma_row_major(c))


def operand_views(a: torch.Tensor, b: torch.Tensor, desc: GemmDesc) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-contiguous views the descriptors cover: A ``[M, K]`` or ``A^T [K, M]``, B ``[N, K]`` or ``B^T [K, N]``."""
    return (a if desc.a_k_major else a.T), (b if desc.b_k_major else b.T)


def _build_plan(desc: GemmDesc, config: Sm90Bf16Config, a, b, d, c):
    m, k = a.shape
    n = b.shape[0]
    bm, bn, bk, split = config.block_m, config.block_n, config.block_k, config.split_k
    bn0, bn1 = config.column_blocks  # a tile bn = bn0 + bn1 wide: two B boxes, two D boxes (bn1 > 0)
    av, bv = operand_views(a, b, desc)
    a_desc = _desc(av, [64, bk] if desc.a_k_major else [bk, 64])
    b_desc = _desc(bv, [bn0, bk] if desc.b_k_major else [bk, bn0])
    num_pid_m = triton.cdiv(m, bm)
    c_arg = c if c is not None else d
    reduce = None
    if split > 1:
        m_pad = num_pid_m * bm
        ws = _workspace(a.device, split * m_pad * n).view(split * m_pad, n)
        out = ws
        block = 256 if n >= 256 else triton.next_power_of_2(n)
        reduce = ((m, triton.cdiv(n, block)),
                  (ws, d, c_arg, n, m_pad, d.stride(0), c_arg.stride(0), c_arg.stride(1)),
                  dict(SPLIT_K=split, HAS_C=c is not None, BLOCK=block, num_warps=4,
                       launch_pdl=env.flag(env.PDL)))
    else:
        out = d
    d_desc = _desc(out, [64, config.d_box_cols])  # half-wide box: D staged in halves
    c_tma = c_tma_ok(config, c, d)
    units = num_pid_m * triton.cdiv(n, bn) * split
    grid = (min(units, config.num_sms),)
    kernel_args = (a_desc, b_desc, d_desc, c_arg, m, n, k, c_arg.stride(0), c_arg.stride(1))
    meta = dict(
        BLOCK_M=bm, BLOCK_N=bn0, BLOCK_K=bk, STAGES=config.stages, GROUP_M=config.group_m, SPLIT_K=split,
        A_MN_MAJOR=not desc.a_k_major, B_MN_MAJOR=not desc.b_k_major, HAS_C=c is not None,
        PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.math_regs(bm), num_warps=config.num_warps,
        B_PREFETCH=config.b_prefetch,
    )
    # as keywords only when on: the kernel's other specializations keep their signature
    if c_tma:
        meta.update(c_desc=_desc(c, [64, bn0]), C_TMA=True)
    if bn1:
        meta.update(b1_desc=_desc(bv, [bn1, bk] if desc.b_k_major else [bk, bn1]), d1_desc=_desc(out, [64, bn1]),
                    BLOCK_N1=bn1)
        if c_tma:
            meta.update(c1_desc=_desc(c, [64, bn1]))
    return grid, kernel_args, meta, reduce


# key (pointers, strides, C dtype, desc, config, device) -> the recorded launches (GEMM, split-K reduction);
# recordings hold no tensor (launcher.py), so the cache can cover every layer of a model
_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
MAX_RECORDINGS = 4096


def bf16_gemm(desc: GemmDesc, config: Sm90Bf16Config | Sm90GemvConfig, a: torch.Tensor, b: torch.Tensor,
              d: torch.Tensor, c: torch.Tensor | None) -> launcher.Recording | launcher.OnStream | None:
    """``d = c + a @ b^T`` on validated tensors (module docstring); falls back to portable where TMA cannot go.

    A repeated call (same pointers, strides and dtypes) replays the cached :class:`launcher.Recording` of its
    launches through Triton's C launcher (what dispatch.fp8_gemm does); returns it when it can replay (split-K:
    bound to the current stream, :class:`launcher.OnStream`). A config that stages C (``c_tma``) given a C that TMA
    cannot read (an unaligned base) runs the tile the rules pick for a C read from global memory instead. A
    :class:`Sm90GemvConfig` runs :mod:`.gemv_bf16` (plain loads: no alignment needed beyond the dtypes')."""
    gemv = isinstance(config, Sm90GemvConfig)
    if not gemv and config.c_tma and c is not None and not c_tma_ok(config, c, d):
        config = _unstaged_config(desc, config)
    key = (desc, config, a.data_ptr(), b.data_ptr(), d.data_ptr(), c.data_ptr() if c is not None else 0,
           a.stride(), b.stride(), d.stride(), c.stride() if c is not None else None,
           c.dtype if c is not None else None, a.device.index)
    # split-K: the launches bake in its stream's workspace (and, for the GEMV, its arrival counters)
    stream_of = a.device if config.split_k > 1 else None
    recording = launcher.replay_cached(_recordings, key, stream_of)
    if recording is not None:
        return recording
    if gemv:
        return launcher.replay_or_record(_recordings, key, lambda: gemv_bf16.build_plan(config, a, b, d, c),
                                         MAX_RECORDINGS, stream_of=stream_of)
    av, bv = operand_views(a, b, desc)
    if not (_tma_ready(av) and _tma_ready(bv) and _tma_ready(d)):
        from ..portable.gemm_bf16 import launch_bf16_gemm

        launch_bf16_gemm(a, b, d, c, get_portable_config(desc, _facts_of(config)))
        return None

    def build() -> list:
        grid, kernel_args, meta, reduce = _build_plan(desc, config, a, b, d, c)
        launches = [(gemm_bf16.bf16_gemm_kernel, grid, kernel_args, meta)]
        if reduce is not None:
            launches.append((gemm_bf16.splitk_reduce_kernel, *reduce))
        return launches

    return launcher.replay_or_record(_recordings, key, build, MAX_RECORDINGS, stream_of=stream_of)


@functools.lru_cache(maxsize=256)
def _unstaged_config(desc: GemmDesc, config: Sm90Bf16Config) -> Sm90Bf16Config:
    """The rules' config for ``desc`` on ``config``'s device with a C that is not staged by TMA."""
    return get_sm90_bf16_config(dataclasses.replace(desc, c_like_d=False), _facts_of(config))


def _facts_of(config: Sm90Bf16Config) -> DeviceFacts:
    from ...jit.device import H200

    return DeviceFacts(H200.name, config.num_sms, H200.smem_per_block, H200.capability)
