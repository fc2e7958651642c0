"""Plan caches of the grouped and MQA APIs (finegemm.api.plan_cache): validate once per call signature.

Launches are patched to counters (these tests are about the host path, not the kernels), so every
case runs in milliseconds. Each op is checked for: (a) a repeated signature skips validation, (b) a
changed shape/stride/dtype/scalar validates again and a bad one still raises its clear error, (c) the
CPU content checks still run on every call of a cached signature.
"""

from __future__ import annotations

import pytest
import torch

import finegemm  # noqa: F401  (turns the interpreter on without a GPU)
from finegemm.api import attention as fa
from finegemm.api import grouped as fg
from finegemm.api import plan_cache
from finegemm.layout import transform_sf_into_required_layout
from finegemm.quant import per_block_cast_to_fp8, per_token_cast_to_fp8

E4M3 = torch.float8_e4m3fn
LAUNCHES = ("launch_m_grouped_contiguous", "launch_m_grouped_masked", "launch_k_grouped")


@pytest.fixture
def launches(monkeypatch):
    """Fresh plan caches; every launch replaced by a counter (op name -> calls)."""
    plan_cache.clear_all()
    counts: dict[str, int] = {}

    def counter(name):
        def launch(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
        return launch

    for name in LAUNCHES:
        monkeypatch.setattr(fg, name, counter(name))
    for name in ("launch_mqa_logits", "launch_paged_mqa_logits"):
        monkeypatch.setattr(fa, name, counter(name))
    yield counts
    plan_cache.clear_all()


def _validate_once(monkeypatch, module, name):
    """Let ``module.name`` (a validation function) run once; any later call fails the test."""
    real = getattr(module, name)
    calls = []

    def once(*args, **kwargs):
        if calls:
            raise AssertionError(f"{name} ran again for a cached signature")
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, once)
    return calls


def _contiguous(m_rows=(128, 128), n=160, k=256, path_b=False):
    m = sum(m_rows)
    a_fp8, sfa = per_token_cast_to_fp8(torch.randn(m, k))
    if path_b:
        sfa = transform_sf_into_required_layout(sfa, m, k, (1, 128, 128), is_sfa=True)
    parts = [per_block_cast_to_fp8(torch.randn(n, k)) for _ in m_rows]
    b = (torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]))
    layout = torch.cat([torch.full((r,), g, dtype=torch.int32) for g, r in enumerate(m_rows)])
    return (a_fp8, sfa), b, torch.empty(m, n, dtype=torch.bfloat16), layout


def _masked(num_groups=2, max_m=64, n=160, k=256):
    a_fp8, sfa = per_token_cast_to_fp8(torch.randn(num_groups * max_m, k))
    a = (a_fp8.view(num_groups, max_m, k), sfa.view(num_groups, max_m, -1))
    parts = [per_block_cast_to_fp8(torch.randn(n, k)) for _ in range(num_groups)]
    b = (torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]))
    masked_m = torch.tensor([10, 20], dtype=torch.int32)
    return a, b, torch.empty(num_groups, max_m, n, dtype=torch.bfloat16), masked_m


