"""MQA logits of the DeepSeek V3.2 lightning indexer (non-paged, "prefill"), one Triton kernel for every GPU.

``out[i, j] = sum_h relu(q[i, h] . kv[j] * kv_sf[j]) * w[i, h]`` for ``j`` in ``[start[i], end[i])``.

Work split: program ``(pid_q, pid_split)`` owns ``BLOCK_Q`` queries (``BLOCK_Q * H`` rows of q, kept in
registers for the whole program) and a fixed run of ``tiles_per_split`` key tiles of ``BLOCK_KV`` keys
(the absolute key axis is cut into splits so that short query blocks still fill the GPU). Per key tile:

1. one ``tl.dot`` of the kv tile ``[BLOCK_KV, D]`` with all heads of all queries ``[D, BLOCK_Q * H]``
   (on sm_90 this is one WGMMA chain with M = keys, N = query-heads, K = D); each kv tile is loaded
   once for every head;
2. epilogue in registers: ``relu(acc * kv_sf) * w``, then the head sum (a reduction along the MMA's N,
   mostly inside each thread), giving ``[BLOCK_KV, BLOCK_Q]`` logits;
3. per-query range mask (``-inf`` outside ``[start, end)``) and a row-contiguous store.

Tiles of the split that no query of the block touches (outside ``[min start, max end)``) are never
loaded or multiplied: with ``CLEAN`` they get one wide ``-inf`` store each, without it nothing. The
compute loop has no branch in it, so Triton can software-pipeline its loads (``num_stages``).

Range values are clamped in the kernel (``start`` to ``[0, S_kv]``, ``end`` to ``[start, S_kv]``, and to
``start + max_seqlen_k`` in the compact form), so no value inside the range tensors can make it read or
write out of bounds.

``COMPRESSED`` (``max_seqlen_k > 0``): the output is ``[S, max_seqlen_k]`` and column ``c`` of row ``i``
holds key ``start[i] + c``; only in-range columns are written (the caller pre-fills ``-inf`` when asked
to clean).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...jit.device import DeviceFacts


@dataclass(frozen=True)
class MqaLogitsConfig:
    """Tiles of one launch: ``block_q`` queries x ``block_kv`` keys per dot, ``tiles_per_split`` tiles each."""

    block_q: int
    block_kv: int
    tiles_per_split: int
    num_warps: int
    num_stages: int
    # kv_sf applied once per logit after the head sum (the kernel's SF_AFTER_SUM; exact for either sign)
    sf_after_sum: bool = False


def get_mqa_logits_config(seq_len: int, seq_len_kv: int, heads: int, head_dim: int, facts: DeviceFacts,
                          hopper: bool) -> MqaLogitsConfig:
    """Pure heuristic (no device access): tile sizes for ``[S, H, D] x [S_kv, D]`` on ``facts``.

    - sm_90, measured on an H200 (benchmarks/results/mqa_h200_2026-12-02.json, S=2048, S_kv=8192):
      N of the dot (``block_q * heads``) 128, M (``block_kv``) 64 keys, 4 warps, 3 stages: 329 us at
      H=64/D=128 against 401 us for 128 keys x 8 warps (one CTA per SM at 138 registers) and 435 us
      for 256 keys; 104 us vs 122 us at H=32/D=64. At D=32 the epilogue dominates and N=64 with
      128 keys is best (235 us vs 255 us).
    - Other GPUs: the same 128 x 64 tiles, 2 stages. Interpreter: N=64, M=64 (fewer numpy ops).
    - Splits of the key axis: enough programs for ~4 per SM (``4 * num_sms``), never fewer than one
      tile per split; one split on the interpreter, where a program is only overhead.
    - ``sf_after_sum`` from 32 heads (H200, S=2048, S_kv=8192, results/mqa-sm90-probe-h200-2026-12-03-
      signed-12ec969.json): H=64/D=128 causal 325.7 -> 300.6 us, H=32/D=64 108.8 -> 101.7, H=64/D=32
      234.6 -> 207.6, H=128 586.6 -> 524.2; at 16 heads 113.8 -> 115.4, so not there.
    """
    if facts.interpreter:
        block_q, block_kv, warps, stages = max(1, 64 // heads), 64, 4, 1
    elif hopper and head_dim <= 32:
        block_q, block_kv, warps, stages = max(1, 64 // heads), 128, 4, 3
    elif hopper:
        block_q, block_kv, warps, stages = max(1, 128 // heads), 64, 4, 3
    else:
        block_q, block_kv, warps, stages = max(1, 128 // heads), 64, 4, 2
    num_tiles = max(1, triton.cdiv(seq_len_kv, block_kv))
    num_q_blocks = max(1, triton.cdiv(seq_len, block_q))
    splits = 1 if facts.interpreter else min(num_tiles, max(1, triton.cdiv(4 * facts.num_sms, num_q_blocks)))
    return MqaLogitsConfig(block_q, block_kv, triton.cdiv(num_tiles, splits), warps, stages, heads >= 32)


@triton.jit
def _store_neg_inf_tile(out_ptr, q_rows64, q_valid, t, seq_len_kv, stride_out, BLOCK_KV: tl.constexpr,
                        BLOCK_Q: tl.constexpr):
    kj = t * BLOCK_KV + tl.arange(0, BLOCK_KV)
    neg = tl.full((BLOCK_Q, BLOCK_KV), float("-inf"), tl.float32).to(out_ptr.dtype.element_ty)
    ptrs = out_ptr + q_rows64[:, None] * stride_out + kj[None, :]
    tl.store(ptrs, neg, mask=q_valid[:, None] & (kj < seq_len_kv)[None, :])


@triton.jit
def _mqa_logits_kernel(
    q_ptr, kv_ptr, kv_sf_ptr, w_ptr, start_ptr, end_ptr, out_ptr,
    seq_len, seq_len_kv, max_seqlen_k, tiles_per_split,
    stride_qs, stride_qh, stride_kv, stride_ws, stride_start, stride_end, stride_out,
    HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr,
    CLEAN: tl.constexpr, COMPRESSED: tl.constexpr, SF_AFTER_SUM: tl.constexpr = False,
):
    ROWS: tl.constexpr = BLOCK_Q * HEADS
    pid_q = tl.program_id(0)
    pid_split = tl.program_id(1)

    # Ranges of this block's queries, clamped so that no value can index out of bounds.
    qi = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_valid = qi < seq_len
    st = tl.load(start_ptr + qi * stride_start, mask=q_valid, other=0)
    en = tl.load(end_ptr + qi * stride_end, mask=q_valid, other=0)
    st = tl.minimum(tl.maximum(st, 0), seq_len_kv)
    en = tl.maximum(tl.minimum(en, seq_len_kv), st)
    if COMPRESSED:
        en = st + tl.minimum(en - st, max_seqlen_k)
    lo = tl.min(tl.where(q_valid, st, seq_len_kv), axis=0)
    hi = tl.max(tl.where(q_valid, en, 0), axis=0)

    # This split's tiles [t_begin, t_end), cut into -inf | compute | -inf.
    num_tiles = tl.cdiv(seq_len_kv, BLOCK_KV)
    t_begin = pid_split * tiles_per_split
    t_end = tl.minimum(t_begin + tiles_per_split, num_tiles)
    c_begin = tl.minimum(tl.maximum(lo // BLOCK_KV, t_begin), t_end)
    c_end = tl.minimum(tl.maximum(tl.cdiv(hi, BLOCK_KV), c_begin), t_end)
    c_end = tl.where(hi > lo, c_end, c_begin)

    q_rows64 = qi.to(tl.int64)
    if CLEAN and not COMPRESSED:
        for t in range(t_begin, c_begin):
            _store_neg_inf_tile(out_ptr, q_rows64, q_valid, t, seq_len_kv, stride_out, BLOCK_KV, BLOCK_Q)
        for t in range(c_end, t_end):
            _store_neg_inf_tile(out_ptr, q_rows64, q_valid, t, seq_len_kv, stride_out, BLOCK_KV, BLOCK_Q)

    if c_end > c_begin:
        # All heads of BLOCK_Q queries: row r is query pid_q * BLOCK_Q + r // HEADS, head r % HEADS.
        r = tl.arange(0, ROWS)
        rq = pid_q * BLOCK_Q + r // HEADS
        rh = r % HEADS
        r_valid = rq < seq_len
        d = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + rq.to(tl.int64)[:, None] * stride_qs + rh[:, None] * stride_qh + d[None, :],
                    mask=r_valid[:, None], other=0.0)
        w = tl.load(w_ptr + rq.to(tl.int64) * stride_ws + rh, mask=r_valid, other=0.0)
        q_t = tl.trans(q)  # [D, ROWS]: K-major B operand of the dot

        for t in range(c_begin, c_end):
            kj = t * BLOCK_KV + tl.arange(0, BLOCK_KV)
            kj_valid = kj < seq_len_kv
            kv = tl.load(kv_ptr + kj.to(tl.int64)[:, None] * stride_kv + d[None, :], mask=kj_valid[:, None],
                         other=0.0)
            sf = tl.load(kv_sf_ptr + kj, mask=kj_valid, other=0.0)
            scores = tl.dot(kv, q_t, out_dtype=tl.float32)  # [BLOCK_KV, ROWS]
            if SF_AFTER_SUM:  # relu(x * sf) = sf * (x + sign(sf) * |x|) / 2, either sign of sf
                sgn = tl.where(sf >= 0.0, 1.0, -1.0)
                scores = tl.fma(tl.abs(scores), sgn[:, None], scores) * w[None, :]
            else:
                scores = tl.maximum(scores * sf[:, None], 0.0, propagate_nan=tl.PropagateNan.ALL) * w[None, :]
            logits = tl.trans(tl.sum(tl.reshape(scores, (BLOCK_KV, BLOCK_Q, HEADS)), axis=2))  # [BLOCK_Q, BLOCK_KV]
            if SF_AFTER_SUM:
                logits = logits * (sf * 0.5)[None, :]
            inside = (kj[None, :] >= st[:, None]) & (kj[None, :] < en[:, None])
            if COMPRESSED:
                ptrs = out_ptr + q_rows64[:, None] * stride_out + (kj[None, :] - st[:, None])
                tl.store(ptrs, logits.to(out_ptr.dtype.element_ty), mask=q_valid[:, None] & inside)
            else:
                logits = tl.where(inside, logits, float("-inf"))
                ptrs = out_ptr + q_rows64[:, None] * stride_out + kj[None, :]
                tl.store(ptrs, logits.to(out_ptr.dtype.element_ty), mask=q_valid[:, None] & kj_valid[None, :])


def launch_mqa_logits(
    q: torch.Tensor,
    kv: torch.Tensor,
    kv_sf: torch.Tensor,
    weights: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
    out: torch.Tensor,
    clean_logits: bool,
    max_seqlen_k: int,
    config: MqaLogitsConfig,
    sf_after_sum: bool | None = None,
) -> None:
    """Launch on validated tensors (no value checks: the kernel clamps the ranges).

    ``sf_after_sum``: ``None`` takes ``config.sf_after_sum``; True multiplies by ``kv_sf[j]`` once per logit
    after the head sum (``relu(x * sf) = sf * (x + sign(sf) * |x|) / 2``: the same logits for either sign
    of ``kv_sf``, one FFMA a score instead of an FMUL and an FMNMX); False once per score before the ReLU.

    q: e4m3 ``[S, H, D]`` with ``stride(2) == 1``; kv: e4m3 ``[S_kv, D]`` with ``stride(1) == 1``; kv_sf:
    fp32 ``[S_kv]`` contiguous; weights: fp32 ``[S, H]`` with ``stride(1) == 1``; start/end: int32 ``[S]``;
    out: fp32 or bf16 ``[S, S_kv]`` (or ``[S, max_seqlen_k]`` when ``max_seqlen_k > 0``), ``stride(1) == 1``.
    """
    seq_len, heads, head_dim = q.shape
    seq_len_kv = kv.shape[0]
    num_tiles = max(1, triton.cdiv(seq_len_kv, config.block_kv))
    grid = (triton.cdiv(seq_len, config.block_q), triton.cdiv(num_tiles, config.tiles_per_split))
    _mqa_logits_kernel[grid](
        q, kv, kv_sf, weights, start, end, out,
        seq_len, seq_len_kv, max_seqlen_k, config.tiles_per_split,
        q.stride(0), q.stride(1), kv.stride(0), weights.stride(0), start.stride(0), end.stride(0), out.stride(0),
        HEADS=heads, HEAD_DIM=head_dim, BLOCK_Q=config.block_q, BLOCK_KV=config.block_kv,
        CLEAN=bool(clean_logits), COMPRESSED=max_seqlen_k > 0,
        SF_AFTER_SUM=config.sf_after_sum if sf_after_sum is None else sf_after_sum,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
