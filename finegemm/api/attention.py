"""DeepSeek V3.2 lightning-indexer scoring with DeepGEMM's names: ``fp8_mqa_logits``, ``fp8_paged_mqa_logits``,
``get_paged_mqa_logits_metadata`` (plus :func:`pack_paged_kv_cache`, a helper DeepGEMM leaves to its tests).

Both ops compute ``sum_h relu(q[i, h] . kv[j] * kv_sf[j]) * weights[i, h]`` (one MQA key head shared by all
query heads, FP8 e4m3 inputs, FP32 math) with ``-inf`` where key ``j`` is outside query ``i``'s range.

Backends: one Triton kernel per op (kernels/portable/mqa_logits.py, kernels/portable/paged_mqa_logits.py)
whose configs come from a heuristic: Hopper tiles (``tl.dot`` compiles to WGMMA there) on sm_90 with
``FINEGEMM_BACKEND`` ``auto`` or ``sm90``, portable tiles elsewhere or with ``portable``; CPU tensors run
through Triton's interpreter. On sm_90 ``fp8_mqa_logits`` (full and compact form) at head dim 32, 64 or
128 (16-128 heads, contiguous inputs) runs the Gluon kernel of kernels/sm90/mqa_logits.py instead, which
sums the heads on the tensor cores from ReLU'd scores rounded to bf16 (calc_diff ~3e-6 against float64;
``FINEGEMM_MQA_FP32_SUM=1`` keeps DeepGEMM's FP32 sum, on the Gluon kernel for the full form at head dim
128 and 32-128 heads, on Triton elsewhere; the rules and measurements: ``mqa_logits.prefill_supported``), and
``fp8_paged_mqa_logits`` at head dim 128 with pages of 64-key multiples and up to 128 query rows a
sequence runs kernels/sm90/paged_mqa_logits.py (``paged_mqa_logits.dispatched``; faster than the Triton
kernel on every DeepGEMM anchor case, its docstring lists them).
``FINEGEMM_PRINT_CONFIGS=1`` prints each choice once.

Non-finite values: the ReLU propagates NaN (``relu(NaN) = NaN``, as ``torch.relu``; the Gluon kernels' ``cvt.relu``
and the Triton kernels' ``max.NaN`` do so at no cost), so a NaN in ``q[i]``, ``kv[j]`` (e4m3 0x7F / 0xFF),
``kv_sf[j]`` or ``weights[i]`` makes every in-range ``out[i, j]`` it reaches NaN, and no other, on every backend
and on the CPU. (On sm_90 the prefill kernel sums a block of queries' heads in one tensor-core product; it finds
the NaN bytes of its query box once, zeroes them so they cannot reach the block's other queries, and stores NaN
for the queries that held them.)
An Inf weight makes its row non-finite. An Inf ``kv_sf[j]`` is not a usable dequantization scale: key ``j``'s
logits are then non-finite wherever the formula's are, and may be NaN where the formula gives 0 (all heads'
scores negative: the kernels apply the scale after the head sum as ``sf * (x + sign(sf) |x|) / 2``). Positions
outside the ranges stay ``-inf`` whatever the inputs hold.

Values inside tensors (ranges, context lengths, block tables, the schedule) are checked on the host only
where that needs no device sync: always for CPU tensors, and for CUDA tensors when ``FINEGEMM_DEBUG=1``
(which syncs). A failed check is a ``ValueError`` naming the argument, the index and the value. Without
the check the kernels clamp every such value before using it as an address, so bad values give defined,
in-bounds results (documented per function) and never a fault.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ..jit import env
from ..jit.cache import report_config
from ..jit.device import DeviceFacts, device_facts
from ..kernels.portable.mqa_logits import MqaLogitsConfig, get_mqa_logits_config, launch_mqa_logits
from ..kernels.portable.paged_mqa_logits import (
    SPLIT_KV,
    PagedMqaLogitsConfig,
    get_paged_mqa_logits_config,
    launch_paged_clean,
    launch_paged_mqa_logits,
    schedule_paged_mqa_logits,
)
from . import traced
from .checks import E4M3, as_bool, as_int, check_dim, check_dtype, check_same_device, check_tensor, describe
from .dispatch import BackendError, check_device_usable, sm90_mqa_module, sm90_paged_mqa_module
from .plan_cache import dispatch_state, new_cache, plan_for, scalar_key, tensor_key

SUPPORTED_HEADS = (16, 32, 64, 128)
SUPPORTED_HEAD_DIMS = (32, 64, 128)
SUPPORTED_BLOCK_KV = (16, 32, 64, 128, 256)
MAX_NEXT_N = 4
LOGITS_DTYPES = (torch.float32, torch.bfloat16)
_ROW_ALIGN = 64  # logits rows start every 64 elements (256 B in fp32): aligned vector stores on every row


# ----------------------------------------------------------------------------------------- helpers


def _check_int(name: str, value: object, minimum: int) -> int:
    return as_int(name, value, minimum)


def _check_bool(name: str, value: object) -> bool:
    return as_bool(name, value)


def _check_logits_dtype(logits_dtype: object) -> torch.dtype:
    if logits_dtype not in LOGITS_DTYPES:
        raise TypeError(f"logits_dtype must be torch.float32 or torch.bfloat16; got {logits_dtype!r}")
    return logits_dtype


def _check_heads_dim(name: str, heads: int, head_dim: int) -> None:
    if heads not in SUPPORTED_HEADS:
        raise ValueError(f"{name} has {heads} heads; supported head counts are {SUPPORTED_HEADS}")
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"{name} has head_dim {head_dim}; supported head dims are {SUPPORTED_HEAD_DIMS}")


def _check_inner_contiguous(name: str, t: torch.Tensor) -> None:
    if t.numel() > 0 and t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dim (stride(-1) == 1); got {describe(t)}")


def _values_checked(device: torch.device) -> bool:
    """Host checks of tensor values: free on CPU, a device sync on CUDA (only with FINEGEMM_DEBUG=1)."""
    return device.type == "cpu" or env.flag(env.DEBUG)


def _first_bad(name: str, bad: torch.Tensor, values: torch.Tensor, need: str) -> None:
    if bool(bad.any()):
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        where = idx[0] if len(idx) == 1 else idx
        raise ValueError(f"{name}[{where}] = {int(values[idx])}; {need} ({int(bad.sum())} bad entries in all)")


def _wants_hopper(facts: DeviceFacts) -> bool:
    requested = env.backend()
    if requested == "sm90" and not facts.is_sm90:
        raise BackendError(f"FINEGEMM_BACKEND=sm90 cannot run the MQA logits on {facts.name} "
                           f"(compute capability {facts.capability}): it needs sm_90")
    return facts.is_sm90 and requested != "portable"


@functools.lru_cache(maxsize=1024)
def _mqa_config(seq_len: int, seq_len_kv: int, heads: int, head_dim: int, facts: DeviceFacts,
                hopper: bool) -> MqaLogitsConfig:
    config = get_mqa_logits_config(seq_len, seq_len_kv, heads, head_dim, facts, hopper)
    report_config(("fp8_mqa_logits", seq_len, seq_len_kv, heads, head_dim), "sm90" if hopper else "portable", config)
    return config


@functools.lru_cache(maxsize=256)
def _paged_config(next_n: int, heads: int, head_dim: int, facts: DeviceFacts, hopper: bool) -> PagedMqaLogitsConfig:
    config = get_paged_mqa_logits_config(next_n, heads, head_dim, facts, hopper)
    report_config(("fp8_paged_mqa_logits", next_n, heads, head_dim), "sm90" if hopper else "portable", config)
    return config


@dataclass(frozen=True)
class _LogitsPlan:
    """What one call signature of a logits op resolved to; replayed while the signature repeats.

    Value checks are never part of a plan: they run on every call where they run at all.
    """

    rows: int
    cols: int
    row_stride: int  # a multiple of 64 elements >= cols: aligned vector stores on every row
    dtype: torch.dtype
    device: torch.device
    config: MqaLogitsConfig | PagedMqaLogitsConfig | None  # None: an empty problem, nothing to launch
    prefill: bool = False  # fp8_mqa_logits' compact form with clean_logits: every position starts at -inf
    sf_reshape: bool = False  # fp8_mqa_logits' kv_sf is [S_kv, 1]: viewed as [S_kv]
    sf_copy: bool = False  # ... and not unit-strided: copied (S_kv floats)
    gluon_sms: int = 0  # > 0: the op runs its sm90 Gluon kernel (kernels/sm90/mqa_logits.py, paged_mqa_logits.py)
    fp32_sum: bool = False  # fp8_mqa_logits' Gluon kernel sums the heads on the CUDA cores (FINEGEMM_MQA_FP32_SUM)


# Host overhead per call on this CPU (python 3.11, torch 2.13), launches patched to no-ops, best of 5 x 4000
# calls, before -> after the plans. "CUDA-like" leaves out the value checks that read tensor contents on the
# host (every call on CPU tensors; on CUDA only with FINEGEMM_DEBUG=1, which also syncs):
#   fp8_mqa_logits 29 -> 8.4 us (CUDA-like), 84 -> 49 us with the CPU value checks;
#   fp8_paged_mqa_logits 27 -> 8.8 us (CUDA-like), 255 -> 217 us with the CPU value checks.
_MQA_PLANS = new_cache()
_PAGED_PLANS = new_cache()


def _row_stride(cols: int) -> int:
    return max(_ROW_ALIGN, -(-cols // _ROW_ALIGN) * _ROW_ALIGN)


def _alloc_logits(plan: _LogitsPlan) -> torch.Tensor:
    """``[rows, cols]`` logits whose rows start every ``row_stride`` elements (DeepGEMM also returns a
    row-padded view): one ``torch.empty_strided``, plus a ``-inf`` fill where the plan needs it."""
    out = torch.empty_strided((plan.rows, plan.cols), (plan.row_stride, 1), dtype=plan.dtype, device=plan.device)
    return out.fill_(float("-inf")) if plan.prefill else out


# ----------------------------------------------------------------------------------------- prefill


def fp8_mqa_logits(
    q: torch.Tensor,
    kv: tuple[torch.Tensor, torch.Tensor],
    weights: torch.Tensor,
    cu_seq_len_k_start: torch.Tensor,
    cu_seq_len_k_end: torch.Tensor,
    clean_logits: bool = True,
    max_seqlen_k: int = 0,
    logits_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Lightning-indexer logits of every query against a contiguous FP8 key cache.

    ``out[i, j] = sum_h relu(q[i, h] . kv[j] * kv_sf[j]) * weights[i, h]`` for ``start[i] <= j < end[i]``.

    Args:
        q: e4m3 ``[S, H, D]`` (``stride(2) == 1``); H in 16/32/64/128, D in 32/64/128.
        kv: ``(kv_fp8, kv_sf)``: e4m3 ``[S_kv, D]`` row-major (``stride(1) == 1``) and fp32 ``[S_kv]``
            (or ``[S_kv, 1]``) per-key dequantization scales.
        weights: fp32 ``[S, H]`` (``stride(1) == 1``), per query and head.
        cu_seq_len_k_start, cu_seq_len_k_end: int32 ``[S]``: query ``i`` scores keys ``[start[i], end[i])``;
            need ``0 <= start[i] <= end[i] <= S_kv``.
        clean_logits: True writes ``-inf`` at every position outside the ranges; False leaves positions in
            key tiles no query of a block reaches unwritten (inside reached tiles they are ``-inf`` too).
        max_seqlen_k: 0 for the full ``[S, S_kv]`` logits; ``> 0`` for the compact ``[S, max_seqlen_k]`` form
            in which column ``c`` of row ``i`` is key ``start[i] + c`` (keys past ``start[i] + max_seqlen_k``
            are dropped). With ``clean_logits`` the columns past ``end[i] - start[i]`` are ``-inf`` (an
            extension: DeepGEMM requires ``clean_logits=False`` there and leaves them unwritten).
        logits_dtype: torch.float32 or torch.bfloat16.

    Returns:
        ``logits_dtype`` ``[S, S_kv]`` (or ``[S, max_seqlen_k]``), a view whose rows start every 64
        elements (``stride(0)`` may exceed the width, as in DeepGEMM).

    Bad range values: checked for CPU tensors and with ``FINEGEMM_DEBUG=1`` (``ValueError``); otherwise
    the kernel reads ``start`` clamped to ``[0, S_kv]`` and ``end`` clamped to ``[start, S_kv]`` (so
    ``start > end`` is an empty range), exactly as :func:`finegemm.reference.mqa.clamp_ranges`.
    """
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                                        max_seqlen_k, logits_dtype)

    def make_key() -> tuple:
        kv_fp8, kv_sf = kv
        return (tensor_key(q), tensor_key(kv_fp8), tensor_key(kv_sf), tensor_key(weights),
                tensor_key(cu_seq_len_k_start), tensor_key(cu_seq_len_k_end), scalar_key(clean_logits),
                scalar_key(max_seqlen_k), scalar_key(logits_dtype), dispatch_state(), env.MQA_FP32_SUM.raw())

    plan = plan_for(_MQA_PLANS, make_key, lambda: _plan_mqa(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                                                             clean_logits, max_seqlen_k, logits_dtype))
    kv_fp8, kv_sf = kv
    if _values_checked(plan.device):
        _check_ranges(cu_seq_len_k_start, cu_seq_len_k_end, kv_fp8.shape[0], max_seqlen_k)
    out = _alloc_logits(plan)
    if plan.config is None:
        return out
    if plan.sf_reshape:
        kv_sf = kv_sf.reshape(kv_fp8.shape[0])
    if plan.sf_copy:
        kv_sf = kv_sf.contiguous()  # S_kv floats; the kernel reads them with unit stride
    if plan.gluon_sms and q.data_ptr() % 16 == 0 and kv_fp8.data_ptr() % 16 == 0:  # TMA needs 16-byte bases
        # the compact form's clean logits are the -inf pre-fill (_alloc_logits): the kernel stores in-range ones
        sm90_mqa_module().launch(q, kv_fp8, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, out,
                                 clean_logits and max_seqlen_k == 0, plan.gluon_sms, head_sum_mma=not plan.fp32_sum,
                                 max_seqlen_k=max_seqlen_k)
    else:
        launch_mqa_logits(q, kv_fp8, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, out, clean_logits,
                          max_seqlen_k, plan.config)
    return out


