"""Float64 references for the DeepSeek V3.2 lightning-indexer ops (``fp8_mqa_logits``, paged twin, schedule).

Each public op has a reference with the same signature, computed straight from the formula

    out[i, j] = sum_h relu(q[i, h] . kv[j] * kv_sf[j]) * weights[i, h]     for j in [start[i], end[i])

in float64 from the exact FP8 values (so the kernels' error is measured alone), and ``-inf`` outside
the range. A simulated-precision twin (``*_simulated``) follows the kernels' FP32 arithmetic order
(FP32 dot, FP32 scale, relu, weight, head sum) for the tight comparison (STYLE.md item 9).

Range values are clamped exactly as the kernels clamp them (see :func:`clamp_ranges`), so the
references also define what the kernels return for out-of-range values inside device tensors.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def clamp_ranges(start: torch.Tensor, end: torch.Tensor, seq_len_kv: int,
                 max_seqlen_k: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernels' reading of ``[start, end)``: ``start`` clamped to ``[0, S_kv]``, ``end`` to ``[start, S_kv]``.

    With ``max_seqlen_k > 0`` (compact output) ``end`` is further capped at ``start + max_seqlen_k``.
    Returns int64 tensors.
    """
    st = start.long().clamp(0, seq_len_kv)
    en = torch.maximum(end.long().clamp(max=seq_len_kv), st)
    if max_seqlen_k > 0:
        en = st + (en - st).clamp(max=max_seqlen_k)
    return st, en


