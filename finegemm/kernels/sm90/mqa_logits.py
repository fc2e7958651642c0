"""Hopper MQA logits (``fp8_mqa_logits``, full and compact form) in Gluon: a TMA ring of key tiles, WGMMA,
and the ReLU / head-sum epilogue, by default with the head sum itself on the tensor cores.

Dispatched by the API on sm_90 for head_dim 32/64/128 and 16-128 heads (:func:`prefill_supported`, which
lists the measurements against the Triton kernel). The compact form (``max_seqlen_k > 0``: column ``c`` of
row ``i`` is key ``start[i] + c``) differs only in where a logit is stored, and stores only in-range ones
(the caller pre-fills ``-inf`` when it asks for clean logits); it runs with the tensor-core sum only.
The epilogue: the scores of a key tile, ``relu(acc)`` (times ``sign(kv_sf)`` where a scale is negative),
are rounded to bf16 with the ReLU folded into the conversion (``cvt.rn.relu.bf16x2``) and multiplied by
the weights in a second WGMMA (A from registers, the weights a ``[H * block_q, 8]`` block-diagonal B in
shared memory), then scaled by ``|kv_sf|``: ~40 instructions a thread and tile where the FP32 sum on the
CUDA cores (``head_sum_mma=False``, ``FINEGEMM_MQA_FP32_SUM=1`` in the API) spends ~290. The rounding
costs ~3e-6 in ``calc_diff`` against float64 (about 1e-8 with the FP32 sum). The block-diagonal weights
would let a NaN score of one query reach the block's others (0 x NaN): :func:`query_nan_flags` zeroes the
query box's NaN bytes once a CTA and the store writes NaN for the queries that held them.
Why one key tile at a time: at ~100 registers four CTAs share an SM and overlap each other's WGMMA and
epilogue, which measured faster than the in-CTA overlap (two accumulators, 198 registers, two CTAs an SM);
an in-CTA pipeline of the tensor-core sum made ptxas serialize the WGMMAs (C7515) at 174 registers.

``out[i, j] = sum_h relu(q[i, h] . kv[j] * kv_sf[j]) * w[i, h]`` for ``j`` in ``[start[i], end[i])``,
``-inf`` elsewhere in the key tiles a query block computes (and, with ``CLEAN``, in all others).

One CTA (one warpgroup) owns ``BLOCK_Q`` queries (``ROWS = BLOCK_Q * H`` rows of ``q`` viewed as
``[S * H, D]``, one TMA box kept in shared memory) and a run of key tiles of ``BLOCK_KV = 64`` keys:

- a ring of ``STAGES`` kv tiles ``[64, D]`` filled by TMA (full barriers with expect-tx); a slot is
  refilled as soon as the WGMMA that read it is known complete (``warpgroup_mma_wait(1)``), by the same
  warps, so no empty barrier is needed (WGMMA and TMA are both async-proxy accesses);
- per tile: ``wgmma(kv_tile [64, D], q^T [D, ROWS])`` into a fresh ``[64, ROWS]`` fp32 accumulator
  (keys along M, query-heads along N), issued before the previous tile's epilogue, which then runs
  while it computes: ``relu(acc * kv_sf) * w`` (by default as ``(acc + sign(kv_sf) |acc|) * w``, then
  ``kv_sf / 2`` after the sum), one masked row sum over the ``H`` columns of each query, range mask,
  store of ``BLOCK_Q`` rows of 64 logits.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from . import gluon_compat, launcher

BLOCK_KV = 64
STAGES = 4
_GL_E4M3 = gl.float8e4nv


@gluon.constexpr_function
def _acc_layout(rows):
    """[64 keys, ROWS] accumulator of one warpgroup: 4 warps stacked along the keys."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, rows, 32])


@gluon.constexpr_function
def sum_columns(block_q):
    """Columns of the head-sum WGMMA: one per query of the block, at least WGMMA's smallest N (8)."""
    return max(8, block_q)