def _check_ranges(st: torch.Tensor, en: torch.Tensor, seq_len_kv: int, max_seqlen_k: int) -> None:
    """Host checks of :func:`fp8_mqa_logits`' range values (CPU always, CUDA with ``FINEGEMM_DEBUG=1``)."""
    _first_bad("cu_seq_len_k_start", (st < 0) | (st > seq_len_kv), st, f"need 0 <= start <= S_kv={seq_len_kv}")
    _first_bad("cu_seq_len_k_end", (en < 0) | (en > seq_len_kv), en, f"need 0 <= end <= S_kv={seq_len_kv}")
    _first_bad("cu_seq_len_k_end", en < st, en, "need end >= cu_seq_len_k_start at the same index")
    if max_seqlen_k > 0:
        _first_bad("cu_seq_len_k_end", en - st > max_seqlen_k, en,
                   f"need end - start <= max_seqlen_k={max_seqlen_k} (keys past it would be dropped)")


def _plan_mqa(q: object, kv: object, weights: object, cu_seq_len_k_start: object, cu_seq_len_k_end: object,
              clean_logits: object, max_seqlen_k: object, logits_dtype: object) -> _LogitsPlan:
    """Validate every argument of :func:`fp8_mqa_logits` but the range values; resolve the config."""
    q = check_tensor("q", q)
    check_dtype("q", q, E4M3)
    check_dim("q", q, 3, "[S, H, D]")
    seq_len, heads, head_dim = q.shape
    _check_heads_dim("q", heads, head_dim)
    _check_inner_contiguous("q", q)
    if not isinstance(kv, (tuple, list)) or len(kv) != 2:
        raise TypeError(f"kv must be a pair (kv_fp8 [S_kv, D], kv_sf [S_kv]); got {type(kv).__name__}")
    kv_fp8 = check_tensor("kv[0]", kv[0])
    kv_sf = check_tensor("kv[1]", kv[1])
    check_dtype("kv[0]", kv_fp8, E4M3)
    check_dim("kv[0]", kv_fp8, 2, "[S_kv, D]")
    seq_len_kv = kv_fp8.shape[0]
    if kv_fp8.shape[1] != head_dim:
        raise ValueError(f"kv[0] must be [S_kv, D] with q's D={head_dim}; got shape {tuple(kv_fp8.shape)}")
    _check_inner_contiguous("kv[0]", kv_fp8)
    check_dtype("kv[1]", kv_sf, (torch.float32,))
    if tuple(kv_sf.shape) not in ((seq_len_kv,), (seq_len_kv, 1)):
        raise ValueError(f"kv[1] must have shape ({seq_len_kv},) (one scale per key); got {tuple(kv_sf.shape)}")
    weights = check_tensor("weights", weights)
    check_dtype("weights", weights, (torch.float32,))
    if tuple(weights.shape) != (seq_len, heads):
        raise ValueError(f"weights must have shape ({seq_len}, {heads}) = [S, H]; got {tuple(weights.shape)}")
    _check_inner_contiguous("weights", weights)
    for name, t in (("cu_seq_len_k_start", cu_seq_len_k_start), ("cu_seq_len_k_end", cu_seq_len_k_end)):
        check_tensor(name, t)
        check_dtype(name, t, (torch.int32,))
        if tuple(t.shape) != (seq_len,):
            raise ValueError(f"{name} must have shape ({seq_len},) = [S]; got {tuple(t.shape)}")
    clean_logits = _check_bool("clean_logits", clean_logits)
    max_seqlen_k = _check_int("max_seqlen_k", max_seqlen_k, 0)
    logits_dtype = _check_logits_dtype(logits_dtype)
    device = check_same_device([("q", q), ("kv[0]", kv_fp8), ("kv[1]", kv_sf), ("weights", weights),
                                ("cu_seq_len_k_start", cu_seq_len_k_start), ("cu_seq_len_k_end", cu_seq_len_k_end)])
    check_device_usable(device)

    compressed = max_seqlen_k > 0
    cols = max_seqlen_k if compressed else seq_len_kv
    config = None
    gluon_sms = 0
    if seq_len > 0 and seq_len_kv > 0:
        facts = device_facts(device)
        hopper = _wants_hopper(facts)
        config = _mqa_config(seq_len, seq_len_kv, heads, head_dim, facts, hopper)
        dense = all(t.is_contiguous() for t in (q, kv_fp8, cu_seq_len_k_start, cu_seq_len_k_end))
        sm90_mqa = sm90_mqa_module() if hopper and dense else None
        fp32_sum = env.flag(env.MQA_FP32_SUM)
        if sm90_mqa is not None and sm90_mqa.prefill_supported(heads, head_dim, max_seqlen_k, fp32_sum):
            gluon_sms = facts.num_sms
            block_q = sm90_mqa.launch_config(heads, head_dim, not fp32_sum)[0]
            report_config(("fp8_mqa_logits", seq_len, seq_len_kv, heads, head_dim), "sm90",
                          f"gluon block_q={block_q} head sum on the {'CUDA' if fp32_sum else 'tensor'} cores")
    sf_reshape = kv_sf.dim() == 2
    return _LogitsPlan(seq_len, cols, _row_stride(cols), logits_dtype, device, config,
                       prefill=compressed and clean_logits, sf_reshape=sf_reshape,
                       sf_copy=not kv_sf.reshape(seq_len_kv).is_contiguous(), gluon_sms=gluon_sms,
                       fp32_sum=gluon_sms > 0 and fp32_sum)