def _k_grouped(ks=(128, 128), m=32, n=96):
    sum_k = sum(ks)
    a = (torch.randn(sum_k, m).to(E4M3), torch.rand(sum_k // 128, m))
    b = (torch.randn(sum_k, n).to(E4M3), torch.rand(sum_k // 128, n))
    d = torch.zeros(len(ks), m, n)
    return a, b, d, list(ks), torch.tensor(ks, dtype=torch.int32)


# ---------------------------------------------------------------------------------------------
# m-grouped contiguous
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path_b", [False, True], ids=["path_a", "path_b"])
def test_contiguous_second_call_skips_validation(launches, monkeypatch, path_b):
    a, b, d, layout = _contiguous(path_b=path_b)
    validations = _validate_once(monkeypatch, fg, "_plan_contiguous")
    for _ in range(3):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    assert len(validations) == 1 and launches["launch_m_grouped_contiguous"] == 3


def test_contiguous_path_a_scales_are_laid_out_on_every_call(launches, monkeypatch):
    a, b, d, layout = _contiguous()
    seen = []
    monkeypatch.setattr(fg, "launch_m_grouped_contiguous", lambda *args: seen.append(args[4]))
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    want = transform_sf_into_required_layout(a[1], 256, 256, (1, 128, 128), is_sfa=True)
    for sfa in seen:  # the kernel always gets MN-major aligned scales, never the caller's row-major ones
        assert sfa is not a[1] and sfa.stride() == want.stride() and torch.equal(sfa, a[1])


def test_contiguous_changed_signature_validates_again(launches):
    a, b, d, layout = _contiguous()
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    with pytest.raises(TypeError, match=r"d must have dtype torch.bfloat16; got torch.float32"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.float(), layout)
    with pytest.raises(ValueError, match=r"d must be row-major"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d.T.contiguous().T, layout)  # same shape, new strides
    with pytest.raises(ValueError, match=r"grouped_layout must be int32 \[256\].*got shape \(255,\)"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout[:-1])
    with pytest.raises(ValueError, match=r"supports recipe \(1, 128, 128\) only"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, recipe=(1, 1, 128))
    with pytest.raises(TypeError, match=r"a\[0\] must be a torch.Tensor"):
        fg.m_grouped_fp8_gemm_nt_contiguous((a[0].tolist(), a[1]), b, d, layout)
    with pytest.raises(TypeError, match=r"b must be a pair"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b[0], d, layout)
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)  # the good signature still replays
    assert launches["launch_m_grouped_contiguous"] == 2


def test_contiguous_content_checks_run_on_every_cpu_call(launches, monkeypatch):
    a, b, d, layout = _contiguous()
    real_plan = fg._plan_contiguous
    _validate_once(monkeypatch, fg, "_plan_contiguous")
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    bad = layout.clone()
    bad[3] = 2
    with pytest.raises(ValueError, match=r"grouped_layout\[3\] = 2 is not a group id"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, bad)
    bad = layout.clone()
    bad[100:] = 1  # group 1 starts at row 100
    with pytest.raises(ValueError, match=r"group 1 start at row 100"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, bad)
    psum = torch.tensor([128, 256], dtype=torch.int32)
    monkeypatch.setattr(fg, "_plan_contiguous", real_plan)
    fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, psum, use_psum_layout=True)  # new scalar, new plan
    _validate_once(monkeypatch, fg, "_plan_contiguous")  # ... and replayed with bad contents next
    with pytest.raises(ValueError, match=r"grouped_layout \(psum\) \[1\] = 120"):
        fg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, torch.tensor([100, 120], dtype=torch.int32),
                                            use_psum_layout=True)
    assert launches["launch_m_grouped_contiguous"] == 2


def test_bf16_contiguous_is_cached_apart_from_fp8(launches, monkeypatch):
    _, _, d, layout = _contiguous()
    a = torch.randn(256, 256).to(torch.bfloat16)
    b = torch.randn(2, 160, 256).to(torch.bfloat16)
    validations = _validate_once(monkeypatch, fg, "_plan_contiguous")
    fg.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout)
    fg.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout)
    assert len(validations) == 1
    monkeypatch.undo()
    with pytest.raises(TypeError, match=r"a must have dtype torch.bfloat16"):
        fg.m_grouped_bf16_gemm_nt_contiguous(a.float(), b, d, layout)


# ---------------------------------------------------------------------------------------------
# m-grouped masked
# ---------------------------------------------------------------------------------------------

def test_masked_second_call_skips_validation_and_expected_m_is_keyed(launches, monkeypatch):
    a, b, d, masked_m = _masked()
    validations = _validate_once(monkeypatch, fg, "_plan_masked")
    fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 16)
    masked_m.fill_(999)  # contents are never checked: any value has a meaning
    fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 16)
    assert len(validations) == 1 and launches["launch_m_grouped_masked"] == 2
    monkeypatch.undo()
    monkeypatch.setattr(fg, "launch_m_grouped_masked", lambda *args: None)
    with pytest.raises(TypeError, match=r"expected_m must be an int; got float 16.0"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 16.0)  # equal to 16, but a float
    with pytest.raises(TypeError, match=r"expected_m must be an int; got bool True"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, True)
    with pytest.raises(TypeError, match=r"masked_m must have dtype torch.int32; got torch.int64"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m.long(), 16)


def test_backend_switch_is_part_of_the_signature(launches, monkeypatch):
    a, b, d, masked_m = _masked()
    fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 16)
    monkeypatch.setenv("FINEGEMM_BACKEND", "sm90")
    with pytest.raises(RuntimeError, match="FINEGEMM_BACKEND=sm90"):
        fg.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 16)


# ---------------------------------------------------------------------------------------------
# k-grouped
# ---------------------------------------------------------------------------------------------

