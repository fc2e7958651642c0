"""``python -m finegemm check``: every op family on the current device against the float64 reference.

One line per case, ``PASS`` or ``FAIL`` with its ``calc_diff`` and bound (or the exception), then a summary line.
Families: dense FP8 (four layouts, both recipes), dense BF16 (four layouts), m-grouped contiguous and masked (FP8
and BF16), k-grouped (FP8 tn and nt), MQA logits (full and paged), einsum (BF16 and FP8) and the FP8 casts. Sizes
are awkward (M not a multiple of 8, N tiles straddling scale blocks, empty groups); on a CPU they are small enough
for Triton's interpreter. Every op is looked up on :mod:`finegemm` when its case runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

FP8_BOUND = 1e-3
BF16_BOUND = 1e-5
CAST_BOUND = 2e-3  # E4M3 keeps 3 mantissa bits: calc_diff of a cast against its input is ~5e-4 (random normal)

Case = tuple[str, Callable[[], tuple[float, float]]]  # (name, run -> (calc_diff, bound))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, seed: int, device: torch.device) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)).to(device)


def _diff(x: torch.Tensor, y: torch.Tensor) -> float:
    import finegemm

    return finegemm.calc_diff(x, y)


def dense_fp8(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    from . import reference

    shapes = [(1, 2112, 7168), (77, 576, 2048), (333, 2112, 1536)] if gpu else [(5, 130, 256)]
    for m, n, k in shapes:
        for layout in ("nt", "nn", "tn", "tt"):
            for recipe in ((1, 128, 128), (1, 1, 128)):
                def run(m=m, n=n, k=k, layout=layout, recipe=recipe) -> tuple[float, float]:
                    a = finegemm.per_token_cast_to_fp8(_randn(m, k, seed=m + k, device=device))
                    b_bf = _randn(n, k, seed=n + k, device=device)
                    cast = finegemm.per_block_cast_to_fp8 if recipe[1] == 128 else finegemm.per_token_cast_to_fp8
                    b = cast(b_bf)
                    c = _randn(m, n, seed=m * n, device=device) if recipe[1] == 1 else None
                    want = reference.fp8_gemm_nt(a, b, c, recipe)
                    a_in = (a[0].T, a[1].T) if layout[0] == "t" else a
                    b_in = (b[0].T, b[1].T) if layout[1] == "n" else b
                    d = torch.full((m, n), float("nan"), dtype=torch.float32 if c is not None else torch.bfloat16,
                                   device=device)
                    getattr(finegemm, f"fp8_gemm_{layout}")(a_in, b_in, d, c=c, recipe=recipe)
                    return _diff(d, want), FP8_BOUND
                yield f"fp8_gemm_{layout} recipe={recipe} {m}x{n}x{k}", run


def dense_bf16(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    from . import reference

    shapes = [(1, 2112, 7168), (77, 576, 2048)] if gpu else [(5, 40, 72)]
    for m, n, k in shapes:
        for layout in ("nt", "nn", "tn", "tt"):
            def run(m=m, n=n, k=k, layout=layout) -> tuple[float, float]:
                a = _randn(*((k, m) if layout[0] == "t" else (m, k)), seed=m, device=device).bfloat16()
                b = _randn(*((k, n) if layout[1] == "n" else (n, k)), seed=n, device=device).bfloat16()
                c = _randn(m, n, seed=k, device=device)
                d = torch.full((m, n), float("nan"), device=device)
                getattr(finegemm, f"bf16_gemm_{layout}")(a, b, d, c=c)
                return _diff(d, reference.bf16_gemm(layout, a, b, c)), BF16_BOUND
            yield f"bf16_gemm_{layout} {m}x{n}x{k}", run


def m_grouped(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    from .reference import grouped as ref

    rows, n, k = ([300, 0, 1000, 77], 4096, 7168) if gpu else ([3, 0, 50], 160, 256)
    align = finegemm.get_mk_alignment_for_contiguous_layout()
    g = len(rows)
    m = sum(-(-r // align) * align for r in rows)
    layout = torch.full((m,), -1, dtype=torch.int32)
    start = 0
    for i, r in enumerate(rows):
        layout[start:start + r] = i
        start += -(-r // align) * align
    layout = layout.to(device)
    a_bf = _randn(m, k, seed=1, device=device)
    b_bf = _randn(g, n, k, seed=2, device=device)

    def contiguous_fp8() -> tuple[float, float]:
        a = finegemm.per_token_cast_to_fp8(a_bf)
        bq = [finegemm.per_block_cast_to_fp8(b_bf[i]) for i in range(g)]
        b = (torch.stack([q for q, _ in bq]), torch.stack([s for _, s in bq]))
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
        finegemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
        return _diff(d, ref.m_grouped_fp8_gemm_nt_contiguous(a, b, layout)), FP8_BOUND

    def contiguous_bf16() -> tuple[float, float]:
        a, b = a_bf.bfloat16(), b_bf.bfloat16()
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
        finegemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout)
        return _diff(d, ref.m_grouped_bf16_gemm_nt_contiguous(a, b, layout)), BF16_BOUND

    max_m = max(rows)
    masked_m = torch.tensor(rows, dtype=torch.int32, device=device)
    am_bf = _randn(g, max_m, k, seed=3, device=device)

    def masked(fp8: bool) -> tuple[float, float]:
        d = torch.zeros((g, max_m, n), dtype=torch.bfloat16, device=device)
        if fp8:
            a = finegemm.per_token_cast_to_fp8(am_bf.reshape(g * max_m, k))
            a = (a[0].view(g, max_m, k), a[1].view(g, max_m, -1))
            bq = [finegemm.per_block_cast_to_fp8(b_bf[i]) for i in range(g)]
            b = (torch.stack([q for q, _ in bq]), torch.stack([s for _, s in bq]))
            finegemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, max_m)
            want = ref.m_grouped_fp8_gemm_nt_masked(a, b, masked_m)
        else:
            a, b = am_bf.bfloat16(), b_bf.bfloat16()
            finegemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, max_m)
            want = ref.m_grouped_bf16_gemm_nt_masked(a, b, masked_m)
        valid = torch.arange(max_m, device=device)[None, :] < masked_m[:, None]
        return _diff(d[valid], want[valid]), FP8_BOUND if fp8 else BF16_BOUND

    shape = f"G={g} rows={rows} N={n} K={k}"
    yield f"m_grouped_fp8_gemm_nt_contiguous {shape}", contiguous_fp8
    yield f"m_grouped_bf16_gemm_nt_contiguous {shape}", contiguous_bf16
    yield f"m_grouped_fp8_gemm_nt_masked {shape}", lambda: masked(True)
    yield f"m_grouped_bf16_gemm_nt_masked {shape}", lambda: masked(False)


def k_grouped(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    from .reference import grouped as ref

    align = finegemm.get_k_alignment_for_k_grouped()
    ks, m, n = ([align * 4, 0, align * 9], 4096, 7168) if gpu else ([align, 0, align], 24, 40)
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device=device)

    def cast(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parts, start = [], 0
        for kk in ks:
            if kk:
                parts.append(finegemm.per_channel_cast_to_fp8(x[start:start + kk]))
            start += kk
        return torch.cat([q for q, _ in parts]), torch.cat([s for _, s in parts])

    a = cast(_randn(sum(ks), m, seed=4, device=device))
    b = cast(_randn(sum(ks), n, seed=5, device=device))
    c = _randn(len(ks), m, n, seed=6, device=device)

    def tn() -> tuple[float, float]:
        d = torch.full_like(c, float("nan"))
        finegemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c)
        return _diff(d, ref.k_grouped_fp8_gemm_tn_contiguous(a, b, ks, c)), FP8_BOUND

    def nt() -> tuple[float, float]:
        def flat(q: torch.Tensor) -> torch.Tensor:
            out, start = [], 0
            for kk in ks:
                out.append(q[start:start + kk].T.contiguous().reshape(-1))
                start += kk
            return torch.cat(out)
        a_nt, b_nt = (flat(a[0]), a[1].T.contiguous()), (flat(b[0]), b[1].T.contiguous())
        d = c.clone()
        finegemm.k_grouped_fp8_gemm_nt_contiguous(a_nt, b_nt, d, ks, ks_tensor, d)
        return _diff(d, ref.k_grouped_fp8_gemm_tn_contiguous(a, b, ks, c)), FP8_BOUND

    yield f"k_grouped_fp8_gemm_tn_contiguous ks={ks} M={m} N={n}", tn
    yield f"k_grouped_fp8_gemm_nt_contiguous ks={ks} M={m} N={n}", nt


def mqa(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    from .reference import mqa as ref

    s, h, dim, s_kv = (300, 64, 128, 4000) if gpu else (5, 16, 32, 70)

    def full() -> tuple[float, float]:
        q = _randn(s, h, dim, seed=7, device=device).to(torch.float8_e4m3fn)
        kv = finegemm.per_custom_dims_cast_to_fp8(_randn(s_kv, dim, seed=8, device=device), (0,))
        w = _randn(s, h, seed=9, device=device)
        st = torch.randint(0, s_kv // 2, (s,), generator=_gen(10)).to(torch.int32).to(device)
        en = torch.minimum(st + torch.randint(1, s_kv, (s,), generator=_gen(11)).to(device), torch.tensor(s_kv,
                           device=device)).to(torch.int32)
        out = finegemm.fp8_mqa_logits(q, kv, w, st, en)
        want = ref.fp8_mqa_logits(q, kv, w, st, en)
        inside = ~torch.isneginf(want)
        if not torch.equal(torch.isneginf(out), ~inside):
            return float("inf"), FP8_BOUND
        return _diff(out[inside], want[inside]), FP8_BOUND

    batch, next_n, block_kv, ctx_max = (8, 2, 64, 5000) if gpu else (2, 2, 32, 130)

    def paged() -> tuple[float, float]:
        blocks_per_seq = -(-ctx_max // block_kv)
        num_blocks = batch * blocks_per_seq + 3
        values = _randn(num_blocks, block_kv, dim, seed=12, device=device).to(torch.float8_e4m3fn)
        scales = _randn(num_blocks, block_kv, seed=13, device=device).abs() + 0.1
        cache = finegemm.pack_paged_kv_cache(values, scales)
        table = torch.randperm(num_blocks, generator=_gen(14))[:batch * blocks_per_seq].view(batch, -1)
        table = table.to(torch.int32).to(device)
        lens = torch.randint(next_n, ctx_max + 1, (batch,), generator=_gen(15)).to(torch.int32).to(device)
        q = _randn(batch, next_n, h, dim, seed=16, device=device).to(torch.float8_e4m3fn)
        w = _randn(batch * next_n, h, seed=17, device=device)
        meta = finegemm.get_paged_mqa_logits_metadata(lens, block_kv, finegemm.get_num_sms())
        out = finegemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, ctx_max, clean_logits=True)
        want = ref.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, ctx_max)
        inside = ~torch.isneginf(want)
        if not torch.equal(torch.isneginf(out), ~inside):
            return float("inf"), FP8_BOUND
        return _diff(out[inside], want[inside]), FP8_BOUND

    yield f"fp8_mqa_logits S={s} H={h} D={dim} S_kv={s_kv}", full
    yield f"fp8_paged_mqa_logits B={batch} next_n={next_n} H={h} D={dim} block_kv={block_kv}", paged


def einsum(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    from .reference import einsum as ref

    bsz, h, r, dd = (300, 128, 512, 128) if gpu else (5, 2, 40, 136)

    def bf16() -> tuple[float, float]:
        a = _randn(bsz, h, r, seed=18, device=device).bfloat16()
        b = _randn(h, dd, r, seed=19, device=device).bfloat16()
        d = torch.full((bsz, h, dd), float("nan"), device=device)
        finegemm.einsum("bhr,hdr->bhd", a, b, d)
        return _diff(d, ref.einsum("bhr,hdr->bhd", a, b)), BF16_BOUND

    def fp8() -> tuple[float, float]:
        a_bf = _randn(bsz, h, r, seed=20, device=device)
        qa, sa = finegemm.per_token_cast_to_fp8(a_bf.reshape(bsz * h, r))
        a = (qa.view(bsz, h, r), sa.view(bsz, h, -1))
        bq = [finegemm.per_block_cast_to_fp8(_randn(dd, r, seed=21 + i, device=device)) for i in range(h)]
        b = (torch.stack([q for q, _ in bq]), torch.stack([s for _, s in bq]))
        d = torch.full((bsz, h, dd), float("nan"), dtype=torch.bfloat16, device=device)
        finegemm.fp8_einsum("bhr,hdr->bhd", a, b, d)
        return _diff(d, ref.fp8_einsum("bhr,hdr->bhd", a, b)), FP8_BOUND

    yield f"einsum bhr,hdr->bhd b={bsz} h={h} r={r} d={dd}", bf16
    yield f"fp8_einsum bhr,hdr->bhd b={bsz} h={h} r={r} d={dd}", fp8


def casts(device: torch.device, gpu: bool) -> Iterator[Case]:
    import finegemm

    m, k = (4096, 7168) if gpu else (37, 300)
    x = _randn(m, k, seed=30, device=device)

    def case(fn: str, ue8m0: bool) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            q, sf = getattr(finegemm, fn)(x, use_ue8m0=ue8m0)
            xd = q.double()
            if fn == "per_token_cast_to_fp8":
                back = xd * sf.double().repeat_interleave(128, dim=1)[:, :k]
            elif fn == "per_channel_cast_to_fp8":
                back = xd * sf.double().repeat_interleave(128, dim=0)[:m]
            else:
                back = xd * sf.double().repeat_interleave(128, dim=0)[:m].repeat_interleave(128, dim=1)[:, :k]
            return _diff(back, x.double()), CAST_BOUND
        return run

    for fn in ("per_token_cast_to_fp8", "per_channel_cast_to_fp8", "per_block_cast_to_fp8"):
        for ue8m0 in (False, True):
            yield f"{fn} use_ue8m0={ue8m0} {m}x{k}", case(fn, ue8m0)


FAMILIES: dict[str, Callable[[torch.device, bool], Iterator[Case]]] = {
    "dense_fp8": dense_fp8, "dense_bf16": dense_bf16, "m_grouped": m_grouped, "k_grouped": k_grouped,
    "mqa": mqa, "einsum": einsum, "casts": casts,
}


def run(device: torch.device | None = None, families: list[str] | None = None, out=print) -> int:
    """Run the self-test; print a PASS / FAIL line per case and a summary line. Returns the exit status (0: all
    passed, 1: some case failed or raised)."""
    device = device or (torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
    gpu = device.type == "cuda"
    started = time.perf_counter()
    passed = failed = 0
    for family in families or list(FAMILIES):
        try:
            cases = list(FAMILIES[family](device, gpu))
        except Exception as error:  # noqa: BLE001 - a broken family is a FAIL line, not a crash
            out(f"FAIL  {family}: {type(error).__name__}: {error}")
            failed += 1
            continue
        for name, case in cases:
            try:
                diff, bound = case()
                ok = diff < bound  # NaN fails
                line = f"calc_diff {diff:.2e} (bound {bound:.0e})"
            except Exception as error:  # noqa: BLE001
                ok, line = False, f"{type(error).__name__}: {error}"
            passed += ok
            failed += not ok
            out(f"{'PASS' if ok else 'FAIL'}  {name}: {line}")
    where = "GPU" if gpu else "CPU interpreter"
    out(f"finegemm check on {where}: {passed} passed, {failed} failed ({time.perf_counter() - started:.1f} s)")
    return 1 if failed else 0