# ------------------------------------------------------------------------------------------- paged


def _check_context_lens(context_lens: object, batch: int | None = None, next_n: int | None = None) -> torch.Tensor:
    context_lens = check_tensor("context_lens", context_lens)
    check_dtype("context_lens", context_lens, (torch.int32,))
    if context_lens.dim() not in (1, 2):
        raise ValueError(f"context_lens must be 1-D [B] or 2-D [B, next_n]; got shape {tuple(context_lens.shape)}")
    if batch is not None:
        ok = context_lens.shape[0] == batch and (context_lens.dim() == 1 or context_lens.shape[1] == next_n)
        if not ok:
            raise ValueError(f"context_lens must have shape ({batch},) or ({batch}, {next_n}) = [B] or [B, next_n]; "
                             f"got {tuple(context_lens.shape)}")
    return context_lens


def get_paged_mqa_logits_metadata(context_lens: torch.Tensor, block_kv: int, num_sms: int,
                                  indices: torch.Tensor | None = None) -> torch.Tensor:
    """Work schedule for :func:`fp8_paged_mqa_logits`: int32 ``[num_sms + 1, 2]`` on ``context_lens``' device.

    Each batch element ``b`` is cut into ``ceil(L_b / 256)`` work items of 256 keys, ``L_b`` its largest
    row context (``context_lens[b]`` for ``[B]`` lens, ``max_t context_lens[b, t]`` for ``[B, next_n]``
    ones); items are numbered in (b, split) order and row ``i`` is the (b, split) at which SM slot ``i``
    starts, item ``floor(i * total / num_sms)``; row ``num_sms`` is ``(B, 0)``. Built with torch ops on
    the device (no sync; safe under CUDA-graph capture).

    Args:
        context_lens: int32 ``[B]`` or ``[B, next_n]``, the same tensor later passed to the logits op.
        block_kv: the cache's page size (16/32/64/128/256); it divides the 256-key split, so the schedule
            does not depend on it beyond this check.
        num_sms: slots to balance over, usually ``get_num_sms()``; any positive count works (the logits
            op launches one slot per row).
        indices: DeepGEMM 2.8's variable-length batches (SM100 and SM120 only there); must be None.
    """
    _no_varlen_indices(indices)
    context_lens = _check_context_lens(context_lens)
    block_kv = _check_int("block_kv", block_kv, 1)
    if block_kv not in SUPPORTED_BLOCK_KV:
        raise ValueError(f"block_kv must be one of {SUPPORTED_BLOCK_KV}; got {block_kv}")
    num_sms = _check_int("num_sms", num_sms, 1)
    return schedule_paged_mqa_logits(context_lens, num_sms)


