"""Fresh inputs for one case and their float64 references.

Every case draws new random normal data (never zeros) from its own seed. Operands are quantized with
finegemm's casts: activations ``per_token_cast_to_fp8`` (1x128), weights ``per_block_cast_to_fp8``
(128x128), or ``per_token_cast_to_fp8`` on both sides for the 1D1D weight-gradient recipe and
``per_channel_cast_to_fp8`` for k-grouped operands stored ``[K, MN]``. The per-tensor FP8 peer gets its
own per-tensor quantization of the same BF16 data.

References are float64, computed on the inputs' device from the *dequantized* operands of the family
a peer consumes (``block``: fine-grained FP8, ``tensor``: per-tensor FP8, ``bf16``: the BF16 data), so
each calc_diff measures the kernel's error alone. They are built lazily and cached per (family, with C).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

import finegemm
from finegemm.reference.hyperconnection import tf32_hc_prenorm_gemm as hc_reference
from finegemm.reference.mqa import fp8_paged_mqa_logits as paged_reference
from finegemm.reference.mqa import mask_and_compact, paged_row_context_lens

from .suites import BLOCK, PAGED_BLOCK_KV, Case, mqa_columns, mqa_ranges

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
# Rows of A per float64 reference chunk: bounds the float64 temporaries to ~1 GiB at N = 129280.
REF_ROWS = 1024
# MQA logits: (query, key, head) triples above which the float64 reference covers every
# ``MQA_CHECK_STRIDE``-th query only (8192 x 65536 x 64 heads would take a minute of float64 einsums)
MQA_REF_FULL = 1 << 33
MQA_CHECK_STRIDE = 8
# Paged MQA logits: the float64 reference covers the first PAGED_CHECK_SEQS sequences' rows.
PAGED_CHECK_SEQS = 16


def per_tensor_cast_to_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One FP32 scale for the whole tensor: ``x ≈ x_fp8 * scale``; scale is a 0-d fp32 tensor."""
    scale = (x.abs().amax().float().clamp(min=1e-4) / FP8_MAX)
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale.reshape(())


def _deq_rows(x: torch.Tensor, sf: torch.Tensor, gran_rows: int) -> torch.Tensor:
    """Dequantize ``x [R, K]`` with 1x128 (gran_rows=1) or 128x128 (gran_rows=128) scales to float64."""
    r, k = x.shape
    s = sf.double()
    if gran_rows != 1:
        s = s.repeat_interleave(gran_rows, dim=0)[:r]
    return x.double() * s.repeat_interleave(BLOCK, dim=1)[:, :k]


def _mm_f64(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 ``a [M, K] @ b[N, K]^T`` in row chunks (a, b float64)."""
    out = torch.empty((a.shape[0], b.shape[0]), dtype=torch.float64, device=a.device)
    for r0 in range(0, a.shape[0], REF_ROWS):
        out[r0:r0 + REF_ROWS] = a[r0:r0 + REF_ROWS] @ b.T
    return out


@dataclass
class Inputs:
    """Tensors of one case (``t``), the valid-row mask of its output, and lazily built references."""

    case: Case
    device: torch.device
    t: dict[str, object] = field(default_factory=dict)
    builders: dict[tuple[str, bool], Callable[[], torch.Tensor]] = field(default_factory=dict)
    valid: torch.Tensor | None = None  # bool mask over the output's leading dims (None: all valid)
    _refs: dict[tuple[str, bool], torch.Tensor] = field(default_factory=dict)

    def reference(self, family: str, with_c: bool = True) -> torch.Tensor:
        key = (family, with_c)
        if key not in self._refs:
            if key not in self.builders:
                raise KeyError(f"no {family} reference (with_c={with_c}) for {self.case.kind}")
            self._refs[key] = self.builders[key]()
        return self._refs[key]

    def check(self, out: torch.Tensor, family: str, with_c: bool = True) -> float:
        """calc_diff of ``out`` against the family's reference over the valid part of the output.

        MQA logits: positions outside each row's range must be exactly ``-inf`` (else NaN is returned,
        which fails); the finite part is compared.
        """
        ref = self.reference(family, with_c)
        out = out.to(ref.device)
        if self.case.kind == "mqa_logits":
            out = out[self.t["ref_rows"]]
            outside = torch.isinf(ref)
            if not self.case.compressed and not bool(torch.isneginf(out[outside]).all()):
                return float("nan")  # the compact form is run unclean: positions outside are unwritten
            return finegemm.calc_diff(out[~outside], ref[~outside])
        if self.case.kind == "paged_mqa_logits":  # clean_logits=False: columns past a row's context hold anything
            inside = torch.isfinite(ref)
            return finegemm.calc_diff(out[:ref.shape[0]][inside], ref[inside])
        if self.valid is not None:
            out, ref = out[self.valid], ref[self.valid]
        return finegemm.calc_diff(out, ref)

    def free_references(self) -> None:
        self._refs.clear()


def make_inputs(case: Case, device: torch.device, seed: int) -> Inputs:
    """Build the inputs of ``case`` on ``device`` from ``seed`` (see the module docstring)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    inp = Inputs(case, device)
    randn = lambda *shape: torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    builder = {
        "fp8_gemm": _dense_fp8, "fp8_gemm_wgrad": _dense_fp8, "bf16_gemm": _bf16,
        "m_grouped_contiguous": _contiguous, "m_grouped_masked": _masked, "k_grouped": _k_grouped,
        "mqa_logits": _mqa, "paged_mqa_logits": _paged_mqa, "hc_prenorm": _hc_prenorm,
    }[case.kind]
    builder(case, inp, randn)
    return inp


