"""The Gluon paged MQA-logits kernel (finegemm/kernels/sm90/paged_mqa_logits.py).

CPU: it compiles for sm_90 for each supported (next_n, heads) and logits dtype with TMA loads, WGMMA,
mbarriers, no spills and registers for four CTAs an SM; :func:`supported` takes what it should. GPU
(``-m gpu``): against the float64 reference on DeepSeek V3.2 decode sizes with shuffled block tables,
both context-length forms, pages of 64 and 128 keys, and the API's dispatch to it.
"""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device
from test_mqa import PagedCase, assert_logits_match, generate_paged
from test_sm90_mqa import mqa_ptx_must_contain

from finegemm.kernels.sm90.compile_check import TARGET, _desc_sig, assert_async_wgmma_kernel
from finegemm.reference import mqa as ref

CASES = [(1, 32), (1, 64), (2, 32), (2, 64), (1, 128), (2, 128), (4, 64)]


def _compile(next_n, heads, out, ctx_2d=False, page=64, ws=False):
    import triton
    from triton.experimental.gluon import language as gl

    from finegemm.jit.interpret import restore_language
    from finegemm.kernels.sm90 import paged_mqa_logits as m
    from finegemm.kernels.sm90.gluon_compat import ast_source

    sig = {"q_desc": _desc_sig("fp8e4nv", [next_n * heads, 128], gl.float8e4nv),
           "kv_desc": _desc_sig("fp8e4nv", [m.BLOCK_KV, 128], gl.float8e4nv),
           "sf_desc": _desc_sig("fp32", [2, 32], gl.float32, gl.NVMMASharedLayout(0, 32)),
           "w_ptr": "*fp32", "ctx_ptr": "*i32", "table_ptr": "*i32", "meta_ptr": "*i32",
           "out_ptr": f"*{out}"}
    for name in ("batch", "num_blocks", "max_blocks", "max_context_len", "rows_per_page", "stride_ws",
                 "stride_ctx_b", "stride_ctx_t", "stride_table", "stride_out"):
        sig[name] = "i32"
    options = {"num_warps": 4}
    if ws:
        kernel = m.paged_mqa_logits_ws_kernel
        consts = dict(NEXT_N=next_n, HEADS=heads, PAGE=page, CTX_2D=ctx_2d,
                      KV_STAGES=m.ws_kv_stages(next_n * heads, 128), MATH_REGS=m.WS_MATH_REGS,
                      LOAD_REGS=m.WS_LOAD_REGS)
    else:
        kernel = m.paged_mqa_logits_kernel
        consts = dict(NEXT_N=next_n, HEADS=heads, PAGE=page, SUBS_=m.ctas_per_slot(next_n * heads), CTX_2D=ctx_2d)
        options["maxnreg"] = m.register_cap(next_n * heads, consts["SUBS_"])  # as the launch passes it
    sig.update({k: "constexpr" for k in consts})
    restore_language()  # interpreted CPU tests earlier in this process may have left tl patched
    return triton.compile(ast_source(kernel, sig, consts), target=TARGET, options=options)


@pytest.mark.parametrize("next_n,heads", CASES)
@pytest.mark.parametrize("out,ctx_2d", [("fp32", False), ("bf16", True)])
def test_compiles(next_n, heads, out, ctx_2d):
    _, usage = assert_async_wgmma_kernel(_compile(next_n, heads, out, ctx_2d), mqa_ptx_must_contain(next_n * heads))
    if next_n * heads <= 128:  # four CTAs an SM (65536 / (4 * 128 threads)), five up to 64 rows
        assert usage["REG"] <= (128 if next_n * heads > 64 else 96), usage


WS_CASES = [c for c in CASES if c[0] * c[1] <= 128]


@pytest.mark.parametrize("next_n,heads", WS_CASES)
@pytest.mark.parametrize("out,ctx_2d", [("fp32", False), ("bf16", True)])
def test_warp_specialized_compiles(next_n, heads, out, ctx_2d):
    """Four math warpgroups at 112-120 registers and four producer warps at 24 under .maxnreg 96 (20 warps a
    CTA), no spills, shared memory holding the two query stages and the four rings of the rule's depth."""
    import re

    from finegemm.kernels.sm90 import paged_mqa_logits as m

    kernel = _compile(next_n, heads, out, ctx_2d, ws=True)
    ptx, _ = assert_async_wgmma_kernel(kernel, mqa_ptx_must_contain(next_n * heads))
    assert re.search(r"\.reqntid 640\b", ptx) and re.search(r"\.maxnreg 96\b", ptx)
    regs = {int(n) for n in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)}
    assert {m.WS_MATH_REGS, m.WS_LOAD_REGS} <= regs
    rows, tile = next_n * heads, m.BLOCK_KV * 128 + 4 * m.BLOCK_KV
    assert 2 * rows * 128 + 4 * m.ws_kv_stages(rows, 128) * tile <= kernel.metadata.shared <= 232448


