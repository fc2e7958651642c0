"""The implementations compared, each turning (case, inputs) into a callable or a refusal.

Peers (names as printed and written to JSON):

- ``finegemm-sm90``, ``finegemm-portable``: finegemm with ``FINEGEMM_BACKEND`` forced to that backend
  while the peer runs (a backend that cannot take the problem raises BackendError → refused).
- ``deepgemm``: DeepGEMM's functions of the same names, when ``import deep_gemm`` works.
- ``cublas-block``: cuBLAS blockwise FP8 through ``torch._scaled_mm`` (1x128 LHS scales ``(M, K/128)``
  M-major; 128x128 RHS scales passed as ``Bs.t()``; 1x128 on both sides for the 1D1D recipe). Grouped
  ops: a Python loop of one call per group (what a user without a grouped kernel writes). Shapes
  cuBLAS refuses (e.g. M not a multiple of 4) are reported as refused with torch's message.
- ``cublas-tensor``: cuBLAS FP8 with one scalar scale per operand (no block-scaling work, fast
  accumulation): the practical ceiling. Never accumulates into C.
- ``cublas-bf16``: ``torch.mm`` on the BF16 data the FP8 inputs were quantized from.
- ``cublas-tf32``: the hc pre-norm GEMM in torch: ``a.float() @ b.T`` with TF32 allowed, and the square-sum.
- ``torch-mqa``: MQA logits as a user without a kernel writes them in torch: per chunk of queries, one
  BF16 ``torch.mm`` (FP32 out) of all heads against the keys, ``* kv_sf``, ReLU, a ``bmm`` with the
  weights, the range mask (and, compact, a gather).

Scales are prepared once outside the timed region for every peer (finegemm and DeepGEMM get the LHS
scales already MN-major and TMA-aligned: path B, no per-call transform), so each timed call is the
GEMM alone, plus, for the cuBLAS loops, the loop's own launches and ``add_`` for accumulation.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

import finegemm
from finegemm.reference.mqa import mask_and_compact

from .inputs import Inputs
from .suites import PAGED_BLOCK_KV, Case


class Refused(Exception):
    """The peer cannot run this case (the message says why); not a failure."""


@dataclass
class Prepared:
    """A ready-to-time call of one peer on one case.

    ``fn`` runs the op once (the timed region). ``output`` returns what it wrote (compared with the
    reference ``family`` / ``with_c``). ``reset`` restores in-place outputs and poisons the rest
    before the checked call. ``context`` is entered around every call of this peer (backend switch).
    """

    fn: Callable[[], Any]
    output: Callable[[], torch.Tensor]
    family: str
    with_c: bool = True
    reset: Callable[[], None] = lambda: None
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    note: str = ""
    extra: dict = field(default_factory=dict)


@contextlib.contextmanager
def env_override(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _poison(t: torch.Tensor) -> None:
    t.fill_(float("nan"))


# --- calls through the DeepGEMM-compatible API (finegemm and DeepGEMM alike) ---------------------------


def _api_call(mod: Any, case: Case, inp: Inputs) -> Prepared:
    """Build the call of ``mod.<case.op>`` with DeepGEMM's signatures."""
    fn_op = getattr(mod, case.op, None)
    if fn_op is None:
        raise Refused(f"{getattr(mod, '__name__', mod)} has no {case.op}")
    t, dev = inp.t, inp.device
    kind = case.kind
    if kind in ("fp8_gemm", "fp8_gemm_wgrad"):
        a = (t["a"][0], t["sfa_mn"])
        if kind == "fp8_gemm":
            d = torch.empty(case.m, case.n, dtype=torch.bfloat16, device=dev)
            return Prepared(lambda: fn_op(a, t["b"], d), lambda: d, "block", reset=lambda: _poison(d))
        c0 = t["c"]
        d = c0.clone()
        return Prepared(lambda: fn_op(a, t["b"], d, c=d, recipe=(1, 1, 128)), lambda: d, "block",
                        reset=lambda: d.copy_(c0))
    if kind == "bf16_gemm":
        out_dtype = torch.float32 if case.out == "fp32" else torch.bfloat16
        d = torch.empty(case.m, case.n, dtype=out_dtype, device=dev)
        c = t["c"]
        return Prepared(lambda: fn_op(t["a_bf"], t["b_bf"], d, c=c), lambda: d, "bf16", reset=lambda: _poison(d))
    if kind == "m_grouped_contiguous":
        a = (t["a"][0], t["sfa_mn"])
        d = torch.empty(case.m, case.n, dtype=torch.bfloat16, device=dev)
        return Prepared(lambda: fn_op(a, t["b"], d, t["layout"]), lambda: d, "block", reset=lambda: _poison(d))
    if kind == "m_grouped_masked":
        a = (t["a"][0], t["sfa_mn"])
        d = torch.empty(case.groups, case.m, case.n, dtype=torch.bfloat16, device=dev)
        return Prepared(lambda: fn_op(a, t["b"], d, t["masked_m"], t["expected_m"]), lambda: d, "block",
                        reset=lambda: _poison(d))
    if kind == "k_grouped":
        c0 = t["c"]
        d = c0.clone()
        return Prepared(lambda: fn_op(t["a_nt"], t["b_nt"], d, t["ks"], t["ks_tensor"], c=d), lambda: d, "block",
                        reset=lambda: d.copy_(c0))
    if kind in ("mqa_logits", "paged_mqa_logits") and case.out != "fp32":
        # DeepGEMM's fp8_(paged_)mqa_logits return fp32 only; its fp8_fp4_ forms take (q, None) and logits_dtype
        fn_mqa = getattr(mod, "fp8_fp4_" + case.op.removeprefix("fp8_"), None)
        if fn_mqa is None:
            raise Refused(f"{getattr(mod, '__name__', mod)} has no fp8_fp4_ form of {case.op} (bf16 logits)")

        def fn_op(q, *args, **kwargs):
            return fn_mqa((q, None), *args, **kwargs, logits_dtype=torch.bfloat16)
    if kind == "mqa_logits":
        held: dict[str, torch.Tensor] = {}

        def run() -> None:  # the compact form unclean (DeepGEMM takes it only so), the full form cleaned
            held["out"] = fn_op(t["q"], t["kv"], t["weights"], t["ks"], t["ke"], clean_logits=not case.compressed,
                                max_seqlen_k=t["max_seqlen_k"])

        return Prepared(run, lambda: held["out"], "block", reset=held.clear)
    if kind == "paged_mqa_logits":
        held = {}

        def run_paged() -> None:  # DeepGEMM's default clean_logits=False, as its test runs it
            held["out"] = fn_op(t["q"], t["cache"], t["weights"], t["ctx"], t["table"], t["meta"], t["max_len"])

        return Prepared(run_paged, lambda: held["out"], "block", reset=held.clear)
    if kind == "hc_prenorm":
        lead = (case.splits,) if case.splits else ()
        d = torch.empty(*lead, case.m, case.n, dtype=torch.float32, device=dev)
        sq = torch.empty(*lead, case.m, dtype=torch.float32, device=dev)
        return Prepared(lambda: fn_op(t["a_bf"], t["b_f32"], d, sq, num_splits=case.splits or None),
                        lambda: _hc_output(d, sq, case.splits), "tf32", reset=lambda: (_poison(d), _poison(sq)))
    raise Refused(f"no call for kind {kind}")