def test_k_grouped_ks_is_keyed_and_contents_checked_every_call(launches, monkeypatch):
    a, b, d, ks, ks_tensor = _k_grouped()
    validations = _validate_once(monkeypatch, fg, "_plan_k_grouped")
    fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=d)
    fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, list(ks), ks_tensor, c=d)
    assert len(validations) == 1 and launches["launch_k_grouped"] == 2
    with pytest.raises(ValueError, match=r"grouped_layout holds \[256, 0\] but ks_cpu is \[128, 128\]"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, torch.tensor([256, 0], dtype=torch.int32), c=d)
    monkeypatch.undo()
    monkeypatch.setattr(fg, "launch_k_grouped", lambda *args: None)
    with pytest.raises(ValueError, match=r"sum\(ks_cpu\) = 128 but a\[0\] holds K = 256"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, [128, 0], ks_tensor, c=d)
    with pytest.raises(TypeError, match=r"ks_cpu\[0\] must be an int; got float 128.0"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, [128.0, 128], ks_tensor, c=d)  # == [128, 128]
    with pytest.raises(TypeError, match=r"ks_cpu must be a list of ints"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks_tensor, ks_tensor, c=d)
    with pytest.raises(ValueError, match=r"c is required by k-grouped GEMMs"):
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, ks_tensor)


def test_k_grouped_empty_ks_copies_c_on_every_call(launches):
    a, b, d, _, _ = _k_grouped()
    a = (a[0][:0], a[1][:0])
    b = (b[0][:0], b[1][:0])
    ks_tensor = torch.zeros(2, dtype=torch.int32)
    for value in (1.0, 2.0):
        c = torch.full_like(d, value)
        fg.k_grouped_fp8_gemm_tn_contiguous(a, b, d, [0, 0], ks_tensor, c=c)
        assert bool((d == value).all())
    assert "launch_k_grouped" not in launches


# ---------------------------------------------------------------------------------------------
# MQA logits
# ---------------------------------------------------------------------------------------------