def test_ws_kv_stages():
    from finegemm.kernels.sm90.paged_mqa_logits import ws_kv_stages, ws_max_kv_stages, ws_supported, ws_wanted

    # 3 slots (the measured best), fewer only where shared memory holds fewer (a wider head); probes may ask for
    # up to what fits
    assert [ws_kv_stages(r, 128) for r in (32, 64, 128)] == [3, 3, 3]
    assert [ws_max_kv_stages(r, 128) for r in (32, 64, 128)] == [6, 6, 5]
    assert ws_kv_stages(128, 512) == ws_max_kv_stages(128, 512) == 2
    assert ws_supported(128) and not ws_supported(256)
    assert [ws_wanted(r, 4096, 10650) for r in (32, 64, 128, 256)] == [False, False, True, False]
    # at 128 rows only calls with many keys (batch x max_context_len >= 2^21) take it
    assert ws_wanted(128, 256, 8192) and not ws_wanted(128, 256, 8191) and not ws_wanted(128, 256, 2048)
    assert not ws_wanted(128, 8, 10650)


def test_ctas_per_slot():
    from finegemm.kernels.sm90.paged_mqa_logits import ctas_per_slot

    assert [ctas_per_slot(r) for r in (32, 64, 128, 256)] == [5, 5, 4, 4]


def test_supported_shapes():
    from finegemm.kernels.sm90.paged_mqa_logits import supported

    def cache(blocks, block_kv, d=128, pad=0):
        rows = torch.empty(blocks, block_kv * (d + 4) + pad, dtype=torch.uint8)[:, :block_kv * (d + 4)]
        return rows.unflatten(1, (block_kv, 1, d + 4))

    assert supported(2, 64, 128, cache(8, 64)) and supported(1, 32, 128, cache(8, 128))
    assert supported(4, 64, 128, cache(8, 256)) and supported(2, 64, 128, cache(8, 64, pad=128))
    assert not supported(3, 64, 128, cache(8, 64))  # N = 192: not a power of two
    assert not supported(1, 16, 128, cache(8, 64))  # N = 16
    assert not supported(4, 128, 128, cache(8, 64))  # N = 512
    assert not supported(2, 64, 64, cache(8, 64, d=64))  # D = 64
    assert not supported(2, 64, 128, cache(8, 32))  # pages smaller than a tile
    assert not supported(2, 64, 128, cache(8, 64, pad=4))  # page starts not on a 128-byte row


def test_dispatched_up_to_the_measured_rows():
    from finegemm.kernels.sm90.paged_mqa_logits import dispatched

    blocks = torch.empty(8, 64 * 132, dtype=torch.uint8).unflatten(1, (64, 1, 132))
    assert dispatched(2, 64, 128, blocks) and dispatched(1, 32, 128, blocks) and dispatched(1, 128, 128, blocks)
    assert not dispatched(2, 128, 128, blocks) and not dispatched(4, 64, 128, blocks)  # 256 rows: untimed
    assert not dispatched(3, 64, 128, blocks)  # not supported


def test_warp_specialized_form_refuses_256_rows():
    """Forcing the ws form where its accumulator and weights do not fit (256 query rows) is a clear error, raised
    before anything is launched."""
    from finegemm.kernels.sm90.paged_mqa_logits import launch

    batch, next_n, heads = 2, 2, 128
    q = torch.zeros(batch, next_n, heads, 128, dtype=torch.float8_e4m3fn)
    cache = torch.zeros(4, 64 * 132, dtype=torch.uint8).unflatten(1, (64, 1, 132))
    meta = torch.zeros(3, 2, dtype=torch.int32)
    args = (q, cache, torch.zeros(batch * next_n, heads), torch.ones(batch, dtype=torch.int32),
            torch.zeros(batch, 4, dtype=torch.int32), meta, torch.zeros(batch * next_n, 256))
    with pytest.raises(ValueError, match="warp-specialized .* up to 128 query rows; got 256"):
        launch(*args, ws=True)


GPU_CASES = [
    (64, 2, 64, 4096, 64, False, torch.float32), (64, 1, 64, 4096, 64, False, torch.bfloat16),
    (32, 1, 32, 8192, 64, True, torch.float32), (32, 2, 32, 3000, 128, False, torch.float32),
    (16, 2, 128, 2048, 64, True, torch.float32), (16, 4, 64, 1000, 256, False, torch.float32),
    (200, 2, 64, 300, 64, False, torch.float32),
    # small batches: most programs own no item, one sequence's items span many slots
    (2, 2, 64, 8192, 64, False, torch.float32), (3, 1, 32, 700, 64, True, torch.bfloat16)]


