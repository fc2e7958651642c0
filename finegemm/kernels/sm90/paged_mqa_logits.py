"""Hopper paged MQA logits (``fp8_paged_mqa_logits``, decode) in Gluon: key pages by TMA, WGMMA, and the
ReLU / head-sum epilogue one 64-key tile at a time.

Same schedule, cache layout, clamping and results as the Triton kernel (kernels/portable/
paged_mqa_logits.py, whose docstring states them): program ``(slot, sub)`` walks its schedule slot's run of
256-key items (``SPLIT_KV``) and takes every ``subs``-th one (:func:`ctas_per_slot`). What differs is how an item runs:

- the fused cache is read as a 2-D e4m3 tensor of ``D``-byte rows: block ``p``'s ``block_kv`` value rows
  are rows ``p * stride(0) / D + [0, block_kv)`` (the scales follow as ``4 * block_kv / D`` more rows,
  never loaded as values), so each 64-key tile is one TMA box ``[64, D]`` at a page looked up in the
  block table; the ``[next_n * H, D]`` query rows of the item's sequence are one more box;
- a ring of four slots, one per 64-key tile of an item: each tile runs ``wgmma(kv_tile [64, D],
  q^T [D, next_n * H])`` and its epilogue, and its slot is refilled at once with the same tile of the
  program's next item (the schedule walked one item ahead), so loads run under the math; the query
  rows are reloaded only when the sequence changes; four or five CTAs an SM overlap each other too;
- a tile's 64 key scales (256 bytes after the page's values) come by TMA with its values, and the next
  item's page is looked up while the WGMMA runs: no dependent global loads between a tile's WGMMA and
  its epilogue;
- the epilogue applies ``kv_sf`` after the head sum as the prefill kernel does
  (:func:`.mqa_logits.weighted_relu`: ``relu(x sf) = sf (x + sign(sf)|x|) / 2``, exact for either sign).

Takes next_n * H in {32, 64, 128, 256} (a power of two: the WGMMA N), D = 128 and block_kv a multiple
of 64 (:func:`supported`); the API takes it up to 128 rows (:func:`dispatched`) and runs the Triton
kernel elsewhere. A repeated launch replays its recording (launcher.py): 18.4 us of host time a call
instead of 98.8. H200, DeepGEMM's paged anchors (results/paged-mqa-sm90-probe-h200-2026-12-03-f19a8e4.json,
pages of 64, contexts avg x U(0.7, 1.3), no clean-up pass, the harness timer), this kernel vs the Triton
one vs DeepGEMM, us: B=256 ctx 8192 n=1 H=64 84.4 / 114.9 / 79, n=2 H=64 102.8 / 208.9 / 87, n=1 H=32
82.3 / 102.9 / 78; B=256 ctx 65536 n=2 H=32 605.8 / 1290.6 / 566, n=1 H=64 585.8 / 846.2 / 556, n=2 H=64
744.0 / 1576.7 / 588; B=4096 ctx 8192 n=1 H=32 1138.1 / 1478.7 / 1102, n=2 H=64 1506.1 / 3105.5 / 1195,
n=2 H=32 1203.4 / 2611.0 / 1129. (The head sum on the tensor cores, as the prefill kernel does it, measured
slower here on all nine: 106.1 vs 92.4 us at the first, 1438.6 vs 1223.7 at the seventh.)

A second form, :func:`paged_mqa_logits_ws_kernel` (``launch(..., ws=True)``), runs one CTA a slot,
warp-specialized: four math warpgroups, warpgroup ``j`` taking tile ``j`` of every item of the slot from its
own ring of key tiles, each ring filled by its own producer warp (page lookups, TMA) as far ahead as the ring
allows; the query rows sit in a two-stage ring shared by the four. The math warps then run only the wait,
the WGMMA, the release and the epilogue. H100 A/B: 3-18 % faster than the four-CTA
form where HBM is not the limit (keys L2-resident), up to 8 % slower where it is. H200 harness: 8-14 %
faster at 128 rows on calls of >= 2^23 keys (batch x max_context_len), a tie or 4-6 % slower on smaller ones;
at 3 key-tile slots instead of what fits (H100) 1-5 % faster again, and ahead from 2^21 keys.
It is :func:`launch`'s default there (:func:`ws_wanted`); :data:`WARP_SPECIALIZED` forces either form.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..portable.paged_mqa_logits import SPLIT_KV
from . import gluon_compat, launcher
from .mqa_logits import _acc_layout, _add, alloc_ring, weighted_relu

BLOCK_KV = 64  # keys per WGMMA tile (the M of the instruction)
_SPLIT = gl.constexpr(SPLIT_KV)  # keys per schedule item, readable inside the kernel
_BKV = gl.constexpr(BLOCK_KV)
def ctas_per_slot(rows: int) -> int:
    """CTAs per schedule slot (one slot an SM): five where five fit an SM (up to 64 query rows: ~41 KB of
    shared memory, <= 78 registers), else four (128 rows: 49 KB, 126 registers). H200, DeepGEMM's paged
    anchors, us, five / four (results/paged-mqa-sm90-probe-h200-2026-12-03-c42649d-subs.json): B=256 ctx
    8192 n=1 H=64 85.0 / 86.9, ctx 65536 n=1 H=64 588.5 / 617.7, n=2 H=32 600.6 / 608.0; at 128 rows five
    lose (137.3 / 101.5 at B=256 n=2 H=64), six lose everywhere."""
    return 5 if rows <= 64 else 4


def register_cap(rows: int, ctas: int) -> int | None:
    """``maxnreg`` of the four-CTA kernel for ``rows`` query rows at ``ctas`` CTAs an SM: up to 128 rows, the most
    registers a thread may take for ``ctas`` 128-thread CTAs to share an SM's 65536 (allocated 8 at a time); None
    above (the accumulators need more). Without it Triton 3.8 / 3.9 allocate 135-147 registers for the 2-D-context
    bf16 form at 128 rows, and an SM holds three CTAs, not four; under the cap ptxas fits it in 120 with no spill
    (3.6 takes 126 uncapped)."""
    return 65536 // (ctas * 128) // 8 * 8 if rows <= 128 else None


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
def _item_keys(ctx_ptr, b, stride_ctx_b, stride_ctx_t, cap, NEXT_N: gl.constexpr, CTX_2D: gl.constexpr):
    """The largest context of sequence ``b``'s tokens, capped at ``cap``."""
    n = _row_context(ctx_ptr, b, NEXT_N - 1, stride_ctx_b, stride_ctx_t, cap, NEXT_N, CTX_2D)
    if CTX_2D:  # 2-D lens need not grow with the token
        for t in gl.static_range(NEXT_N - 1):
            n = gl.maximum(n, _row_context(ctx_ptr, b, t, stride_ctx_b, stride_ctx_t, cap, NEXT_N, CTX_2D))
    return n


