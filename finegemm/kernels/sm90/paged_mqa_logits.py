"""Hopper paged MQA logits (``fp8_paged_mqa_logits``, decode) in Gluon: key pages by TMA, WGMMA, and the
ReLU / head-sum epilogue one 64-key tile at a time.

Same schedule, cache layout, clamping and results as the Triton kernel (kernels/portable/
paged_mqa_logits.py, whose docstring states them): program ``(slot, sub)`` walks its schedule slot's run of
256-key items (``SPLIT_KV``) and takes every ``SUBS``-th one. What differs is how an item runs:

- the fused cache is read as a 2-D e4m3 tensor of ``D``-byte rows: block ``p``'s ``block_kv`` value rows
  are rows ``p * stride(0) / D + [0, block_kv)`` (the scales follow as ``4 * block_kv / D`` more rows,
  never loaded as values), so each 64-key tile is one TMA box ``[64, D]`` at a page looked up in the
  block table; the ``[next_n * H, D]`` query rows of the item's sequence are one more box;
- all of an item's (up to four) tiles are requested at once into a ring of four slots, then each runs
  ``wgmma(kv_tile [64, D], q^T [D, next_n * H])`` and its epilogue while the later tiles land; four
  CTAs an SM (``SUBS``) overlap each other's loads, WGMMAs and epilogues;
- the epilogue applies ``kv_sf`` after the head sum as the prefill kernel does
  (:func:`.mqa_logits.weighted_relu`: ``relu(x sf) = sf (x + sign(sf)|x|) / 2``, exact for either sign).

Takes next_n * H in {32, 64, 128, 256} (a power of two: the WGMMA N), D = 128 and block_kv a multiple
of 64 (:func:`supported`); the API takes it where it measured faster (:func:`preferred`) and runs the
Triton kernel elsewhere.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..portable.paged_mqa_logits import SPLIT_KV
from .mqa_logits import _acc_layout, _add, weighted_relu

BLOCK_KV = 64  # keys per WGMMA tile (the M of the instruction)
_SPLIT = gl.constexpr(SPLIT_KV)  # keys per schedule item, readable inside the kernel
SUBS = 4  # CTAs per schedule slot (four fit an SM: 48 KB of shared memory, ~120 registers)
_GL_E4M3 = gl.float8e4nv


@gluon.jit
def _row_context(ctx_ptr, b, t: gl.constexpr, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N: gl.constexpr,
                 CTX_2D: gl.constexpr):
    """Keys token ``t`` of sequence ``b`` sees, in ``[0, key_cap]`` (the Triton kernel's rule)."""
    if CTX_2D:
        c = gl.load(ctx_ptr + b * stride_ctx_b + t * stride_ctx_t)
    else:
        c = gl.load(ctx_ptr + b * stride_ctx_b) - NEXT_N + 1 + t
    return gl.minimum(gl.maximum(c, 0), key_cap)


@gluon.jit
def _page(table_ptr, b64, stride_table, key, num_blocks, PAGE: gl.constexpr):
    """The cache block holding logical key ``key`` of sequence ``b``, clamped to ``[0, num_blocks)``."""
    return gl.minimum(gl.maximum(gl.load(table_ptr + b64 * stride_table + key // PAGE), 0), num_blocks - 1)


@gluon.jit
def _tile_logits(acc, sf, w, col_t, k, b64, ctx_ptr, b, stride_ctx_b, stride_ctx_t, key_cap, max_context_len,
                 out_ptr, stride_out, NEXT_N: gl.constexpr, CTX_2D: gl.constexpr):
    """Logits of keys ``k`` [64] for the ``NEXT_N`` tokens of sequence ``b`` from their ``[64, ROWS]`` scores
    (kv_sf after the head sum: :func:`.mqa_logits.weighted_relu`)."""
    s, post = weighted_relu(acc, sf, w, True)
    for t in gl.static_range(NEXT_N):
        logits = gl.reduce(gl.where((col_t == t)[None, :], s, 0.0), 1, _add) * post
        n_t = _row_context(ctx_ptr, b, t, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N, CTX_2D)
        logits = gl.where(k < n_t, logits, float("-inf"))
        ptrs = out_ptr + (b64 * NEXT_N + t) * stride_out + k
        gl.store(ptrs, logits.to(out_ptr.dtype.element_ty), mask=k < max_context_len)


@gluon.jit
def paged_mqa_logits_kernel(q_desc, kv_desc, sf_ptr, w_ptr, ctx_ptr, table_ptr, meta_ptr, out_ptr,
                            batch, num_blocks, max_blocks, max_context_len, rows_per_page, stride_page_sf,
                            sf_offset, stride_ws, stride_ctx_b, stride_ctx_t, stride_table, stride_out,
                            NEXT_N: gl.constexpr, HEADS: gl.constexpr, PAGE: gl.constexpr,
                            SUBS_: gl.constexpr, CTX_2D: gl.constexpr):
    ROWS: gl.constexpr = NEXT_N * HEADS
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    TILES: gl.constexpr = _SPLIT // BKV
    gl.static_assert(PAGE % BKV == 0, "a 64-key tile lies inside one page")
    acc_layout: gl.constexpr = _acc_layout(ROWS)
    row_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, acc_layout)
    slot = gl.program_id(0)
    sub = gl.program_id(1)
    b = gl.minimum(gl.maximum(gl.load(meta_ptr + 2 * slot), 0), batch)
    s = gl.maximum(gl.load(meta_ptr + 2 * slot + 1), 0)
    b_stop = gl.minimum(gl.maximum(gl.load(meta_ptr + 2 * slot + 2), 0), batch)
    s_stop = gl.maximum(gl.load(meta_ptr + 2 * slot + 3), 0)
    key_cap = gl.minimum(max_context_len, max_blocks * PAGE)

    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    kv_smem = gl.allocate_shared_memory(kv_desc.dtype, [TILES] + kv_desc.block_type.shape, kv_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [TILES + 1, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(TILES + 1):
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()
    q_bar = bars.index(TILES)
    q_t = q_smem.permute((1, 0))
    zero = gl.zeros([BKV, ROWS], gl.float32, acc_layout)
    r = gl.arange(0, ROWS, layout=col_layout)
    col_t = r // HEADS  # which of the NEXT_N tokens column r scores
    kt = gl.arange(0, BKV, layout=row_layout)

    item = 0
    done = 0  # items this program ran: the phase of every barrier
    while (b < batch) & ((b < b_stop) | (s < s_stop)):
        n_keys = _row_context(ctx_ptr, b, NEXT_N - 1, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N, CTX_2D)
        if CTX_2D:  # 2-D lens need not grow with the token
            for t in gl.static_range(NEXT_N - 1):
                n_keys = gl.maximum(n_keys, _row_context(ctx_ptr, b, t, stride_ctx_b, stride_ctx_t, key_cap,
                                                         NEXT_N, CTX_2D))
        # the schedule's item count for b counts the uncapped lens; items past the cap write nothing
        b_keys = _row_context(ctx_ptr, b, NEXT_N - 1, stride_ctx_b, stride_ctx_t, 2147483647, NEXT_N, CTX_2D)
        if CTX_2D:
            for t in gl.static_range(NEXT_N - 1):
                b_keys = gl.maximum(b_keys, _row_context(ctx_ptr, b, t, stride_ctx_b, stride_ctx_t, 2147483647,
                                                         NEXT_N, CTX_2D))
        if s < gl.cdiv(b_keys, _SPLIT):
            if item % SUBS_ == sub:
                b64 = b.to(gl.int64)
                k0 = s * _SPLIT
                n_tiles = gl.minimum(gl.maximum(gl.cdiv(n_keys - k0, BKV), 0), TILES)
                phase = done & 1
                mbarrier.expect(q_bar, q_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(q_desc, [b * ROWS, 0], q_bar, q_smem)
                for j in gl.static_range(TILES):
                    if j < n_tiles:
                        mbarrier.expect(bars.index(j), kv_desc.block_type.nbytes)
                        row = _page(table_ptr, b64, stride_table, k0 + j * BKV, num_blocks, PAGE) * rows_per_page
                        tma.async_copy_global_to_shared(kv_desc, [row + (k0 + j * BKV) % PAGE, 0], bars.index(j),
                                                        kv_smem.index(j))
                w = gl.load(w_ptr + (b64 * NEXT_N + col_t) * stride_ws + (r % HEADS))
                mbarrier.wait(q_bar, phase)
                for j in range(n_tiles):  # a runtime loop: unrolled it took 150 registers, not 127
                    mbarrier.wait(bars.index(j), phase)
                    acc = warpgroup_mma(kv_smem.index(j), q_t, zero, use_acc=False, is_async=True)
                    k = k0 + j * BKV + kt
                    inside = (k0 + j * BKV) % PAGE + kt
                    page = _page(table_ptr, b64, stride_table, k0 + j * BKV, num_blocks, PAGE)
                    sf = gl.load(sf_ptr + page.to(gl.int64) * stride_page_sf + sf_offset + inside,
                                 mask=k < n_keys, other=0.0)
                    acc = warpgroup_mma_wait(0, deps=(acc,))
                    _tile_logits(acc, sf, w, col_t, k, b64, ctx_ptr, b, stride_ctx_b, stride_ctx_t, key_cap,
                                 max_context_len, out_ptr, stride_out, NEXT_N, CTX_2D)
                # barriers the skipped tiles did not use are re-armed to keep one phase for all
                for j in gl.static_range(TILES):
                    if j >= n_tiles:
                        mbarrier.arrive(bars.index(j))
                done += 1
            item += 1
            s += 1
        else:
            b += 1
            s = 0


def supported(next_n: int, heads: int, head_dim: int, kv_cache: torch.Tensor) -> bool:
    """Whether this kernel takes the call (sm_90 assumed): a power-of-two WGMMA N (``next_n * H`` 32-256),
    D = 128, pages of 64-key multiples whose start (``stride(0)``) is a whole number of ``D``-byte rows,
    and a 16-byte-aligned cache."""
    rows = next_n * heads
    block_kv = kv_cache.shape[1]
    return (head_dim == 128 and rows in (32, 64, 128, 256) and block_kv % BLOCK_KV == 0
            and kv_cache.stride(0) % head_dim == 0 and kv_cache.data_ptr() % 16 == 0
            and kv_cache.shape[0] * (kv_cache.stride(0) // head_dim) < 2 ** 31)  # int32 TMA row coordinates


def preferred(next_n: int, heads: int, batch: int, max_context_len: int) -> bool:
    """Whether the API takes this kernel over the Triton one where :func:`supported`: from 128 query rows a
    sequence (``next_n * H``), or from 2**23 keys of work (``batch * max_context_len``). H200, pages of 64,
    contexts avg x U(0.7, 1.3), no clean-up pass (results/paged-mqa-sm90-probe-h200-2026-12-03-760302a-wip.json),
    Gluon vs Triton, us: B=256 ctx 8192 n=2 H=64 132.4 vs 208.8; B=256 ctx 65536 n=2 H=32 775.9 vs 1338.1,
    n=1 H=64 741.5 vs 844.7, n=2 H=64 898.2 vs 1571.2; B=4096 ctx 8192 n=1 H=32 1380.5 vs 1474.6, n=2
    H=64 1740.9 vs 3126.0, n=2 H=32 1525.7 vs 2592.5; but B=256 ctx 8192 n=1 H=64 121.5 vs 114.8 and n=1
    H=32 156.8 vs 102.8 (32-64 rows, few items: the Triton kernel's one 256-key dot an item wins)."""
    return next_n * heads >= 128 or batch * max_context_len >= 2 ** 23


def launch(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
           block_table: torch.Tensor, schedule_meta: torch.Tensor, out: torch.Tensor) -> None:
    """Launch on validated tensors (as api/attention.py's ``fp8_paged_mqa_logits`` passes them; the
    ``-inf`` clean-up of unwritten columns stays the Triton launcher's).

    q: e4m3 ``[B, next_n, H, D]`` contiguous (seen as ``[B * next_n * H, D]``); kv_cache: uint8
    ``[num_blocks, block_kv, 1, D + 4]`` with :func:`supported` strides; weights fp32 ``[B * next_n, H]``,
    ``stride(1) == 1``; context_lens int32 ``[B]`` or ``[B, next_n]``; block_table int32
    ``[B, max_blocks]``, ``stride(1) == 1``; schedule_meta int32 ``[num_slots + 1, 2]`` contiguous; out
    fp32/bf16 ``[B * next_n, max_context_len]``, ``stride(1) == 1``.
    """
    batch, next_n, heads, head_dim = q.shape
    num_blocks, block_kv = kv_cache.shape[0], kv_cache.shape[1]
    if not supported(next_n, heads, head_dim, kv_cache) or not q.is_contiguous():
        raise ValueError(f"the sm90 paged MQA kernel takes next_n * H in 32..256 (a power of two), D = 128, "
                         f"block_kv a multiple of 64 and a contiguous q; got q {tuple(q.shape)}, block_kv {block_kv}")
    rows = next_n * heads
    num_slots = schedule_meta.shape[0] - 1
    if num_slots <= 0 or batch == 0:
        return
    q2 = q.reshape(batch * rows, head_dim)
    rows_per_page = kv_cache.stride(0) // head_dim
    # the value rows up to the last block's own (its scale rows and any padding may end the storage)
    value_rows = (num_blocks - 1) * rows_per_page + block_kv
    values = torch.as_strided(kv_cache, (value_rows, head_dim), (head_dim, 1)).view(torch.float8_e4m3fn)
    scales = kv_cache.view(torch.float32)  # same storage, fp32 elements
    q_layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], _GL_E4M3)
    kv_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_KV, head_dim], _GL_E4M3)
    q_desc = TensorDescriptor(q2, list(q2.shape), list(q2.stride()), [rows, head_dim], q_layout)
    kv_desc = TensorDescriptor(values, list(values.shape), list(values.stride()), [BLOCK_KV, head_dim], kv_layout)
    ctx_2d = context_lens.dim() == 2
    paged_mqa_logits_kernel[(num_slots, SUBS)](
        q_desc, kv_desc, scales, weights, context_lens, block_table, schedule_meta, out,
        batch, num_blocks, block_table.shape[1], out.shape[1], rows_per_page, kv_cache.stride(0) // 4,
        block_kv * head_dim // 4, weights.stride(0), context_lens.stride(0),
        context_lens.stride(1) if ctx_2d else 0, block_table.stride(0), out.stride(0),
        NEXT_N=next_n, HEADS=heads, PAGE=block_kv, SUBS_=SUBS, CTX_2D=ctx_2d, num_warps=4)