def _dense_fp8(case: Case, inp: Inputs, randn) -> None:
    m, n, k = case.m, case.n, case.k
    wgrad = case.kind == "fp8_gemm_wgrad"
    a_bf, b_bf = randn(m, k), randn(n, k)
    a = finegemm.per_token_cast_to_fp8(a_bf)
    b = finegemm.per_token_cast_to_fp8(b_bf) if wgrad else finegemm.per_block_cast_to_fp8(b_bf)
    a_t, b_t = per_tensor_cast_to_fp8(a_bf), per_tensor_cast_to_fp8(b_bf)
    c = torch.randn(m, n, device=inp.device, dtype=torch.float32) if wgrad else None
    inp.t.update(a_bf=a_bf, b_bf=b_bf, a=a, b=b, a_t=a_t, b_t=b_t, c=c,
                 sfa_mn=finegemm.get_mn_major_tma_aligned_tensor(a[1]))
    gran_b = 1 if wgrad else BLOCK

    def block(with_c: bool) -> torch.Tensor:
        out = _mm_f64(_deq_rows(a[0], a[1], 1), _deq_rows(b[0], b[1], gran_b))
        return out + c.double() if (with_c and c is not None) else out

    inp.builders[("block", True)] = lambda: block(True)
    inp.builders[("block", False)] = lambda: block(False)
    tensor = lambda: _mm_f64(a_t[0].double() * a_t[1].double(), b_t[0].double() * b_t[1].double())
    inp.builders[("tensor", True)] = inp.builders[("tensor", False)] = tensor
    bf16 = lambda: _mm_f64(a_bf.double(), b_bf.double())
    inp.builders[("bf16", True)] = inp.builders[("bf16", False)] = bf16


def _bf16(case: Case, inp: Inputs, randn) -> None:
    m, n, k = case.m, case.n, case.k
    a_bf, b_bf = randn(m, k), randn(n, k)
    out_dtype = torch.float32 if case.out == "fp32" else torch.bfloat16
    c = randn(m, n).to(out_dtype) if case.accumulate else None
    inp.t.update(a_bf=a_bf, b_bf=b_bf, c=c)

    def ref(with_c: bool) -> torch.Tensor:
        out = _mm_f64(a_bf.double(), b_bf.double())
        return out + c.double() if (with_c and c is not None) else out

    inp.builders[("bf16", True)] = lambda: ref(True)
    inp.builders[("bf16", False)] = lambda: ref(False)


