"""NaN and Inf in every operand and scale: the documented behaviour (api/gemm.py's and api/attention.py's module
docstrings) on the CPU path, which matches the GPU's: a NaN read by an output's sum makes it NaN, an Inf makes it
non-finite, never finite.

Before: Triton's interpreter widened e4m3 NaN (0x7F) to 480 and e5m2 Inf to 65536, so a NaN row of A gave a
finite row of D on the CPU only; the portable MQA kernel's ReLU dropped NaN (max.f32) where the Gluon kernel's
cvt.relu keeps it.
"""

from __future__ import annotations

import pytest
import torch

import finegemm
from finegemm import reference
from finegemm.reference import mqa as mqa_ref

M, N, K = 8, 160, 256  # N: two per-block scale rows, the second partial
NAN_E4M3 = 0x7F
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]  # on a GPU: both backends' kernels, same contract


def _poke(t: torch.Tensor, index: tuple, value: float) -> None:
    """Write ``value`` at ``index`` of ``t``: a float, or for FP8 the NaN byte (only NaN has no float form here)."""
    if t.dtype == torch.float8_e4m3fn:
        assert value != value
        t.view(torch.uint8)[index] = NAN_E4M3
    else:
        t[index] = value


def _fp8_operands(recipe, device):
    gen = torch.Generator().manual_seed(3)
    a = finegemm.per_token_cast_to_fp8(torch.randn(M, K, generator=gen).to(device))
    b_bf = torch.randn(N, K, generator=gen).to(device)
    b = finegemm.per_block_cast_to_fp8(b_bf) if recipe == (1, 128, 128) else finegemm.per_token_cast_to_fp8(b_bf)
    return a, b


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("where", ["a[0]", "a[1]", "b[0]", "b[1]", "c"])
@pytest.mark.parametrize("recipe", [(1, 128, 128), (1, 1, 128)])
@pytest.mark.parametrize("device", DEVICES)
def test_fp8_gemm_non_finite_where_the_reference_is(device, recipe, where, value):
    if where.endswith("[0]") and value == float("inf"):
        pytest.skip("e4m3 has no Inf")
    a, b = _fp8_operands(recipe, device)
    c = torch.randn(M, N).to(device)
    target = {"a[0]": (a[0], (2, 130)), "a[1]": (a[1], (5, 1)), "b[0]": (b[0], (150, 7)),
              "b[1]": (b[1], (1, 0)), "c": (c, (3, 40))}[where]
    _poke(*target, value)
    use_c = c if recipe == (1, 1, 128) or where == "c" else None
    d = torch.zeros(M, N, dtype=torch.float32 if use_c is not None else torch.bfloat16, device=device)
    finegemm.fp8_gemm_nt(a, b, d, c=use_c, recipe=recipe)
    want = reference.fp8_gemm_nt(a, b, use_c, recipe)
    bad = ~torch.isfinite(want)
    assert bad.any()
    assert torch.equal(~torch.isfinite(d), bad)  # non-finite exactly where the float64 reference is
    if value != value:
        assert torch.isnan(d[bad]).all()
    assert finegemm.calc_diff(d[~bad], want[~bad]) < 1e-3


@pytest.mark.parametrize("where", ["a", "b", "c"])
def test_bf16_gemm_nan(where):
    a, b, c = torch.randn(M, 64).bfloat16(), torch.randn(N, 64).bfloat16(), torch.randn(M, N)
    {"a": a, "b": b, "c": c}[where][1, 3] = float("nan")
    d = torch.empty(M, N)
    finegemm.bf16_gemm_nt(a, b, d, c=c)
    want = reference.bf16_gemm("nt", a, b, c)
    assert torch.equal(torch.isnan(d), torch.isnan(want)) and torch.isnan(d).any()


def _mqa_inputs(device):
    gen = torch.Generator().manual_seed(5)
    s, h, dim, s_kv = 4, 16, 32, 80
    q = torch.randn(s, h, dim, generator=gen).to(torch.float8_e4m3fn)
    kv = finegemm.per_custom_dims_cast_to_fp8(torch.randn(s_kv, dim, generator=gen), (0,))
    weights = torch.randn(s, h, generator=gen)
    st = torch.tensor([0, 5, 10, 0], dtype=torch.int32)
    en = torch.tensor([80, 60, 70, 30], dtype=torch.int32)
    return tuple(x.to(device) for x in (q, *kv, weights, st, en))


MQA_WHERE = ["q", "kv[0]", "kv[1]", "weights", "weights inf", "kv[1] inf"]


