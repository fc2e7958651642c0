"""Benchmark cases: every suite's shapes with their FLOP and byte counts (pure Python, no device).

A :class:`Case` is one problem. Its ``kind`` says which op it exercises (and so which finegemm function
and which peers apply); ``flops`` counts useful multiply-adds x 2, ``bytes`` the fewest bytes the op
must move through device memory (each input read once, each output written once, plus C read when
accumulating), which gives the HBM floor.

Shapes come from DESIGN.md §7 and ``shared/anchors/h200-2026-12-02.json`` (fields named per suite
below), so the peers' figures can be checked against the anchors.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from ..reference.mqa import paged_row_context_lens

BLOCK = 128

# DeepSeek-V3 dense shapes (DESIGN.md §7, anchors field ``dense``).
DEEPSEEK_V3_M = (64, 128, 4096)
DEEPSEEK_V3_NK = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))

# Weight-gradient shapes of the anchors' ``fp8_gemm_test_sweep`` with accumulate=1 (1D1D, FP32 out).
WEIGHT_GRAD_MNK = (
    (2112, 4096, 7168), (576, 4096, 7168), (24576, 4096, 1536), (32768, 4096, 512),
    (7168, 4096, 16384), (4096, 4096, 7168), (7168, 4096, 2048),
)

# BF16 shapes of the anchors' ``bf16_gemm``: M x (N, K), BF16 out with and without accumulation, plus
# the FP32-out LM-head-like shapes.
BF16_M = (1, 128, 4096)
BF16_NK = ((2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))
BF16_FP32_NK = ((256, 7168), (129280, 7168))

# M-grouped (anchors field ``grouped``): contiguous (groups, rows per group) and masked (groups, max_m),
# each with (N, K) in MOE_NK; masked adds DESIGN.md's decode extreme (32 experts x 64 rows).
MOE_NK = ((4096, 7168), (7168, 2048))
CONTIGUOUS_GM = ((4, 8192), (8, 4096))
MASKED_GM = ((1, 1024), (2, 512), (4, 256), (16, 64), (32, 64))
# masked decode with half the experts empty (masked_m alternating max_m and 0): (groups, max_m)
MASKED_HALF_EMPTY_GM = ((16, 64),)

# K-grouped (anchors field ``k_grouped``): groups x (M, N); per-group K = 32768/groups x U(0.7, 1.3),
# rounded to 128, drawn from a fixed seed so the list is the same in every run, then moved by 128-row steps to
# the total K DeepGEMM's test drew for that case (the anchors keep only the total): same work, so the times
# compare directly (finegemm.bench.anchors).
K_GROUPED_G = (4, 8, 16)
K_GROUPED_MN = ((4096, 7168), (7168, 2048))
K_GROUPED_TOTAL = 32768
K_GROUPED_ANCHOR_TOTALS = {(4, 4096, 7168): 34304, (4, 7168, 2048): 32896, (8, 4096, 7168): 35968,
                           (8, 7168, 2048): 33920, (16, 4096, 7168): 34432, (16, 7168, 2048): 34304}

# MQA logits prefill: the 14 prefill cases of the anchors field ``mqa``, in its order: (seq_len,
# seq_len_kv, heads, head_dim, ranges, logits dtype, compressed). Ranges (:func:`mqa_ranges`): ``causal``,
# row i sees kv [0, i + S_kv - S); ``cp``, DeepGEMM's context-parallel pattern. Compressed: the compact
# form (``max_seqlen_k`` = the longest range) with ``clean_logits=False``, as DeepGEMM runs it; otherwise
# the full form, cleaned.
MQA_PREFILL = (
    (2048, 8192, 32, 64, "cp", "fp32", False), (2048, 8192, 64, 128, "causal", "fp32", False),
    (2048, 8192, 64, 128, "cp", "bf16", False), (2048, 65536, 64, 32, "cp", "bf16", True),
    (8192, 8192, 64, 128, "cp", "fp32", False), (8192, 8192, 32, 128, "cp", "fp32", False),
    (2048, 8192, 64, 32, "causal", "fp32", False), (8192, 8192, 32, 128, "causal", "bf16", True),
    (8192, 8192, 32, 64, "cp", "fp32", False), (8192, 65536, 64, 32, "causal", "bf16", True),
    (2048, 8192, 32, 128, "causal", "fp32", True), (2048, 8192, 64, 32, "causal", "bf16", True),
    (8192, 8192, 64, 64, "causal", "fp32", False), (8192, 8192, 64, 128, "causal", "bf16", False),
)

# Paged MQA logits (decode): the paged cases of the anchors field ``mqa`` in its order (DeepGEMM's test: block_kv
# 64, head_dim 128, per-sequence context avg x U(0.7, 1.3), run with ``clean_logits=False``): (batch, next_n,
# heads, avg context, logits dtype). Context lengths come from a fixed seed (:func:`paged_context_lens`).
MQA_PAGED = (
    (256, 1, 64, 8192, "bf16"), (256, 1, 64, 65536, "fp32"), (256, 1, 32, 8192, "bf16"),
    (256, 1, 32, 8192, "fp32"), (256, 2, 32, 65536, "fp32"), (4096, 2, 64, 8192, "bf16"),
    (4096, 1, 32, 8192, "fp32"), (4096, 1, 32, 8192, "bf16"), (256, 2, 64, 65536, "bf16"),
    (4096, 2, 32, 8192, "fp32"), (256, 2, 64, 8192, "fp32"), (4096, 2, 32, 8192, "bf16"),
    (256, 2, 64, 65536, "fp32"), (4096, 1, 64, 8192, "bf16"),
)
# Beyond the anchors, where the remaining room is: small batches and short contexts, same format; DeepGEMM has no
# figure for them in the anchors file.
MQA_PAGED_SHORT = (
    (1, 1, 64, 8192, "fp32"), (8, 2, 64, 8192, "fp32"), (32, 1, 64, 4096, "fp32"), (32, 2, 64, 2048, "bf16"),
    (256, 1, 64, 1024, "fp32"), (256, 2, 64, 2048, "bf16"), (4096, 1, 64, 1024, "bf16"),
)
PAGED_BLOCK_KV = 64
PAGED_HEAD_DIM = 128

# Hyper-connection pre-norm GEMM (DeepGEMM's tests/test_hyperconnection.py): M x (N, K), unsplit and 16 K splits.
HC_PRENORM_M = (13, 137, 4096, 8192)
HC_PRENORM_NK = ((24, 28672), (24, 7680), (24, 7168))
HC_PRENORM_SPLITS = (0, 16)  # 0: num_splits=None

# Kind -> the finegemm function it needs (a suite whose function is missing is listed as unavailable).
OP_OF_KIND = {
    "fp8_gemm": "fp8_gemm_nt",
    "fp8_gemm_wgrad": "fp8_gemm_nt",
    "bf16_gemm": "bf16_gemm_nt",
    "m_grouped_contiguous": "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_masked": "m_grouped_fp8_gemm_nt_masked",
    # the nt form, K-major groups (DeepGEMM's k-grouped anchors time k_grouped_fp8_gemm_nt_contiguous; the tn form on
    # MN-major operands adds two transpose launches, commit 384d2de)
    "k_grouped": "k_grouped_fp8_gemm_nt_contiguous",
    "mqa_logits": "fp8_mqa_logits",
    "paged_mqa_logits": "fp8_paged_mqa_logits",
    "hc_prenorm": "tf32_hc_prenorm_gemm",
}

SUITES = ("dense", "weight-grad", "bf16", "grouped", "k-grouped", "mqa", "paged-mqa", "hc-prenorm")


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _align(x: int, a: int) -> int:
    return _ceil_div(x, a) * a


@dataclass(frozen=True)
class Case:
    """One benchmark problem.

    ``m``/``n``/``k`` mean: dense ``D[m, n] = A[m, k] @ B[n, k]^T``; m-grouped: ``m`` total rows
    (``ms`` per group, before alignment padding), ``n``/``k`` per expert; k-grouped: ``k`` the sum of
    ``ks``; mqa: ``m`` = seq_len, ``n`` = seq_len_kv, ``k`` = head_dim; paged mqa: ``m`` = batch, ``n`` = the
    average context, ``k`` = head_dim, ``ms`` every sequence's context length, ``next_n`` tokens a sequence;
    hc prenorm: ``d[M, N] = a[M, K] @ b[N, K]^T`` (bf16 x fp32, TF32 products) and ``sqr_sum[M]``, ``splits`` K
    splits (0: unsplit).
    """

    suite: str
    kind: str
    m: int
    n: int
    k: int
    groups: int = 1
    ms: tuple[int, ...] = ()
    ks: tuple[int, ...] = ()
    out: str = "bf16"  # output dtype: "bf16" or "fp32"
    accumulate: bool = False  # D = C + A @ B^T (C read)
    heads: int = 0
    ranges: str = ""
    compressed: bool = False  # mqa: the compact [S, max_seqlen_k] logits, unclean
    next_n: int = 0  # paged mqa: new tokens a sequence
    splits: int = 0  # hc prenorm: num_splits (0: None)
    label: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        return self.label or f"{self.m}x{self.n}x{self.k}"

    @property
    def op(self) -> str:
        return OP_OF_KIND[self.kind]

    @property
    def is_fp8(self) -> bool:
        return self.kind not in ("bf16_gemm", "hc_prenorm")

    @property
    def tolerance(self) -> float:
        """calc_diff bound: 1e-3 for FP8 (DESIGN.md §1), 1e-5 for BF16 GEMMs, 1e-8 for the TF32 hc pre-norm GEMM
        against its TF32 reference (DeepGEMM's test bound)."""
        if self.kind == "hc_prenorm":
            return 1e-8
        return 1e-3 if self.is_fp8 else 1e-5

    @property
    def flops(self) -> int:
        if self.kind == "m_grouped_masked":
            return 2 * sum(self.ms) * self.n * self.k
        if self.kind == "mqa_logits":
            return 2 * mqa_pairs(self.m, self.n, self.ranges) * self.heads * self.k
        if self.kind == "paged_mqa_logits":
            return 2 * paged_row_keys(self.ms, self.next_n) * self.heads * self.k
        return 2 * self.m * self.n * self.k

    @property
    def bytes(self) -> int:
        return case_bytes(self)

    def params(self) -> dict:
        """The fields that define the case, for JSON."""
        p = {"suite": self.suite, "kind": self.kind, "name": self.name, "M": self.m, "N": self.n, "K": self.k}
        if self.groups != 1 or self.kind.startswith(("m_grouped", "k_grouped")):
            p["groups"] = self.groups
        if self.ms and self.kind != "paged_mqa_logits":  # (a paged case's 256-4096 context lengths: their sum)
            p["ms"] = list(self.ms)
        if self.ks:
            p["ks"] = list(self.ks)
        p["out"] = self.out
        p["accumulate"] = self.accumulate
        if self.kind == "mqa_logits":
            p.update(heads=self.heads, ranges=self.ranges, compressed=self.compressed)
        if self.kind == "paged_mqa_logits":
            p.update(heads=self.heads, next_n=self.next_n, avg_context=self.n, context_total=sum(self.ms),
                     block_kv=PAGED_BLOCK_KV)
        if self.kind == "hc_prenorm":
            p["num_splits"] = self.splits or None
        return p


def mqa_ranges(seq_len: int, seq_len_kv: int, ranges: str) -> list[tuple[int, int]]:
    """Per-row ``[start, end)`` of the kv positions row i attends to (see MQA_PREFILL).

    ``causal``: ``[0, i + S_kv - S)`` (clamped to ``[0, S_kv]``). ``cp``: DeepGEMM's context-parallel
    benchmark ranges, which reproduce the anchors' work (e.g. 2048 x 8192 at 32 heads, D = 64: 8.39M
    pairs, 561 TFLOPS in 61 us): the rows are two chunks of ``S / 2`` queries of the CP rank
    ``r = (S_kv / S) // 3`` of ``S_kv / S``; the first chunk's row ``i`` ends at ``r * S / 2 + i``, the
    second's at ``(2 * S_kv / S - 1 - r) * S / 2 + i``, all starting at 0."""
    if ranges == "cp":
        chunk, ranks = seq_len // 2, max(1, seq_len_kv // max(seq_len, 1))
        rank = ranks // 3
        ends = [rank * chunk + i if i < chunk else (2 * ranks - 1 - rank) * chunk + i - chunk for i in range(seq_len)]
    elif ranges == "causal":
        ends = [i + seq_len_kv - seq_len for i in range(seq_len)]
    else:
        raise ValueError(f"unknown mqa ranges {ranges!r}")
    return [(0, min(seq_len_kv, max(0, e))) for e in ends]


def mqa_columns(c: Case) -> int:
    """Columns of the logits: ``S_kv``, or ``max_seqlen_k`` (the longest range) in the compact form."""
    return max(e - s for s, e in mqa_ranges(c.m, c.n, c.ranges)) if c.compressed else c.n


def mqa_pairs(seq_len: int, seq_len_kv: int, ranges: str) -> int:
    return sum(e - s for s, e in mqa_ranges(seq_len, seq_len_kv, ranges))


def paged_context_lens(batch: int, avg: int, seed: int) -> tuple[int, ...]:
    """Per-sequence context lengths: ``avg`` x U(0.7, 1.3), at least 1, from a fixed seed."""
    rng = random.Random(seed)
    return tuple(max(1, int(avg * rng.uniform(0.7, 1.3))) for _ in range(batch))


def paged_row_keys(lens: tuple[int, ...], next_n: int) -> int:
    """Keys all logits rows see together (the reference's causal rule, :func:`paged_row_context_lens`)."""
    return int(paged_row_context_lens(torch.tensor(lens), next_n).sum())


def case_bytes(c: Case) -> int:
    """Fewest bytes moved: FP8 operands 1 B/elem, FP32 scales, BF16 2 B, FP32 4 B; C read when accumulating."""
    out_b = 4 if c.out == "fp32" else 2
    kb = _ceil_div(c.k, BLOCK)
    if c.kind == "fp8_gemm":
        return c.m * c.k + c.n * c.k + 4 * (c.m * kb + _ceil_div(c.n, BLOCK) * kb) + out_b * c.m * c.n * (
            2 if c.accumulate else 1)
    if c.kind == "fp8_gemm_wgrad":
        return c.m * c.k + c.n * c.k + 4 * kb * (c.m + c.n) + 2 * 4 * c.m * c.n
    if c.kind == "bf16_gemm":
        return 2 * (c.m * c.k + c.n * c.k) + out_b * c.m * c.n * (2 if c.accumulate else 1)
    b_bytes = c.groups * (c.n * c.k + 4 * _ceil_div(c.n, BLOCK) * kb)
    if c.kind == "m_grouped_contiguous":
        return c.m * c.k + 4 * c.m * kb + b_bytes + out_b * c.m * c.n + 4 * c.m
    if c.kind == "m_grouped_masked":
        rows = sum(c.ms)
        return rows * c.k + 4 * rows * kb + b_bytes + out_b * rows * c.n + 4 * c.groups
    if c.kind == "k_grouped":
        kbs = sum(_ceil_div(k, BLOCK) for k in c.ks)
        return c.k * (c.m + c.n) + 4 * kbs * (c.m + c.n) + 2 * 4 * c.groups * c.m * c.n
    if c.kind == "mqa_logits":
        s, skv, h, d = c.m, c.n, c.heads, c.k
        return s * h * d + skv * d + 4 * skv + 4 * s * h + out_b * s * mqa_columns(c) + 8 * s
    if c.kind == "paged_mqa_logits":  # q, the cache's used pages, weights, block table, lens, logits written
        b, rows, h, d = c.m, c.m * c.next_n, c.heads, c.k
        pages = sum(_ceil_div(n, PAGED_BLOCK_KV) for n in c.ms)
        return (rows * h * d + pages * PAGED_BLOCK_KV * (d + 4) + 4 * rows * h
                + 4 * b * _ceil_div(max(c.ms), PAGED_BLOCK_KV) + 4 * b + out_b * rows * max(c.ms))
    if c.kind == "hc_prenorm":  # bf16 a, fp32 b, fp32 d and sqr_sum for every split
        return 2 * c.m * c.k + 4 * c.n * c.k + 4 * max(1, c.splits) * c.m * (c.n + 1)
    raise ValueError(f"unknown kind {c.kind!r}")


def _k_grouped_ks(groups: int, seed: int, total: int | None = None) -> tuple[int, ...]:
    """Per-group K: ``K_GROUPED_TOTAL / groups`` x U(0.7, 1.3) rounded to 128 (fixed ``seed``); with ``total`` (a
    multiple of 128, at least 128 a group) moved round-robin by 128 a group until they sum to it."""
    rng = random.Random(seed)
    expected = K_GROUPED_TOTAL // groups
    ks = [max(BLOCK, _align(int(expected * rng.uniform(0.7, 1.3)), BLOCK)) for _ in range(groups)]
    if total is not None:
        if total % BLOCK or total < BLOCK * groups:
            raise ValueError(f"total K {total} is not a multiple of {BLOCK} of at least {BLOCK} a group")
        steps, i = (total - sum(ks)) // BLOCK, 0
        while steps:
            step = 1 if steps > 0 else -1
            if ks[i % groups] + step * BLOCK >= BLOCK:
                ks[i % groups] += step * BLOCK
                steps -= step
            i += 1
    return tuple(ks)


def dense_cases(shapes: list[tuple[int, int, int]] | None = None, suite: str = "dense") -> list[Case]:
    shapes = shapes if shapes is not None else [(m, n, k) for m in DEEPSEEK_V3_M for n, k in DEEPSEEK_V3_NK]
    return [Case(suite, "fp8_gemm", m, n, k) for m, n, k in shapes]


def weight_grad_cases(shapes: list[tuple[int, int, int]] | None = None) -> list[Case]:
    shapes = shapes if shapes is not None else list(WEIGHT_GRAD_MNK)
    return [Case("weight-grad", "fp8_gemm_wgrad", m, n, k, out="fp32", accumulate=True) for m, n, k in shapes]


def bf16_cases(shapes: list[tuple[int, int, int]] | None = None) -> list[Case]:
    if shapes is not None:
        return [Case("bf16", "bf16_gemm", m, n, k) for m, n, k in shapes]
    cases = []
    for m in BF16_M:
        for n, k in BF16_NK:
            for acc in (False, True):
                cases.append(Case("bf16", "bf16_gemm", m, n, k, accumulate=acc,
                                  label=f"{m}x{n}x{k}{'+c' if acc else ''}"))
        for n, k in BF16_FP32_NK:
            cases.append(Case("bf16", "bf16_gemm", m, n, k, out="fp32", label=f"{m}x{n}x{k}:f32"))
    return cases


def grouped_cases() -> list[Case]:
    cases = []
    for g, mpg in CONTIGUOUS_GM:
        for n, k in MOE_NK:
            cases.append(_contiguous(g, (mpg,) * g, n, k))
    for g, max_m in MASKED_GM:
        for n, k in MOE_NK:
            cases.append(_masked(g, max_m, (max_m,) * g, n, k))
    for g, max_m in MASKED_HALF_EMPTY_GM:
        for n, k in MOE_NK:
            ms = tuple(max_m if i % 2 == 0 else 0 for i in range(g))
            cases.append(_masked(g, max_m, ms, n, k, " half-empty"))
    return cases


def _contiguous(g: int, ms: tuple[int, ...], n: int, k: int, alignment: int = BLOCK) -> Case:
    total = sum(_align(m, alignment) for m in ms)
    return Case("grouped", "m_grouped_contiguous", total, n, k, groups=g, ms=ms,
                label=f"contig {g}x{ms[0]}x{n}x{k}")


def _masked(g: int, max_m: int, ms: tuple[int, ...], n: int, k: int, note: str = "") -> Case:
    return Case("grouped", "m_grouped_masked", max_m, n, k, groups=g, ms=ms,
                label=f"masked {g}x{max_m}x{n}x{k}{note}")


def k_grouped_cases() -> list[Case]:
    cases = []
    for g in K_GROUPED_G:
        for m, n in K_GROUPED_MN:
            ks = _k_grouped_ks(g, seed=g, total=K_GROUPED_ANCHOR_TOTALS.get((g, m, n)))
            cases.append(Case("k-grouped", "k_grouped", m, n, sum(ks), groups=g, ks=ks, out="fp32", accumulate=True,
                              label=f"kgrp {g}x{m}x{n}xK{sum(ks)}"))
    return cases


def mqa_cases() -> list[Case]:
    return [Case("mqa", "mqa_logits", s, skv, d, heads=h, ranges=r, out=out, compressed=comp,
                 label=f"mqa {s}x{skv} h{h}d{d} {r} {out}{' compact' if comp else ''}")
            for s, skv, h, d, r, out, comp in MQA_PREFILL]


def paged_mqa_cases() -> list[Case]:
    return [Case("paged-mqa", "paged_mqa_logits", b, avg, PAGED_HEAD_DIM, ms=paged_context_lens(b, avg, seed=i),
                 heads=h, next_n=nn, out=out, label=f"paged b{b} n{nn} h{h} ctx{avg} {out}")
            for i, (b, nn, h, avg, out) in enumerate(MQA_PAGED + MQA_PAGED_SHORT)]


def hc_prenorm_cases() -> list[Case]:
    return [Case("hc-prenorm", "hc_prenorm", m, n, k, out="fp32", splits=sp,
                 label=f"hc {m}x{n}x{k}{f' split{sp}' if sp else ''}")
            for m in HC_PRENORM_M for n, k in HC_PRENORM_NK for sp in HC_PRENORM_SPLITS]


def smoke_cases(suite: str) -> list[Case]:
    """Tiny shapes for the CPU interpreter (each runs in well under a second there)."""
    if suite == "dense":
        return dense_cases([(16, 64, 128), (33, 96, 256)])
    if suite == "weight-grad":
        return weight_grad_cases([(32, 64, 256)])
    if suite == "bf16":
        return [Case("bf16", "bf16_gemm", 16, 64, 64), Case("bf16", "bf16_gemm", 16, 64, 64, accumulate=True,
                                                                label="16x64x64+c")]
    if suite == "grouped":
        return [_contiguous(2, (100, 128), 64, 128), _masked(2, 32, (17, 32), 64, 128)]
    if suite == "k-grouped":
        return [Case("k-grouped", "k_grouped", 32, 64, 384, groups=2, ks=(128, 256), out="fp32", accumulate=True,
                     label="kgrp 2x32x64xK384")]
    if suite == "mqa":
        return [Case("mqa", "mqa_logits", 16, 64, 32, heads=16, ranges="causal", out="fp32", label="mqa 16x64 h16d32"),
                Case("mqa", "mqa_logits", 16, 64, 64, heads=32, ranges="cp", out="bf16", compressed=True,
                     label="mqa 16x64 h32d64 cp bf16 compact")]
    if suite == "paged-mqa":
        return [Case("paged-mqa", "paged_mqa_logits", 3, 100, 64, ms=(100, 70, 130), heads=32, next_n=2, out="fp32",
                     label="paged b3 n2 h32 ctx100 fp32")]
    if suite == "hc-prenorm":
        return [Case("hc-prenorm", "hc_prenorm", 13, 24, 320, out="fp32", label="hc 13x24x320"),
                Case("hc-prenorm", "hc_prenorm", 33, 24, 448, out="fp32", splits=4, label="hc 33x24x448 split4")]
    raise ValueError(f"unknown suite {suite!r}")


def suite_cases(suite: str, smoke: bool = False) -> list[Case]:
    if smoke:
        return smoke_cases(suite)
    return {
        "dense": dense_cases, "weight-grad": weight_grad_cases, "bf16": bf16_cases, "grouped": grouped_cases,
        "k-grouped": k_grouped_cases, "mqa": mqa_cases, "paged-mqa": paged_mqa_cases,
        "hc-prenorm": hc_prenorm_cases,
    }[suite]()


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``"M,N,K;M,N,K"`` → list of (M, N, K); raises ValueError naming the bad item."""
    shapes = []
    for item in text.replace(" ", "").split(";"):
        if not item:
            continue
        parts = item.lower().replace("x", ",").split(",")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"--shapes: {item!r} is not M,N,K with three positive integers")
        shapes.append(tuple(int(p) for p in parts))
    if not shapes:
        raise ValueError("--shapes: no shape given")
    return shapes


def missing_op(case: Case, module: object) -> str | None:
    """None when ``module`` (finegemm) has the case's op, else a reason naming it."""
    return None if hasattr(module, case.op) else f"finegemm has no {case.op} yet"