def _hc_output(d: torch.Tensor, sqr_sum: torch.Tensor, splits: int) -> torch.Tensor:
    """``[d | sqr_sum]`` (``[M, N + 1]``) of the hc pre-norm GEMM, its K splits summed."""
    if splits:
        d, sqr_sum = d.sum(0), sqr_sum.sum(0)
    return torch.cat([d, sqr_sum[:, None]], dim=1)


class Peer:
    """One implementation. ``available`` is checked once per run; ``prepare`` once per case."""

    name = "peer"
    needs_cuda = True
    is_ours = False
    kinds: tuple[str, ...] = ()

    def available(self, device: torch.device) -> str | None:
        if self.needs_cuda and device.type != "cuda":
            return "needs a CUDA GPU"
        return None

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        raise NotImplementedError


class FinegemmPeer(Peer):
    is_ours = True
    needs_cuda = False
    kinds = ("fp8_gemm", "fp8_gemm_wgrad", "bf16_gemm", "m_grouped_contiguous", "m_grouped_masked", "k_grouped",
             "mqa_logits", "paged_mqa_logits", "hc_prenorm")

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.name = f"finegemm-{backend}"

    def available(self, device: torch.device) -> str | None:
        if self.backend == "sm90":
            if device.type != "cuda":
                return "the sm90 backend needs a Hopper GPU"
            cap = torch.cuda.get_device_capability(device)
            if cap != (9, 0):
                return f"the sm90 backend needs compute capability 9.0, this GPU has {cap[0]}.{cap[1]}"
            from ..api import dispatch
            if dispatch._sm90_module() is None:
                return "finegemm.kernels.sm90 is not available (not written yet, or this Triton lacks Gluon)"
        return None

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        p = _api_call(finegemm, case, inp)
        p.context = lambda: env_override("FINEGEMM_BACKEND", self.backend)
        return p