def _quantize_experts(b_bf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-expert 128x128 casts of ``[G, N, K]`` → (fp8 ``[G, N, K]``, fp32 ``[G, N/128, K/128]``)."""
    parts = [finegemm.per_block_cast_to_fp8(b_bf[g]) for g in range(b_bf.shape[0])]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def _contiguous(case: Case, inp: Inputs, randn) -> None:
    g, n, k = case.groups, case.n, case.k
    align = finegemm.get_mk_alignment_for_contiguous_layout()
    a_bf, b_bf = randn(case.m, k), randn(g, n, k)
    layout = torch.full((case.m,), -1, dtype=torch.int32, device=inp.device)
    segments = []  # (group, first row, valid rows)
    start = 0
    for e, rows in enumerate(case.ms):
        layout[start:start + rows] = e
        segments.append((e, start, rows))
        start += -(-rows // align) * align
    a = finegemm.per_token_cast_to_fp8(a_bf)
    b = _quantize_experts(b_bf)
    a_t, b_t = per_tensor_cast_to_fp8(a_bf), per_tensor_cast_to_fp8(b_bf)
    inp.valid = layout >= 0
    inp.t.update(a_bf=a_bf, b_bf=b_bf, a=a, b=b, a_t=a_t, b_t=b_t, layout=layout, segments=segments,
                 sfa_mn=finegemm.get_mn_major_tma_aligned_tensor(a[1]))

    def ref(a64: torch.Tensor, b64: Callable[[int], torch.Tensor]) -> torch.Tensor:
        out = torch.zeros((case.m, n), dtype=torch.float64, device=inp.device)
        for e, s, rows in segments:
            out[s:s + rows] = _mm_f64(a64[s:s + rows], b64(e))
        return out

    block = lambda: ref(_deq_rows(a[0], a[1], 1), lambda e: _deq_rows(b[0][e], b[1][e], BLOCK))
    tensor = lambda: ref(a_t[0].double() * a_t[1].double(), lambda e: b_t[0][e].double() * b_t[1].double())
    inp.builders[("block", True)] = inp.builders[("block", False)] = block
    inp.builders[("tensor", True)] = inp.builders[("tensor", False)] = tensor


def _masked(case: Case, inp: Inputs, randn) -> None:
    g, max_m, n, k = case.groups, case.m, case.n, case.k
    a_bf, b_bf = randn(g, max_m, k), randn(g, n, k)
    a_fp8, sfa = finegemm.per_token_cast_to_fp8(a_bf.view(g * max_m, k))
    a = (a_fp8.view(g, max_m, k), sfa.view(g, max_m, -1))
    b = _quantize_experts(b_bf)
    a_t, b_t = per_tensor_cast_to_fp8(a_bf), per_tensor_cast_to_fp8(b_bf)
    masked_m = torch.tensor(case.ms, dtype=torch.int32, device=inp.device)
    valid = torch.zeros((g, max_m), dtype=torch.bool, device=inp.device)
    for e, rows in enumerate(case.ms):
        valid[e, :rows] = True
    inp.valid = valid
    inp.t.update(a_bf=a_bf, b_bf=b_bf, a=a, b=b, a_t=a_t, b_t=b_t, masked_m=masked_m, expected_m=max(case.ms),
                 sfa_mn=finegemm.get_mn_major_tma_aligned_tensor(a[1]))

    def ref(a64: Callable[[int], torch.Tensor], b64: Callable[[int], torch.Tensor]) -> torch.Tensor:
        out = torch.zeros((g, max_m, n), dtype=torch.float64, device=inp.device)
        for e, rows in enumerate(case.ms):
            out[e, :rows] = _mm_f64(a64(e)[:rows], b64(e))
        return out

    block = lambda: ref(lambda e: _deq_rows(a[0][e], a[1][e], 1), lambda e: _deq_rows(b[0][e], b[1][e], BLOCK))
    tensor = lambda: ref(lambda e: a_t[0][e].double() * a_t[1].double(),
                         lambda e: b_t[0][e].double() * b_t[1].double())
    inp.builders[("block", True)] = inp.builders[("block", False)] = block
    inp.builders[("tensor", True)] = inp.builders[("tensor", False)] = tensor


def _k_grouped(case: Case, inp: Inputs, randn) -> None:
    g, m, n = case.groups, case.m, case.n
    a_bf, b_bf = randn(case.k, m), randn(case.k, n)
    a_parts, b_parts, bounds = [], [], []
    start = 0
    for kg in case.ks:
        a_parts.append(finegemm.per_channel_cast_to_fp8(a_bf[start:start + kg]))
        b_parts.append(finegemm.per_channel_cast_to_fp8(b_bf[start:start + kg]))
        bounds.append((start, kg))
        start += kg
    # Stored [K_sum, MN] with scales [sum_g ceil(k_g/128), MN], as the tn k-grouped layout takes them.
    a = (torch.cat([p[0] for p in a_parts]), torch.cat([p[1] for p in a_parts]))
    b = (torch.cat([p[0] for p in b_parts]), torch.cat([p[1] for p in b_parts]))
    # The nt layout (what DeepGEMM's k-grouped anchors time): each group's K-major [MN, k_g] block back to back, the
    # same values and scales; the scales MN-major [MN, K_sum/128] (the tn scales seen transposed, read in place).
    a_nt = (torch.cat([x.t().contiguous().flatten() for x, _ in a_parts]), a[1].t())
    b_nt = (torch.cat([x.t().contiguous().flatten() for x, _ in b_parts]), b[1].t())
    a_t, b_t = per_tensor_cast_to_fp8(a_bf), per_tensor_cast_to_fp8(b_bf)
    c = torch.randn(g, m, n, device=inp.device, dtype=torch.float32)
    ks_tensor = torch.tensor(case.ks, dtype=torch.int32, device=inp.device)
    inp.t.update(a_bf=a_bf, b_bf=b_bf, a=a, b=b, a_nt=a_nt, b_nt=b_nt, a_parts=a_parts, b_parts=b_parts,
                 bounds=bounds, a_t=a_t, b_t=b_t, c=c, ks=list(case.ks), ks_tensor=ks_tensor)

    def ref(a64: Callable[[int], torch.Tensor], b64: Callable[[int], torch.Tensor], with_c: bool) -> torch.Tensor:
        out = c.double().clone() if with_c else torch.zeros((g, m, n), dtype=torch.float64, device=inp.device)
        for e in range(g):
            out[e] += _mm_f64(a64(e).T.contiguous(), b64(e).T.contiguous())
        return out

    def deq_channel(parts, e):  # [k_g, MN] fp8 with [ceil(k_g/128), MN] scales → float64
        x, sf = parts[e]
        return _deq_rows(x.T, sf.T, 1).T

    for with_c in (True, False):
        inp.builders[("block", with_c)] = (
            lambda w=with_c: ref(lambda e: deq_channel(a_parts, e), lambda e: deq_channel(b_parts, e), w))
        inp.builders[("tensor", with_c)] = (lambda w=with_c: ref(
            lambda e: a_t[0][bounds[e][0]:sum(bounds[e])].double() * a_t[1].double(),
            lambda e: b_t[0][bounds[e][0]:sum(bounds[e])].double() * b_t[1].double(), w))


def _mqa(case: Case, inp: Inputs, randn) -> None:
    s, skv, h, d = case.m, case.n, case.heads, case.k
    q = randn(s, h, d).to(FP8)  # DeepGEMM's convention: q plainly cast (|x| << 448), no scale
    kv_fp8, kv_sf = finegemm.per_token_cast_to_fp8(randn(skv, d))
    kv_sf = kv_sf[:, 0].contiguous()
    weights = torch.randn(s, h, device=inp.device, dtype=torch.float32)
    rng = mqa_ranges(s, skv, case.ranges)
    ks = torch.tensor([r[0] for r in rng], dtype=torch.int32, device=inp.device)
    ke = torch.tensor([r[1] for r in rng], dtype=torch.int32, device=inp.device)
    stride = MQA_CHECK_STRIDE if s * skv * h > MQA_REF_FULL else 1
    ref_rows = torch.arange(0, s, stride, device=inp.device)
    cols_out = mqa_columns(case)
    inp.t.update(q=q, kv=(kv_fp8, kv_sf), weights=weights, ks=ks, ke=ke, ref_rows=ref_rows,
                 max_seqlen_k=cols_out if case.compressed else 0)

    def ref() -> torch.Tensor:
        """float64 logits of the rows ``ref_rows`` (column ``c`` = key ``c``, or ``start + c`` compact)."""
        kv64 = kv_fp8.double() * kv_sf.double()[:, None]
        out = torch.empty((ref_rows.numel(), cols_out), dtype=torch.float64, device=inp.device)
        rows = max(1, REF_ROWS // max(h, 1))
        for r0 in range(0, ref_rows.numel(), rows):
            idx = ref_rows[r0:r0 + rows]
            score = torch.relu(torch.einsum("rhd,jd->rhj", q[idx].double(), kv64))
            logits = torch.einsum("rhj,rh->rj", score, weights[idx].double())  # [r, S_kv]
            out[r0:r0 + rows] = mask_and_compact(logits, ks[idx], ke[idx], inp.t["max_seqlen_k"])
        return out

    inp.builders[("block", True)] = inp.builders[("block", False)] = ref


def _paged_mqa(case: Case, inp: Inputs, randn) -> None:
    """DeepGEMM's paged test inputs: every sequence's pages scattered over the cache by a shuffled block table,
    e4m3 values with positive per-token scales, q plainly cast, fp32 weights, context lengths ``case.ms`` (the
    last token's; ``[B, next_n]`` as DeepGEMM's test passes them)."""
    b, next_n, h, d, bkv = case.m, case.next_n, case.heads, case.k, PAGED_BLOCK_KV
    lens = list(case.ms)
    pages = [-(-n // bkv) for n in lens]
    num_blocks = sum(pages) + 8
    values = randn(num_blocks * bkv, d).to(FP8).view(num_blocks, bkv, d)
    scales = randn(num_blocks, bkv).float().abs_().mul_(0.01).add_(0.001)
    cache = finegemm.pack_paged_kv_cache(values, scales)
    del values, scales
    order = torch.argsort(randn(num_blocks).float()).to(torch.int32).cpu()  # a shuffled page pool
    table = torch.zeros(b, max(pages), dtype=torch.int32)
    used = 0
    for i, p in enumerate(pages):
        table[i, :p] = order[used:used + p]
        used += p
    q = randn(b, next_n, h, d).to(FP8)
    weights = randn(b * next_n, h).float()
    # [B, next_n] lens, each row's own (the causal rule of [B] lens): DeepGEMM 2.6.1 takes no other form
    ctx = paged_row_context_lens(torch.tensor(lens), next_n).view(b, next_n).to(torch.int32).to(inp.device)
    table = table.to(inp.device)
    num_sms = torch.cuda.get_device_properties(inp.device).multi_processor_count if inp.device.type == "cuda" else 4
    meta = finegemm.get_paged_mqa_logits_metadata(ctx, bkv, num_sms)
    seqs = min(b, PAGED_CHECK_SEQS)
    inp.t.update(q=q, cache=cache, weights=weights, ctx=ctx, table=table, meta=meta, max_len=max(lens))

    def ref() -> torch.Tensor:
        """float64 logits of the first ``seqs`` sequences' rows, ``-inf`` past each row's context."""
        return paged_reference(q[:seqs], cache, weights[:seqs * next_n], ctx[:seqs], table[:seqs], None, max(lens))

    inp.builders[("block", True)] = inp.builders[("block", False)] = ref


def _hc_prenorm(case: Case, inp: Inputs, randn) -> None:
    """a bf16 ``[M, K]``, b fp32 ``[N, K]``; the output compared is ``[d | sqr_sum]`` (``[M, N + 1]``, splits
    summed) against the float64 reference on b rounded to TF32 (family ``tf32``)."""
    a = randn(case.m, case.k)
    b = randn(case.n, case.k).float()
    inp.t.update(a_bf=a, b_f32=b)

    def ref() -> torch.Tensor:
        d, s = hc_reference(a, b, tf32=True)
        return torch.cat([d, s[:, None]], dim=1)

    inp.builders[("tf32", True)] = inp.builders[("tf32", False)] = ref