@gluon.constexpr_function
def _sum_layout(block_q):
    """[64 keys, sum_columns(block_q) queries] accumulator of the head-sum WGMMA (bf16, K = 16 a step)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, sum_columns(block_q), 16])


@gluon.jit
def _relu_bf16(x):
    """``relu(x)`` rounded to bf16, two values an instruction (``cvt.rn.relu.bf16x2.f32``: the ReLU is free)."""
    return gl.inline_asm_elementwise("cvt.rn.relu.bf16x2.f32 $0, $2, $1;", "=r,r,r", [x], dtype=gl.bfloat16,
                                     is_pure=True, pack=2)


@gluon.jit
def _min(a, b):
    return gl.minimum(a, b)


@gluon.jit
def _max(a, b):
    return gl.maximum(a, b)


@gluon.jit
def _add(a, b):
    # the reduction's own combine function: gl.sum's lives in triton.language.standard, which on a
    # machine where finegemm enabled the interpreter is an interpreted function a real compile rejects
    return a + b


@gluon.jit
def weighted_relu(acc, sf, w, SF_AFTER_SUM: gl.constexpr):
    """``(s, post)``: ``[64, ROWS]`` terms whose head sums times ``post`` [64] (per key, ``SF_AFTER_SUM``
    only) are the logits.

    Default: ``s = relu(acc * sf) * w``. ``SF_AFTER_SUM``: ``kv_sf`` applied once per logit after the head
    sum, through ``relu(x * sf) = sf * (x + sign(sf) * |x|) / 2`` (exact for either sign of ``sf``): one
    FFMA a score (``|x|`` is an operand modifier) where the default spends an FMUL and a half-rate FMNMX.
    (A per-tile branch to ``relu(x) * w`` when all 64 scales are >= 0 measured slower: its cross-warp
    minimum costs more than the FFMA.)"""
    if SF_AFTER_SUM:
        sgn = gl.where(sf >= 0.0, 1.0, -1.0)
        s = gl.fma(gl.abs(acc), sgn[:, None], acc) * w[None, :]
        post = sf * 0.5
    else:
        s = gl.maximum(acc * sf[:, None], 0.0) * w[None, :]
        post = sf
    return s, post


@gluon.jit
def _query_range(start_ptr, end_ptr, qi, seq_len, seq_len_kv, max_seqlen_k=0, COMPRESSED: gl.constexpr = False):
    """``(st, en)``: query ``qi``'s key range (``qi`` a scalar or a vector, clamped to a real query), clamped
    into ``[0, S_kv]`` with ``st <= en`` (and, ``COMPRESSED``, ``en <= st + max_seqlen_k``)."""
    q = gl.minimum(qi, seq_len - 1)
    st = gl.minimum(gl.maximum(gl.load(start_ptr + q), 0), seq_len_kv)
    en = gl.maximum(gl.minimum(gl.load(end_ptr + q), seq_len_kv), st)
    if COMPRESSED:
        en = st + gl.minimum(en - st, max_seqlen_k)
    return st, en


@gluon.jit
def _tile_epilogue(acc, sf, w, col_q, t, q0, seq_len, seq_len_kv, start_ptr, end_ptr, out_ptr, stride_out,
                   BLOCK_Q: gl.constexpr, BLOCK_KV_: gl.constexpr, row_layout: gl.constexpr,
                   SF_AFTER_SUM: gl.constexpr = False):
    """Logits of key tile ``t`` for queries ``q0 + [0, BLOCK_Q)`` from its ``[64, ROWS]`` scores
    (:func:`weighted_relu` says how ``kv_sf`` is applied)."""
    kj = t * BLOCK_KV_ + gl.arange(0, BLOCK_KV_, layout=row_layout)
    s, post = weighted_relu(acc, sf, w, SF_AFTER_SUM)
    for qq in gl.static_range(BLOCK_Q):
        qi = q0 + qq
        logits = gl.reduce(gl.where((col_q == qq)[None, :], s, 0.0), 1, _add)  # [64]: this query's heads
        if SF_AFTER_SUM:
            logits = logits * post
        st, en = _query_range(start_ptr, end_ptr, qi, seq_len, seq_len_kv)
        inside = (kj >= st) & (kj < en)
        logits = gl.where(inside, logits, float("-inf"))
        ptrs = out_ptr + qi.to(gl.int64) * stride_out + kj
        gl.store(ptrs, logits.to(out_ptr.dtype.element_ty), mask=(kj < seq_len_kv) & (qi < seq_len))


@gluon.jit
def head_sum_weights(w_ptr, row0, num_rows, stride_ws, HEADS: gl.constexpr, QUERIES: gl.constexpr):
    """The head-sum WGMMA's B operand as registers ``[SUM_N, QUERIES * HEADS]`` bf16 (to store K-major in
    shared memory and use through ``permute``): row ``c < QUERIES`` holds weight row ``row0 + c`` (if below
    ``num_rows``) on its ``HEADS`` columns ``[c * HEADS, (c + 1) * HEADS)``, zeros elsewhere."""
    ROWS: gl.constexpr = QUERIES * HEADS
    SUM_N: gl.constexpr = sum_columns(QUERIES)
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    c = gl.arange(0, SUM_N, layout=gl.SliceLayout(1, blk))[:, None]
    r = gl.arange(0, ROWS, layout=gl.SliceLayout(0, blk))[None, :]
    qi = row0 + c
    mine = (r // HEADS == c) & (c < QUERIES) & (qi < num_rows)
    w = gl.load(w_ptr + qi.to(gl.int64) * stride_ws + (r % HEADS), mask=mine, other=0.0)
    return w.to(gl.bfloat16)


@gluon.jit
def head_sum_smem(QUERIES: gl.constexpr, HEADS: gl.constexpr):
    """Uninitialized shared memory for :func:`head_sum_weights` (K-major ``[SUM_N, ROWS]`` bf16)."""
    shape: gl.constexpr = [sum_columns(QUERIES), QUERIES * HEADS]
    return gl.allocate_shared_memory(gl.bfloat16, shape, gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16))


@gluon.jit
def head_sum_mma(acc, sgn, w_t, QUERIES: gl.constexpr, NONNEG: gl.constexpr):
    """``[64, SUM_N]`` head sums of ``[64, ROWS]`` scores on the tensor cores: ``relu(acc * sgn)`` rounded to
    bf16 (the A operand, from registers; ``sgn`` [64] the keys' ``sign(kv_sf)`` in ``acc``'s row layout, left
    out with ``NONNEG``) times the weights ``w_t`` (``[ROWS, SUM_N]`` shared memory). With ``|kv_sf|`` after it
    that is ``sum_h relu(x * kv_sf) * w`` (``relu(x sf) = |sf| relu(x sign(sf))``)."""
    sum_layout: gl.constexpr = _sum_layout(QUERIES)
    if NONNEG:
        p = _relu_bf16(acc)
    else:
        p = _relu_bf16(acc * sgn[:, None])
    p = gl.convert_layout(p, gl.DotOperandLayout(operand_index=0, parent=sum_layout, k_width=2))
    BKV: gl.constexpr = acc.shape[0]
    SUM_N: gl.constexpr = sum_columns(QUERIES)
    zero = gl.zeros([BKV, SUM_N], gl.float32, sum_layout)
    return warpgroup_mma(p, w_t, zero, use_acc=False)


@gluon.jit
def query_nan_flags(q_smem, HEADS: gl.constexpr, SUM_N: gl.constexpr, col_layout: gl.constexpr):
    """``[SUM_N]`` int32 in ``col_layout``: 1 for the queries (column ``c``: rows ``[c * HEADS, (c + 1) * HEADS)``
    of ``q_smem``, ``[ROWS, D]`` e4m3) that hold a NaN byte (0x7F / 0xFF), whose bytes are then set to 0 in
    ``q_smem``. The head sum multiplies every query's scores by the zero weights of the other queries of the
    block, so one NaN score would reach all of them (0 x NaN); zeroed, it reaches none, and the caller stores NaN
    for the flagged queries' logits. The common case costs one pass over the query box a CTA, four bytes a test
    (a 32-bit view, in which byte order does not matter for "any"); the per-query work runs only when a NaN is
    there."""
    ROWS: gl.constexpr = q_smem.shape[0]
    D: gl.constexpr = q_smem.shape[1]
    CH: gl.constexpr = 2048 // D  # rows a pass: 16 bytes a thread
    TD: gl.constexpr = D // 16
    words_layout: gl.constexpr = gl.BlockedLayout([1, 4], [32 // TD, TD], [4, 1], [1, 0])
    words = gluon_compat.reinterpret(q_smem, gl.uint32, [ROWS, D // 4], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    seen = gl.zeros([CH, D // 4], gl.uint32, words_layout)
    for k in gl.static_range(ROWS // CH):
        # a byte is 0x7F or 0xFF iff it is 0 in v (bytes < 0x80, so the zero-byte test below is exact for "any")
        v = (words.slice(k * CH, CH).load(words_layout) & 0x7F7F7F7F) ^ 0x7F7F7F7F
        seen = seen | ((v - 0x01010101) & 0x80808080)
    blk: gl.constexpr = gl.BlockedLayout([1, 16], [32 // TD, TD], [4, 1], [1, 0])
    c = gl.arange(0, SUM_N, layout=col_layout)
    flags = gl.zeros([SUM_N], gl.int32, col_layout)
    if gluon_compat.warp_uniform(gl.reduce(gl.reduce(seen, 1, _max), 0, _max) != 0):
        for k in gl.static_range(ROWS // CH):
            chunk = q_smem.slice(k * CH, CH)
            x = chunk.load(blk).to(gl.int8, bitcast=True)
            bad = (x & 0x7F) == 0x7F
            chunk.store(gl.where(bad, 0, x).to(q_smem.dtype, bitcast=True))
            row_bad = gl.reduce(bad.to(gl.int32), 1, _max)
            row_q = (k * CH + gl.arange(0, CH, layout=gl.SliceLayout(1, blk))) // HEADS
            for qq in gl.static_range((k * CH) // HEADS, ((k + 1) * CH - 1) // HEADS + 1):
                hit = gl.reduce(gl.where(row_q == qq, row_bad, 0), 0, _max)
                flags = gl.where(c == qq, flags | hit, flags)
        fence_async_shared()
        gluon_compat.thread_barrier()
    return flags


@gluon.jit
def store_head_sums(s, scale, kj, lo, hi, out_rows, row_ok, key_limit, out_ptr, stride_out, q_nan):
    """Store ``s * scale`` (``s`` ``[64, SUM_N]`` from :func:`head_sum_mma`, ``scale`` [64] per key) at
    ``out[out_rows[c], kj]`` for the columns ``c`` with ``row_ok`` and keys ``kj < key_limit``; NaN for the
    columns with ``q_nan`` (:func:`query_nan_flags`); ``-inf`` outside ``[lo[c], hi[c])``. ``kj`` [64] in the sum
    layout's row slice; the others [SUM_N] in its column slice."""
    logits = gl.where(q_nan[None, :] != 0, float("nan"), s * scale[:, None])
    inside = (kj[:, None] >= lo[None, :]) & (kj[:, None] < hi[None, :])
    logits = gl.where(inside, logits, float("-inf"))
    ptrs = out_ptr + out_rows[None, :] * stride_out + kj[:, None]
    gl.store(ptrs, logits.to(out_ptr.dtype.element_ty), mask=(kj < key_limit)[:, None] & row_ok[None, :])


