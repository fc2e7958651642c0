"""Lightning-indexer MQA logits (prefill and paged) against the float64 references.

CPU cases run the Triton kernels through the interpreter, so they are tiny (S <= 48, S_kv <= 200) and
cover each head count (32, 64) and head dim (32, 64, 128) once rather than as a grid. Every case checks
the exact ``-inf`` positions, ``calc_diff < 1e-3`` on the finite entries against the float64 reference
and a tight bound against the FP32 simulated twin. GPU cases (``-m gpu``) use DeepSeek V3.2 sizes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import finegemm
from finegemm.api import attention
from finegemm.api.attention import (
    fp8_mqa_logits,
    fp8_paged_mqa_logits,
    get_paged_mqa_logits_metadata,
    pack_paged_kv_cache,
)
from finegemm.jit.device import CPU_INTERPRETER, H200
from finegemm.kernels.portable.mqa_logits import MqaLogitsConfig, get_mqa_logits_config, launch_mqa_logits
from finegemm.kernels.portable.paged_mqa_logits import (
    SPLIT_KV,
    PagedMqaLogitsConfig,
    get_paged_mqa_logits_config,
    launch_paged_mqa_logits,
)
from finegemm.reference import mqa as ref
from finegemm.reference.dense import calc_diff

NEG_INF = float("-inf")
E4M3 = torch.float8_e4m3fn

# ------------------------------------------------------------------------------------- generators


@dataclasses.dataclass(frozen=True)
class MqaCase:
    seq_len: int
    seq_len_kv: int
    heads: int
    head_dim: int
    ranges: str  # "causal", "cp" (two chunks, DeepGEMM's context-parallel pattern), "ragged" (random, some empty)
    logits_dtype: torch.dtype = torch.float32


def enumerate_mqa_cpu() -> list[MqaCase]:
    return [
        MqaCase(16, 64, 32, 32, "ragged"),
        MqaCase(24, 200, 64, 128, "causal"),
        MqaCase(32, 130, 32, 64, "cp"),
        MqaCase(20, 96, 64, 64, "ragged", torch.bfloat16),
    ]


def make_ranges(kind: str, s: int, s_kv: int, gen: torch.Generator, device: str = "cpu"):
    if kind == "causal":
        end = torch.arange(s) + (s_kv - s)
        start = torch.zeros(s, dtype=torch.long)
    elif kind == "cp":
        half = s // 2
        i = torch.arange(s)
        start = torch.where(i < half, 0, s_kv // 3)
        end = torch.where(i < half, s_kv // 4 + i, s_kv - half + (i - half) + 1)
    else:
        start = torch.randint(0, s_kv, (s,), generator=gen)
        end = torch.minimum(start + torch.randint(0, s_kv // 2, (s,), generator=gen), torch.tensor(s_kv))
        end[::5] = start[::5]  # empty ranges
    return start.to(torch.int32).to(device), end.to(torch.int32).to(device)


def generate_mqa(case: MqaCase, seed: int, device: str = "cpu"):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(case.seq_len, case.heads, case.head_dim, generator=gen).to(E4M3)
    kv = torch.randn(case.seq_len_kv, case.head_dim, generator=gen).to(E4M3)
    kv_sf = torch.rand(case.seq_len_kv, generator=gen) * 0.02 + 0.001
    weights = torch.randn(case.seq_len, case.heads, generator=gen)
    start, end = make_ranges(case.ranges, case.seq_len, case.seq_len_kv, gen)
    return tuple(t.to(device) for t in (q, kv, kv_sf, weights, start, end))


@dataclasses.dataclass(frozen=True)
class PagedCase:
    batch: int
    next_n: int
    heads: int
    head_dim: int
    block_kv: int
    lens_2d: bool
    max_context_len: int
    logits_dtype: torch.dtype = torch.float32


def enumerate_paged_cpu() -> list[PagedCase]:
    return [
        PagedCase(3, 1, 64, 128, 64, False, 320),
        PagedCase(4, 2, 32, 64, 64, False, 300),
        PagedCase(3, 2, 32, 32, 32, True, 200),
        PagedCase(2, 1, 32, 64, 64, False, 140, torch.bfloat16),
    ]


def generate_paged(case: PagedCase, seed: int, lens: list[int] | None = None, device: str = "cpu"):
    """Inputs with a shuffled block table (pages of all sequences interleaved in the cache)."""
    gen = torch.Generator().manual_seed(seed)
    if lens is None:
        lens = torch.randint(1, case.max_context_len + 1, (case.batch,), generator=gen).tolist()
        lens[0] = case.max_context_len
    bkv = case.block_kv
    max_blocks = -(-max(lens) // bkv)
    num_blocks = sum(-(-n // bkv) for n in lens) + 3
    values = torch.randn(num_blocks, bkv, case.head_dim, generator=gen).to(E4M3)
    scales = torch.rand(num_blocks, bkv, generator=gen) * 0.02 + 0.001
    cache = pack_paged_kv_cache(values, scales)
    pool = torch.randperm(num_blocks, generator=gen)
    table = torch.zeros(case.batch, max_blocks, dtype=torch.int32)
    used = 0
    for b, n in enumerate(lens):
        k = -(-n // bkv)
        table[b, :k] = pool[used:used + k].to(torch.int32)
        used += k
    q = torch.randn(case.batch, case.next_n, case.heads, case.head_dim, generator=gen).to(E4M3)
    weights = torch.randn(case.batch * case.next_n, case.heads, generator=gen)
    ctx = torch.tensor(lens, dtype=torch.int32)
    if case.lens_2d:  # row t sees a random prefix, the last row the whole context
        frac = torch.rand(case.batch, case.next_n, generator=gen)
        ctx = ((ctx[:, None] + 1) * frac).to(torch.int32).clamp(max=ctx[:, None])
        ctx[:, -1] = torch.tensor(lens, dtype=torch.int32)
    return tuple(t.to(device) for t in (q, cache, weights, ctx.contiguous(), table))


def assert_logits_match(out: torch.Tensor, expected: torch.Tensor, simulated: torch.Tensor | None = None,
                        bound: float = 1e-3) -> None:
    """Exact -inf positions, calc_diff on the finite entries, tight agreement with the FP32 twin."""
    out_inf = torch.isneginf(out)
    ref_inf = torch.isneginf(expected)
    assert torch.equal(out_inf, ref_inf), f"{int((out_inf != ref_inf).sum())} -inf positions differ"
    assert not torch.isnan(out).any()
    a, b = out.double().masked_fill(out_inf, 0), expected.double().masked_fill(ref_inf, 0)
    assert calc_diff(a, b) < bound
    if simulated is not None and out.dtype == torch.float32:
        s = simulated.double().masked_fill(ref_inf, 0)
        scale = s.abs().max().clamp(min=1e-30)
        assert float((a - s).abs().max() / scale) < 1e-5


# -------------------------------------------------------------------------------- prefill, CPU


@pytest.mark.parametrize("case", enumerate_mqa_cpu(),
                         ids=lambda c: f"S{c.seq_len}-SKV{c.seq_len_kv}-H{c.heads}-D{c.head_dim}-{c.ranges}-"
                                       f"{str(c.logits_dtype)[6:]}")
def test_mqa_logits_matches_reference(case: MqaCase):
    q, kv, sf, w, st, en = generate_mqa(case, seed=case.seq_len)
    out = fp8_mqa_logits(q, (kv, sf), w, st, en, logits_dtype=case.logits_dtype)
    assert out.shape == (case.seq_len, case.seq_len_kv) and out.dtype == case.logits_dtype
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en)
    simulated = ref.fp8_mqa_logits_simulated(q, (kv, sf), w, st, en)
    # bf16 logits: rounded (the interpreter truncates) to 8 bits, so ~1e-5-class calc_diff instead of ~1e-12.
    assert_logits_match(out, expected, simulated, 1e-3 if case.logits_dtype == torch.float32 else 5e-3)


def test_mqa_logits_compressed_form():
    case = MqaCase(20, 150, 32, 64, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=5)
    max_k = int((en - st).max())
    for clean in (False, True):
        out = fp8_mqa_logits(q, (kv, sf), w, st, en, clean_logits=clean, max_seqlen_k=max_k)
        assert out.shape == (20, max_k)
        expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k)
        if clean:
            assert_logits_match(out, expected)
        else:
            inside = ~torch.isneginf(expected)
            assert calc_diff(out[inside], expected[inside]) < 1e-3


def test_mqa_logits_unclean_keeps_in_range_values():
    case = MqaCase(16, 130, 64, 32, "cp")
    q, kv, sf, w, st, en = generate_mqa(case, seed=11)
    out = fp8_mqa_logits(q, (kv, sf), w, st, en, clean_logits=False)
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en)
    inside = ~torch.isneginf(expected)
    assert calc_diff(out[inside], expected[inside]) < 1e-3


def test_mqa_logits_all_empty_ranges_and_empty_problems():
    case = MqaCase(8, 64, 32, 32, "causal")
    q, kv, sf, w, st, _ = generate_mqa(case, seed=2)
    out = fp8_mqa_logits(q, (kv, sf), w, st, st.clone())
    assert torch.isneginf(out).all()
    empty = fp8_mqa_logits(q[:0], (kv, sf), w[:0], st[:0], st[:0])
    assert empty.shape == (0, 64)


def test_mqa_logits_splits_and_small_tiles():
    """Several key splits and tiny tiles: the -inf / compute / -inf partition of every split."""
    case = MqaCase(12, 200, 32, 64, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=9)
    out = torch.full((12, 200), float("nan"))
    for config in (MqaLogitsConfig(1, 32, 2, 4, 1), MqaLogitsConfig(4, 16, 3, 4, 1)):
        launch_mqa_logits(q, kv, sf, w, st, en, out, True, 0, config)
        assert_logits_match(out, ref.fp8_mqa_logits(q, (kv, sf), w, st, en))


def test_mqa_logits_scale_after_head_sum():
    """``sf_after_sum``: kv_sf applied once per logit after the head sum, through
    ``relu(x * sf) = sf * (x + sign(sf) |x|) / 2``: the contract's logits for the non-negative scales a cast
    produces and for negative ones, as the default per-score form gives them."""
    case = MqaCase(12, 200, 32, 64, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=21)
    config = get_mqa_logits_config(12, 200, 32, 64, CPU_INTERPRETER, False)
    signed = sf * torch.where(torch.arange(200) % 3 == 0, -1.0, 1.0)
    signed[7] = 0.0
    out = torch.full((12, 200), float("nan"))
    for scales in (sf, signed):
        want = ref.fp8_mqa_logits(q, (kv, scales), w, st, en)
        for after in (False, True):
            out.fill_(float("nan"))
            launch_mqa_logits(q, kv, scales, w, st, en, out, True, 0, config, sf_after_sum=after)
            assert_logits_match(out, want)


def test_mqa_config_scales_after_the_sum_from_32_heads():
    """The rule measured on the H200 (get_mqa_logits_config): after the head sum from 32 heads, per score
    at 16."""
    for heads in (16, 32, 64, 128):
        for facts in (CPU_INTERPRETER, H200):
            assert get_mqa_logits_config(2048, 8192, heads, 128, facts, facts is H200).sf_after_sum == (heads >= 32)


def test_mqa_logits_bitwise_repeatable():
    case = MqaCase(16, 100, 64, 64, "ragged")
    q, kv, sf, w, st, en = generate_mqa(case, seed=4)
    first = fp8_mqa_logits(q, (kv, sf), w, st, en)
    second = fp8_mqa_logits(q, (kv, sf), w, st, en)
    assert torch.equal(first.view(torch.int32), second.view(torch.int32))


def test_mqa_logits_clamps_bad_ranges_in_kernel():
    """What CUDA callers get without FINEGEMM_DEBUG: ranges clamped, nothing read or written out of bounds."""
    case = MqaCase(10, 64, 32, 32, "ragged")
    q, kv, sf, w, _, _ = generate_mqa(case, seed=3)
    st = torch.tensor([-5, 0, 10, 70, 40, 3, -100, 63, 0, 2**30], dtype=torch.int32)
    en = torch.tensor([10, 200, 5, 80, 40, 2**31 - 1, -1, 64, -7, 5], dtype=torch.int32)
    buf = torch.full((10, 80), float("nan"))  # 16 poisoned pad columns past S_kv
    out = buf[:, :64]
    launch_mqa_logits(q, kv, sf, w, st, en, out, True, 0, get_mqa_logits_config(10, 64, 32, 32, CPU_INTERPRETER, False))
    assert torch.isnan(buf[:, 64:]).all(), "wrote past S_kv"
    assert_logits_match(out, ref.fp8_mqa_logits(q, (kv, sf), w, st, en))
    # The compact form with an end - start larger than max_seqlen_k drops the keys past it.
    buf = torch.full((10, 24), float("nan"))
    launch_mqa_logits(q, kv, sf, w, st, en, buf[:, :16], False, 16,
                      get_mqa_logits_config(10, 64, 32, 32, CPU_INTERPRETER, False))
    assert torch.isnan(buf[:, 16:]).all()
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=16)
    inside = ~torch.isneginf(expected)
    assert calc_diff(buf[:, :16][inside], expected[inside]) < 1e-3


def _mqa_args(**over):
    case = MqaCase(8, 64, 32, 32, "causal")
    q, kv, sf, w, st, en = generate_mqa(case, seed=1)
    args = dict(q=q, kv=(kv, sf), weights=w, cu_seq_len_k_start=st, cu_seq_len_k_end=en)
    args.update(over)
    return args


def _bad_mqa_cases():
    case = MqaCase(8, 64, 32, 32, "causal")
    q, kv, sf, w, st, en = generate_mqa(case, seed=1)
    return [
        ("q", TypeError, dict(q=q.float())),
        ("q", ValueError, dict(q=q[:, :, :1].reshape(8, 32))),
        ("heads", ValueError, dict(q=torch.zeros(8, 48, 32, dtype=E4M3), weights=torch.zeros(8, 48))),
        ("head_dim", ValueError, dict(q=torch.zeros(8, 32, 48, dtype=E4M3))),
        ("q", ValueError, dict(q=torch.zeros(8, 32, 64, dtype=E4M3)[:, :, ::2])),
        ("kv must be a pair", TypeError, dict(kv=kv)),
        ("kv[0]", TypeError, dict(kv=(kv.to(torch.bfloat16), sf))),
        ("kv[0]", ValueError, dict(kv=(torch.zeros(64, 64, dtype=E4M3), sf))),
        ("kv[1]", TypeError, dict(kv=(kv, sf.double()))),
        ("kv[1]", ValueError, dict(kv=(kv, sf[:10]))),
        ("weights", TypeError, dict(weights=w.half())),
        ("weights", ValueError, dict(weights=w[:, :16])),
        ("weights", ValueError, dict(weights=w.t().contiguous().t())),
        ("cu_seq_len_k_start", TypeError, dict(cu_seq_len_k_start=st.long())),
        ("cu_seq_len_k_end", ValueError, dict(cu_seq_len_k_end=en[:4])),
        ("clean_logits", TypeError, dict(clean_logits=1)),
        ("max_seqlen_k", ValueError, dict(max_seqlen_k=-1)),
        ("max_seqlen_k", TypeError, dict(max_seqlen_k=4.0)),
        ("logits_dtype", TypeError, dict(logits_dtype=torch.float16)),
        ("cu_seq_len_k_start[3] = -1", ValueError, dict(cu_seq_len_k_start=torch.tensor([0, 0, 0, -1, 0, 0, 0, 0],
                                                                                       dtype=torch.int32))),
        ("cu_seq_len_k_end[0] = 65", ValueError, dict(cu_seq_len_k_end=torch.full((8,), 65, dtype=torch.int32))),
        ("need end >= cu_seq_len_k_start", ValueError,
         dict(cu_seq_len_k_start=torch.full((8,), 60, dtype=torch.int32))),
        ("max_seqlen_k=4", ValueError, dict(max_seqlen_k=4, clean_logits=False)),
    ]


@pytest.mark.parametrize("needle, exc, over", _bad_mqa_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_mqa_logits_rejects_bad_arguments(needle, exc, over):
    with pytest.raises(exc, match=needle.replace("[", r"\[").replace("]", r"\]")):
        fp8_mqa_logits(**_mqa_args(**over))


def test_mqa_config_heuristic():
    cfg = get_mqa_logits_config(2048, 8192, 64, 128, H200, True)
    assert cfg.block_q * 64 == 128 and cfg.block_kv == 64 and cfg.num_warps == 4  # measured best on the H200
    cfg32 = get_mqa_logits_config(2048, 8192, 32, 64, H200, True)
    assert cfg32.block_q * 32 == 128
    assert get_mqa_logits_config(2048, 8192, 64, 32, H200, True).block_q == 1  # D=32: N=64, epilogue-bound
    small = get_mqa_logits_config(4, 65536, 64, 128, H200, True)  # few queries: the key axis is split
    q_blocks, tiles = 2, 65536 // small.block_kv
    assert q_blocks * -(-tiles // small.tiles_per_split) >= 2 * H200.num_sms  # 4x targeted, >= 2x after rounding
    interp = get_mqa_logits_config(16, 64, 32, 32, CPU_INTERPRETER, False)
    assert interp.tiles_per_split == 1 and interp.block_q * 32 == 64
    paged = get_paged_mqa_logits_config(2, 64, 128, H200, True)
    assert SPLIT_KV % paged.block_n == 0 and paged.subs >= 2


def test_backend_switch_sm90_needs_hopper(monkeypatch):
    monkeypatch.setenv("FINEGEMM_BACKEND", "sm90")
    with pytest.raises(attention.BackendError, match="sm_90"):
        fp8_mqa_logits(**_mqa_args())


# ---------------------------------------------------------------------------------- paged, CPU


@pytest.mark.parametrize("case", enumerate_paged_cpu(),
                         ids=lambda c: f"B{c.batch}-N{c.next_n}-H{c.heads}-D{c.head_dim}-BKV{c.block_kv}-"
                                       f"{'2d' if c.lens_2d else '1d'}-{str(c.logits_dtype)[6:]}")
def test_paged_mqa_logits_matches_reference(case: PagedCase):
    q, cache, w, ctx, table = generate_paged(case, seed=case.batch * 10 + case.next_n)
    meta = get_paged_mqa_logits_metadata(ctx, case.block_kv, 3)
    out = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, case.max_context_len, clean_logits=True,
                               logits_dtype=case.logits_dtype)
    assert out.shape == (case.batch * case.next_n, case.max_context_len) and out.dtype == case.logits_dtype
    expected = ref.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, case.max_context_len)
    assert_logits_match(out, expected, None, 1e-3 if case.logits_dtype == torch.float32 else 5e-3)


def test_paged_causal_rule_for_1d_lens():
    """next_n = 2 with [B] lens: token t of 2 sees context_len - 2 + t + 1 keys (DeepGEMM's rule)."""
    case = PagedCase(2, 2, 32, 32, 64, False, 130)
    q, cache, w, ctx, table = generate_paged(case, seed=1, lens=[130, 65])
    meta = get_paged_mqa_logits_metadata(ctx, 64, 2)
    out = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, 130, clean_logits=True)
    finite = (~torch.isneginf(out)).sum(dim=1).tolist()
    assert finite == [129, 130, 64, 65]


