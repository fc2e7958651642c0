"""sm90 k-grouped path on the CPU: support rule, config, routing, per-group plans, layout fallback, the
tn transpose (interpreter), and sm_90 compile checks of the per-group kernels the planner picks for the
six anchor cases (G = 4, 8, 16; (M, N) = (4096, 7168), (7168, 2048)).

The compile checks are deduplicated by what the kernel is specialized on apart from K (N and the
config): the dense FP8 kernel bakes K in, so one K per (N, config) stands for the others.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types

import pytest
import torch

from finegemm.api import dispatch as api_dispatch
from finegemm.api import grouped as api_grouped
from finegemm.bench.suites import k_grouped_cases
from finegemm.jit.device import H200, DeviceFacts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_bf16_config, get_sm90_config
from finegemm.kernels.sm90 import dispatch_k_grouped as kg
from finegemm.kernels.sm90 import transpose
from finegemm.kernels.sm90.compile_check import (
    BF16_PTX_MUST_CONTAIN,
    assert_fast_path_kernel,
    compile_bf16_variant,
    compile_variant,
)
from finegemm.quant import per_channel_cast_to_fp8
from finegemm.reference import grouped as ref

ANCHOR_MN = ((4096, 7168), (7168, 2048))


def _desc(kind="fp8_1d1d", m=4096, n=7168, k=8192, a_k_major=True, b_k_major=True, sf_packed=False, groups=4,
          with_c=True):
    return GemmDesc(kind, m, n, k, a_k_major, b_k_major, True, with_c, sf_packed, layout="k_grouped",
                    num_groups=groups)


# ---------------------------------------------------------------------------------------------
# Support rule, config, routing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,a_km,b_km", [("fp8_1d1d", True, True), ("fp8_1d1d", False, False),
                                            ("fp8_1d1d", True, False), ("bf16", False, False), ("bf16", True, True)])
def test_supported_anchor_forms(kind, a_km, b_km):
    for m, n in ANCHOR_MN:
        assert kg.unsupported_reason(_desc(kind, m, n, 32768, a_km, b_km), H200) is None


@pytest.mark.parametrize("desc,needle", [
    (_desc(n=7170), "N % 4"),
    (_desc(kind="fp8_1d2d"), "no sm90 k-grouped path"),
    (_desc(sf_packed=True), "UE8M0"),
    (_desc(kind="bf16", m=4100, a_k_major=False), "M % 8"),
    (_desc(kind="bf16", n=4100, b_k_major=False), "N % 8"),
    (GemmDesc("fp8_1d1d", 64, 64, 128, out_fp32=True, with_c=True), "not k-grouped"),
])
def test_unsupported_reasons(desc, needle):
    reason = kg.unsupported_reason(desc, H200)
    assert reason is not None and needle in reason, reason


def test_triton_release_is_no_reason_of_the_kernel_module(monkeypatch):
    # every tested release runs the sm90 path; an untested one is api/dispatch.py's call
    # through kg: a top-level ``import triton`` here would come before finegemm picks the interpreter
    for version in ("3.7.1", "3.99.0"):
        monkeypatch.setattr(kg.launcher.triton, "__version__", version)
        assert kg.unsupported_reason(_desc(), H200) is None


def test_config_marks_the_transposed_fp8_operands():
    # FP8 reads K at run time (one kernel per tile config, K_DYNAMIC_DEFAULT)
    fp8 = dict(k_dynamic=kg.K_DYNAMIC_DEFAULT)
    assert kg.get_config(_desc(), H200) == kg.KGroupedConfig(H200, False, False, **fp8)
    assert kg.get_config(_desc(a_k_major=False, b_k_major=False), H200) == kg.KGroupedConfig(H200, True, True, **fp8)
    assert kg.get_config(_desc(a_k_major=True, b_k_major=False), H200) == kg.KGroupedConfig(H200, False, True, **fp8)
    assert kg.K_DYNAMIC_DEFAULT
    # BF16 reads MN-major operands in place
    assert kg.get_config(_desc("bf16", a_k_major=False, b_k_major=False), H200) == kg.KGroupedConfig(H200)


def test_routing_picks_sm90_on_hopper_and_portable_elsewhere():
    api_dispatch._choose.cache_clear()
    for kind in ("fp8_1d1d", "bf16"):
        desc = _desc(kind, a_k_major=kind != "bf16", b_k_major=kind != "bf16")
        backend, config = api_dispatch._choose(desc, H200, "auto")
        assert backend == "sm90" and isinstance(config, kg.KGroupedConfig)
        ampere = DeviceFacts("A100", 108, 166912, (8, 0))
        assert api_dispatch._choose(desc, ampere, "auto")[0] == "portable"
    assert api_dispatch._choose(_desc(n=7170), H200, "auto")[0] == "portable"
    with pytest.raises(api_dispatch.BackendError, match="N % 4"):
        api_dispatch._choose(_desc(n=7170), H200, "sm90")


# ---------------------------------------------------------------------------------------------
# Per-group plans
# ---------------------------------------------------------------------------------------------
def test_plan_groups_offsets_and_dense_configs():
    ks = [256, 0, 1024, 128, 0]
    desc = _desc(m=4096, n=2048, k=sum(ks), groups=len(ks))
    cfg = kg.get_config(desc, H200)
    sfa = torch.empty(sum(ks) // 128, 4096).T  # MN-major (the nt generator's sf.T)
    sfb = torch.empty(2048, sum(ks) // 128)  # K-major: re-laid out per call
    plan = kg._plan(desc, cfg, ks, sfa, sfb, True)
    assert [(g.g, g.k, g.k0) for g in plan.groups] == [(0, 256, 0), (2, 1024, 256), (3, 128, 1280)]
    assert plan.empty == (1, 4)
    assert plan.sfa_ready and not plan.sfb_ready
    for grp in plan.groups:
        want = GemmDesc("fp8_1d1d", 4096, 2048, grp.k, True, True, True, True)
        dense = kg.fp8_group_config(want, H200)
        # runtime K (the default) wherever the dense config has no split-K (then no C by TMA at 256 rows)
        runtime = dense.split_k == 1
        want_cfg = dataclasses.replace(dense, k_dynamic=runtime)
        want_cfg = dataclasses.replace(want_cfg, c_tma=dense.c_tma and want_cfg.can_stage_c)
        assert grp.desc == want and grp.config == want_cfg
    assert kg._plan(desc, cfg, ks, sfa, sfb, True) is plan  # cached: a repeated call plans nothing
    # the tn form's row-major [sum(ks)/128, MN] scales are MN-major once transposed
    tn = kg._plan(desc, cfg, ks, torch.empty(sum(ks) // 128, 4096), torch.empty(sum(ks) // 128, 2048), False)
    assert tn.sfa_ready and tn.sfb_ready


def test_fp8_group_config_rule():
    """The dense weight-gradient rule per group: 128-row pipelined tiles (since badbb7e at K >= 4096 too), C staged by
    TMA."""
    for k in (2048, 7168):
        cfg = kg.fp8_group_config(GemmDesc("fp8_1d1d", 4096, 7168, k, True, True, True, True), H200)
        assert (cfg.block_m, cfg.block_n, cfg.pipe_mma, cfg.sfa_tma, cfg.sfb_tma, cfg.c_tma) == (128, 128, True, True,
                                                                                                   True, True)
    for m, n, k in ((192, 7168, 4096), (4096, 7168, 1024), (7168, 2048, 2048)):
        desc = GemmDesc("fp8_1d1d", m, n, k, True, True, True, True)
        assert kg.fp8_group_config(desc, H200) == get_sm90_config(desc, H200)


def test_bf16_plan_keeps_operand_majorness():
    ks = [128, 384]
    desc = _desc("bf16", m=256, n=512, k=sum(ks), a_k_major=False, b_k_major=True, groups=2)
    plan = kg._plan(desc, kg.get_config(desc, H200), ks, None, None)
    for grp in plan.groups:
        want = GemmDesc("bf16", 256, 512, grp.k, False, True, True, True, c_like_d=True)  # C: an FP32 [M, N] slice
        assert grp.desc == want and grp.config == get_sm90_bf16_config(want, H200)


def test_scales_path_a_relays_out_and_path_b_is_in_place():
    sf = torch.arange(12.0).view(3, 4)  # [MN=3, SFK=4] K-major: not what the kernel reads
    out = kg._scales(sf, True, kg._mn_major_ready(sf))
    assert out.stride(0) == 1 and out.stride(1) % 4 == 0 and torch.equal(out, sf)
    ready = torch.empty(4, 8).T  # [8, 4] with strides (1, 8)
    assert kg._mn_major_ready(ready) and kg._scales(ready, True, True) is ready


# ---------------------------------------------------------------------------------------------
# Tensor layouts the desc cannot see: the planner falls back to portable
# ---------------------------------------------------------------------------------------------
def _tn_tensors(ks, m, n, dtype=torch.float8_e4m3fn):
    a = torch.zeros(sum(ks), m, dtype=dtype)
    b = torch.zeros(sum(ks), n, dtype=dtype)
    c = torch.zeros(len(ks), m, n)
    d = torch.zeros(len(ks), m, n)
    return a, b, c, d


def test_layout_reason():
    ks = [128, 256]
    a, b, c, d = _tn_tensors(ks, 64, 96)
    desc = _desc(m=64, n=96, k=384, a_k_major=False, b_k_major=False, groups=2)
    assert kg.layout_reason(desc, a, b, c, d, False) is None
    assert "not row-major" in kg.layout_reason(desc, a, b, c.transpose(1, 2).contiguous().transpose(1, 2), d, False)
    # BF16 reads a in place: an M stride of 4 bf16 (8 bytes) is not TMA-aligned
    ab = torch.zeros(384, 68, dtype=torch.bfloat16)[:, :64]
    bd = _desc("bf16", m=64, n=96, k=384, a_k_major=False, b_k_major=False, groups=2)
    assert kg.layout_reason(bd, ab, b.to(torch.bfloat16), c, d, False) is not None
    assert kg.layout_reason(bd, torch.zeros(384, 64, dtype=torch.bfloat16), b.to(torch.bfloat16), c, d, False) is None
    # nt flat buffers: the base must be 16-byte aligned
    flat = torch.zeros(384 * 64 + 8, dtype=torch.float8_e4m3fn)[8:]
    assert "aligned" in kg.layout_reason(desc, flat, b.reshape(-1), c, d, True)


def test_planner_falls_back_to_portable_for_layout_reasons(monkeypatch):
    """_plan_k_grouped asks layout_reason once sm90 is chosen (choose_backend faked to sm90 on the CPU)."""
    ks = [128, 256]
    a, b, c, d = _tn_tensors(ks, 64, 96)
    sfa, sfb = torch.ones(3, 64), torch.ones(3, 96)
    ks_tensor = torch.tensor(ks, dtype=torch.int32)

    def fake_choose(desc, device):
        return "sm90", kg.get_config(desc, H200)

    monkeypatch.setattr(api_grouped, "choose_backend", fake_choose)
    plan = api_grouped._plan_k_grouped("fp8_1d1d", a, sfa, b, sfb, c, d, ks, ks_tensor, False)
    assert plan.backend == "sm90" and plan.config.transpose_a and plan.config.transpose_b
    c_cols = c.transpose(1, 2).contiguous().transpose(1, 2)
    plan = api_grouped._plan_k_grouped("fp8_1d1d", a, sfa, b, sfb, c_cols, d, ks, ks_tensor, False)
    assert plan.backend == "portable"
    monkeypatch.setenv("FINEGEMM_BACKEND", "sm90")
    with pytest.raises(api_dispatch.BackendError, match="not row-major"):
        api_grouped._plan_k_grouped("fp8_1d1d", a, sfa, b, sfb, c_cols, d, ks, ks_tensor, False)


# ---------------------------------------------------------------------------------------------
# The tn transpose (Triton interpreter on the CPU)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows,cols", [(256, 96), (384, 200), (1, 7)])
def test_transpose_into(rows, cols):
    src = torch.randn(rows, cols).to(torch.float8_e4m3fn)
    dst = torch.empty(cols, rows, dtype=torch.float8_e4m3fn)
    transpose.transpose_into(src, dst)
    assert torch.equal(dst.view(torch.uint8), src.T.contiguous().view(torch.uint8))


def test_transpose_into_a_batch():
    """A [G, R, C] batch transposed matrix by matrix in one launch (the grid's third axis), from a strided view."""
    src = torch.randn(3, 200, 160).to(torch.float8_e4m3fn)[:, :130]
    dst = torch.empty(3, 160, 130, dtype=torch.float8_e4m3fn)
    transpose.transpose_into(src, dst)
    assert torch.equal(dst.view(torch.uint8), src.transpose(1, 2).contiguous().view(torch.uint8))


def test_transpose_rejects_bad_shapes():
    with pytest.raises(ValueError):
        transpose.transpose_launch(torch.zeros(4, 8, dtype=torch.uint8), torch.zeros(4, 8, dtype=torch.uint8))
    with pytest.raises(ValueError):
        transpose.transpose_launch(torch.zeros(4, 8), torch.zeros(8, 4))
    with pytest.raises(ValueError, match="batch|2-D or 3-D|src"):
        transpose.transpose_launch(torch.zeros(2, 4, 8, dtype=torch.uint8), torch.zeros(3, 8, 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match="2-D or 3-D"):
        transpose.transpose_launch(torch.zeros(2, 4, 8, dtype=torch.uint8), torch.zeros(8, 4, dtype=torch.uint8))


# ---------------------------------------------------------------------------------------------
# sm_90 compile checks of what the planner picks for the six anchor cases
# ---------------------------------------------------------------------------------------------
def _anchor_variants():
    fp8, bf16 = {}, {}
    for case in k_grouped_cases():
        assert (case.m, case.n) in ANCHOR_MN and case.groups in (4, 8, 16)
        for kind, km in (("fp8_1d1d", True), ("fp8_1d1d", False), ("bf16", False)):
            desc = _desc(kind, case.m, case.n, case.k, km, km, groups=case.groups)
            plan = kg._plan(desc, kg.get_config(desc, H200), list(case.ks),
                            None if kind == "bf16" else torch.empty(case.m, case.k // 128),
                            None if kind == "bf16" else torch.empty(case.n, case.k // 128), km)
            for grp in plan.groups:
                if kind == "bf16":  # M, N and K are runtime arguments: one compile per config and layout
                    bf16.setdefault((grp.config, grp.desc.a_k_major, grp.desc.b_k_major), grp.desc)
                else:  # K is baked in: the smallest K stands for each (N, config)
                    key = (grp.desc.n, grp.config)
                    if key not in fp8 or grp.k < fp8[key].k:
                        fp8[key] = grp.desc
    return [(d, cfg) for (_, cfg), d in fp8.items()], [(d, cfg) for (cfg, _, _), d in bf16.items()]


FP8_VARIANTS, BF16_VARIANTS = _anchor_variants()


@pytest.mark.parametrize("desc,cfg", FP8_VARIANTS,
                         ids=[f"n{d.n}-k{d.k}-{c.block_m}x{c.block_n}st{c.stages}" for d, c in FP8_VARIANTS])
def test_anchor_fp8_group_kernels_compile(desc, cfg):
    assert_fast_path_kernel(compile_variant(desc, cfg, "fp32"), H200.smem_per_block)


@pytest.mark.parametrize("desc,cfg", FP8_VARIANTS,
                         ids=[f"n{d.n}-k{d.k}-{c.block_m}x{c.block_n}st{c.stages}" for d, c in FP8_VARIANTS])
def test_anchor_fp8_group_kernels_without_c_compile(desc, cfg):
    """The training layer's no-C groups (with_c False: the same tiles by the rule, D stored, nothing read)."""
    no_c = dataclasses.replace(desc, with_c=False)
    assert kg.fp8_group_config(no_c, H200).block_m == cfg.block_m
    assert_fast_path_kernel(compile_variant(no_c, cfg, "fp32"), H200.smem_per_block)


@pytest.mark.parametrize("desc,cfg", BF16_VARIANTS,
                         ids=[f"n{d.n}-{c.block_m}x{c.block_n}s{c.split_k}" for d, c in BF16_VARIANTS])
def test_anchor_bf16_group_kernels_compile(desc, cfg):
    assert_fast_path_kernel(compile_bf16_variant(desc, cfg, "fp32"), H200.smem_per_block, BF16_PTX_MUST_CONTAIN)


def test_k_dynamic_groups_share_one_kernel(monkeypatch):
    """With runtime K (``KGroupedConfig.k_dynamic``) every group of a (N, tile config) runs one compiled
    kernel whatever its K: the planner marks the dense configs, and two different K compile identically."""
    monkeypatch.setattr(kg, "K_DYNAMIC_DEFAULT", True)
    ks = [1536, 2688, 6272, 0]
    desc = _desc(m=4096, n=7168, k=sum(ks), groups=len(ks))
    cfg = kg.get_config(desc, H200)
    assert cfg.k_dynamic
    plan = kg._plan(desc, cfg, ks, torch.empty(4096, sum(ks) // 128), torch.empty(7168, sum(ks) // 128), True)
    assert all(g.config.k_dynamic for g in plan.groups)
    tiles = {dataclasses.replace(g.config, k_dynamic=False, c_tma=False) for g in plan.groups}
    # otherwise the usual rule
    assert tiles == {dataclasses.replace(kg.fp8_group_config(g.desc, H200), c_tma=False) for g in plan.groups}
    grp = plan.groups[0]
    other = dataclasses.replace(grp.desc, k=grp.desc.k + 1024)
    one, two = (compile_variant(d, grp.config, "fp32") for d in (grp.desc, other))
    assert_fast_path_kernel(one, H200.smem_per_block)
    assert one.hash == two.hash  # K is not part of the kernel
    fixed = compile_variant(grp.desc, dataclasses.replace(grp.config, k_dynamic=False), "fp32")
    assert fixed.hash != one.hash


TRANSPOSE_COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from finegemm.kernels.sm90 import transpose
sig = {"src_ptr": "*u8", "dst_ptr": "*u8", "R": "i32", "C": "i32", "stride_src": "i32", "stride_dst": "i32",
       "stride_src_g": "i32", "stride_dst_g": "i32", "BLOCK": "constexpr"}
src = ASTSource(transpose._transpose_kernel, sig, {(8,): transpose.BLOCK})
ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
assert "ld.global" in ptx and "st.global" in ptx and "st.shared" in ptx, "no staged transpose"
print("compiled")
"""


def test_transpose_kernel_compiles_for_sm90():
    """In a subprocess with TRITON_INTERPRET=0: this process defined the kernel as interpreted."""
    out = subprocess.run([sys.executable, "-c", TRANSPOSE_COMPILE], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]


# ---------------------------------------------------------------------------------------------
# The FP8 host loop (views, scale slices, transposes, empty groups) with the dense launch faked in torch
# ---------------------------------------------------------------------------------------------
def _k_grouped_inputs(ks, m, n, flat):
    """(a, b, c, d, ks_tensor): tn pairs ``([sum K, MN] e4m3, [sum K/128, MN])``, or the nt flat form."""
    def cast(mn):
        parts = [per_channel_cast_to_fp8(torch.randn(k, mn)) for k in ks if k]
        q, sf = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        if not flat:
            return q, sf
        blocks, k0 = [], 0
        for k in ks:
            blocks.append(q[k0:k0 + k].T.contiguous().reshape(-1))
            k0 += k
        return torch.cat(blocks), sf.T

    a, b = cast(m), cast(n)
    c = torch.randn(len(ks), m, n)
    return a, b, c, torch.full_like(c, float("nan")), torch.tensor(ks, dtype=torch.int32)


class _FakeKernel:
    """Stands for the dense FP8 kernel in launcher.record: ``[grid](*args)`` computes the group in torch."""

    def __init__(self, calls):
        self.calls = calls

    def __getitem__(self, grid):
        def run(desc, a, sfa, b, sfb, d, c):
            assert a.shape == (desc.m, desc.k) and b.shape == (desc.n, desc.k)
            assert a.stride(1) == 1 and b.stride(1) == 1, "the dense kernel reads K-major operands"
            assert sfa.stride(0) == 1 and sfb.stride(0) == 1, "the dense kernel reads MN-major scales"
            lhs = a.float() * sfa.repeat_interleave(128, dim=1)
            rhs = b.float() * sfb.repeat_interleave(128, dim=1)
            d.copy_(lhs.double() @ rhs.double().T + (0 if c is None else c.double()))
            self.calls.append(desc.k)
        return run


@pytest.mark.parametrize("form", ["nt", "nt_k_major_scales", "tn_mn_major", "tn_k_major", "tn_mn_major_no_c"])
def test_fp8_host_loop_against_reference(monkeypatch, form):
    """no_c: the training layer's form without C (api's k_grouped_fp8_gemm_tn_contiguous_no_c): the groups'
    launches get no C and the empty group's d is zeroed."""
    ks = [256, 0, 384, 128]
    m, n = 40, 96
    flat = form.startswith("nt")
    no_c = form.endswith("no_c")
    a, b, c, d, ks_tensor = _k_grouped_inputs(ks, m, n, flat)
    if form == "nt_k_major_scales":
        a, b = (a[0], a[1].contiguous()), (b[0], b[1].contiguous())
    if form == "tn_k_major":
        a, b = (a[0].T.contiguous().T, a[1]), (b[0].T.contiguous().T, b[1])
    if no_c:
        c = torch.zeros_like(c)  # the reference's C; the call gets none
    km = not form.startswith("tn_mn_major")
    desc = _desc(m=m, n=n, k=sum(ks), a_k_major=km, b_k_major=km, groups=len(ks), with_c=not no_c)
    calls = []
    fake = _FakeKernel(calls)
    monkeypatch.setattr(kg, "_fp8_group_launches",
                        lambda grp, *views: [(fake, (1,), (grp.desc, *views[:6]), {})])  # views[6]: the chain link
    # no CUDA here: launch each (kernel, grid, args, kwargs) directly; nothing replayable is recorded
    launched = []

    def record(launches):
        launched.append(len(launches))
        kg.launcher.launch_normally(launches)
        return types.SimpleNamespace(replayable=False)

    monkeypatch.setattr(kg.launcher, "record", record)
    monkeypatch.setattr(kg, "_fp8_recordings", {})
    reference = ref.k_grouped_fp8_gemm_nt_contiguous if flat else ref.k_grouped_fp8_gemm_tn_contiguous
    expected = reference(a, b, ks, c)
    kg.k_grouped_fp8_1d1d_gemm(desc, kg.get_config(desc, H200), a[0], a[1], b[0], b[1], None if no_c else c, d,
                               ks, ks_tensor, flat)
    assert calls == [256, 384, 128]
    assert launched == [3 + 2 * (not km)]  # one recording: the transposes, then the groups
    assert torch.allclose(d.double(), expected, rtol=1e-5, atol=1e-4)
    assert torch.equal(d[1], c[1])