class DeepGemmPeer(Peer):
    name = "deepgemm"
    kinds = FinegemmPeer.kinds

    def __init__(self) -> None:
        self._mod: Any = None
        self._why = ""

    def available(self, device: torch.device) -> str | None:
        reason = super().available(device)
        if reason:
            return reason
        try:
            self._mod = importlib.import_module("deep_gemm")
        except Exception as e:  # any import failure (missing, or built for another torch) means "not here"
            return f"import deep_gemm failed: {type(e).__name__}: {e}".splitlines()[0][:160]
        return None

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        if case.kind in ("fp8_gemm", "fp8_gemm_wgrad", "m_grouped_contiguous", "m_grouped_masked"):
            # DeepGEMM's own MN-major TMA-aligned layout (the same contract as finegemm's).
            helper = getattr(self._mod, "get_mn_major_tma_aligned_tensor", None)
            if helper is not None:
                inp = Inputs(inp.case, inp.device, {**inp.t, "sfa_mn": helper(inp.t["a"][1])}, inp.builders, inp.valid)
        if case.kind == "paged_mqa_logits":  # its own schedule for its own kernel
            sms = torch.cuda.get_device_properties(inp.device).multi_processor_count
            meta = self._mod.get_paged_mqa_logits_metadata(inp.t["ctx"], PAGED_BLOCK_KV, sms)
            inp = Inputs(inp.case, inp.device, {**inp.t, "meta": meta}, inp.builders, inp.valid)
        return _api_call(self._mod, case, inp)


# --- cuBLAS through torch --------------------------------------------------------------------------------


def _sfa_m_major(sf: torch.Tensor) -> torch.Tensor:
    """``(M, K/128)`` fp32 with stride ``(1, M)``, what cuBLAS's 1x128 mode reads."""
    return sf.t().contiguous().t()