@gluon.jit
def store_compact_head_sums(s, scale, kj, lo, hi, key0_ptrs, row_ok, q_nan):
    """The compact form of :func:`store_head_sums`: ``s * scale`` (NaN for the columns with ``q_nan``) at
    ``key0_ptrs[c] + kj`` (``key0_ptrs``: where column ``c``'s key 0 would be, ``out + row * stride - lo[c]``),
    only inside ``[lo[c], hi[c])``."""
    logits = gl.where(q_nan[None, :] != 0, float("nan"), s * scale[:, None])
    inside = (kj[:, None] >= lo[None, :]) & (kj[:, None] < hi[None, :])
    gl.store(key0_ptrs[None, :] + kj[:, None], logits.to(key0_ptrs.dtype.element_ty), mask=inside & row_ok[None, :])


@gluon.jit
def _mma_sum_tiles(kv_desc, kv_smem, q_t, bars, w_t, kv_sf_ptr, st, en, c_begin, n, q0, seq_len, seq_len_kv,
                   out_ptr, stride_out, q_nan, ROWS: gl.constexpr, BLOCK_Q: gl.constexpr, STAGES_: gl.constexpr,
                   NONNEG: gl.constexpr, COMPRESSED: gl.constexpr):
    """The CTA's ``n`` key tiles from ``c_begin``, one at a time: WGMMA, then :func:`head_sum_mma` and
    :func:`store_head_sums` (``NONNEG``: every key scale of the CTA is >= 0, no sign multiply; ``q_nan``:
    :func:`query_nan_flags`)."""
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    acc_layout: gl.constexpr = _acc_layout(ROWS)
    sum_layout: gl.constexpr = _sum_layout(BLOCK_Q)
    sum_rows: gl.constexpr = gl.SliceLayout(1, sum_layout)
    zero = gl.zeros([BKV, ROWS], gl.float32, acc_layout)
    qc = gl.arange(0, sum_columns(BLOCK_Q), layout=gl.SliceLayout(0, sum_layout))
    out_rows = (q0 + qc).to(gl.int64)
    if COMPRESSED:
        key0_ptrs = out_ptr + (out_rows * stride_out - st)
    row_ok = (qc < BLOCK_Q) & (q0 + qc < seq_len)
    for i in range(0, n):
        acc = _issue(kv_smem, q_t, zero, bars, i, STAGES_)
        sf = _key_scales(kv_sf_ptr, c_begin + i, seq_len_kv, BKV, sum_rows)
        if NONNEG:
            sgn = sf  # unused
        else:
            sf_acc = _key_scales(kv_sf_ptr, c_begin + i, seq_len_kv, BKV, gl.SliceLayout(1, acc_layout))
            sgn = gl.where(sf_acc >= 0.0, 1.0, -1.0)
        part = warpgroup_mma_wait(0, deps=(acc,))
        _refill(kv_desc, kv_smem, bars, i, c_begin, n, STAGES_)
        if ROWS > 128:  # at 256 rows, under maxnreg, the hoisted descriptors of the weights spill (gluon_compat)
            sums = head_sum_mma(part, sgn, gluon_compat.per_iteration(w_t, i), BLOCK_Q, NONNEG)
        else:
            sums = head_sum_mma(part, sgn, w_t, BLOCK_Q, NONNEG)
        kj = (c_begin + i) * BKV + gl.arange(0, BKV, layout=sum_rows)
        if COMPRESSED:
            store_compact_head_sums(sums, sf if NONNEG else gl.abs(sf), kj, st, en, key0_ptrs, row_ok, q_nan)
        else:
            store_head_sums(sums, sf if NONNEG else gl.abs(sf), kj, st, en, out_rows, row_ok, seq_len_kv, out_ptr,
                            stride_out, q_nan)