@pytest.mark.gpu
@pytest.mark.parametrize("batch,next_n,heads,avg,block_kv,ctx_2d,dtype,ws",
                         [c + (False,) for c in GPU_CASES] + [c + (True,) for c in GPU_CASES if c[1] * c[2] <= 128])
def test_gpu_matches_reference(batch, next_n, heads, avg, block_kv, ctx_2d, dtype, ws):
    """The kernel against the float64 reference, shuffled block tables, ragged contexts (some empty),
    output poisoned first, directly and through the API (which dispatches it up to 128 rows); bitwise
    repeat; with every third key scale negated too. ``ws``: the warp-specialized kernel."""
    sm90_device()
    import finegemm
    from finegemm.kernels.sm90 import paged_mqa_logits as m

    gen = torch.Generator().manual_seed(batch + next_n)
    lens = torch.randint(int(0.7 * avg), int(1.3 * avg), (batch,), generator=gen).tolist()
    lens[1] = 0  # an empty context
    max_len = max(lens)
    case = PagedCase(batch, next_n, heads, 128, block_kv, ctx_2d, max_len, dtype)
    q, kv_cache, w, ctx, table = generate_paged(case, seed=11, lens=lens, device="cuda")
    meta = finegemm.get_paged_mqa_logits_metadata(ctx, block_kv, finegemm.get_num_sms())
    expected = ref.fp8_paged_mqa_logits(q, kv_cache, w, ctx, table, meta, max_len)
    assert m.supported(next_n, heads, 128, kv_cache)
    api = finegemm.fp8_paged_mqa_logits(q, kv_cache, w, ctx, table, meta, max_len, clean_logits=True,
                                        logits_dtype=dtype)
    outs = []
    for _ in range(2):
        out = torch.full((batch * next_n, max_len), float("nan"), device="cuda", dtype=dtype)
        m.launch(q, kv_cache, w, ctx, table, meta, out, ws=ws)
        outs.append(out)
    torch.cuda.synchronize()
    tol = 1e-3 if dtype == torch.float32 else 5e-3
    assert_logits_match(api, expected, None, tol)
    # direct launch: every in-context value written; past the largest context of a split left as is
    written = ~torch.isnan(outs[0])
    fin = ~torch.isneginf(expected)
    assert bool(written[fin].all()), "an in-context logit was not written"
    assert_logits_match(torch.where(written, outs[0], expected.to(dtype)), expected, None, tol)
    assert torch.equal(outs[0].nan_to_num(), outs[1].nan_to_num()), "repeat run differs"
    signed = kv_cache.clone()
    scales = signed.view(signed.shape[0], -1)[:, block_kv * 128:].view(torch.float32)
    scales[:, ::3] *= -1.0
    expected = ref.fp8_paged_mqa_logits(q, signed, w, ctx, table, meta, max_len)
    out = torch.full((batch * next_n, max_len), float("nan"), device="cuda", dtype=dtype)
    m.launch(q, signed, w, ctx, table, meta, out, ws=ws)
    torch.cuda.synchronize()
    written = ~torch.isnan(out)
    assert_logits_match(torch.where(written, out, expected.to(dtype)), expected, None, tol)


@pytest.mark.gpu
def test_gpu_repeated_decode_step_replays():
    """A repeated launch with the same tensors replays its recording (launcher.py): a decode step with new
    query, weight and context-length contents in the same tensors gives the new logits."""
    sm90_device()
    import finegemm
    from finegemm.kernels.sm90 import paged_mqa_logits as m

    lens = [3000, 2500, 0, 4000]
    case = PagedCase(4, 2, 64, 128, 64, False, 4100, torch.float32)
    q, kv_cache, w, ctx, table = generate_paged(case, seed=12, lens=lens, device="cuda")
    meta = finegemm.get_paged_mqa_logits_metadata(ctx, 64, finegemm.get_num_sms())
    out = torch.full((4 * 2, 4100), float("nan"), device="cuda")
    m.launch(q, kv_cache, w, ctx, table, meta, out)
    q2, _, w2, _, _ = generate_paged(case, seed=13, lens=lens, device="cuda")
    q.copy_(q2)
    w.copy_(w2)
    ctx.copy_(torch.tensor([2900, 2400, 0, 3900], dtype=ctx.dtype, device="cuda"))  # within the pages held
    meta.copy_(finegemm.get_paged_mqa_logits_metadata(ctx, 64, finegemm.get_num_sms()))
    out.fill_(float("nan"))
    m.launch(q, kv_cache, w, ctx, table, meta, out)  # the recorded launch, new contents
    torch.cuda.synchronize()
    expected = ref.fp8_paged_mqa_logits(q, kv_cache, w, ctx, table, meta, 4100)
    written = ~torch.isnan(out)
    assert bool(written[~torch.isneginf(expected)].all())
    assert_logits_match(torch.where(written, out, expected.to(out.dtype)), expected, None, 1e-3)