@pytest.mark.parametrize("device,where", [("cpu", w) for w in MQA_WHERE] + [
    pytest.param("cuda", w, marks=pytest.mark.gpu) for w in MQA_WHERE])
def test_mqa_logits_non_finite(device, where):
    q, kv_fp8, kv_sf, weights, st, en = _mqa_inputs(device)
    kv = (kv_fp8, kv_sf)
    value = float("inf") if where.endswith("inf") else float("nan")
    target = {"q": (q, (1, 3, 7)), "kv[0]": (kv[0], (20, 4)), "kv[1]": (kv[1], (25,)),
              "weights": (weights, (2, 9)), "weights inf": (weights, (2, 9)), "kv[1] inf": (kv[1], (25,))}
    _poke(*target[where.split()[0] if where.endswith("inf") else where], value)
    out = finegemm.fp8_mqa_logits(q, kv, weights, st, en)
    want = mqa_ref.fp8_mqa_logits(q, kv, weights, st, en)
    inside = torch.isfinite(want) | torch.isnan(want)  # -inf marks positions outside the ranges
    bad = inside & ~torch.isfinite(want)
    assert bad.any()
    assert (~torch.isfinite(out[bad])).all()  # never finite where the formula is not
    assert torch.equal(out[~inside], want[~inside])  # outside: -inf whatever the inputs
    if value != value:  # NaN: exactly where the formula's is
        assert torch.equal(torch.isnan(out), torch.isnan(want))
    else:  # Inf weights: exactly the formula's non-finite set; Inf scales: at least it (module docstring)
        ok = inside & torch.isfinite(out)
        assert finegemm.calc_diff(out[ok], want[ok]) < 1e-3
        if where == "weights inf":
            assert torch.equal(inside & ~torch.isfinite(out), bad)


@pytest.mark.gpu
@pytest.mark.parametrize("heads,head_dim", [(16, 32), (32, 64), (64, 128), (128, 128)])
@pytest.mark.parametrize("form", ["full", "compact", "signed scales"])
def test_mqa_logits_nan_in_q_stays_in_its_query(heads, head_dim, form):
    """A NaN byte of ``q`` (e4m3 0x7F or 0xFF) makes exactly its own query's in-range logits NaN: the sm90 prefill
    kernel sums a block of queries' heads in one tensor-core product, where an unguarded NaN score would reach
    the block's other queries (0 x NaN). Queries 0, 5 (two heads) and the last one carry a NaN; blocks hold
    128 / heads or 256 / heads queries, so flagged and clean queries share blocks."""
    gen = torch.Generator().manual_seed(heads + head_dim)
    s, s_kv = 37, 300
    q = torch.randn(s, heads, head_dim, generator=gen).to(torch.float8_e4m3fn)
    raw = q.view(torch.uint8)
    raw[0, heads - 1, 3] = 0x7F
    raw[5, 0, 0] = 0xFF
    raw[5, heads // 2, head_dim - 1] = 0x7F
    raw[s - 1, 1, head_dim // 2] = 0xFF
    kv_fp8, kv_sf = finegemm.per_custom_dims_cast_to_fp8(torch.randn(s_kv, head_dim, generator=gen), (0,))
    if form == "signed scales":
        kv_sf[::3] = -kv_sf[::3]
    weights = torch.randn(s, heads, generator=gen)
    st = torch.randint(0, 100, (s,), generator=gen, dtype=torch.int32)
    en = torch.minimum(st + torch.randint(1, 250, (s,), generator=gen, dtype=torch.int32), torch.tensor(s_kv))
    max_seqlen_k = int((en - st).max()) if form == "compact" else 0
    args = [x.cuda() for x in (q, kv_fp8, kv_sf, weights, st, en)]
    out = finegemm.fp8_mqa_logits(args[0], (args[1], args[2]), *args[3:], max_seqlen_k=max_seqlen_k).cpu()
    want = mqa_ref.fp8_mqa_logits(q, (kv_fp8, kv_sf), weights, st, en, max_seqlen_k=max_seqlen_k)
    inside = ~torch.isneginf(want)
    nan_rows = torch.isnan(want).any(dim=1)
    assert nan_rows.tolist() == [i in (0, 5, s - 1) for i in range(s)]
    assert torch.equal(torch.isnan(out) & inside, torch.isnan(want))
    ok = inside & ~nan_rows[:, None]
    assert finegemm.calc_diff(out[ok], want[ok]) < 1e-3