def pack_paged_kv_cache(values: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Fuse e4m3 ``[num_blocks, block_kv, D]`` values and fp32 ``[num_blocks, block_kv]`` scales into the
    uint8 ``[num_blocks, block_kv, 1, D + 4]`` cache :func:`fp8_paged_mqa_logits` reads (per block: the
    ``block_kv * D`` value bytes, then the ``block_kv`` scales)."""
    values = check_tensor("values", values)
    scales = check_tensor("scales", scales)
    check_dtype("values", values, E4M3)
    check_dtype("scales", scales, (torch.float32,))
    check_dim("values", values, 3, "[num_blocks, block_kv, D]")
    nb, bkv, d = values.shape
    if tuple(scales.shape) != (nb, bkv):
        raise ValueError(f"scales must have shape ({nb}, {bkv}) = [num_blocks, block_kv]; got {tuple(scales.shape)}")
    out = torch.empty((nb, bkv * (d + 4)), dtype=torch.uint8, device=values.device)
    out[:, :bkv * d] = values.reshape(nb, bkv * d).view(torch.uint8)
    out[:, bkv * d:] = scales.contiguous().view(torch.uint8).reshape(nb, bkv * 4)
    return out.view(nb, bkv, 1, d + 4)


def fp8_paged_mqa_logits(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    weights: torch.Tensor,
    context_lens: torch.Tensor,
    block_table: torch.Tensor,
    schedule_meta: torch.Tensor,
    max_context_len: int,
    clean_logits: bool = False,
    indices: torch.Tensor | None = None,
    logits_dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Lightning-indexer logits of ``next_n`` new tokens per sequence against a paged FP8 key cache.

    Row ``b * next_n + t`` scores keys ``k < ctx(b, t)`` of sequence ``b``, where ``ctx(b, t)`` is
    ``context_lens[b] - next_n + t + 1`` for ``[B]`` lens (token ``t`` sits at position
    ``context_lens[b] - next_n + t`` and sees keys up to it: DeepGEMM's causal rule) and
    ``context_lens[b, t]`` for ``[B, next_n]`` lens. Key ``k`` is row ``k % block_kv`` of cache block
    ``block_table[b, k // block_kv]``.

    Args:
        q: e4m3 ``[B, next_n, H, D]`` (``stride(3) == 1``); next_n 1..4, H 16/32/64/128, D 32/64/128.
        kv_cache: uint8 ``[num_blocks, block_kv, 1, D + 4]`` (``stride(1) == D + 4``, ``stride(3) == 1``,
            ``stride(0) % 4 == 0``): per block ``block_kv * D`` e4m3 values then ``block_kv`` fp32 scales
            (:func:`pack_paged_kv_cache` builds it). block_kv 16/32/64/128/256.
        weights: fp32 ``[B * next_n, H]`` (``stride(1) == 1``).
        context_lens: int32 ``[B]`` or ``[B, next_n]``, with ``0 <= ctx <= max_context_len`` and
            ``ceil(ctx / block_kv) <= max_blocks``.
        block_table: int32 ``[B, max_blocks]`` (``stride(1) == 1``) of block indices in ``[0, num_blocks)``.
        schedule_meta: :func:`get_paged_mqa_logits_metadata` of these context_lens (any slot count).
        max_context_len: width of the logits.
        clean_logits: True: ``-inf`` at every column ``>= ctx(b, t)``. False (DeepGEMM's default): columns
            in 256-key splits past a sequence's largest context are left unwritten; the others are ``-inf``.
        indices: DeepGEMM's variable-length batches (SM100 and SM120 only there); must be None.
        logits_dtype: torch.float32 or torch.bfloat16 (a finegemm keyword after DeepGEMM's; its SM90 form
            returns float32).

    Returns:
        ``logits_dtype`` ``[B * next_n, max_context_len]``, a row-padded view (rows every 64 elements).

    Bad values (checked on CPU and with ``FINEGEMM_DEBUG=1``, else clamped in the kernel): context lengths
    below 0 read as 0 and beyond ``max_blocks * block_kv`` or ``max_context_len`` are capped there (keys
    past the cap are ``-inf``); block-table entries are clamped to ``[0, num_blocks - 1]``; schedule rows
    are clamped to ``[0, B]`` and a schedule that does not match the lens leaves some items unwritten but
    never reads or writes out of bounds.
    """
    _no_varlen_indices(indices)
    if torch.compiler.is_compiling():  # one opaque node in the traced graph (api/traced.py)
        return traced.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                                              max_context_len, clean_logits, logits_dtype)

    def make_key() -> tuple:
        # The cache's start offset is checked too (4-byte aligned scales), so it is part of the signature.
        return (tensor_key(q), tensor_key(kv_cache), kv_cache.storage_offset() % 4, tensor_key(weights),
                tensor_key(context_lens), tensor_key(block_table), tensor_key(schedule_meta),
                scalar_key(max_context_len), scalar_key(clean_logits), scalar_key(logits_dtype), dispatch_state())

    plan = plan_for(_PAGED_PLANS, make_key, lambda: _plan_paged(q, kv_cache, weights, context_lens, block_table,
                                                                 schedule_meta, max_context_len, clean_logits,
                                                                 logits_dtype))
    if _values_checked(plan.device):
        _check_paged_values(kv_cache, context_lens, block_table, schedule_meta, max_context_len)
    out = _alloc_logits(plan)
    if plan.config is None:
        return out
    if plan.gluon_sms and q.data_ptr() % 16 == 0 and kv_cache.data_ptr() % 16 == 0:  # TMA needs 16-byte bases
        sm90_paged_mqa_module().launch(q, kv_cache, weights, context_lens, block_table, schedule_meta, out)
        if clean_logits:
            launch_paged_clean(context_lens, out, q.shape[1])
    else:
        launch_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, out, clean_logits,
                                plan.config)
    return out


