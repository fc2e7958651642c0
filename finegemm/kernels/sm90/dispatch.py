"""Host side of the sm90 fast path: support check, config, TMA descriptors, launch (called by api/dispatch.py).

Imports cleanly on a CPU-only machine (nothing touches the device at import time). Per call the hot
path does: one dict lookup keyed by the tensors' pointers, strides and dtypes, then a replay of the
recorded launch (launcher.py: Triton's C launcher with pre-encoded tensor maps), plus the split-K
reduction's where chosen.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ...jit import env, ptxas
from ...jit.device import DeviceFacts
from ...jit.heuristics import GemmDesc, get_portable_config
from ...jit.heuristics_sm90 import HEAD_SPLIT_BLOCK_NS, Sm90Config, get_sm90_config, head_split_config
from ..portable.gemm_fp8 import launch_fp8_gemm
from . import gemm_1d2d, launcher, layouts
from .dispatch_bf16 import _facts_of, _tma_ready, tma_row_major
from .transpose import operand_workspace, transpose_launch

SUPPORTED_KINDS = ("fp8_1d2d", "fp8_1d1d")
# FP8 WGMMA reads both operands K-major: with this on, an MN-major A or B (fp8_gemm_nn / tn / tt) is first copied
# K-major into a per-stream workspace (one transposing launch each, .transpose) and the nt kernel runs, instead of
# the portable kernel. Off: its GPU tests and timing have not run on the H200.
MN_MAJOR_VIA_TRANSPOSE = False

_GL_DTYPES = {
    torch.float8_e4m3fn: gl.float8e4nv,
    torch.float8_e5m2: gl.float8e5,
    torch.bfloat16: gl.bfloat16,
    torch.float32: gl.float32,
    torch.int32: gl.int32,
}


def unsupported_reason(desc: GemmDesc, facts: DeviceFacts) -> str | None:
    """None when the sm90 kernel runs ``desc``; else a short reason."""
    if desc.kind not in SUPPORTED_KINDS:
        return f"kind {desc.kind} has no sm90 kernel yet"
    if desc.layout != "normal":
        return f"layout {desc.layout} has no sm90 kernel yet"
    if not (desc.a_k_major and desc.b_k_major) and not MN_MAJOR_VIA_TRANSPOSE:
        return "sm90 kernel needs K-major A and B"
    if desc.k % 128:
        return f"K={desc.k} is not a multiple of 128"
    out_bytes = 4 if desc.out_fp32 else 2
    if (desc.n * out_bytes) % 16:
        return f"N={desc.n} rows of D are not 16-byte aligned for the TMA store"
    if desc.kind == "fp8_1d1d" and not desc.out_fp32:
        return "recipe (1, 1, 128) writes FP32"
    if desc.head_splits is not None:
        left, mid, right = desc.head_splits
        if math.gcd(left, right) % HEAD_SPLIT_BLOCK_NS[-1]:
            return (f"head splits {desc.head_splits}: left and right must be multiples of "
                    f"{HEAD_SPLIT_BLOCK_NS[-1]} (a tile's columns land together)")
        if ((desc.n + desc.n // (left + right) * mid) * out_bytes) % 16:
            return f"head splits {desc.head_splits}: rows of D are not 16-byte aligned for the TMA store"
    return None


def get_config(desc: GemmDesc, facts: DeviceFacts) -> Sm90Config:
    config = get_sm90_config(desc, facts)
    return config if desc.head_splits is None else head_split_config(desc, facts, config)


# split-K buffers per (device, current stream, size): launcher.stream_scratch
_workspaces: dict[tuple, torch.Tensor] = {}
_counters: dict[tuple, torch.Tensor] = {}


def _workspace(device: torch.device, numel: int) -> torch.Tensor:
    """FP32 split-K partials of the current stream."""
    return launcher.stream_scratch(_workspaces, device, numel, torch.float32)


def _arrival_counters(device: torch.device, numel: int) -> torch.Tensor:
    """Zeroed int32 split-K arrival counters (``Sm90Config.splitk_fused``) of the current stream; the kernel
    leaves them 0."""
    return launcher.stream_scratch(_counters, device, numel, torch.int32, zeroed=True)


def _desc(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[t.dtype])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


_sfa_dummies: dict[tuple, torch.Tensor] = {}


def _scale_desc(sfa: torch.Tensor, bm: int, tma: bool) -> TensorDescriptor | None:
    """TMA descriptor of MN-major scales ``[M, K/128]`` (the per-token LHS ones, or recipe (1, 1, 128)'s
    per-channel RHS ones with N for M) seen as [K/128 (packed: ceil(K/512)), M], box [1, BM].

    Without ``tma`` the kernel never reads it: a 16-byte placeholder over a cached dummy tensor. None
    when the scales cannot be a TMA source (base or K stride not 16-byte aligned).
    """
    if not tma:
        key = (sfa.device, sfa.dtype)
        dummy = _sfa_dummies.get(key)
        if dummy is None:
            dummy = _sfa_dummies[key] = launcher.persistent_buffer(sfa.device, 4, sfa.dtype, zeroed=True).view(1, 4)
        return TensorDescriptor(dummy, [1, 4], [4, 1], layouts.sfa_box(bm, False), gemm_1d2d.sfa_desc_layout())
    m, sfk = sfa.shape
    # a size-1 K dim may carry any stride; the layout contract pads M to 4 words
    stride_k = sfa.stride(1) if sfk > 1 else (m + 3) // 4 * 4
    if sfa.data_ptr() % 16 or (stride_k * 4) % 16 or (m > 1 and sfa.stride(0) != 1):
        return None
    return TensorDescriptor(sfa, [sfk, m], [stride_k, 1], layouts.sfa_box(bm, True), gemm_1d2d.sfa_desc_layout())


def c_tma_ok(config: Sm90Config, c: torch.Tensor | None, d: torch.Tensor) -> bool:
    """Whether C can be staged by TMA in the D buffer (``Sm90Config.c_tma``): a tiling that can
    (``Sm90Config.can_stage_c``), FP32 C and D, C a tensor :func:`.dispatch_bf16.tma_row_major` takes."""
    return (c is not None and config.can_stage_c and c.dtype == torch.float32 and d.dtype == torch.float32
            and tma_row_major(c))


# The in-place accumulate by TMA reduce-add: when C is D the tile is added into D by the TMA instead of C being read
# and D stored. H100, three rounds, bitwise equal to the separate-C call: one-wave tiles 128 wide gain
# (24576x4096x1536 at 128x128 501 -> 460 us, 7168x4096x2048 187 -> 172, 2112x4096x7168 at 64x128 176 -> 172);
# 256-row tiles lose (7168x4096x16384 1026-1082 -> 1088-1120, 4096x4096x7168 +1-2 %; without a C read they keep a
# 32-byte stack) and so does 128x64 at K = 512 (32768x4096x512 418 -> 556). So only tiles of <= 128 rows and 128
# columns take it, except in the groups of a k-grouped call, where it gained on every tile the groups run (H100
# harness k-grouped suite, kernel us without / with, 3 rounds: G = 16 7168x2048 1328-1377 -> 1240-1253, G = 8
# 7168x2048 1166-1177 -> 1085-1100, G = 16 4096x7168 2776-2964 -> 2702-2724, G = 4 4096x7168 (256 rows) 2182-2373
# -> 2188-2395: a tie).
def d_reduce_ok(desc: GemmDesc, config: Sm90Config, c: torch.Tensor | None, d: torch.Tensor,
                k_group: bool = False) -> bool:
    """Whether ``d = c + a @ b`` runs as ``d += a @ b`` by TMA reduce-add (the kernel's ``D_REDUCE``): C is D
    (same storage, strides and dtype, FP32), the whole K in one launch (no split-K, or split-K summed in the kernel:
    the split that arrives last adds the sum) and plain columns, recipe (1, 1, 128) (the weight-gradient and
    k-grouped accumulate: at 256 rows recipe (1, 128, 128) without a C read spills 104 bytes in its K loop,
    CPU compile); a tile of <= 128 rows and 128 columns (the measured gain, above), or any tile in one group of
    a k-grouped call (``k_group``)."""
    if not k_group and (config.block_m > 128 or config.block_n != 128):
        return False
    return (c is not None and (config.split_k == 1 or config.splitk_fused) and not desc.head_splits
            and desc.kind == "fp8_1d1d"
            and d.dtype == torch.float32
            and c.dtype == d.dtype and c.data_ptr() == d.data_ptr() and c.shape == d.shape
            and c.stride() == d.stride())


def _build_plan(desc: GemmDesc, config: Sm90Config, a, sfa, b, sfb, d, c, chain: int = 0, k_group: bool = False):
    """(grid, kernel arguments, launch keywords, split-K reduction launch or None) of one GEMM.

    ``chain`` (the kernel's ``PDL_CHAIN``; 0 unless programmatic dependent launch is on and the config has no
    split-K): 1 the first of a chain of independent launches, 2 a later link (k-grouped groups). ``k_group``: one
    group of a k-grouped call (see :func:`d_reduce_ok`)."""
    m, k = a.shape
    n = b.shape[0]
    bm, bn, split = config.block_m, config.block_n, config.split_k
    bn0, bn1 = config.column_blocks  # a tile bn = bn0 + bn1 wide: B and D in two boxes each (bn1 > 0)
    a_desc = _desc(a, [layouts.a_box_rows(bm), 128])
    b_desc = _desc(b, [bn0, 128])
    num_pid_m = triton.cdiv(m, bm)
    ws = None
    fused = split > 1 and config.splitk_fused
    tiles = num_pid_m * triton.cdiv(n, bn)
    units = tiles * split
    if fused:
        # the kernel's _unit_plan: with split_tail only the tiles past the last whole round of the grid split
        whole = tiles // config.num_sms * config.num_sms if config.split_tail else 0
        units = whole + (tiles - whole) * split
        ws = _workspace(a.device, max(tiles - whole, 1) * split * bm * bn)
        counters = _arrival_counters(a.device, max(tiles - whole, 1) * gemm_1d2d.num_math_warpgroups(bm))
        d_desc = _desc(d, [64, bn])
    elif split > 1:
        m_pad = num_pid_m * bm
        ws = _workspace(a.device, split * m_pad * n).view(split * m_pad, n)
        d_desc = _desc(ws, [64, bn])
    else:
        m_pad = m
        d_desc = _desc(d, [64, bn0])
    grid = (min(units, config.num_sms),)
    per_channel = desc.kind == "fp8_1d1d"
    pdl = env.flag(env.PDL)
    chain = chain if pdl and split == 1 else 0
    stride_sfb = sfb.stride(1) if per_channel else sfb.stride(0)
    d_reduce = d_reduce_ok(desc, config, c, d, k_group)
    if d_reduce:
        c = None  # C is D: the tile is added into D by the TMA, the kernel reads no C
    c_arg = c if c is not None else d
    sfa_desc = _scale_desc(sfa, bm, config.sfa_tma)
    if sfa_desc is None:  # scales not TMA-addressable (unaligned view): load them from global memory
        config = dataclasses.replace(config, sfa_tma=False)
        sfa_desc = _scale_desc(sfa, bm, False)
    sfb_desc = _scale_desc(sfb, bn, True) if per_channel and config.sfb_tma else None
    if sfb_desc is None:
        config = dataclasses.replace(config, sfb_tma=False)
    c_desc = _desc(c, [64, bn]) if config.c_tma and c_tma_ok(config, c, d) else None
    if c_desc is None:
        config = dataclasses.replace(config, c_tma=False)
    kernel_args = (a_desc, b_desc, d_desc, sfa, sfb, c_arg, m, sfa.stride(1), stride_sfb, c_arg.stride(0), sfa_desc)
    meta = dict(
        N=n, K=layouts.BLOCK_K if config.k_dynamic else k, BLOCK_M=bm, BLOCK_N=bn, STAGES=config.stages,
        GROUP_M=config.group_m, SPLIT_K=split,
        SF_PACKED=sfa.dtype == torch.int32, SFB_PER_CHANNEL=per_channel, HAS_C=c is not None,
        PIPE_MMA=config.pipe_mma, PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.math_regs(bm),
        SMALL_EPI=config.small_epi, SFA_TMA=config.sfa_tma, sfb_desc=sfb_desc, SFB_TMA=config.sfb_tma,
        K_DYN=config.k_dynamic, c_desc=c_desc, C_TMA=config.c_tma,
        C_TMA_LATE=config.c_tma and config.c_tma_late and not (fused and config.split_tail),
        num_warps=config.num_warps, SPLITK_FUSED=fused, SPLIT_TAIL=fused and config.split_tail,
        PDL=pdl and chain != 2, launch_pdl=pdl, PDL_CHAIN=chain, B_PREFETCH=config.b_prefetch,
        HEAD_SPLITS=desc.head_splits or (0, 0, 0), D_REDUCE=d_reduce,
        ptx_options=ptxas.fp8_gemm_options(per_channel),
    )
    if fused:
        meta.update(ws_ptr=ws, cnt_ptr=counters)
    if bn1:
        meta.update(BLOCK_N=bn0, BLOCK_N1=bn1, b1_desc=_desc(b, [bn1, 128]), d1_desc=_desc(d, [64, bn1]))
    reduce = None
    if split > 1 and not fused:
        block = 256 if n >= 256 else triton.next_power_of_2(n)
        reduce = ((m, triton.cdiv(n, block)), (ws, d, c_arg, m, n, m_pad, d.stride(0), c_arg.stride(0)),
                  dict(SPLIT_K=split, HAS_C=c is not None, BLOCK=block, num_warps=4,
                       launch_pdl=pdl))
    return grid, kernel_args, meta, reduce


# plan key -> the recorded launches (GEMM, split-K reduce). Recordings hold no tensor (launcher.py), so
# the cache can cover every layer of a model and the allocator can reuse freed activation addresses.
_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
MAX_RECORDINGS = 4096


def fp8_gemm(desc: GemmDesc, config: Sm90Config, a, sfa, b, sfb, d, c
             ) -> launcher.Recording | launcher.OnStream | None:
    """Launch on validated tensors (shapes, layouts and dtypes as in api/gemm.py's docstring).

    Per call: one key (pointers, strides, dtypes of every tensor, device; shapes via ``desc``) and one
    dict lookup, then the cached :class:`launcher.Recording` of the GEMM (and of the split-K
    reduction): Triton's C launcher with pre-built arguments and pre-encoded tensor maps on the
    current stream. A new key builds the plan and launches through ``kernel[grid](...)``, recording
    it; a recording that cannot replay now (a launch hook, another current device, ...) launches the
    same way.

    Returns the replayable recording of this launch (replayed or just recorded), else None: a caller
    whose own key covers this one's (api/gemm.py) may replay it directly on later calls. A split-K recording
    comes bound to the current stream (:class:`launcher.OnStream`): it bakes in that stream's workspace.
    """
    a_k, b_k = _k_major_operands(desc, a, b)
    key = (desc, config, a.data_ptr(), sfa.data_ptr(), b.data_ptr(), sfb.data_ptr(), d.data_ptr(),
           a.stride(), sfa.stride(), b.stride(), sfb.stride(), d.stride(), a.dtype, b.dtype, a.get_device(),
           None if c is None else (c.data_ptr(), c.stride(), c.dtype), a_k.data_ptr(), b_k.data_ptr())
    stream_of = a.device if config.split_k > 1 or a_k is not a or b_k is not b else None
    recording = launcher.replay_cached(_recordings, key, stream_of)
    if recording is not None:
        return recording
    if not (_tma_ready(a_k) and _tma_ready(b_k) and _tma_ready(d)):
        # a view TMA cannot address (base or row stride not a multiple of 16 bytes, e.g. d = out[:, 4:]):
        # the shape rules cannot see pointers, so the portable kernel runs it (scales as they are)
        launch_fp8_gemm(a, sfa, b, sfb, d, c, desc.kind == "fp8_1d2d", get_portable_config(desc, _facts_of(config)),
                        desc.head_splits)
        return None

    def build() -> list:
        return fp8_launches(desc, config, a, sfa, b, sfb, d, c, a_k, b_k)

    # a split-K launch bakes in its stream's workspace (_workspace), a transposed operand its stream's copy
    return launcher.replay_or_record(_recordings, key, build, MAX_RECORDINGS, stream_of=stream_of)


def _k_major_operands(desc: GemmDesc, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B as the K-major ``[M, K]`` / ``[N, K]`` the kernel reads: themselves, or for an MN-major operand
    (``MN_MAJOR_VIA_TRANSPOSE``) this stream's workspace that :func:`fp8_launches` fills with its transpose."""
    m, k = a.shape
    n = b.shape[0]
    a_k = a if desc.a_k_major else operand_workspace("dense_a", a, m, k)
    b_k = b if desc.b_k_major else operand_workspace("dense_b", b, n, k)
    return a_k, b_k


def fp8_launches(desc: GemmDesc, config: Sm90Config, a, sfa, b, sfb, d, c, a_k, b_k) -> list:
    """The launches of one dense FP8 GEMM (launcher.py's form): the transposes of MN-major operands into their
    K-major workspaces ``a_k`` / ``b_k`` (:func:`_k_major_operands`), the GEMM, the split-K reduction."""
    launches = []
    if a_k is not a:
        launches.append(transpose_launch(a.T, a_k))
    if b_k is not b:
        launches.append(transpose_launch(b.T, b_k))
    kdesc = dataclasses.replace(desc, a_k_major=True, b_k_major=True)
    grid, kernel_args, meta, reduce = _build_plan(kdesc, config, a_k, sfa, b_k, sfb, d, c)
    launches.append((gemm_1d2d.fp8_gemm_kernel, grid, kernel_args, meta))
    if reduce is not None:
        launches.append((gemm_1d2d._splitk_reduce_kernel, *reduce))
    return launches


def bf16_gemm(desc: GemmDesc, config: Any, a, b, d, c) -> launcher.Recording | launcher.OnStream | None:
    """BF16 entry point for ``api.dispatch.run_sm90``: recordings and launch live in :mod:`.dispatch_bf16`;
    returns its replayable recording of this launch, else None."""
    from . import dispatch_bf16

    return dispatch_bf16.bf16_gemm(desc, config, a, b, d, c)