def test_paged_unclean_and_multi_tile_schedule():
    """clean_logits=False keeps every in-context value; 64-key tiles and 2 CTAs per slot walk the same items."""
    case = PagedCase(4, 2, 32, 64, 32, False, 600)
    q, cache, w, ctx, table = generate_paged(case, seed=8, lens=[600, 1, 257, 300])
    expected = ref.fp8_paged_mqa_logits(q, cache, w, ctx, table, None, 600)
    inside = ~torch.isneginf(expected)
    out = fp8_paged_mqa_logits(q, cache, w, ctx, table, get_paged_mqa_logits_metadata(ctx, 32, 5), 600)
    assert calc_diff(out[inside], expected[inside]) < 1e-3
    meta = get_paged_mqa_logits_metadata(ctx, 32, 2)
    out = torch.full((8, 600), float("nan"))
    launch_paged_mqa_logits(q, cache, w, ctx, table, meta, out, True, PagedMqaLogitsConfig(64, 2, 4, 1))
    assert_logits_match(out, expected)


def test_paged_bitwise_repeatable():
    case = PagedCase(3, 2, 64, 64, 64, False, 300)
    q, cache, w, ctx, table = generate_paged(case, seed=6)
    meta = get_paged_mqa_logits_metadata(ctx, 64, 4)
    first = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, 300, clean_logits=True)
    second = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, 300, clean_logits=True)
    assert torch.equal(first.view(torch.int32), second.view(torch.int32))