@gluon.jit
def _store_neg_inf(t, q0, seq_len, seq_len_kv, out_ptr, stride_out, BLOCK_Q: gl.constexpr,
                   BLOCK_KV_: gl.constexpr, row_layout: gl.constexpr, WIDE: gl.constexpr):
    """``-inf`` at key tile ``t`` of queries ``q0 + [0, BLOCK_Q)``: ``WIDE``, in one store of 16-byte vectors
    (the query-block rows side by side); else a query at a time in ``row_layout`` (four lanes a key)."""
    if WIDE:
        blk: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0])
        qi = q0 + gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(1, blk))
        kj = t * BLOCK_KV_ + gl.arange(0, BLOCK_KV_, layout=gl.SliceLayout(0, blk))
        neg = gl.full([BLOCK_Q, BLOCK_KV_], float("-inf"), gl.float32, blk).to(out_ptr.dtype.element_ty)
        ptrs = out_ptr + qi.to(gl.int64)[:, None] * stride_out + kj[None, :]
        gl.store(ptrs, neg, mask=(qi < seq_len)[:, None] & (kj < seq_len_kv)[None, :])
    else:
        kj = t * BLOCK_KV_ + gl.arange(0, BLOCK_KV_, layout=row_layout)
        neg = gl.full([BLOCK_KV_], float("-inf"), gl.float32, row_layout).to(out_ptr.dtype.element_ty)
        for qq in gl.static_range(BLOCK_Q):
            qi = q0 + qq
            gl.store(out_ptr + qi.to(gl.int64) * stride_out + kj, neg, mask=(kj < seq_len_kv) & (qi < seq_len))


