"""Paged MQA logits (lightning indexer, decode): the logits of ``next_n`` new tokens against a paged FP8 KV cache.

Cache layout (DeepGEMM's fused cache, uint8 ``[num_blocks, block_kv, 1, D + 4]``): block ``p`` starts at
byte ``p * stride(0)`` and holds ``block_kv * D`` FP8 e4m3 values (row ``r`` at byte ``r * D``) followed by
``block_kv`` fp32 scales (row ``r`` at byte ``block_kv * D + 4 r``). Logical key ``k`` of batch ``b`` is
row ``k % block_kv`` of block ``block_table[b, k // block_kv]``.

Schedule: the work is cut into items of ``SPLIT_KV`` (256) keys per batch element — batch ``b`` has
``ceil(L_b / SPLIT_KV)`` of them, ``L_b`` its largest row context — numbered in (b, split) order.
:func:`schedule_paged_mqa_logits` gives every SM slot a contiguous run of items as an int32
``[num_slots + 1, 2]`` table of (b, split) starts, built on the device with torch ops (no sync, CUDA
graph safe). Program ``(slot, sub)`` walks its slot's run and takes every ``SUBS``-th item, so
``SUBS`` CTAs share an SM's run and hide each other's load latency.

Per item: the q rows of all ``next_n`` tokens and all heads ``[next_n * H, D]`` are loaded once; each of
the item's key tiles ``[BLOCK_N, D]`` is gathered row by row through the block table (pages of any size
dividing ``SPLIT_KV``), multiplied with one ``tl.dot`` for every head and token, and reduced in registers
(``relu(acc * sf) * w``, head sum) to ``[next_n, BLOCK_N]`` logits with ``-inf`` past each row's context.

Clamping (values inside device tensors are never trusted for addressing): schedule entries are clamped
to ``[0, B]`` (and a walk always ends), context lengths below 0 read as 0 and are capped at
``max_blocks * block_kv`` and ``max_context_len`` for masking, block-table entries are clamped to
``[0, num_blocks - 1]``, and stores are masked to ``max_context_len`` columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...jit.device import DeviceFacts

SPLIT_KV = 256  # keys per schedule item; every supported block_kv divides it


@dataclass(frozen=True)
class PagedMqaLogitsConfig:
    block_n: int  # keys per dot (divides SPLIT_KV)
    subs: int  # CTAs sharing one schedule slot
    num_warps: int
    num_stages: int


def get_paged_mqa_logits_config(next_n: int, heads: int, head_dim: int, facts: DeviceFacts,
                                hopper: bool) -> PagedMqaLogitsConfig:
    """Pure heuristic. On sm_90 the whole 256-key item is one dot (``[256, next_n * H]`` accumulator, 8
    warps) with 2 CTAs per SM slot: on an H200 (benchmarks/results/mqa_h200_2026-12-02.json, B=256,
    avg context 8192, H=64) 129 us for next_n=1 and 234 us for next_n=2, against 139/282 us for
    64-key tiles x 4 CTAs and 172/352 us for 128-key tiles x 4 CTAs. Elsewhere 64-key tiles with 4
    CTAs a slot; the interpreter takes the whole item in one dot."""
    if facts.interpreter:
        return PagedMqaLogitsConfig(SPLIT_KV, 1, 4, 1)
    if hopper:
        return PagedMqaLogitsConfig(SPLIT_KV, 2, 8, 1)
    return PagedMqaLogitsConfig(64, 4, 4, 2)


def schedule_paged_mqa_logits(context_lens: torch.Tensor, num_slots: int) -> torch.Tensor:
    """int32 ``[num_slots + 1, 2]``: slot ``i`` starts at item ``floor(i * total / num_slots)``, as (b, split).

    ``context_lens`` int32 ``[B]`` or ``[B, next_n]`` on any device; runs as a few torch ops on that device.
    """
    c = context_lens.long()
    lens = (c if c.dim() == 1 else c.amax(dim=1)).clamp(min=0)
    splits = (lens + SPLIT_KV - 1) // SPLIT_KV
    cum = torch.cumsum(splits, dim=0)  # inclusive
    total = cum[-1:] if cum.numel() else torch.zeros(1, dtype=torch.long, device=c.device)
    targets = torch.arange(num_slots + 1, device=c.device, dtype=torch.long) * total // num_slots
    b = torch.searchsorted(cum, targets, right=True)
    before = torch.cat([torch.zeros(1, dtype=torch.long, device=c.device), cum])[b]
    return torch.stack([b, targets - before], dim=1).to(torch.int32)


@triton.jit
def _row_context(ctx_ptr, b, t, t_valid, stride_ctx_b, stride_ctx_t, NEXT_N: tl.constexpr, CTX_2D: tl.constexpr):
    """Keys row (b, t) sees: ``ctx[b, t]`` for 2-D lens, ``ctx[b] - NEXT_N + t + 1`` for 1-D; at least 0."""
    if CTX_2D:
        c = tl.load(ctx_ptr + b * stride_ctx_b + t * stride_ctx_t, mask=t_valid, other=0)
    else:
        c = tl.load(ctx_ptr + b * stride_ctx_b) - NEXT_N + 1 + t
    return tl.where(t_valid, tl.maximum(c, 0), 0)


@triton.jit
def _paged_mqa_logits_kernel(
    q_ptr, kv_ptr, sf_ptr, w_ptr, ctx_ptr, table_ptr, meta_ptr, out_ptr,
    batch, num_blocks, max_blocks, max_context_len,
    stride_qb, stride_qt, stride_qh, stride_page, stride_page_sf, sf_offset,
    stride_ws, stride_ctx_b, stride_ctx_t, stride_table, stride_out,
    NEXT_N: tl.constexpr, NEXT_N_P2: tl.constexpr, HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr, SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, SUBS: tl.constexpr, CTX_2D: tl.constexpr,
):
    ROWS: tl.constexpr = NEXT_N_P2 * HEADS
    slot = tl.program_id(0)
    sub = tl.program_id(1)
    b = tl.minimum(tl.maximum(tl.load(meta_ptr + 2 * slot), 0), batch)
    s = tl.maximum(tl.load(meta_ptr + 2 * slot + 1), 0)
    b_stop = tl.minimum(tl.maximum(tl.load(meta_ptr + 2 * slot + 2), 0), batch)
    s_stop = tl.maximum(tl.load(meta_ptr + 2 * slot + 3), 0)

    # Row r of the q tile is token r // HEADS of next_n, head r % HEADS.
    r = tl.arange(0, ROWS)
    rt = r // HEADS
    rh = r % HEADS
    r_valid = rt < NEXT_N
    d = tl.arange(0, HEAD_DIM)
    tok = tl.arange(0, NEXT_N_P2)
    tok_valid = tok < NEXT_N
    key_cap = tl.minimum(max_context_len, max_blocks * PAGE)

    item = 0
    while (b < batch) & ((b < b_stop) | (s < s_stop)):
        # The schedule's item count for b, from the same lens it was built from.
        ctx_rows = _row_context(ctx_ptr, b, tok, tok_valid, stride_ctx_b, stride_ctx_t, NEXT_N, CTX_2D)
        b_keys = tl.max(ctx_rows, axis=0)
        if s < tl.cdiv(b_keys, SPLIT):
            if item % SUBS == sub:
                lens = tl.minimum(ctx_rows, key_cap)  # [NEXT_N_P2]
                n_keys = tl.max(lens, axis=0)
                b64 = b.to(tl.int64)
                q = tl.load(q_ptr + b64 * stride_qb + rt[:, None] * stride_qt + rh[:, None] * stride_qh + d[None, :],
                            mask=r_valid[:, None], other=0.0)
                w = tl.load(w_ptr + (b64 * NEXT_N + rt) * stride_ws + rh, mask=r_valid, other=0.0)
                q_t = tl.trans(q)
                out_rows = out_ptr + (b64 * NEXT_N + tok)[:, None] * stride_out
                for i in range(SPLIT // BLOCK_N):
                    k = s * SPLIT + i * BLOCK_N + tl.arange(0, BLOCK_N)
                    k_valid = k < n_keys
                    page = tl.load(table_ptr + b64 * stride_table + k // PAGE, mask=k_valid, other=0)
                    page = tl.minimum(tl.maximum(page, 0), num_blocks - 1).to(tl.int64)
                    row = k % PAGE
                    kv = tl.load(kv_ptr + page[:, None] * stride_page + row[:, None] * HEAD_DIM + d[None, :],
                                 mask=k_valid[:, None], other=0.0)
                    sf = tl.load(sf_ptr + page * stride_page_sf + sf_offset + row, mask=k_valid, other=0.0)
                    scores = tl.dot(kv, q_t, out_dtype=tl.float32)  # [BLOCK_N, ROWS]
                    scores = tl.maximum(scores * sf[:, None], 0.0, propagate_nan=tl.PropagateNan.ALL) * w[None, :]
                    logits = tl.trans(tl.sum(tl.reshape(scores, (BLOCK_N, NEXT_N_P2, HEADS)), axis=2))
                    logits = tl.where(k[None, :] < lens[:, None], logits, float("-inf"))
                    tl.store(out_rows + k[None, :], logits.to(out_ptr.dtype.element_ty),
                             mask=tok_valid[:, None] & (k < max_context_len)[None, :])
            item += 1
            s += 1
        else:
            b += 1
            s = 0


@triton.jit
def _paged_clean_kernel(
    ctx_ptr, out_ptr, max_context_len, stride_ctx_b, stride_ctx_t, stride_out,
    NEXT_N: tl.constexpr, CTX_2D: tl.constexpr, CHUNK: tl.constexpr,
):
    """``-inf`` at columns ``[row context, max_context_len)`` of one row (the main kernel never visits them all)."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    b = row // NEXT_N
    t = row % NEXT_N
    c = _row_context(ctx_ptr, b, t, True, stride_ctx_b, stride_ctx_t, NEXT_N, CTX_2D)
    if tl.program_id(1) * CHUNK + CHUNK > c:
        neg = tl.full((CHUNK,), float("-inf"), tl.float32).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + row.to(tl.int64) * stride_out + cols, neg, mask=(cols >= c) & (cols < max_context_len))