@pytest.mark.parametrize("lens_2d", [False, True])
@pytest.mark.parametrize("num_sms", [1, 3, 7, 132])
def test_paged_schedule_matches_plain_python(lens_2d, num_sms):
    gen = torch.Generator().manual_seed(num_sms)
    lens = torch.randint(0, 3000, (9,), generator=gen).to(torch.int32)
    lens[2] = 0
    if lens_2d:
        lens = torch.stack([lens // 2, lens], dim=1).to(torch.int32)
    meta = get_paged_mqa_logits_metadata(lens, 64, num_sms)
    assert meta.shape == (num_sms + 1, 2) and meta.dtype == torch.int32
    assert torch.equal(meta, ref.get_paged_mqa_logits_metadata(lens, 64, num_sms))
    assert meta[-1].tolist() == [9, 0]


def test_paged_clamps_bad_values_in_kernel():
    """Bad block-table entries, oversize lens and a garbage schedule: clamped, in bounds, documented result."""
    case = PagedCase(3, 1, 32, 32, 64, False, 200)
    q, cache, w, ctx, table = generate_paged(case, seed=2, lens=[200, 100, 64])
    num_blocks = cache.shape[0]
    table[0, 1] = -3
    table[1, 0] = num_blocks + 40
    ctx_bad = torch.tensor([200, 100, 10_000], dtype=torch.int32)  # row 2 past its table and the logits
    meta = get_paged_mqa_logits_metadata(ctx_bad, 64, 2)
    buf = torch.full((3, 264), float("nan"))
    out = buf[:, :200]
    launch_paged_mqa_logits(q, cache, w, ctx_bad, table, meta, out, True,
                            get_paged_mqa_logits_config(1, 32, 32, CPU_INTERPRETER, False))
    assert torch.isnan(buf[:, 200:]).all(), "wrote past max_context_len"
    assert_logits_match(out, ref.fp8_paged_mqa_logits(q, cache, w, ctx_bad, table, None, 200))
    garbage = torch.tensor([[7, -4], [-1, 99], [2**30, 5]], dtype=torch.int32)
    buf.fill_(float("nan"))
    launch_paged_mqa_logits(q, cache, w, ctx, table, garbage, out, False,
                            get_paged_mqa_logits_config(1, 32, 32, CPU_INTERPRETER, False))
    assert torch.isnan(buf[:, 200:]).all()


def _paged_args(**over):
    case = PagedCase(2, 2, 32, 32, 64, False, 128)
    q, cache, w, ctx, table = generate_paged(case, seed=3, lens=[128, 70])
    args = dict(q=q, kv_cache=cache, weights=w, context_lens=ctx, block_table=table,
                schedule_meta=get_paged_mqa_logits_metadata(ctx, 64, 2), max_context_len=128)
    args.update(over)
    return args


def _bad_paged_cases():
    a = _paged_args()
    q, cache, w, ctx, table = a["q"], a["kv_cache"], a["weights"], a["context_lens"], a["block_table"]
    return [
        ("q", TypeError, dict(q=q.to(torch.bfloat16))),
        ("q must be 4-D", ValueError, dict(q=q[0])),
        ("next_n=5", ValueError, dict(q=torch.zeros(2, 5, 32, 32, dtype=E4M3), weights=torch.zeros(10, 32))),
        ("heads", ValueError, dict(q=torch.zeros(2, 2, 24, 32, dtype=E4M3), weights=torch.zeros(4, 24))),
        ("kv_cache", TypeError, dict(kv_cache=cache.view(E4M3))),
        ("kv_cache", ValueError, dict(kv_cache=cache[:, :, :, :32])),
        ("block_kv=48", ValueError, dict(kv_cache=torch.zeros(4, 48, 1, 36, dtype=torch.uint8))),
        ("kv_cache must hold each block", ValueError, dict(kv_cache=cache[:, ::2])),
        ("weights", ValueError, dict(weights=w[:2])),
        ("context_lens", TypeError, dict(context_lens=ctx.long())),
        ("context_lens", ValueError, dict(context_lens=ctx[:1])),
        ("block_table", ValueError, dict(block_table=table[:1])),
        ("block_table", TypeError, dict(block_table=table.long())),
        ("schedule_meta", ValueError, dict(schedule_meta=torch.zeros(3, dtype=torch.int32))),
        ("max_context_len", ValueError, dict(max_context_len=-1)),
        ("clean_logits", TypeError, dict(clean_logits=None)),
        ("logits_dtype", TypeError, dict(logits_dtype=torch.float64)),
        ("context_lens\\[0\\] = 129", ValueError, dict(context_lens=torch.tensor([129, 70], dtype=torch.int32))),
        ("context_lens\\[1\\] = -2", ValueError, dict(context_lens=torch.tensor([128, -2], dtype=torch.int32))),
        ("block_table\\[\\(1, 0\\)\\]", ValueError,
         dict(block_table=torch.stack([table[0], torch.tensor([99, 0], dtype=torch.int32)]))),
        ("schedule_meta does not match", ValueError,
         dict(schedule_meta=get_paged_mqa_logits_metadata(torch.tensor([600, 5], dtype=torch.int32), 64, 2))),
    ]


@pytest.mark.parametrize("needle, exc, over", _bad_paged_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_paged_mqa_logits_rejects_bad_arguments(needle, exc, over):
    with pytest.raises(exc, match=needle):
        fp8_paged_mqa_logits(**_paged_args(**over))


@pytest.mark.parametrize("over, exc, needle", [
    (dict(context_lens=torch.zeros(2, 2, 2, dtype=torch.int32)), ValueError, "context_lens"),
    (dict(block_kv=48), ValueError, "block_kv"),
    (dict(num_sms=0), ValueError, "num_sms"),
    (dict(context_lens=torch.zeros(2, dtype=torch.int64)), TypeError, "context_lens"),
])
def test_paged_metadata_rejects_bad_arguments(over, exc, needle):
    args = dict(context_lens=torch.zeros(2, dtype=torch.int32), block_kv=64, num_sms=4)
    args.update(over)
    with pytest.raises(exc, match=needle):
        get_paged_mqa_logits_metadata(**args)


def test_pack_paged_kv_cache_layout():
    values = torch.randn(3, 64, 32).to(E4M3)
    scales = torch.rand(3, 64)
    cache = pack_paged_kv_cache(values, scales)
    assert cache.shape == (3, 64, 1, 36) and cache.dtype == torch.uint8
    flat = cache.reshape(3, -1)
    assert torch.equal(flat[1, :64 * 32], values[1].reshape(-1).view(torch.uint8))
    assert torch.equal(flat[2, 64 * 32:].view(torch.float32), scales[2])
    v2, s2 = ref.unpack_paged_kv_cache(cache)
    assert torch.equal(v2.view(torch.uint8), values.view(torch.uint8)) and torch.equal(s2, scales)


# ------------------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
@pytest.mark.parametrize("heads, head_dim, ranges, dtype", [
    (64, 128, "causal", torch.float32), (64, 128, "cp", torch.bfloat16), (32, 64, "cp", torch.float32),
    (64, 32, "causal", torch.float32), (128, 128, "cp", torch.float32), (16, 128, "causal", torch.float32),
])
def test_gpu_mqa_logits_realistic(heads, head_dim, ranges, dtype):
    case = MqaCase(2048, 8192, heads, head_dim, ranges, dtype)
    q, kv, sf, w, st, en = generate_mqa(case, seed=0, device="cuda")
    out = fp8_mqa_logits(q, (kv, sf), w, st, en, logits_dtype=dtype)
    assert_logits_match(out, ref.fp8_mqa_logits(q, (kv, sf), w, st, en), None,
                        1e-3 if dtype == torch.float32 else 5e-3)
    again = fp8_mqa_logits(q, (kv, sf), w, st, en, logits_dtype=dtype)
    assert torch.equal(out, again) and torch.equal(torch.isneginf(out), torch.isneginf(again))


@pytest.mark.gpu
def test_gpu_mqa_logits_compressed_and_clamped():
    case = MqaCase(2048, 8192, 64, 128, "cp")
    q, kv, sf, w, st, en = generate_mqa(case, seed=1, device="cuda")
    max_k = int((en - st).max())
    out = fp8_mqa_logits(q, (kv, sf), w, st, en, clean_logits=False, max_seqlen_k=max_k)
    expected = ref.fp8_mqa_logits(q, (kv, sf), w, st, en, max_seqlen_k=max_k)
    inside = ~torch.isneginf(expected)
    assert calc_diff(out[inside], expected[inside]) < 1e-3
    bad_st, bad_en = st - 100, en + 9000  # out of [0, S_kv]: clamped by the kernel, no error without DEBUG
    out = fp8_mqa_logits(q, (kv, sf), w, bad_st, bad_en)
    assert_logits_match(out, ref.fp8_mqa_logits(q, (kv, sf), w, bad_st, bad_en))


@pytest.mark.gpu
def test_gpu_debug_checks_values(monkeypatch):
    monkeypatch.setenv("FINEGEMM_DEBUG", "1")
    args = _mqa_args()
    args = {k: (tuple(x.cuda() for x in v) if isinstance(v, tuple) else v.cuda()) for k, v in args.items()}
    args["cu_seq_len_k_end"] = args["cu_seq_len_k_end"] + 1000
    with pytest.raises(ValueError, match="cu_seq_len_k_end"):
        fp8_mqa_logits(**args)


@pytest.mark.gpu
@pytest.mark.parametrize("next_n", [1, 2])
@pytest.mark.parametrize("lens_2d", [False, True])
def test_gpu_paged_mqa_logits_realistic(next_n, lens_2d):
    gen = torch.Generator().manual_seed(next_n)
    lens = torch.randint(int(0.7 * 4096), int(1.3 * 4096), (64,), generator=gen).tolist()
    max_len = max(lens)
    case = PagedCase(64, next_n, 64, 128, 64, lens_2d, max_len)
    q, cache, w, ctx, table = generate_paged(case, seed=3, lens=lens, device="cuda")
    meta = get_paged_mqa_logits_metadata(ctx, 64, torch.cuda.get_device_properties(0).multi_processor_count)
    out = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len, clean_logits=True)
    assert_logits_match(out, ref.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len))
    again = fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len, clean_logits=True)
    assert torch.equal(torch.nan_to_num(out), torch.nan_to_num(again))