def _scores(q: torch.Tensor, kv: torch.Tensor, kv_sf: torch.Tensor, weights: torch.Tensor,
            dtype: torch.dtype) -> torch.Tensor:
    """``sum_h relu(q[i,h] . kv[j] * kv_sf[j]) * w[i,h]`` for every (i, j) in ``dtype`` → ``[S, S_kv]``."""
    kd, sf = kv.to(dtype), kv_sf.reshape(-1).to(dtype)
    seq_len, heads, _ = q.shape
    out = torch.empty((seq_len, kv.shape[0]), dtype=dtype, device=q.device)
    chunk = max(1, (1 << 26) // max(1, heads * kv.shape[0]))  # bound the [chunk, H, S_kv] temporary
    for i in range(0, seq_len, chunk):
        s = torch.einsum("shd,kd->shk", q[i:i + chunk].to(dtype), kd)
        s = (s * sf[None, None, :]).relu()
        out[i:i + chunk] = (s * weights[i:i + chunk].to(dtype)[:, :, None]).sum(dim=1)
    return out


def mask_and_compact(full: torch.Tensor, st: torch.Tensor, en: torch.Tensor, max_seqlen_k: int) -> torch.Tensor:
    """``full`` ``[R, S_kv]`` logits (rows with ranges ``[st, en)``, integer ``[R]``, ``en - st <= max_seqlen_k``
    when compact) with ``-inf`` outside each row's range; with ``max_seqlen_k > 0`` the compact
    ``[R, max_seqlen_k]`` form, column ``c`` = key ``st + c``, ``-inf`` past ``en - st``. No host sync."""
    st, en = st.long()[:, None], en.long()[:, None]
    if max_seqlen_k <= 0:
        cols = torch.arange(full.shape[1], device=full.device)
        return full.masked_fill(~((cols >= st) & (cols < en)), NEG_INF)
    cols = torch.arange(max_seqlen_k, device=full.device)
    if full.shape[1] == 0:  # no keys: every column is past its range
        return torch.full((full.shape[0], max_seqlen_k), NEG_INF, dtype=full.dtype, device=full.device)
    picked = torch.gather(full, 1, (st + cols).clamp(max=full.shape[1] - 1))
    return picked.masked_fill(~(cols < en - st), NEG_INF)


def _mqa_logits(q: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                start: torch.Tensor, end: torch.Tensor, max_seqlen_k: int, dtype: torch.dtype) -> torch.Tensor:
    """Both prefill references: scores in ``dtype``, then the clamped-range mask and compact form."""
    kv_fp8, kv_sf = kv
    st, en = clamp_ranges(start, end, kv_fp8.shape[0], max_seqlen_k)
    return mask_and_compact(_scores(q, kv_fp8, kv_sf, weights, dtype), st, en, max_seqlen_k)


def fp8_mqa_logits(q: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                   cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, clean_logits: bool = True,
                   max_seqlen_k: int = 0, logits_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Float64 reference of :func:`finegemm.api.attention.fp8_mqa_logits`.

    q: e4m3 ``[S, H, D]``; kv: (e4m3 ``[S_kv, D]``, fp32 ``[S_kv]``); weights fp32 ``[S, H]``; ranges int
    ``[S]``. Returns float64 ``[S, S_kv]`` (or ``[S, max_seqlen_k]`` with column ``c`` = key ``start[i] + c``)
    with ``-inf`` at every position outside the (clamped) range, whatever ``clean_logits`` says.
    ``logits_dtype`` is accepted for signature parity and ignored.
    """
    del clean_logits, logits_dtype
    return _mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, max_seqlen_k, torch.float64)


def fp8_mqa_logits_simulated(q: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                             cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor,
                             clean_logits: bool = True, max_seqlen_k: int = 0,
                             logits_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The kernels' arithmetic in FP32 (dot, scale, relu, weight, head sum), same masks; float32 result."""
    del clean_logits, logits_dtype
    return _mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, max_seqlen_k, torch.float32)


# --------------------------------------------------------------------------------------------- paged


def unpack_paged_kv_cache(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a fused uint8 cache ``[num_blocks, block_kv, 1, D + 4]`` into its parts.

    Per block (``kv_cache.stride(0)`` bytes apart): ``block_kv * D`` FP8 values, row after row, then
    ``block_kv`` little-endian fp32 scales. Returns (e4m3 ``[num_blocks, block_kv, D]``, fp32
    ``[num_blocks, block_kv]``) as copies.
    """
    nb, bkv, _, dp4 = kv_cache.shape
    d = dp4 - 4
    flat = kv_cache.reshape(nb, bkv * dp4)
    values = flat[:, :bkv * d].contiguous().view(torch.float8_e4m3fn).reshape(nb, bkv, d)
    scales = flat[:, bkv * d:].contiguous().view(torch.float32).reshape(nb, bkv)
    return values, scales


def paged_row_context_lens(context_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """Keys each logits row ``b * next_n + t`` sees, int64 ``[B * next_n]`` (negative values read as 0).

    ``context_lens [B]``: token ``t`` of ``next_n`` is at position ``len - next_n + t`` and sees the keys up
    to it, ``len - next_n + t + 1`` of them (DeepGEMM's causal rule). ``context_lens [B, next_n]``: row
    ``(b, t)`` sees ``context_lens[b, t]`` keys.
    """
    c = context_lens.long()
    if c.dim() == 1:
        c = c[:, None] - next_n + 1 + torch.arange(next_n, device=c.device)[None, :]
    return c.clamp(min=0).reshape(-1)


def fp8_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                         block_table: torch.Tensor, schedule_meta: torch.Tensor | None, max_context_len: int,
                         clean_logits: bool = False, logits_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Float64 reference of :func:`finegemm.api.attention.fp8_paged_mqa_logits`.

    q e4m3 ``[B, next_n, H, D]``; kv_cache uint8 ``[num_blocks, block_kv, 1, D + 4]``; weights fp32
    ``[B * next_n, H]``; context_lens ``[B]`` or ``[B, next_n]``; block_table ``[B, max_blocks]``. Returns
    float64 ``[B * next_n, max_context_len]``: logits for key positions below the row's context length
    (:func:`paged_row_context_lens`, capped at ``max_blocks * block_kv`` and ``max_context_len``), ``-inf``
    elsewhere. Block-table entries are clamped to ``[0, num_blocks - 1]`` as the kernel clamps them.
    ``schedule_meta``, ``clean_logits`` and ``logits_dtype`` are accepted for parity and ignored.
    """
    del schedule_meta, clean_logits, logits_dtype
    b, next_n, h, d = q.shape
    values, scales = unpack_paged_kv_cache(kv_cache)
    nb, bkv, _ = values.shape
    max_blocks = block_table.shape[1]
    rows = paged_row_context_lens(context_lens, next_n).clamp(max=min(max_context_len, max_blocks * bkv))
    out = torch.full((b * next_n, max_context_len), NEG_INF, dtype=torch.float64, device=q.device)
    for i in range(b):
        n_keys = int(rows[i * next_n:(i + 1) * next_n].max()) if next_n else 0
        if n_keys == 0:
            continue
        pages = block_table[i, :(n_keys + bkv - 1) // bkv].long().clamp(0, nb - 1)
        kv_i = values[pages].reshape(-1, d)[:n_keys]
        sf_i = scales[pages].reshape(-1)[:n_keys]
        s = _scores(q[i], kv_i, sf_i, weights[i * next_n:(i + 1) * next_n], torch.float64)  # [next_n, n_keys]
        cols = torch.arange(n_keys, device=q.device)
        lens = rows[i * next_n:(i + 1) * next_n]
        out[i * next_n:(i + 1) * next_n, :n_keys] = s.masked_fill(cols[None, :] >= lens[:, None], NEG_INF)
    return out


def get_paged_mqa_logits_metadata(context_lens: torch.Tensor, block_kv: int, num_sms: int,
                                  split_kv: int = 256) -> torch.Tensor:
    """Plain-Python twin of the schedule: int32 ``[num_sms + 1, 2]`` of (batch index, split index) starts.

    Batch ``b`` owns ``ceil(L_b / split_kv)`` work items, ``L_b`` its largest row context (``context_lens[b]``
    for 1-D lens, ``max_t context_lens[b, t]`` for 2-D ones, negative read as 0). The items are numbered
    in (b, split) order and SM ``i`` starts at item ``floor(i * total / num_sms)``; row ``num_sms`` is
    ``(B, 0)``. ``block_kv`` does not change the split (it must divide ``split_kv``).
    """
    del block_kv
    c = context_lens.long().cpu()
    lens = (c if c.dim() == 1 else c.amax(dim=1)).clamp(min=0).tolist()
    splits = [(n + split_kv - 1) // split_kv for n in lens]
    total = sum(splits)
    out = []
    for i in range(num_sms + 1):
        target = i * total // num_sms
        b, seen = 0, 0
        while b < len(splits) and seen + splits[b] <= target:
            seen += splits[b]
            b += 1
        out.append((b, target - seen if b < len(splits) else 0))
    return torch.tensor(out, dtype=torch.int32)