@gluon.jit
def _item_tiles(ctx_ptr, b, s, batch, stride_ctx_b, stride_ctx_t, key_cap, BKV: gl.constexpr, TILES: gl.constexpr,
                NEXT_N: gl.constexpr, CTX_2D: gl.constexpr):
    """How many of item ``(b, s)``'s ``TILES`` key tiles hold keys below its sequence's largest context
    (capped at ``key_cap``). Past the run ``b`` can be ``batch``: the
    lens read is clamped to a real row, and the caller does not use the result."""
    n_keys = _item_keys(ctx_ptr, gl.minimum(b, batch - 1), stride_ctx_b, stride_ctx_t, key_cap, NEXT_N, CTX_2D)
    return gl.minimum(gl.maximum(gl.cdiv(n_keys - s * _SPLIT, BKV), 0), TILES)


@gluon.jit
def _next_owned(b, s, item, batch, b_stop, s_stop, sub, ctx_ptr, stride_ctx_b, stride_ctx_t,
                SUBS_: gl.constexpr, NEXT_N: gl.constexpr, CTX_2D: gl.constexpr):
    """From schedule position ``(b, s)``, item number ``item`` (not yet looked at), the first item this
    program owns (``item % SUBS_ == sub``) within its slot's run: ``(b, s, item, found)``."""
    found = b * 0  # an int32 tensor (a plain 0 would be a constexpr the loop cannot reassign)
    while (found == 0) & (b < batch) & ((b < b_stop) | (s < s_stop)):
        # the schedule's item count for b counts the uncapped lens; items past the cap write nothing
        if s < gl.cdiv(_item_keys(ctx_ptr, b, stride_ctx_b, stride_ctx_t, 2147483647, NEXT_N, CTX_2D), _SPLIT):
            if item % SUBS_ == sub:
                found = 1
            else:
                item += 1
                s += 1
        else:
            b += 1
            s = 0
    return b, s, item, found


@gluon.jit
def _load_query(q_desc, q_bar, q_smem, w_ptr, b, col_t, r, stride_ws, NEXT_N: gl.constexpr, HEADS: gl.constexpr):
    """Start the TMA load of sequence ``b``'s ``[NEXT_N * HEADS, D]`` query rows into ``q_smem`` (completing
    ``q_bar``) and return their weights, column ``r`` scoring token ``col_t`` with head ``r % HEADS``."""
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    gluon_compat.async_load(q_desc, [b * (NEXT_N * HEADS), 0], q_bar, q_smem)
    return gl.load(w_ptr + (b.to(gl.int64) * NEXT_N + col_t) * stride_ws + (r % HEADS))


@gluon.jit
def _tile_page(table_ptr, b, s, j, stride_table, num_blocks, BKV: gl.constexpr, PAGE: gl.constexpr, max_blocks=None):
    """The cache block of tile ``j`` of item ``(b, s)`` (sequence ``b``'s block-table entry of its first key),
    clamped to ``[0, num_blocks)``. With ``max_blocks`` (the table's columns) the entry read is clamped to the
    row's last: callers that look pages up ahead, before knowing the tile holds keys, pass it with ``b``
    clamped to the batch (compute-sanitizer memcheck found reads past the table there, ``paged b3 n2 h32 ctx
    100/70/130`` of tools/sanitize_cases.py: a tile past a sequence's last page, the item after a program's
    last); a page read so is never loaded from."""
    col = (s * _SPLIT + j * BKV) // PAGE
    if max_blocks is not None:
        col = gl.minimum(col, max_blocks - 1)
    return gl.minimum(gl.maximum(gl.load(table_ptr + b.to(gl.int64) * stride_table + col), 0), num_blocks - 1)