def _sfb_variants(sfb: torch.Tensor) -> list[torch.Tensor]:
    """``Bs.t()`` for 128x128 scales ``Bs (N/128, K/128)``; a second variant whose row stride is padded
    to a multiple of 4 (some torch versions ask for it)."""
    nb, kb = sfb.shape
    plain = sfb.contiguous().t()
    if kb % 4 == 0:
        return [plain]
    buf = torch.zeros(nb, -(-kb // 4) * 4, dtype=sfb.dtype, device=sfb.device)
    buf[:, :kb] = sfb
    return [plain, buf[:, :kb].t()]


def _first_working(calls: list[Callable[[], torch.Tensor]]) -> Callable[[], torch.Tensor]:
    """The first call that torch accepts (tried once, synchronously); Refused with the first error."""
    first: Exception | None = None
    for call in calls:
        try:
            call()
            return call
        except (RuntimeError, ValueError, TypeError) as e:
            first = first or e
    msg = str(first).strip().splitlines()[0] if first else "no variant"
    raise Refused(f"torch._scaled_mm refused: {msg[:200]}")


def _block_mm(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor, out_dtype: torch.dtype,
              rhs_1x128: bool, out: torch.Tensor | None = None) -> Callable[[], torch.Tensor]:
    """A checked cuBLAS blockwise call ``a [M, K] @ b[N, K]^T``; ``out`` (contiguous) receives it when given."""
    scale_a = _sfa_m_major(sfa)
    variants = [sfb.t().contiguous()] if rhs_1x128 else _sfb_variants(sfb)
    b_t = b.t()

    calls: list[Callable[[], torch.Tensor]] = []
    for sb in variants:
        if out is None:
            calls.append(lambda sb=sb: torch._scaled_mm(a, b_t, scale_a, sb, out_dtype=out_dtype))
        else:
            calls.append(lambda sb=sb: torch._scaled_mm(a, b_t, scale_a, sb, out_dtype=out_dtype, out=out))
            # Without out= support: the same call plus a copy into the caller's tensor.
            calls.append(lambda sb=sb: out.copy_(torch._scaled_mm(a, b_t, scale_a, sb, out_dtype=out_dtype)))
    return _first_working(calls)


def _tensor_mm(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, out_dtype: torch.dtype,
               out: torch.Tensor | None = None) -> Callable[[], torch.Tensor]:
    b_t = b.t()
    plain = lambda: torch._scaled_mm(a, b_t, sa, sb, out_dtype=out_dtype, use_fast_accum=True)
    if out is None:
        return _first_working([plain])
    return _first_working([lambda: torch._scaled_mm(a, b_t, sa, sb, out_dtype=out_dtype, use_fast_accum=True, out=out),
                           lambda: out.copy_(plain())])


def _run_all(calls: list[Callable[[], Any]]) -> Callable[[], None]:
    def run() -> None:
        for call in calls:
            call()
    return run


class CublasBlockPeer(Peer):
    name = "cublas-block"
    kinds = ("fp8_gemm", "fp8_gemm_wgrad", "m_grouped_contiguous", "m_grouped_masked", "k_grouped")

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        t, dev = inp.t, inp.device
        if case.kind == "fp8_gemm":
            (a, sfa), (b, sfb) = t["a"], t["b"]
            d = torch.empty(case.m, case.n, dtype=torch.bfloat16, device=dev)
            return Prepared(_block_mm(a, sfa, b, sfb, torch.bfloat16, False, out=d), lambda: d, "block",
                            reset=lambda: _poison(d))
        if case.kind == "fp8_gemm_wgrad":
            (a, sfa), (b, sfb) = t["a"], t["b"]
            c0 = t["c"]
            d = c0.clone()
            mm = _block_mm(a, sfa, b, sfb, torch.float32, True)
            return Prepared(lambda: d.add_(mm()), lambda: d, "block", reset=lambda: d.copy_(c0),
                            note="fp32 out, then d.add_ (cuBLAS has no in-place FP32 accumulate here)")
        if case.kind == "m_grouped_contiguous":
            (a, sfa), (b, sfb) = t["a"], t["b"]
            d = torch.empty(case.m, case.n, dtype=torch.bfloat16, device=dev)
            calls = [_block_mm(a[s:s + r], sfa[s:s + r].contiguous(), b[e], sfb[e], torch.bfloat16, False,
                               out=d[s:s + r]) for e, s, r in t["segments"]]
            return Prepared(_run_all(calls), lambda: d, "block", reset=lambda: _poison(d),
                            note="loop of one call per group")
        if case.kind == "m_grouped_masked":
            (a, sfa), (b, sfb) = t["a"], t["b"]
            d = torch.empty(case.groups, case.m, case.n, dtype=torch.bfloat16, device=dev)
            calls = [_block_mm(a[e, :r], sfa[e, :r].contiguous(), b[e], sfb[e], torch.bfloat16, False,
                               out=d[e, :r]) for e, r in enumerate(case.ms) if r > 0]
            return Prepared(_run_all(calls), lambda: d, "block", reset=lambda: _poison(d),
                            note="loop over groups with host-known masked_m (a real masked caller has none)")
        if case.kind == "k_grouped":
            c0 = t["c"]
            d = c0.clone()
            calls = []
            for e in range(case.groups):
                (xa, sa), (xb, sb) = t["a_parts"][e], t["b_parts"][e]
                # cuBLAS FP8 wants K-major operands: transposed copies made here, outside the timed region.
                mm = _block_mm(xa.t().contiguous(), sa.t().contiguous(), xb.t().contiguous(), sb.t().contiguous(),
                               torch.float32, True)
                calls.append(lambda e=e, mm=mm: d[e].add_(mm()))
            return Prepared(_run_all(calls), lambda: d, "block", reset=lambda: d.copy_(c0),
                            note="loop per group on K-major copies, fp32 out + add_")
        raise Refused(f"no cuBLAS blockwise call for {case.kind}")


class CublasTensorPeer(Peer):
    name = "cublas-tensor"
    kinds = ("fp8_gemm", "fp8_gemm_wgrad", "m_grouped_contiguous", "m_grouped_masked", "k_grouped")

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        t, dev = inp.t, inp.device
        (a, sa), (b, sb) = t["a_t"], t["b_t"]
        if case.kind in ("fp8_gemm", "fp8_gemm_wgrad"):
            out_dtype = torch.float32 if case.kind == "fp8_gemm_wgrad" else torch.bfloat16
            d = torch.empty(case.m, case.n, dtype=out_dtype, device=dev)
            return Prepared(_tensor_mm(a, sa, b, sb, out_dtype, out=d), lambda: d, "tensor", with_c=False,
                            reset=lambda: _poison(d))
        if case.kind == "m_grouped_contiguous":
            d = torch.empty(case.m, case.n, dtype=torch.bfloat16, device=dev)
            calls = [_tensor_mm(a[s:s + r], sa, b[e], sb, torch.bfloat16, out=d[s:s + r])
                     for e, s, r in t["segments"]]
            return Prepared(_run_all(calls), lambda: d, "tensor", reset=lambda: _poison(d),
                            note="loop of one call per group")
        if case.kind == "m_grouped_masked":
            d = torch.empty(case.groups, case.m, case.n, dtype=torch.bfloat16, device=dev)
            calls = [_tensor_mm(a[e, :r], sa, b[e], sb, torch.bfloat16, out=d[e, :r])
                     for e, r in enumerate(case.ms) if r > 0]
            return Prepared(_run_all(calls), lambda: d, "tensor", reset=lambda: _poison(d),
                            note="loop over groups with host-known masked_m")
        if case.kind == "k_grouped":
            d = torch.empty(case.groups, case.m, case.n, dtype=torch.float32, device=dev)
            calls = []
            for e, (s, kg) in enumerate(t["bounds"]):
                calls.append(_tensor_mm(a[s:s + kg].t().contiguous(), sa, b[s:s + kg].t().contiguous(), sb,
                                        torch.float32, out=d[e]))
            return Prepared(_run_all(calls), lambda: d, "tensor", with_c=False, reset=lambda: _poison(d),
                            note="loop per group on K-major copies, no accumulation")
        raise Refused(f"no cuBLAS per-tensor call for {case.kind}")


class CublasBf16Peer(Peer):
    name = "cublas-bf16"
    kinds = ("fp8_gemm", "bf16_gemm")

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        t, dev = inp.t, inp.device
        a, b = t["a_bf"], t["b_bf"]
        out_dtype = torch.float32 if case.out == "fp32" else torch.bfloat16
        d = torch.empty(case.m, case.n, dtype=out_dtype, device=dev)
        c = t.get("c") if case.kind == "bf16_gemm" else None
        if out_dtype == torch.float32:
            if c is not None:
                raise Refused("bf16 GEMM with FP32 C has no single cuBLAS call here")
            call = lambda: torch.mm(a, b.t(), out_dtype=torch.float32, out=d)
        elif c is not None:
            call = lambda: torch.addmm(c, a, b.t(), out=d)
        else:
            call = lambda: torch.mm(a, b.t(), out=d)
        try:
            call()
        except (RuntimeError, TypeError) as e:
            raise Refused(f"torch refused: {str(e).splitlines()[0][:200]}") from None
        return Prepared(call, lambda: d, "bf16", with_c=c is not None, reset=lambda: _poison(d))


# float32 scores held at once by the torch MQA peer (elements): 2 GiB
TORCH_MQA_SCORES = 1 << 29


def torch_mqa_logits(q: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                     ks: torch.Tensor, ke: torch.Tensor, max_seqlen_k: int, out: torch.Tensor) -> torch.Tensor:
    """The straightforward torch form of ``fp8_mqa_logits`` into ``out`` (``[S, S_kv]``, or ``[S,
    max_seqlen_k]`` compact with column ``c`` = key ``start + c``): BF16 copies of the FP8 values (exact)."""
    kv_fp8, kv_sf = kv
    s, h, d = q.shape
    skv = kv_fp8.shape[0]
    # BF16 on the tensor cores, FP32 out (the CPU has no such mm: FP32 there)
    mm_dtype, mm_out = (torch.bfloat16, {"out_dtype": torch.float32}) if q.is_cuda else (torch.float32, {})
    kv_bf = kv_fp8.to(mm_dtype)
    rows = max(1, TORCH_MQA_SCORES // (h * skv))
    for r0 in range(0, s, rows):
        r1 = min(s, r0 + rows)
        scores = torch.mm(q[r0:r1].reshape(-1, d).to(mm_dtype), kv_bf.t(), **mm_out)
        scores = torch.relu(scores.view(r1 - r0, h, skv) * kv_sf)
        logits = torch.bmm(weights[r0:r1, None, :], scores)[:, 0]  # [r, S_kv]
        out[r0:r1] = mask_and_compact(logits, ks[r0:r1], ke[r0:r1], max_seqlen_k).to(out.dtype)
    return out


class TorchMqaPeer(Peer):
    name = "torch-mqa"
    needs_cuda = False
    kinds = ("mqa_logits",)

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        t = inp.t
        width = t["max_seqlen_k"] or case.n
        out = torch.empty(case.m, width, dtype=torch.float32 if case.out == "fp32" else torch.bfloat16,
                          device=inp.device)
        call = lambda: torch_mqa_logits(t["q"], t["kv"], t["weights"], t["ks"], t["ke"], t["max_seqlen_k"], out)
        return Prepared(call, lambda: out, "block", reset=lambda: _poison(out))


class CublasTf32Peer(Peer):
    """The hc pre-norm GEMM as DeepGEMM's test writes it in torch: ``a.float() @ b.T`` with TF32 allowed (cuBLAS)
    and ``a.float().square().sum(-1)``, unsplit."""

    name = "cublas-tf32"
    kinds = ("hc_prenorm",)

    def prepare(self, case: Case, inp: Inputs) -> Prepared:
        a, b = inp.t["a_bf"], inp.t["b_f32"]
        d = torch.empty(case.m, case.n, dtype=torch.float32, device=inp.device)
        sq = torch.empty(case.m, dtype=torch.float32, device=inp.device)

        def call() -> None:
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                a32 = a.float()
                torch.mm(a32, b.t(), out=d)
                torch.sum(a32.square(), -1, out=sq)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old

        return Prepared(call, lambda: _hc_output(d, sq, 0), "tf32", reset=lambda: (_poison(d), _poison(sq)),
                        note="torch.mm with TF32 allowed and a square-sum, unsplit")


PEER_NAMES = ("finegemm-sm90", "finegemm-portable", "deepgemm", "cublas-block", "cublas-tensor", "cublas-bf16",
              "cublas-tf32", "torch-mqa")


def make_peers(selected: list[str] | None = None) -> list[Peer]:
    """Peers in report order; ``selected`` keeps those whose name starts with any given prefix."""
    peers: list[Peer] = [FinegemmPeer("sm90"), FinegemmPeer("portable"), DeepGemmPeer(), CublasBlockPeer(),
                         CublasTensorPeer(), CublasBf16Peer(), CublasTf32Peer(), TorchMqaPeer()]
    if selected:
        unknown = [s for s in selected if not any(p.name.startswith(s) for p in peers)]
        if unknown:
            raise ValueError(f"--peers: unknown {unknown}; known: {', '.join(PEER_NAMES)}")
        peers = [p for p in peers if any(p.name.startswith(s) for s in selected)]
    return peers