def _mqa(s=8, s_kv=64, heads=32, dim=32):
    q = torch.randn(s, heads, dim).to(E4M3)
    kv = (torch.randn(s_kv, dim).to(E4M3), torch.rand(s_kv))
    start = torch.zeros(s, dtype=torch.int32)
    end = torch.arange(1, s + 1, dtype=torch.int32) * (s_kv // s)
    return q, kv, torch.rand(s, heads), start, end


def test_mqa_second_call_skips_validation_and_allocates_once(launches, monkeypatch):
    q, kv, w, st, en = _mqa()
    real_plan = fa._plan_mqa
    validations = _validate_once(monkeypatch, fa, "_plan_mqa")
    outs = [fa.fp8_mqa_logits(q, kv, w, st, en) for _ in range(2)]
    assert len(validations) == 1 and launches["launch_mqa_logits"] == 2
    for out in outs:
        assert out.shape == (8, 64) and out.stride() == (64, 1) and out.dtype == torch.float32
    assert outs[0].data_ptr() != outs[1].data_ptr()  # a fresh output per call
    monkeypatch.setattr(fa, "_plan_mqa", real_plan)
    compact = fa.fp8_mqa_logits(q, kv, w, st, en.clamp(max=40), max_seqlen_k=40)  # compact + clean: -inf prefill
    assert compact.shape == (8, 40) and compact.stride() == (64, 1) and torch.isneginf(compact).all()


def test_mqa_changed_signature_validates_again(launches):
    q, kv, w, st, en = _mqa()
    fa.fp8_mqa_logits(q, kv, w, st, en)
    with pytest.raises(TypeError, match="clean_logits must be a bool"):
        fa.fp8_mqa_logits(q, kv, w, st, en, clean_logits=1)  # == True, but an int
    with pytest.raises(TypeError, match="max_seqlen_k must be an int"):
        fa.fp8_mqa_logits(q, kv, w, st, en, max_seqlen_k=0.0)
    with pytest.raises(ValueError, match="weights must be contiguous in its last dim"):
        fa.fp8_mqa_logits(q, kv, w.t().contiguous().t(), st, en)
    with pytest.raises(TypeError, match="cu_seq_len_k_start must have dtype torch.int32"):
        fa.fp8_mqa_logits(q, kv, w, st.long(), en)
    with pytest.raises(TypeError, match="kv must be a pair"):
        fa.fp8_mqa_logits(q, kv[0], w, st, en)
    # [S_kv, 1] scales with a non-unit stride: a new plan that copies them to unit stride
    seen = []
    fa.launch_mqa_logits = lambda *args: seen.append(args[2])
    sf_wide = torch.rand(64, 2)[:, :1]
    fa.fp8_mqa_logits(q, (kv[0], sf_wide), w, st, en)
    assert seen[0].shape == (64,) and seen[0].stride() == (1,) and torch.equal(seen[0], sf_wide[:, 0])


def test_mqa_value_checks_run_on_every_cpu_call(launches, monkeypatch):
    q, kv, w, st, en = _mqa()
    _validate_once(monkeypatch, fa, "_plan_mqa")
    fa.fp8_mqa_logits(q, kv, w, st, en)
    with pytest.raises(ValueError, match=r"cu_seq_len_k_end\[0\] = 65"):
        fa.fp8_mqa_logits(q, kv, w, st, torch.full_like(en, 65))
    with pytest.raises(ValueError, match="need end >= cu_seq_len_k_start"):
        fa.fp8_mqa_logits(q, kv, w, torch.full_like(st, 60), en)
    assert launches["launch_mqa_logits"] == 1


def _paged(batch=2, next_n=2, heads=32, dim=32, block_kv=64, max_len=128):
    q = torch.randn(batch, next_n, heads, dim).to(E4M3)
    cache = fa.pack_paged_kv_cache(torch.randn(4, block_kv, dim).to(E4M3), torch.rand(4, block_kv))
    ctx = torch.tensor([128, 70], dtype=torch.int32)
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    meta = fa.get_paged_mqa_logits_metadata(ctx, block_kv, 2)
    return q, cache, torch.rand(batch * next_n, heads), ctx, table, meta, max_len


def test_paged_second_call_skips_validation_and_checks_values(launches, monkeypatch):
    q, cache, w, ctx, table, meta, max_len = _paged()
    validations = _validate_once(monkeypatch, fa, "_plan_paged")
    out = fa.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len)
    fa.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len)
    assert len(validations) == 1 and launches["launch_paged_mqa_logits"] == 2
    assert out.shape == (4, 128) and out.stride() == (128, 1)
    bad_table = table.clone()
    bad_table[1, 0] = 99
    with pytest.raises(ValueError, match=r"block_table\[\(1, 0\)\] = 99"):
        fa.fp8_paged_mqa_logits(q, cache, w, ctx, bad_table, meta, max_len)
    with pytest.raises(ValueError, match="schedule_meta does not match"):
        fa.fp8_paged_mqa_logits(q, cache, w, ctx, table, torch.zeros_like(meta), max_len)
    assert launches["launch_paged_mqa_logits"] == 2


def test_paged_changed_signature_validates_again(launches):
    q, cache, w, ctx, table, meta, max_len = _paged()
    fa.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len)
    buf = torch.zeros(cache.numel() + 4, dtype=torch.uint8)
    shifted = buf[2:2 + cache.numel()].view(cache.shape)  # same shape and strides as cache, 2-byte offset
    shifted.copy_(cache)
    with pytest.raises(ValueError, match="4-byte aligned start"):
        fa.fp8_paged_mqa_logits(q, shifted, w, ctx, table, meta, max_len)
    with pytest.raises(ValueError, match="max_context_len must be an int >= 0; got -1"):
        fa.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, -1)
    with pytest.raises(TypeError, match="logits_dtype"):
        fa.fp8_paged_mqa_logits(q, cache, w, ctx, table, meta, max_len, logits_dtype=torch.float64)


def test_set_num_sms_is_part_of_the_signature(monkeypatch):
    from finegemm.jit import device

    key = plan_cache.dispatch_state()
    monkeypatch.setattr(device, "_num_sms_cap", 7)  # what finegemm.set_num_sms(7) sets
    assert plan_cache.dispatch_state() != key


def test_content_checks_are_decided_per_call(monkeypatch):
    """CPU: always; CUDA: only while FINEGEMM_DEBUG=1, read at each call (never frozen into a plan)."""
    cuda = torch.device("cuda", 0)
    monkeypatch.delenv("FINEGEMM_DEBUG", raising=False)
    assert fg._reads_contents(torch.device("cpu")) and fa._values_checked(torch.device("cpu"))
    assert not fg._reads_contents(cuda) and not fa._values_checked(cuda)
    monkeypatch.setenv("FINEGEMM_DEBUG", "1")
    assert fg._reads_contents(cuda) and fa._values_checked(cuda)