# ------------------------------------------------------------------------------ DeepGEMM 2.8's names
def test_fp8_fp4_names_are_the_fp8_ops():
    """``fp8_fp4_mqa_logits`` / ``fp8_fp4_paged_mqa_logits`` take ``q`` as ``(q, None)`` (or the tensor) and give
    the FP8 ops' results bit for bit; Blackwell-only arguments are rejected by name."""
    args = _mqa_args()
    want = finegemm.fp8_mqa_logits(**args)
    q = args.pop("q")
    for q_arg in ((q, None), q):
        assert torch.equal(finegemm.fp8_fp4_mqa_logits(q_arg, **args), want)
    with pytest.raises(ValueError, match=r"q\[1\] .* must be None"):
        finegemm.fp8_fp4_mqa_logits((q, torch.zeros(1, dtype=torch.int32)), **args)
    with pytest.raises(ValueError, match="schedule_meta .* must be None"):
        finegemm.fp8_fp4_mqa_logits(q, **args, schedule_meta=torch.zeros(1))
    with pytest.raises(TypeError, match="a pair"):
        finegemm.fp8_fp4_mqa_logits((q,), **args)

    paged = _paged_args()
    want = finegemm.fp8_paged_mqa_logits(**paged)
    q = paged.pop("q")
    got = finegemm.fp8_fp4_paged_mqa_logits((q, None), **paged)
    assert torch.equal(got.nan_to_num(), want.nan_to_num())
    with pytest.raises(ValueError, match="indices .* not supported"):
        finegemm.fp8_fp4_paged_mqa_logits(q, **paged, indices=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="indices .* not supported"):
        finegemm.get_paged_mqa_logits_metadata(paged["context_lens"], 64, 2, indices=torch.zeros(2))