def _check_paged_values(kv_cache: torch.Tensor, context_lens: torch.Tensor, block_table: torch.Tensor,
                        schedule_meta: torch.Tensor, max_context_len: int) -> None:
    """Host checks of :func:`fp8_paged_mqa_logits`' values (CPU always, CUDA with ``FINEGEMM_DEBUG=1``)."""
    num_blocks, block_kv = kv_cache.shape[0], kv_cache.shape[1]
    max_blocks = block_table.shape[1]
    c = context_lens
    cap = min(max_context_len, max_blocks * block_kv)
    _first_bad("context_lens", (c < 0) | (c > cap), c,
               f"need 0 <= context length <= min(max_context_len={max_context_len}, "
               f"max_blocks * block_kv={max_blocks * block_kv})")
    lens = (c if c.dim() == 1 else c.amax(dim=1)).long()
    used = torch.arange(max_blocks, device=c.device)[None, :] < ((lens + block_kv - 1) // block_kv)[:, None]
    _first_bad("block_table", used & ((block_table < 0) | (block_table >= num_blocks)), block_table,
               f"need 0 <= block index < num_blocks={num_blocks} for every block a context uses")
    expected = schedule_paged_mqa_logits(context_lens, schedule_meta.shape[0] - 1)
    if not torch.equal(expected, schedule_meta):
        raise ValueError("schedule_meta does not match context_lens: build it with "
                         "get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms) from these lens")


def _plan_paged(q: object, kv_cache: object, weights: object, context_lens: object, block_table: object,
                schedule_meta: object, max_context_len: object, clean_logits: object,
                logits_dtype: object) -> _LogitsPlan:
    """Validate every argument of :func:`fp8_paged_mqa_logits` but the tensor values; resolve the config."""
    q = check_tensor("q", q)
    check_dtype("q", q, E4M3)
    check_dim("q", q, 4, "[B, next_n, H, D]")
    batch, next_n, heads, head_dim = q.shape
    _check_heads_dim("q", heads, head_dim)
    if not 1 <= next_n <= MAX_NEXT_N:
        raise ValueError(f"q has next_n={next_n} (dim 1); supported: 1..{MAX_NEXT_N}")
    _check_inner_contiguous("q", q)
    kv_cache = check_tensor("kv_cache", kv_cache)
    check_dtype("kv_cache", kv_cache, (torch.uint8,))
    check_dim("kv_cache", kv_cache, 4, "[num_blocks, block_kv, 1, D + 4]")
    num_blocks, block_kv, kv_heads, row_bytes = kv_cache.shape
    if kv_heads != 1 or row_bytes != head_dim + 4:
        raise ValueError(f"kv_cache must be [num_blocks, block_kv, 1, D + 4] = [*, *, 1, {head_dim + 4}] for q's "
                         f"D={head_dim}; got shape {tuple(kv_cache.shape)}")
    if block_kv not in SUPPORTED_BLOCK_KV:
        raise ValueError(f"kv_cache has block_kv={block_kv} (dim 1); supported: {SUPPORTED_BLOCK_KV}")
    if num_blocks == 0:
        raise ValueError("kv_cache has no blocks (dim 0 is 0)")
    if (kv_cache.stride(3) != 1 or kv_cache.stride(1) != row_bytes or kv_cache.stride(0) < block_kv * row_bytes
            or kv_cache.stride(0) % 4 or kv_cache.storage_offset() % 4):
        raise ValueError(f"kv_cache must hold each block as one run of block_kv * (D + 4) bytes (stride(3) == 1, "
                         f"stride(1) == {row_bytes}, stride(0) >= {block_kv * row_bytes} and a multiple of 4, "
                         f"4-byte aligned start); got {describe(kv_cache)}, offset {kv_cache.storage_offset()}")
    weights = check_tensor("weights", weights)
    check_dtype("weights", weights, (torch.float32,))
    if tuple(weights.shape) != (batch * next_n, heads):
        raise ValueError(f"weights must have shape ({batch * next_n}, {heads}) = [B * next_n, H]; "
                         f"got {tuple(weights.shape)}")
    _check_inner_contiguous("weights", weights)
    context_lens = _check_context_lens(context_lens, batch, next_n)
    block_table = check_tensor("block_table", block_table)
    check_dtype("block_table", block_table, (torch.int32,))
    if block_table.dim() != 2 or block_table.shape[0] != batch or block_table.shape[1] == 0:
        raise ValueError(f"block_table must be [B, max_blocks] = ({batch}, >= 1); got shape {tuple(block_table.shape)}")
    _check_inner_contiguous("block_table", block_table)
    schedule_meta = check_tensor("schedule_meta", schedule_meta)
    check_dtype("schedule_meta", schedule_meta, (torch.int32,))
    if schedule_meta.dim() != 2 or schedule_meta.shape[1] != 2 or schedule_meta.shape[0] < 2 \
            or not schedule_meta.is_contiguous():
        raise ValueError("schedule_meta must be a contiguous [num_sms + 1, 2] tensor from "
                         f"get_paged_mqa_logits_metadata; got {describe(schedule_meta)}")
    max_context_len = _check_int("max_context_len", max_context_len, 0)
    clean_logits = _check_bool("clean_logits", clean_logits)
    logits_dtype = _check_logits_dtype(logits_dtype)
    device = check_same_device([("q", q), ("kv_cache", kv_cache), ("weights", weights), ("context_lens", context_lens),
                                ("block_table", block_table), ("schedule_meta", schedule_meta)])
    check_device_usable(device)

    rows = batch * next_n
    config = None
    gluon_sms = 0
    if rows > 0 and max_context_len > 0:
        facts = device_facts(device)
        hopper = _wants_hopper(facts)
        config = _paged_config(next_n, heads, head_dim, facts, hopper)
        sm90_paged = sm90_paged_mqa_module() if hopper and q.is_contiguous() else None
        if sm90_paged is not None and sm90_paged.dispatched(next_n, heads, head_dim, kv_cache):
            gluon_sms = facts.num_sms
            report_config(("fp8_paged_mqa_logits", next_n, heads, head_dim), "sm90", "gluon")
    return _LogitsPlan(rows, max_context_len, _row_stride(max_context_len), logits_dtype, device, config,
                       gluon_sms=gluon_sms)


__all__ = ["fp8_mqa_logits", "fp8_paged_mqa_logits", "get_paged_mqa_logits_metadata", "pack_paged_kv_cache",
           "SPLIT_KV"]


# ------------------------------------------------------------------------------ DeepGEMM 2.8's names
def _no_varlen_indices(indices: object) -> None:
    if indices is not None:
        raise ValueError("indices (DeepGEMM's variable-length paged batches, an SM100/SM120 feature) is not "
                         "supported: pass None and one row of block_table per sequence")


def _fp8_query(q: object) -> torch.Tensor:
    """``q`` of the ``fp8_fp4_*`` entries: an e4m3 tensor, or ``(q_fp8, None)``; FP4 queries with their MX scales
    are Blackwell formats, rejected here."""
    if isinstance(q, (tuple, list)):
        if len(q) != 2:
            raise TypeError(f"q must be an e4m3 tensor or a pair (q, q_sf); got a sequence of {len(q)}")
        q, q_sf = q
        if q_sf is not None:
            raise ValueError("q[1] (per-block MX scales of an FP4 query, a Blackwell format) must be None: "
                             "finegemm's indexer takes e4m3 queries")
    return q


def fp8_fp4_mqa_logits(
    q: torch.Tensor | tuple[torch.Tensor, None],
    kv: tuple[torch.Tensor, torch.Tensor],
    weights: torch.Tensor,
    cu_seq_len_k_start: torch.Tensor,
    cu_seq_len_k_end: torch.Tensor,
    clean_logits: bool = True,
    max_seqlen_k: int = 0,
    logits_dtype: torch.dtype = torch.float32,
    schedule_meta: torch.Tensor | None = None,
) -> torch.Tensor:
    """DeepGEMM 2.8's name of :func:`fp8_mqa_logits`: ``q`` is ``(q_fp8, None)`` (or the tensor); ``schedule_meta``
    (SM100's) must be None. FP4 queries and keys are Blackwell formats and are rejected."""
    if schedule_meta is not None:
        raise ValueError("schedule_meta (SM100's prefill schedule) must be None: fp8_mqa_logits needs none")
    return fp8_mqa_logits(_fp8_query(q), kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                          max_seqlen_k, logits_dtype)


def fp8_fp4_paged_mqa_logits(
    q: torch.Tensor | tuple[torch.Tensor, None],
    kv_cache: torch.Tensor,
    weights: torch.Tensor,
    context_lens: torch.Tensor,
    block_table: torch.Tensor,
    schedule_meta: torch.Tensor,
    max_context_len: int,
    clean_logits: bool = False,
    logits_dtype: torch.dtype = torch.float32,
    indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """DeepGEMM 2.8's name of :func:`fp8_paged_mqa_logits`: ``q`` is ``(q_fp8, None)`` (or the tensor); ``indices``
    must be None."""
    return fp8_paged_mqa_logits(_fp8_query(q), kv_cache, weights, context_lens, block_table, schedule_meta,
                                max_context_len, clean_logits, indices, logits_dtype)