@gluon.jit
def _load_tile(kv_desc, sf_desc, kv_dst, sf_dst, bar, key, page, rows_per_page, PAGE: gl.constexpr):
    """Arm ``bar`` for one 64-key tile and start its two TMA loads: the values of keys ``key + [0, 64)`` in cache
    block ``page`` (:func:`_tile_page`) into ``kv_dst``, and their scales, the ``4 * 64 / D`` rows after the
    block's values at the tile's offset, into ``sf_dst``."""
    D: gl.constexpr = kv_desc.block_type.shape[1]
    row = page * rows_per_page
    mbarrier.expect(bar, kv_desc.block_type.nbytes + sf_desc.block_type.nbytes)
    gluon_compat.async_load(sf_desc, [row + PAGE + (key % PAGE) * 4 // D, 0], bar, sf_dst)
    gluon_compat.async_load(kv_desc, [row + key % PAGE, 0], bar, kv_dst)


@gluon.jit
def _fill_slot(kv_desc, sf_desc, kv_smem, sf_smem, bars, j, load, s, page, rows_per_page, PAGE: gl.constexpr):
    """Complete slot ``j``'s barrier once for item ``(b, s)``: where ``load``, TMA loads of its tile ``j`` at
    cache block ``page`` (:func:`_tile_page`), the 64 keys' values and their scales,
    the ``4 * 64 / D`` rows after the block's values at the tile's offset; else a plain arrive (every slot's
    barrier completes once an item, so all share one phase)."""
    if load:
        BKV: gl.constexpr = kv_desc.block_type.shape[0]
        fence_async_shared()  # the threads' reads of the slot's old scales before the TMA rewrites them
        _load_tile(kv_desc, sf_desc, kv_smem.index(j), sf_smem.index(j), bars.index(j), s * _SPLIT + j * BKV, page,
                   rows_per_page, PAGE)
    else:
        mbarrier.arrive(bars.index(j))


@gluon.jit
def _load_tiles(kv_desc, sf_desc, kv_smem, sf_smem, bars, j_lo, n_tiles, b, s, table_ptr, stride_table, num_blocks,
                rows_per_page, PAGE: gl.constexpr, TILES: gl.constexpr):
    """:func:`_fill_slot` for slots ``j_lo .. TILES - 1`` of item ``(b, s)``, which has ``n_tiles`` tiles."""
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    for j in gl.static_range(TILES):
        if j >= j_lo:
            if j < n_tiles:  # the page looked up only for a tile that holds keys
                page = _tile_page(table_ptr, b, s, j, stride_table, num_blocks, BKV, PAGE)
                _fill_slot(kv_desc, sf_desc, kv_smem, sf_smem, bars, j, True, s, page, rows_per_page, PAGE)
            else:
                mbarrier.arrive(bars.index(j))


@gluon.jit
def _slot_run(meta_ptr, batch):
    """This CTA's schedule slot's run of items: ``(b0, s0, b_stop, s_stop)``, clamped to the batch."""
    slot = gl.program_id(0)
    b0 = gl.minimum(gl.maximum(gl.load(meta_ptr + 2 * slot), 0), batch)
    s0 = gl.maximum(gl.load(meta_ptr + 2 * slot + 1), 0)
    b_stop = gl.minimum(gl.maximum(gl.load(meta_ptr + 2 * slot + 2), 0), batch)
    s_stop = gl.maximum(gl.load(meta_ptr + 2 * slot + 3), 0)
    return b0, s0, b_stop, s_stop


@gluon.jit
def paged_mqa_logits_kernel(q_desc, kv_desc, sf_desc, w_ptr, ctx_ptr, table_ptr, meta_ptr, out_ptr,
                            batch, num_blocks, max_blocks, max_context_len, rows_per_page,
                            stride_ws, stride_ctx_b, stride_ctx_t, stride_table, stride_out,
                            NEXT_N: gl.constexpr, HEADS: gl.constexpr, PAGE: gl.constexpr,
                            SUBS_: gl.constexpr, CTX_2D: gl.constexpr):
    """Program ``(slot, sub)``: the items of its schedule slot's run numbered ``sub`` mod ``SUBS_``. Tile
    ``j`` of the next owned item is loaded into slot ``j`` as soon as this item's tile ``j`` is reduced (and
    the slots this item leaves unused right after it), so the next item's pages arrive under this one's
    WGMMAs and epilogues; the query rows are reloaded only when the sequence changes. A tile's key scales
    come with its values (TMA, into ``sf_smem``)."""
    ROWS: gl.constexpr = NEXT_N * HEADS
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    TILES: gl.constexpr = _SPLIT // BKV
    gl.static_assert(PAGE % BKV == 0, "a 64-key tile lies inside one page")
    acc_layout: gl.constexpr = _acc_layout(ROWS)
    row_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, acc_layout)
    sub = gl.program_id(1)
    b0, s0, b_stop, s_stop = _slot_run(meta_ptr, batch)
    key_cap = gl.minimum(max_context_len, max_blocks * PAGE)

    q_smem, kv_smem, bars = alloc_ring(q_desc, kv_desc, TILES)
    sf_smem = gl.allocate_shared_memory(sf_desc.dtype, [TILES] + sf_desc.block_type.shape, sf_desc.layout)
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    q_bar = bars.index(TILES)
    q_t = q_smem.permute((1, 0))
    zero = gl.zeros([BKV, ROWS], gl.float32, acc_layout)
    r = gl.arange(0, ROWS, layout=col_layout)
    col_t = r // HEADS  # which of the NEXT_N tokens column r scores
    kt = gl.arange(0, BKV, layout=row_layout)
    w = gl.zeros([ROWS], gl.float32, col_layout)

    b, s, item, ok = _next_owned(b0, s0, b0 * 0, batch, b_stop, s_stop, sub, ctx_ptr, stride_ctx_b, stride_ctx_t,
                                 SUBS_, NEXT_N, CTX_2D)
    n_tiles = _item_tiles(ctx_ptr, b, s, batch, stride_ctx_b, stride_ctx_t, key_cap, BKV, TILES, NEXT_N, CTX_2D)
    q_b = b0 * 0 - 1  # the sequence whose query rows q_smem holds (or will, once q_bar completes)
    q_fresh = b0 * 0  # 1: a query load is in flight, not yet waited for
    if ok == 1:
        _load_tiles(kv_desc, sf_desc, kv_smem, sf_smem, bars, 0, n_tiles, b, s, table_ptr, stride_table, num_blocks,
                    rows_per_page, PAGE, TILES)
        # the first item's query rows and weights with its pages, off the serial start of a small-batch call
        w = _load_query(q_desc, q_bar, q_smem, w_ptr, b, col_t, r, stride_ws, NEXT_N, HEADS)
        q_b = b
        q_fresh = 1
    done = b0 * 0  # items this program ran: the phase of every kv barrier
    q_loads = b0 * 0
    while ok == 1:
        nb, ns, nitem, nok = _next_owned(b, s + 1, item + 1, batch, b_stop, s_stop, sub, ctx_ptr, stride_ctx_b,
                                         stride_ctx_t, SUBS_, NEXT_N, CTX_2D)
        nn_tiles = _item_tiles(ctx_ptr, nb, ns, batch, stride_ctx_b, stride_ctx_t, key_cap, BKV, TILES, NEXT_N,
                               CTX_2D)
        nn_tiles = gl.where(nok == 1, nn_tiles, 0)
        nb_row = gl.minimum(nb, batch - 1)  # past the run nb can be the batch: its pages are read, never used
        b64 = b.to(gl.int64)
        if b != q_b:  # the previous item's WGMMAs, the last readers of q_smem, are complete
            w = _load_query(q_desc, q_bar, q_smem, w_ptr, b, col_t, r, stride_ws, NEXT_N, HEADS)
            q_b = b
            q_fresh = 1
        if q_fresh == 1:
            mbarrier.wait(q_bar, q_loads & 1)
            q_loads += 1
            q_fresh = 0
        phase = done & 1
        k0 = s * _SPLIT
        for j in range(n_tiles):
            mbarrier.wait(bars.index(j), phase)
            acc = warpgroup_mma(kv_smem.index(j), q_t, zero, use_acc=False, is_async=True)
            k = k0 + j * BKV + kt
            # the next item's page for slot j, looked up while the WGMMA runs
            next_page = _tile_page(table_ptr, nb_row, ns, j, stride_table, num_blocks, BKV, PAGE, max_blocks)
            # keys past the context hold any scale: their logits are masked (_tile_logits)
            sf = gluon_compat.reinterpret(sf_smem.index(j), gl.float32, [BKV], flat).load(row_layout)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            # slot j is free: the next item's tile j
            _fill_slot(kv_desc, sf_desc, kv_smem, sf_smem, bars, j, j < nn_tiles, ns, next_page, rows_per_page, PAGE)
            _tile_logits(acc, sf, w, col_t, k, b64, ctx_ptr, b, stride_ctx_b, stride_ctx_t, key_cap,
                         max_context_len, out_ptr, stride_out, NEXT_N, CTX_2D)
        # the slots this item did not use (their barriers completed by an arrive last round) serve the next; their
        # phase is observed first, so that no barrier completes a phase before its last one was waited for
        # (compute-sanitizer synccheck reports a "missing wait" otherwise); these waits return at once
        for j in range(n_tiles, TILES):
            mbarrier.wait(bars.index(j), phase)
        _load_tiles(kv_desc, sf_desc, kv_smem, sf_smem, bars, n_tiles, nn_tiles, nb, ns, table_ptr, stride_table,
                    num_blocks, rows_per_page, PAGE, TILES)
        done += 1
        b = nb
        s = ns
        item = nitem
        ok = nok
        n_tiles = nn_tiles



@gluon.jit
def _seq_counts(ctx_ptr, b, batch, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N: gl.constexpr, CTX_2D: gl.constexpr):
    """Sequence ``b``'s schedule items (from its uncapped lens, as the schedule counts them) and its keys capped at
    ``key_cap``: ``(items, keys)``. Past the batch the lens read is clamped to a real row (callers stop there)."""
    n = _item_keys(ctx_ptr, gl.minimum(b, batch - 1), stride_ctx_b, stride_ctx_t, 2147483647, NEXT_N, CTX_2D)
    return gl.cdiv(n, _SPLIT), gl.minimum(n, key_cap)


@gluon.jit
def _walk(b, s, items, keys, batch, b_stop, s_stop, ctx_ptr, stride_ctx_b, stride_ctx_t, key_cap,
          NEXT_N: gl.constexpr, CTX_2D: gl.constexpr):
    """The item after ``(b, s)`` in the slot's run, sequence ``b`` having ``items`` items and ``keys`` keys
    (:func:`_seq_counts`, re-read only when the walk enters the next sequence, skipping empty ones):
    ``(b, s, items, keys, ok)``, ``ok`` 0 past the run."""
    s += 1
    while (s >= items) & (b < batch):
        b += 1
        s = b * 0
        items, keys = _seq_counts(ctx_ptr, b, batch, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N, CTX_2D)
    ok = ((b < batch) & ((b < b_stop) | (s < s_stop))).to(gl.int32)
    return b, s, items, keys, ok


@gluon.jit
def _walk_start(meta_ptr, batch, ctx_ptr, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N: gl.constexpr,
                CTX_2D: gl.constexpr):
    """The first item of this CTA's slot run: :func:`_walk`'s ``(b, s, items, keys, ok)`` and the run's end."""
    b0, s0, b_stop, s_stop = _slot_run(meta_ptr, batch)
    items, keys = _seq_counts(ctx_ptr, b0, batch, stride_ctx_b, stride_ctx_t, key_cap, NEXT_N, CTX_2D)
    b, s, items, keys, ok = _walk(b0, s0 - 1, items, keys, batch, b_stop, s_stop, ctx_ptr, stride_ctx_b,
                                  stride_ctx_t, key_cap, NEXT_N, CTX_2D)
    return b, s, items, keys, ok, b_stop, s_stop


@gluon.jit
def _ws_load_partition(q_desc, kv_desc, sf_desc, q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full, kv_empty,
                       ctx_ptr, table_ptr, meta_ptr, batch, num_blocks, max_blocks, max_context_len, rows_per_page,
                       stride_ctx_b, stride_ctx_t, stride_table, NEXT_N: gl.constexpr, HEADS: gl.constexpr,
                       PAGE: gl.constexpr, CTX_2D: gl.constexpr, KV_STAGES: gl.constexpr, WG: gl.constexpr):
    """Producer warp of math warpgroup ``WG``: walks the slot's items and loads each item's tile ``WG`` (its
    64 keys' values and scales) into that warpgroup's ring of ``KV_STAGES`` slots, as far ahead as the ring
    allows; producer 0 also loads each new sequence's query rows into the two-stage query ring (the
    math warpgroups release a stage when they move on to the next sequence)."""
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    key_cap = gl.minimum(max_context_len, max_blocks * PAGE)
    b, s, items, keys, ok, b_stop, s_stop = _walk_start(meta_ptr, batch, ctx_ptr, stride_ctx_b, stride_ctx_t,
                                                        key_cap, NEXT_N, CTX_2D)
    it = b * 0
    q_it = b * 0
    q_b = b * 0 - 1
    while ok == 1:
        if WG == 0:
            if b != q_b:
                qs = q_it % 2
                mbarrier.wait(q_empty.index(qs), ((q_it // 2) & 1) ^ 1)
                mbarrier.expect(q_full.index(qs), q_desc.block_type.nbytes)
                gluon_compat.async_load(q_desc, [b * (NEXT_N * HEADS), 0], q_full.index(qs),
                                        q_smem.index(qs))
                q_it += 1
                q_b = b
        key = s * _SPLIT + WG * BKV
        if key < keys:  # this item's tile WG holds keys
            page = _tile_page(table_ptr, b, s, WG, stride_table, num_blocks, BKV, PAGE)
            slot = WG * KV_STAGES + it % KV_STAGES
            mbarrier.wait(kv_empty.index(slot), ((it // KV_STAGES) & 1) ^ 1)
            _load_tile(kv_desc, sf_desc, kv_smem.index(slot), sf_smem.index(slot), kv_full.index(slot), key, page,
                       rows_per_page, PAGE)
            it += 1
        b, s, items, keys, ok = _walk(b, s, items, keys, batch, b_stop, s_stop, ctx_ptr, stride_ctx_b, stride_ctx_t,
                                      key_cap, NEXT_N, CTX_2D)


@gluon.jit
def _ws_math_partition(q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full, kv_empty, w_ptr, ctx_ptr, meta_ptr,
                       out_ptr, batch, max_blocks, max_context_len, stride_ws, stride_ctx_b, stride_ctx_t,
                       stride_out, NEXT_N: gl.constexpr, HEADS: gl.constexpr, PAGE: gl.constexpr,
                       CTX_2D: gl.constexpr, KV_STAGES: gl.constexpr, WG: gl.constexpr):
    """Math warpgroup ``WG``: tile ``WG`` of every item of the slot (the item's keys ``WG * 64 + [0, 64)``),
    from its own ring: WGMMA, release the slot, then the ReLU / head-sum epilogue and the logits store."""
    ROWS: gl.constexpr = NEXT_N * HEADS
    BKV: gl.constexpr = _BKV
    acc_layout: gl.constexpr = _acc_layout(ROWS)
    row_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    col_layout: gl.constexpr = gl.SliceLayout(0, acc_layout)
    flat: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[0])
    key_cap = gl.minimum(max_context_len, max_blocks * PAGE)
    zero = gl.zeros([BKV, ROWS], gl.float32, acc_layout)
    r = gl.arange(0, ROWS, layout=col_layout)
    col_t = r // HEADS  # which of the NEXT_N tokens column r scores
    kt = gl.arange(0, BKV, layout=row_layout)
    w = gl.zeros([ROWS], gl.float32, col_layout)
    b, s, items, keys, ok, b_stop, s_stop = _walk_start(meta_ptr, batch, ctx_ptr, stride_ctx_b, stride_ctx_t,
                                                        key_cap, NEXT_N, CTX_2D)
    it = b * 0
    q_it = b * 0
    q_b = b * 0 - 1
    while ok == 1:
        b64 = b.to(gl.int64)
        if b != q_b:
            w = gl.load(w_ptr + (b64 * NEXT_N + col_t) * stride_ws + (r % HEADS))
            if q_it > 0:  # this warpgroup is done with the previous sequence's query rows
                mbarrier.arrive(q_empty.index((q_it - 1) % 2), count=1)
            mbarrier.wait(q_full.index(q_it % 2), (q_it // 2) & 1)
            q_it += 1
            q_b = b
        k0 = s * _SPLIT + WG * BKV
        if k0 < keys:  # this item's tile WG holds keys
            slot = WG * KV_STAGES + it % KV_STAGES
            mbarrier.wait(kv_full.index(slot), (it // KV_STAGES) & 1)
            q_t = q_smem.index((q_it - 1) % 2).permute((1, 0))
            acc = warpgroup_mma(kv_smem.index(slot), q_t, zero, use_acc=False, is_async=True)
            # the walk to the next item while the WGMMA runs
            nb, ns, nitems, nkeys, nok = _walk(b, s, items, keys, batch, b_stop, s_stop, ctx_ptr, stride_ctx_b,
                                               stride_ctx_t, key_cap, NEXT_N, CTX_2D)
            # keys past the context hold any scale: their logits are masked (_tile_logits)
            sf = gluon_compat.reinterpret(sf_smem.index(slot), gl.float32, [BKV], flat).load(row_layout)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            fence_async_shared()  # the scale reads (generic proxy) before the producer's next TMA write
            mbarrier.arrive(kv_empty.index(slot), count=1)
            _tile_logits(acc, sf, w, col_t, k0 + kt, b64, ctx_ptr, b, stride_ctx_b, stride_ctx_t, key_cap,
                         max_context_len, out_ptr, stride_out, NEXT_N, CTX_2D)
            it += 1
        else:
            nb, ns, nitems, nkeys, nok = _walk(b, s, items, keys, batch, b_stop, s_stop, ctx_ptr, stride_ctx_b,
                                               stride_ctx_t, key_cap, NEXT_N, CTX_2D)
        b = nb
        s = ns
        items = nitems
        keys = nkeys
        ok = nok


@gluon.jit
def paged_mqa_logits_ws_kernel(q_desc, kv_desc, sf_desc, w_ptr, ctx_ptr, table_ptr, meta_ptr, out_ptr,
                               batch, num_blocks, max_blocks, max_context_len, rows_per_page,
                               stride_ws, stride_ctx_b, stride_ctx_t, stride_table, stride_out,
                               NEXT_N: gl.constexpr, HEADS: gl.constexpr, PAGE: gl.constexpr,
                               CTX_2D: gl.constexpr, KV_STAGES: gl.constexpr, MATH_REGS: gl.constexpr,
                               LOAD_REGS: gl.constexpr):
    """One CTA a schedule slot, warp-specialized: four math warpgroups, warpgroup ``j`` taking tile ``j``
    (keys ``j * 64 + [0, 64)``) of every 256-key item, each fed by its own producer warp through its own
    ring of ``KV_STAGES`` key tiles; the query rows in a two-stage ring shared by the four."""
    BKV: gl.constexpr = kv_desc.block_type.shape[0]
    TILES: gl.constexpr = _SPLIT // BKV
    gl.static_assert(TILES == 4, "one math warpgroup per 64-key tile of a 256-key item")
    gl.static_assert(PAGE % BKV == 0, "a 64-key tile lies inside one page")
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    kv_smem = gl.allocate_shared_memory(kv_desc.dtype, [TILES * KV_STAGES] + kv_desc.block_type.shape,
                                        kv_desc.layout)
    sf_smem = gl.allocate_shared_memory(sf_desc.dtype, [TILES * KV_STAGES] + sf_desc.block_type.shape,
                                        sf_desc.layout)
    q_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    kv_full = gl.allocate_shared_memory(gl.int64, [TILES * KV_STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [TILES * KV_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(q_full.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=TILES)
    for i in gl.static_range(TILES * KV_STAGES):
        mbarrier.init(kv_full.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=1)
    fence_async_shared()
    # spelled out: argument tuples built once and extended per partition (``args + (wg,)``) lose their
    # constexpr-ness for some specializations (HEADS arrived as a tensor; 699afb3, reverted)
    gl.warp_specialize([
        (_ws_math_partition, (q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full, kv_empty, w_ptr, ctx_ptr,
                               meta_ptr, out_ptr, batch, max_blocks, max_context_len, stride_ws, stride_ctx_b,
                               stride_ctx_t, stride_out, NEXT_N, HEADS, PAGE, CTX_2D, KV_STAGES, 0)),
        (_ws_math_partition, (q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full, kv_empty, w_ptr, ctx_ptr,
                               meta_ptr, out_ptr, batch, max_blocks, max_context_len, stride_ws, stride_ctx_b,
                               stride_ctx_t, stride_out, NEXT_N, HEADS, PAGE, CTX_2D, KV_STAGES, 1)),
        (_ws_math_partition, (q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full, kv_empty, w_ptr, ctx_ptr,
                               meta_ptr, out_ptr, batch, max_blocks, max_context_len, stride_ws, stride_ctx_b,
                               stride_ctx_t, stride_out, NEXT_N, HEADS, PAGE, CTX_2D, KV_STAGES, 2)),
        (_ws_math_partition, (q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full, kv_empty, w_ptr, ctx_ptr,
                               meta_ptr, out_ptr, batch, max_blocks, max_context_len, stride_ws, stride_ctx_b,
                               stride_ctx_t, stride_out, NEXT_N, HEADS, PAGE, CTX_2D, KV_STAGES, 3)),
        (_ws_load_partition, (q_desc, kv_desc, sf_desc, q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full,
                               kv_empty, ctx_ptr, table_ptr, meta_ptr, batch, num_blocks, max_blocks, max_context_len,
                               rows_per_page, stride_ctx_b, stride_ctx_t, stride_table, NEXT_N, HEADS, PAGE, CTX_2D,
                               KV_STAGES, 0)),
        (_ws_load_partition, (q_desc, kv_desc, sf_desc, q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full,
                               kv_empty, ctx_ptr, table_ptr, meta_ptr, batch, num_blocks, max_blocks, max_context_len,
                               rows_per_page, stride_ctx_b, stride_ctx_t, stride_table, NEXT_N, HEADS, PAGE, CTX_2D,
                               KV_STAGES, 1)),
        (_ws_load_partition, (q_desc, kv_desc, sf_desc, q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full,
                               kv_empty, ctx_ptr, table_ptr, meta_ptr, batch, num_blocks, max_blocks, max_context_len,
                               rows_per_page, stride_ctx_b, stride_ctx_t, stride_table, NEXT_N, HEADS, PAGE, CTX_2D,
                               KV_STAGES, 2)),
        (_ws_load_partition, (q_desc, kv_desc, sf_desc, q_smem, kv_smem, sf_smem, q_full, q_empty, kv_full,
                               kv_empty, ctx_ptr, table_ptr, meta_ptr, batch, num_blocks, max_blocks, max_context_len,
                               rows_per_page, stride_ctx_b, stride_ctx_t, stride_table, NEXT_N, HEADS, PAGE, CTX_2D,
                               KV_STAGES, 3)),
    ], [4, 4, 4, 1, 1, 1, 1], [MATH_REGS, MATH_REGS, MATH_REGS, LOAD_REGS, LOAD_REGS, LOAD_REGS, LOAD_REGS])


# The warp-specialized form (paged_mqa_logits_ws_kernel): whether launch() takes it by default, and its budget.
# The kernel runs 20 warps (4 math warpgroups, 4 producer warps) under .maxnreg 96, i.e. 61440 registers:
# 3 x 128 x 112 (math workers) + 4 x 32 x 24 (producers) leaves 120 to the default (math) partition (at 32 a
# producer it gets 112 and spills a register at 128 rows).
WARP_SPECIALIZED: bool | None = None  # None: launch() follows ws_wanted(); True / False force a form (A/B runs)
WS_STAGES = 0  # key-tile slots a warpgroup of the ws form (0: ws_kv_stages; at most ws_max_kv_stages), A/B runs
WS_MATH_REGS = 112
WS_LOAD_REGS = 24
_SMEM_BYTES = 232448  # sm_90's dynamic shared memory a CTA


def ws_supported(rows: int) -> bool:
    """Whether the warp-specialized kernel takes ``rows = next_n * H`` query rows: its [64, rows] accumulator
    and weights fit the 112 registers of a math warpgroup up to 128 rows (no spills, CPU-checked)."""
    return rows <= 128


# batch x max_context_len (keys a call may score, per query row) from which the ws form is the default at 128 rows
WS_MIN_KEYS = 1 << 21
# Key-tile slots a math warpgroup of the ws form takes at most. H100 (3 / 4 / 5 / what fits, 5 at
# 128 rows and 6 below, on 9 cases of 32-128 rows, 2-32 M keys): 3 the fastest on all nine, 1-5 % under what fits
# (b256 n1 h64 ctx8192 113 / 118 / 122 / 119 us, b4096 n2 h64 ctx8192 1603 / 1618 / 1646 / 1648); harness
# paged-mqa at 128 rows, kernel us: b256 n2 h64 ctx65536 bf16 844 -> 804, b4096 n2 h64 ctx8192 1651 -> 1618. Deeper
# rings only add requests in flight past what HBM serves.
WS_RING_STAGES = 3


def ws_wanted(rows: int, batch: int, max_context_len: int) -> bool:
    """Whether :func:`launch` takes the warp-specialized form by default: at 128 query rows with at least
    :data:`WS_MIN_KEYS` keys in the call (``batch x max_context_len``, what the host knows without a sync), where
    the four-CTA form is bound by each CTA's serial tile chain rather than by HBM (H200 ncu: DRAM 62 %,
    tensor 40 %). H200 harness, kernel us four-CTA / ws: b4096 n2 h64 ctx8192 1539.0 / 1352.6,
    b256 n2 h64 ctx65536 725.5 / 670.5 (bf16) and 714.9 / 648.8 (fp32); below the threshold the ws form ties or
    loses: b256 ctx8192 101.6 / 101.8, b256 ctx2048 32.3 / 34.3, b32 ctx2048 10.1 / 10.5, b8 ctx8192 9.6 / 10.1.
    At 3 key-tile slots (:data:`WS_RING_STAGES`, H100) b256 ctx8192 (2^21 keys) gains too: 122.9 /
    119.6, so the threshold moved to 2^21. At 32 and 64 rows the four-CTA form won on the H200 (ws 0.86-1.02x at
    6 slots) and stays; at 3 slots the H100 has ws 1-4 % ahead there (b4096 n1 h32 ctx8192 1584 / 1552): an H200
    run decides."""
    return rows == 128 and batch * max_context_len >= WS_MIN_KEYS


def ws_kv_stages(rows: int, head_dim: int) -> int:
    """Key-tile slots per math warpgroup of the warp-specialized kernel by default: :data:`WS_RING_STAGES`, or
    fewer if :func:`ws_max_kv_stages` is fewer."""
    return min(WS_RING_STAGES, ws_max_kv_stages(rows, head_dim))


def ws_max_kv_stages(rows: int, head_dim: int) -> int:
    """Key-tile slots per math warpgroup that shared memory holds after the two query stages (four rings of
    64-key tiles with their 256 bytes of scales; 1 KB for barriers), at least 2."""
    tile = BLOCK_KV * head_dim + 4 * BLOCK_KV
    return max(2, (_SMEM_BYTES - 2 * rows * head_dim - 1024) // (4 * tile))


def supported(next_n: int, heads: int, head_dim: int, kv_cache: torch.Tensor) -> bool:
    """Whether this kernel takes the call (sm_90 assumed): a power-of-two WGMMA N (``next_n * H`` 32-256),
    D = 128, pages of 64-key multiples whose start (``stride(0)``) is a whole number of ``D``-byte rows,
    and a 16-byte-aligned cache."""
    rows = next_n * heads
    block_kv = kv_cache.shape[1]
    return (head_dim == 128 and rows in (32, 64, 128, 256) and block_kv % BLOCK_KV == 0
            and kv_cache.stride(0) % head_dim == 0 and kv_cache.data_ptr() % 16 == 0
            and kv_cache.shape[0] * (kv_cache.stride(0) // head_dim) < 2 ** 31)  # int32 TMA row coordinates


def dispatched(next_n: int, heads: int, head_dim: int, kv_cache: torch.Tensor) -> bool:
    """Whether the API runs this kernel: :func:`supported` and at most 128 query rows a sequence, the range
    measured against the Triton kernel (the module docstring's nine cases; 256 rows, e.g. H=128 with
    next_n=2, run correctly here but at two CTAs an SM and are untimed)."""
    return next_n * heads <= 128 and supported(next_n, heads, head_dim, kv_cache)


def launch(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
           block_table: torch.Tensor, schedule_meta: torch.Tensor, out: torch.Tensor, subs: int = 0,
           ws: bool | None = None, ws_stages: int = 0) -> None:
    """Launch on validated tensors (as api/attention.py's ``fp8_paged_mqa_logits`` passes them; the
    ``-inf`` clean-up of unwritten columns stays the Triton launcher's).

    q: e4m3 ``[B, next_n, H, D]`` contiguous (seen as ``[B * next_n * H, D]``); kv_cache: uint8
    ``[num_blocks, block_kv, 1, D + 4]`` with :func:`supported` strides; weights fp32 ``[B * next_n, H]``,
    ``stride(1) == 1``; context_lens int32 ``[B]`` or ``[B, next_n]``; block_table int32
    ``[B, max_blocks]``, ``stride(1) == 1``; schedule_meta int32 ``[num_slots + 1, 2]`` contiguous; out
    fp32/bf16 ``[B * next_n, max_context_len]``, ``stride(1) == 1``. ``subs`` (four-CTA form) and ``ws_stages``
    (warp-specialized form, at most :func:`ws_max_kv_stages`) override the CTAs a slot and the key-tile slots a
    warpgroup (0: the rule), for measurements; ``ws`` forces a form (None: :func:`ws_wanted`).
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
    if ws is None:
        ws = (ws_wanted(rows, batch, out.shape[1]) if WARP_SPECIALIZED is None
              else WARP_SPECIALIZED and ws_supported(rows))
    elif ws and not ws_supported(rows):
        raise ValueError(f"the warp-specialized sm90 paged MQA kernel takes up to 128 query rows; got {rows}")
    ws_stages = ws_stages or WS_STAGES  # resolved before the key, as the form is: a recording holds its depth
    key = (q.data_ptr(), q.shape, kv_cache.data_ptr(), kv_cache.shape, kv_cache.stride(), weights.data_ptr(),
           weights.shape, weights.stride(), context_lens.data_ptr(), context_lens.shape, context_lens.stride(),
           block_table.data_ptr(), block_table.shape, block_table.stride(), schedule_meta.data_ptr(),
           schedule_meta.shape, out.data_ptr(), out.shape, out.stride(), out.dtype, q.get_device(), subs, ws,
           ws_stages)

    def build() -> list:
        q2 = q.reshape(batch * rows, head_dim)
        rows_per_page = kv_cache.stride(0) // head_dim
        # the value rows up to the last block's own (its scale rows and any padding may end the storage)
        value_rows = (num_blocks - 1) * rows_per_page + block_kv
        values = torch.as_strided(kv_cache, (value_rows, head_dim), (head_dim, 1)).view(torch.float8_e4m3fn)
        q_layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], _GL_E4M3)
        kv_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_KV, head_dim], _GL_E4M3)
        q_desc = TensorDescriptor(q2, list(q2.shape), list(q2.stride()), [rows, head_dim], q_layout)
        kv_desc = TensorDescriptor(values, list(values.shape), list(values.stride()), [BLOCK_KV, head_dim],
                                   kv_layout)
        # the rows through the last block's scales: a tile's 64 scales are 256 bytes, 4 * 64 / D rows of D bytes
        scale_rows = value_rows + 4 * block_kv // head_dim
        sf_rows = torch.as_strided(kv_cache, (scale_rows, head_dim), (head_dim, 1)).view(torch.float32)
        sf_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2)
        sf_desc = TensorDescriptor(sf_rows, list(sf_rows.shape), list(sf_rows.stride()),
                                   [4 * BLOCK_KV // head_dim, head_dim // 4], sf_layout)
        ctx_2d = context_lens.dim() == 2
        args = (q_desc, kv_desc, sf_desc, weights, context_lens, block_table, schedule_meta, out,
                batch, num_blocks, block_table.shape[1], out.shape[1], rows_per_page, weights.stride(0),
                context_lens.stride(0),
                context_lens.stride(1) if ctx_2d else 0, block_table.stride(0), out.stride(0))
        if ws:
            stages = (min(ws_stages, ws_max_kv_stages(rows, head_dim)) if ws_stages
                      else ws_kv_stages(rows, head_dim))
            meta = dict(NEXT_N=next_n, HEADS=heads, PAGE=block_kv, CTX_2D=ctx_2d, KV_STAGES=stages,
                        MATH_REGS=WS_MATH_REGS,
                        LOAD_REGS=WS_LOAD_REGS, num_warps=4)
            return [(paged_mqa_logits_ws_kernel, (num_slots,), args, meta)]
        ctas = subs or ctas_per_slot(rows)
        meta = dict(NEXT_N=next_n, HEADS=heads, PAGE=block_kv, SUBS_=ctas, CTX_2D=ctx_2d, num_warps=4,
                    maxnreg=register_cap(rows, ctas))
        return [(paged_mqa_logits_kernel, (num_slots, ctas), args, meta)]

    launcher.replay_or_record(_recordings, key, build, MAX_RECORDINGS)


# launch key -> the recorded launch (launcher.py; holds no tensor): a repeated decode step costs a key and a
# dict lookup instead of the ~100 us of descriptor building and argument binding measured per call
_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
MAX_RECORDINGS = 1024