def launch_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                            block_table: torch.Tensor, schedule_meta: torch.Tensor, out: torch.Tensor,
                            clean_logits: bool, config: PagedMqaLogitsConfig) -> None:
    """Launch on validated tensors (values unchecked: the kernel clamps them).

    q: e4m3 ``[B, next_n, H, D]``, ``stride(3) == 1``; kv_cache: uint8 ``[num_blocks, block_kv, 1, D + 4]``
    with ``stride(3) == 1``, ``stride(1) == D + 4`` and ``stride(0) % 4 == 0``; weights fp32
    ``[B * next_n, H]``, ``stride(1) == 1``; context_lens int32 ``[B]`` or ``[B, next_n]``; block_table
    int32 ``[B, max_blocks]``, ``stride(1) == 1``; schedule_meta int32 ``[num_slots + 1, 2]`` contiguous;
    out fp32/bf16 ``[B * next_n, max_context_len]``, ``stride(1) == 1``.
    """
    batch, next_n, heads, head_dim = q.shape
    num_blocks, block_kv = kv_cache.shape[0], kv_cache.shape[1]
    max_context_len = out.shape[1]
    values = kv_cache.view(torch.float8_e4m3fn)
    scales = kv_cache.view(torch.float32)  # same storage, fp32 elements (last dim (D + 4) / 4)
    ctx_2d = context_lens.dim() == 2
    stride_ctx_t = context_lens.stride(1) if ctx_2d else 0
    num_slots = schedule_meta.shape[0] - 1
    block_n = min(config.block_n, SPLIT_KV)
    if num_slots > 0 and batch > 0:
        _paged_mqa_logits_kernel[(num_slots, config.subs)](
            q, values, scales, weights, context_lens, block_table, schedule_meta, out,
            batch, num_blocks, block_table.shape[1], max_context_len,
            q.stride(0), q.stride(1), q.stride(2),
            kv_cache.stride(0), kv_cache.stride(0) // 4, block_kv * head_dim // 4,
            weights.stride(0), context_lens.stride(0), stride_ctx_t, block_table.stride(0), out.stride(0),
            NEXT_N=next_n, NEXT_N_P2=triton.next_power_of_2(next_n), HEADS=heads, HEAD_DIM=head_dim,
            PAGE=block_kv, SPLIT=SPLIT_KV, BLOCK_N=block_n, SUBS=config.subs, CTX_2D=ctx_2d,
            num_warps=config.num_warps, num_stages=config.num_stages,
        )
    if clean_logits:
        launch_paged_clean(context_lens, out, next_n)


def launch_paged_clean(context_lens: torch.Tensor, out: torch.Tensor, next_n: int) -> None:
    """``-inf`` at every column ``>= ctx(b, t)`` of ``out`` ``[B * next_n, max_context_len]`` (``clean_logits``;
    the main kernels leave the splits past a sequence's largest context unwritten)."""
    max_context_len = out.shape[1]
    ctx_2d = context_lens.dim() == 2
    stride_ctx_t = context_lens.stride(1) if ctx_2d else 0
    if out.numel() > 0:
        chunk = 1024
        _paged_clean_kernel[(out.shape[0], triton.cdiv(max_context_len, chunk))](
            context_lens, out, max_context_len, context_lens.stride(0), stride_ctx_t, out.stride(0),
            NEXT_N=next_n, CTX_2D=ctx_2d, CHUNK=chunk,
        )