@gluon.jit
def _issue(kv_smem, q_t, zero, bars, i, STAGES_: gl.constexpr):
    """Wait for ring tile ``i`` and issue its WGMMA into a fresh accumulator (async: returns the token)."""
    s = i % STAGES_
    mbarrier.wait(bars.index(s), (i // STAGES_) & 1)
    return warpgroup_mma(kv_smem.index(s), q_t, zero, use_acc=False, is_async=True)


@gluon.jit
def _refill(kv_desc, kv_smem, bars, i, c_begin, n, STAGES_: gl.constexpr):
    """Reload the slot of ring tile ``i`` (whose WGMMA is complete) with tile ``i + STAGES_``, if any."""
    nxt = i + STAGES_
    if nxt < n:
        s = i % STAGES_
        mbarrier.expect(bars.index(s), kv_desc.block_type.nbytes)
        gluon_compat.async_load(kv_desc, [(c_begin + nxt) * kv_desc.block_type.shape[0], 0], bars.index(s),
                                kv_smem.index(s))


@gluon.jit
def _key_scales(kv_sf_ptr, t, seq_len_kv, BKV: gl.constexpr, row_layout: gl.constexpr):
    kj = t * BKV + gl.arange(0, BKV, layout=row_layout)
    return gl.load(kv_sf_ptr + kj, mask=kj < seq_len_kv, other=0.0)


@gluon.jit
def alloc_ring(q_desc, kv_desc, STAGES_: gl.constexpr):
    """Shared memory of one query box and a ring of ``STAGES_`` key tiles, with ``STAGES_ + 1`` initialized
    mbarriers (one per tile, then the query's): ``(q_smem, kv_smem, bars)``."""
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    kv_smem = gl.allocate_shared_memory(kv_desc.dtype, [STAGES_] + kv_desc.block_type.shape, kv_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES_ + 1, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES_ + 1):
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()
    return q_smem, kv_smem, bars


@gluon.jit
def mqa_logits_kernel(q_desc, kv_desc, kv_sf_ptr, w_ptr, start_ptr, end_ptr, out_ptr,
                      seq_len, seq_len_kv, tiles_per_split, stride_ws, stride_out, max_seqlen_k,
                      HEADS: gl.constexpr, BLOCK_Q: gl.constexpr, STAGES_: gl.constexpr, CLEAN: gl.constexpr,
                      OVERLAP: gl.constexpr = True, SF_AFTER_SUM: gl.constexpr = False,
                      HEAD_SUM_MMA: gl.constexpr = False, COMPRESSED: gl.constexpr = False,
                      LAST_FIRST: gl.constexpr = False, WIDE_CLEAN: gl.constexpr = False):
    ROWS: gl.constexpr = BLOCK_Q * HEADS
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    gl.static_assert(ROWS <= 256, "BLOCK_Q * HEADS is the WGMMA N: at most 256")
    gl.static_assert(not COMPRESSED or (HEAD_SUM_MMA and not CLEAN),
                     "the compact form: tensor-core head sum only, -inf pre-filled by the caller")
    acc_layout: gl.constexpr = _acc_layout(ROWS)
    row_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, acc_layout)
    pid_q = gl.program_id(0)
    if LAST_FIRST:  # the last query blocks first: in prefill (causal, context-parallel) their ranges are longest
        pid_q = gl.num_programs(0) - 1 - pid_q
    pid_split = gl.program_id(1)
    q0 = pid_q * BLOCK_Q

    # This block's key range [lo, hi): the union of its queries' clamped ranges.
    lo = seq_len_kv
    hi = 0
    for qq in gl.static_range(BLOCK_Q):
        st, en = _query_range(start_ptr, end_ptr, q0 + qq, seq_len, seq_len_kv, max_seqlen_k, COMPRESSED)
        lo = gl.minimum(lo, st)
        hi = gl.maximum(hi, en)
    num_tiles = gl.cdiv(seq_len_kv, BKV)
    t_begin = pid_split * tiles_per_split
    t_end = gl.minimum(t_begin + tiles_per_split, num_tiles)
    c_begin = gl.minimum(gl.maximum(lo // BKV, t_begin), t_end)
    c_end = gl.minimum(gl.maximum(gl.cdiv(hi, BKV), c_begin), t_end)
    c_end = gl.where(hi > lo, c_end, c_begin)
    if CLEAN:
        for t in range(t_begin, c_begin):
            _store_neg_inf(t, q0, seq_len, seq_len_kv, out_ptr, stride_out, BLOCK_Q, BKV, row_layout, WIDE_CLEAN)
        for t in range(c_end, t_end):
            _store_neg_inf(t, q0, seq_len, seq_len_kv, out_ptr, stride_out, BLOCK_Q, BKV, row_layout, WIDE_CLEAN)
    n = c_end - c_begin

    q_smem, kv_smem, bars = alloc_ring(q_desc, kv_desc, STAGES_)
    q_bar = bars.index(STAGES_)
    if n > 0:
        mbarrier.expect(q_bar, q_desc.block_type.nbytes)
        gluon_compat.async_load(q_desc, [pid_q * ROWS, 0], q_bar, q_smem)
        for p in gl.static_range(STAGES_):
            if p < n:
                mbarrier.expect(bars.index(p), kv_desc.block_type.nbytes)
                gluon_compat.async_load(kv_desc, [(c_begin + p) * BKV, 0], bars.index(p), kv_smem.index(p))
        # the weight of every (query, head) column, and which query each column belongs to
        r = gl.arange(0, ROWS, layout=col_layout)
        col_q = r // HEADS
        rq = q0 + col_q
        w = gl.load(w_ptr + rq.to(gl.int64) * stride_ws + (r % HEADS), mask=rq < seq_len, other=0.0)
        zero = gl.zeros([BKV, ROWS], gl.float32, acc_layout)
        q_t = q_smem.permute((1, 0))
        mbarrier.wait(q_bar, 0)

        if HEAD_SUM_MMA:  # the weights into shared memory once, the queries' ranges into registers once
            w_smem = head_sum_smem(BLOCK_Q, HEADS)
            w_smem.store(head_sum_weights(w_ptr, q0, seq_len, stride_ws, HEADS, BLOCK_Q))
            fence_async_shared()
            w_t = w_smem.permute((1, 0))
            sum_layout: gl.constexpr = _sum_layout(BLOCK_Q)
            qc = q0 + gl.arange(0, sum_columns(BLOCK_Q), layout=gl.SliceLayout(0, sum_layout))
            q_st, q_en = _query_range(start_ptr, end_ptr, qc, seq_len, seq_len_kv, max_seqlen_k, COMPRESSED)
            q_nan = query_nan_flags(q_smem, HEADS, sum_columns(BLOCK_Q), gl.SliceLayout(0, sum_layout))
            # whether every key scale of the CTA's tiles is >= 0 (then no per-score sign multiply)
            lowest = gl.zeros([BKV], gl.float32, gl.SliceLayout(1, sum_layout))
            for t in range(c_begin, c_end):
                lowest = gl.minimum(lowest, _key_scales(kv_sf_ptr, t, seq_len_kv, BKV, gl.SliceLayout(1, sum_layout)))
            if gluon_compat.warp_uniform(gl.reduce(lowest, 0, _min) >= 0.0):
                _mma_sum_tiles(kv_desc, kv_smem, q_t, bars, w_t, kv_sf_ptr, q_st, q_en, c_begin, n, q0, seq_len,
                               seq_len_kv, out_ptr, stride_out, q_nan, ROWS, BLOCK_Q, STAGES_, True, COMPRESSED)
            else:
                _mma_sum_tiles(kv_desc, kv_smem, q_t, bars, w_t, kv_sf_ptr, q_st, q_en, c_begin, n, q0, seq_len,
                               seq_len_kv, out_ptr, stride_out, q_nan, ROWS, BLOCK_Q, STAGES_, False, COMPRESSED)
        elif OVERLAP:
            # Tile 0 in flight, then: issue tile i, wait for tile i - 1, refill its slot, reduce it. The loop
            # runs two tiles an iteration with two named accumulators: a loop that carried "the one in
            # flight" through prev = cur would copy its registers while its WGMMA runs, and ptxas then
            # serializes every WGMMA (C7514).
            acc_a = _issue(kv_smem, q_t, zero, bars, 0, STAGES_)
            sf_a = _key_scales(kv_sf_ptr, c_begin, seq_len_kv, BKV, row_layout)
            for i in range(1, n - 1, 2):
                acc_b = _issue(kv_smem, q_t, zero, bars, i, STAGES_)
                sf_b = _key_scales(kv_sf_ptr, c_begin + i, seq_len_kv, BKV, row_layout)
                part = warpgroup_mma_wait(1, deps=(acc_a,))
                _refill(kv_desc, kv_smem, bars, i - 1, c_begin, n, STAGES_)
                _tile_epilogue(part, sf_a, w, col_q, c_begin + i - 1, q0, seq_len, seq_len_kv, start_ptr, end_ptr,
                               out_ptr, stride_out, BLOCK_Q, BKV, row_layout, SF_AFTER_SUM)
                acc_a = _issue(kv_smem, q_t, zero, bars, i + 1, STAGES_)
                sf_a = _key_scales(kv_sf_ptr, c_begin + i + 1, seq_len_kv, BKV, row_layout)
                part = warpgroup_mma_wait(1, deps=(acc_b,))
                _refill(kv_desc, kv_smem, bars, i, c_begin, n, STAGES_)
                _tile_epilogue(part, sf_b, w, col_q, c_begin + i, q0, seq_len, seq_len_kv, start_ptr, end_ptr,
                               out_ptr, stride_out, BLOCK_Q, BKV, row_layout, SF_AFTER_SUM)
            if n % 2 == 0:  # one tile left to issue: n - 1
                acc_b = _issue(kv_smem, q_t, zero, bars, n - 1, STAGES_)
                sf_b = _key_scales(kv_sf_ptr, c_end - 1, seq_len_kv, BKV, row_layout)
                part = warpgroup_mma_wait(1, deps=(acc_a,))
                _tile_epilogue(part, sf_a, w, col_q, c_end - 2, q0, seq_len, seq_len_kv, start_ptr, end_ptr,
                               out_ptr, stride_out, BLOCK_Q, BKV, row_layout, SF_AFTER_SUM)
                part = warpgroup_mma_wait(0, deps=(acc_b,))
                _tile_epilogue(part, sf_b, w, col_q, c_end - 1, q0, seq_len, seq_len_kv, start_ptr, end_ptr,
                               out_ptr, stride_out, BLOCK_Q, BKV, row_layout, SF_AFTER_SUM)
            else:
                part = warpgroup_mma_wait(0, deps=(acc_a,))
                _tile_epilogue(part, sf_a, w, col_q, c_end - 1, q0, seq_len, seq_len_kv, start_ptr, end_ptr,
                               out_ptr, stride_out, BLOCK_Q, BKV, row_layout, SF_AFTER_SUM)
        else:  # one tile at a time (the overlap then comes only from the other CTAs on the SM)
            for i in range(0, n):
                acc = _issue(kv_smem, q_t, zero, bars, i, STAGES_)
                sf = _key_scales(kv_sf_ptr, c_begin + i, seq_len_kv, BKV, row_layout)
                part = warpgroup_mma_wait(0, deps=(acc,))
                _refill(kv_desc, kv_smem, bars, i, c_begin, n, STAGES_)
                _tile_epilogue(part, sf, w, col_q, c_begin + i, q0, seq_len, seq_len_kv, start_ptr, end_ptr,
                               out_ptr, stride_out, BLOCK_Q, BKV, row_layout, SF_AFTER_SUM)


def prefill_supported(heads: int, head_dim: int, max_seqlen_k: int, fp32_sum: bool = False) -> bool:
    """Whether the API runs this kernel (on sm_90, with contiguous 16-byte-aligned q, kv, ranges): both
    logits forms at head_dim 32, 64 or 128 and 16-128 heads, with the head sum on the tensor cores (the
    default, :func:`head_sum_mma`). H200, S=2048, S_kv=8192, the tensor-core sum at :func:`prefill_config`
    vs the CUDA-core one vs the Triton kernel (results/mqa-sm90-probe-h200-2026-12-03-head-sum-bf0b842.json), us:
    H=64/D=128 causal 248.0 / 273.9 / 300.2, context-parallel 146.9 / 162.9 / 180.5; H=32/D=128 137.6 /
    175.2 / 191.9; H=16/D=128 81.4 / 157.0 / 115.7; H=128/D=128 449.3 / 458.8 / 524.8; H=32/D=64 cp
    66.8 / 108.9 / 101.2; H=64/D=64 173.6 / 231.8 / 266.8; H=64/D=32 139.6 / 214.2 / 208.4.
    ``fp32_sum`` (``FINEGEMM_MQA_FP32_SUM=1``): the CUDA-core FP32 sum, faster than Triton only at head_dim
    128 with 32-128 heads (above), and only for the full form."""
    if heads not in (16, 32, 64, 128) or head_dim not in (32, 64, 128):
        return False
    if fp32_sum:  # the compact form has no FP32-sum variant here
        return max_seqlen_k == 0 and head_dim == 128 and heads >= 32
    return True


def prefill_config(heads: int, head_dim: int) -> tuple[int, int | None]:
    """``(block_q, maxnreg)`` of the tensor-core-sum kernel the API launches, the fastest measured under the
    launch order and key split of :func:`launch` (results/mqa-schedule-probe-h200-2026-12-03-1488389-shapes.json,
    DeepGEMM's ranges, us): 64 heads: 256 query-head rows a CTA at 168 registers (three CTAs an SM; ptxas
    spills 8 bytes only in the signed-scale loop, which nonnegative scales never run) at every head_dim
    (S=2048 D=128 causal 219.7 vs 225.9 at 128 rows, cp bf16 137.3 vs 140.8, S=8192 cp 500.4 vs 515.7,
    causal bf16 494.0 vs 508.3; D=64 360.6 vs 358.0; D=32 129.1 vs 141.1); otherwise 128 rows at the
    compiler's ~100 registers (four CTAs): 32 heads at D=64 (S=2048 cp 60.0 vs 65.9 at 256 rows, S=8192 cp
    202.9 vs 226.5) and D=128 (280.5 vs 283.1 at 256 rows / 168); D=32 at 32 heads, 16 and 128 heads
    follow untimed under this schedule (before it, results/mqa-sm90-probe-h200-2026-12-03-head-sum-bf0b842.json:
    H=16 81.4 at 128 rows vs 84.5 at 256, H=128 context-parallel 252.5 vs 266.7)."""
    if heads == 64:
        return 4, 168
    return block_q_for(heads), None


def block_q_for(heads: int) -> int:
    """Queries per CTA: 128 query-head rows (the WGMMA N), at least one query."""
    return max(1, 128 // heads)


# CTAs launched per resident CTA slot (CTAs an SM x SMs): enough that the last wave is short, few enough that
# each CTA's prologue (query box, weights, scale scan) stays amortized (key_splits has the measurements)
WAVES = 8


def resident_ctas(rows: int, maxnreg: int | None) -> int:
    """CTAs of one SM at ``rows`` query-head rows: four at 128 (~100 registers), three at 256 with
    ``maxnreg`` 168, two at 256 with the compiler's ~175."""
    return 4 if rows <= 128 else 3 if maxnreg and maxnreg <= 168 else 2


def key_splits(q_blocks: int, num_tiles: int, rows: int, maxnreg: int | None, num_sms: int) -> int:
    """How many runs the key tiles are cut into (grid axis 1): about :data:`WAVES` CTAs a resident slot
    over ``q_blocks`` query blocks, at least one tile a run. H200, DeepGEMM's ranges, last query block
    first, us: S=2048, S_kv=8192, H=64/D=128 causal 4 runs (this rule) 229.6, 1 (the previous rule, ~4 CTAs
    an SM) 243.6, 8 runs 235.0; H=32/D=64 cp 8 runs 66.6, 3 runs 71.0, 4 runs 73.7; S=8192, H=64/D=128 cp
    1 run 543.2, 4 runs 558.6 (results/mqa-schedule-probe-h200-2026-12-03-70ec4ea.json)."""
    return min(num_tiles, max(1, round(WAVES * resident_ctas(rows, maxnreg) * num_sms / q_blocks)))


def wide_clean_for(heads: int, rows: int, maxnreg: int | None) -> bool:
    """Whether the ``-inf`` stores of a CTA's unreached key tiles go as one 16-byte-vector store of the query
    block (``WIDE_CLEAN``) rather than a query at a time: at the measured 32 and 64 heads but 256 rows at the
    compiler's register count (32 heads, head_dim <= 64); 16 and 128 heads (untimed) keep the narrow form.
    H200, DeepGEMM's ranges, us, wide / a query at a time
    (results/mqa-schedule-probe-h200-2026-12-03-c2902f8-wide-clean.json): S=8192 H=32/D=128 cp 284.0 / 305.5,
    H=64/D=128 causal bf16 514.5 / 548.8, H=64/D=64 causal 364.1 / 387.3, S=2048 H=64/D=128 cp bf16 143.2 /
    152.0; S=2048 H=32/D=64 cp 70.0 / 66.3 (the one it loses), H=64/D=32 causal 130.6 / 128.4."""
    return heads in (32, 64) and not (rows == 256 and maxnreg is None)


def launch_config(heads: int, head_dim: int, head_sum_mma: bool) -> tuple[int, int | None]:
    """``(block_q, maxnreg)`` :func:`launch` uses when none is given: :func:`prefill_config` for the
    tensor-core head sum, 128 query-head rows at the compiler's register count for the FP32 sum."""
    return prefill_config(heads, head_dim) if head_sum_mma else (block_q_for(heads), None)


def launch(q: torch.Tensor, kv: torch.Tensor, kv_sf: torch.Tensor, weights: torch.Tensor, start: torch.Tensor,
           end: torch.Tensor, out: torch.Tensor, clean_logits: bool, num_sms: int = 132, block_q: int | None = None,
           overlap: bool = False, sf_after_sum: bool = True, head_sum_mma: bool = True,
           maxnreg: int | None = None, stages: int = STAGES, max_seqlen_k: int = 0, last_first: bool = True,
           tiles_per_split: int | None = None, wide_clean: bool | None = None) -> None:
    """Launch on validated tensors (as api/attention.py's ``fp8_mqa_logits`` passes them).

    q: e4m3 ``[S, H, D]`` contiguous (seen as ``[S * H, D]``); kv: e4m3 ``[S_kv, D]`` row-major; kv_sf:
    fp32 ``[S_kv]``; weights: fp32 ``[S, H]`` (``stride(1) == 1``); start/end: int32 ``[S]`` contiguous;
    out: fp32 or bf16 ``[S, S_kv]`` (``stride(1) == 1``), or ``[S, max_seqlen_k]`` when ``max_seqlen_k > 0``
    (the compact form: only in-range logits are written, ``clean_logits`` must be False: the caller
    pre-fills; tensor-core head sum only). D in {32, 64, 128}, H * block_q <= 256.
    ``head_sum_mma`` (the default): the head sum on the tensor cores (:func:`head_sum_mma`); without
    ``block_q``, :func:`launch_config`'s ``block_q`` (and its ``maxnreg`` where none is given). Otherwise
    the FP32 CUDA-core epilogue (:func:`_tile_epilogue`), where ``sf_after_sum`` (its default) applies
    ``kv_sf`` once per logit after the head sum (the same logits for either sign of ``kv_sf``); measured
    then, H200, S=2048, S_kv=8192,
    results/mqa-sm90-probe-h200-2026-12-03-signed-12ec969.json: H=64/D=128 causal 292.1 -> 272.9 us,
    context-parallel 173.4 -> 163.8, H=32 184.5 -> 175.1, H=128 506.7 -> 458.5.
    ``last_first`` (the default): CTA ``x`` takes query block ``n - 1 - x``, so in prefill (causal and
    context-parallel ranges grow with the query) the longest blocks start first instead of forming the
    last wave: 1-7 % on nine of DeepGEMM's anchor cases (results/mqa-schedule-probe-h200-2026-12-03-
    70ec4ea.json, e.g. S=8192, H=32/D=64 cp 251.4 -> 233.9 us). ``tiles_per_split`` overrides
    :func:`key_splits`' cut of the key axis. ``wide_clean``: None takes :func:`wide_clean_for`.
    """
    seq_len, heads, head_dim = q.shape
    seq_len_kv = kv.shape[0]
    if head_dim not in (32, 64, 128) or 128 % heads and heads % 128:
        raise ValueError(f"the sm90 MQA kernel takes head_dim 32/64/128 and power-of-two heads; got H={heads}, "
                         f"D={head_dim}")
    for name, t in (("q", q), ("kv", kv), ("kv_sf", kv_sf), ("start", start), ("end", end)):
        if not t.is_contiguous():
            raise ValueError(f"the sm90 MQA kernel needs a contiguous {name}; got strides {tuple(t.stride())}")
    if weights.stride(1) != 1 or out.stride(1) != 1:
        raise ValueError("the sm90 MQA kernel needs weights and out with stride(1) == 1")
    compressed = max_seqlen_k > 0
    if compressed and (clean_logits or not head_sum_mma):
        raise ValueError("the sm90 MQA kernel's compact form (max_seqlen_k > 0) needs head_sum_mma=True and "
                         "clean_logits=False (pre-fill -inf to clean)")
    if block_q is None:
        block_q, chosen = launch_config(heads, head_dim, head_sum_mma)
        maxnreg = maxnreg or chosen
    if wide_clean is None:
        wide_clean = wide_clean_for(heads, block_q * heads, maxnreg)
    # every argument a launch encodes: tensors' pointers, shapes, strides and dtypes, then the options
    key = (q.data_ptr(), q.shape, kv.data_ptr(), kv.shape, kv.stride(), kv_sf.data_ptr(), kv_sf.shape,
           weights.data_ptr(), weights.shape, weights.stride(), start.data_ptr(), end.data_ptr(), start.shape,
           out.data_ptr(), out.shape, out.stride(), out.dtype, q.get_device(), bool(clean_logits), num_sms, block_q,
           overlap, sf_after_sum, head_sum_mma, maxnreg, stages, max_seqlen_k, last_first, tiles_per_split, wide_clean)

    def build() -> list:
        rows = block_q * heads
        q2 = q.reshape(seq_len * heads, head_dim)
        q_layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], _GL_E4M3)
        kv_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_KV, head_dim], _GL_E4M3)
        q_desc = TensorDescriptor(q2, list(q2.shape), list(q2.stride()), [rows, head_dim], q_layout)
        kv_desc = TensorDescriptor(kv, list(kv.shape), list(kv.stride()), [BLOCK_KV, head_dim], kv_layout)
        num_tiles = max(1, triton.cdiv(seq_len_kv, BLOCK_KV))
        q_blocks = max(1, triton.cdiv(seq_len, block_q))
        per_split = tiles_per_split or triton.cdiv(num_tiles, key_splits(q_blocks, num_tiles, rows, maxnreg, num_sms))
        grid = (q_blocks, triton.cdiv(num_tiles, per_split))
        args = (q_desc, kv_desc, kv_sf, weights, start, end, out, seq_len, seq_len_kv, per_split,
                weights.stride(0), out.stride(0), max_seqlen_k)
        meta = dict(HEADS=heads, BLOCK_Q=block_q, STAGES_=stages, CLEAN=bool(clean_logits), OVERLAP=overlap,
                    SF_AFTER_SUM=sf_after_sum, HEAD_SUM_MMA=head_sum_mma, COMPRESSED=compressed, LAST_FIRST=last_first,
                    WIDE_CLEAN=wide_clean, num_warps=4, **({"maxnreg": maxnreg} if maxnreg else {}))
        return [(mqa_logits_kernel, grid, args, meta)]

    launcher.replay_or_record(_recordings, key, build, MAX_RECORDINGS)


# launch key -> the recorded launch (launcher.py: Triton's C launcher, tensor maps encoded once; holds no
# tensor): a repeated call costs a key and a dict lookup instead of ~100 us of descriptor building and
# argument binding
_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
MAX_RECORDINGS = 1024
