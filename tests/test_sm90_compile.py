"""Every config the sm90 heuristic picks compiles for sm_90 on the CPU, with the instructions it needs.

The configs for the 18 DeepSeek-V3 shapes and the awkward sizes are deduplicated by their compile
key (many shapes share a specialization only through N and K), so the sweep stays fast.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_config, make_config
from finegemm.kernels.sm90 import gemm_1d2d, layouts
from finegemm.kernels.sm90.compile_check import (
    ARRIVE_PTX,
    CP_ASYNC_ARRIVE_PTX,
    EXPECT_TX_PTX,
    PTX_MUST_CONTAIN,
    TMA_STORE_PTX,
    assert_fast_path_kernel,
    c_tma_effective,
    compile_variant,
    expect_tx_ptx,
    lowered_arg_names,
    math_partitions,
    resource_usage,
)

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]


def _variants():
    seen = {}

    def add(desc, cfg, c_dtype="bf16"):
        # the kernel is specialized on N and K; M only reaches it through the config
        key = (desc.kind, desc.n, desc.k, desc.out_fp32, desc.with_c, desc.sf_packed, cfg, c_dtype)
        seen.setdefault(key, (desc, cfg, c_dtype))

    for m in (64, 128, 4096):
        for n, k in NK:
            d = GemmDesc("fp8_1d2d", m, n, k)
            add(d, get_sm90_config(d, H200))
    for m in (1, 77, 333, 4095):
        for n in (2112, 576):
            for k in (128, 7168):
                d = GemmDesc("fp8_1d2d", m, n, k)
                add(d, get_sm90_config(d, H200))
    # both recipes, both scale formats, C, split-K and both MMA schedules at least once
    d = GemmDesc("fp8_1d1d", 333, 2112, 7168, out_fp32=True, with_c=True)
    add(d, get_sm90_config(d, H200), "fp32")
    d = GemmDesc("fp8_1d1d", 77, 576, 7168, out_fp32=True, with_c=True, sf_packed=True)
    add(d, get_sm90_config(d, H200), "fp32")
    d = GemmDesc("fp8_1d2d", 4096, 2112, 7168, sf_packed=True)
    add(d, get_sm90_config(d, H200))
    d = GemmDesc("fp8_1d2d", 333, 2112, 7168, out_fp32=True, with_c=True)
    add(d, get_sm90_config(d, H200), "fp32")
    d = GemmDesc("fp8_1d2d", 64, 2112, 7168)
    add(d, make_config(d, H200, 64, 64, 8))
    # a792a80: FP32-out 1d2d at large M (256 rows, shared D staging), packed scales too
    for d in (GemmDesc("fp8_1d2d", 4096, 4096, 7168, out_fp32=True, with_c=True),
              GemmDesc("fp8_1d2d", 4095, 576, 7168, out_fp32=True, with_c=True, sf_packed=True)):
        add(d, get_sm90_config(d, H200), "fp32")
    # e7bde22: 256-row tiles in every form the GPU tests force, TMA scales at 64/128 rows (split-K, packed)
    d = GemmDesc("fp8_1d2d", 4096, 7168, 2048)
    for small_epi, sfa_tma in ((False, False), (True, False), (False, True)):
        add(d, make_config(d, H200, 256, 128, 1, small_epi, sfa_tma))
    d = GemmDesc("fp8_1d2d", 4096, 7168, 2048, out_fp32=True, with_c=True)
    add(d, make_config(d, H200, 256, 128, 1, small_epi=True), "fp32")
    d = GemmDesc("fp8_1d2d", 77, 2112, 7168, sf_packed=True)
    add(d, make_config(d, H200, 256, 128))
    add(d, make_config(d, H200, 128, 128, sfa_tma=True))
    add(d, make_config(d, H200, 64, 64, 4, sfa_tma=True))
    # 9cff964: recipe (1, 1, 128) with the per-channel RHS scales in the ring, 128 and 256 rows, packed too
    d = GemmDesc("fp8_1d1d", 4096, 4096, 7168, out_fp32=True, with_c=True)
    add(d, make_config(d, H200, 128, 128, sfb_tma=True), "fp32")
    add(d, dataclasses.replace(make_config(d, H200, 128, 128, sfa_tma=True, sfb_tma=True), pipe_mma=True), "fp32")
    add(d, make_config(d, H200, 256, 128, small_epi=True, sfa_tma=True, sfb_tma=True), "fp32")
    add(d, dataclasses.replace(make_config(d, H200, 128, 64, sfa_tma=True, sfb_tma=True), pipe_mma=True), "fp32")
    d = GemmDesc("fp8_1d1d", 4095, 2112, 7168, out_fp32=True, with_c=True, sf_packed=True)
    add(d, make_config(d, H200, 256, 128, small_epi=True, sfb_tma=True), "fp32")
    add(d, make_config(d, H200, 64, 128, 4, sfa_tma=True, sfb_tma=True), "fp32")
    # e3c1034 candidate: BLOCK_N 16 (132 tiles of 64x16 cover 64x2112 in one round, no split-K)
    d = GemmDesc("fp8_1d2d", 64, 2112, 7168)
    add(d, make_config(d, H200, 64, 16, sfa_tma=True))
    return list(seen.values())


def _c_tma_variants():
    """FP32 C staged by TMA in the D buffer (``c_tma``): one wave, two waves, two waves sharing one buffer."""
    d = GemmDesc("fp8_1d1d", 4096, 4096, 7168, out_fp32=True, with_c=True)
    pipe = dataclasses.replace(make_config(d, H200, 128, 128, sfa_tma=True, sfb_tma=True), pipe_mma=True)
    out = [(d, pipe), (d, make_config(d, H200, 256, 128, small_epi=True, sfa_tma=True, sfb_tma=True)),
           (d, make_config(d, H200, 64, 128, sfa_tma=True))]
    packed = GemmDesc("fp8_1d1d", 4095, 2112, 2048, out_fp32=True, with_c=True, sf_packed=True)
    out.append((packed, make_config(packed, H200, 256, 128, small_epi=True, sfb_tma=True)))
    out = [(desc, dataclasses.replace(cfg, c_tma=True, c_tma_late=False)) for desc, cfg in out]
    # the C load started after the first K-block pair (c_tma_late), pipelined one-wave tiles
    return out + [(d, dataclasses.replace(pipe, c_tma=True, c_tma_late=True))]


C_TMA_VARIANTS = _c_tma_variants()


@pytest.mark.parametrize("desc,cfg", C_TMA_VARIANTS,
                         ids=[f"{c.block_m}x{c.block_n}{'-se' if c.small_epi else ''}{'-packed' if d.sf_packed else ''}"
                              f"{'-late' if c.c_tma_late else ''}" for d, c in C_TMA_VARIANTS])
def test_c_by_tma_compiles(desc, cfg):
    """Each math warpgroup loads its first wave's C rows by TMA and no longer by ld.global."""
    ptx = assert_fast_path_kernel(compile_variant(desc, cfg, "fp32"), H200.smem_per_block)
    plain = compile_variant(desc, dataclasses.replace(cfg, c_tma=False), "fp32").asm["ptx"]
    loads = [len(re.findall(PTX_MUST_CONTAIN["TMA load"], p)) for p in (ptx, plain)]
    assert loads[0] - loads[1] == gemm_1d2d.num_math_warpgroups(cfg.block_m), loads
    c_loads = [len(re.findall(r"\bld\.global\.", p)) for p in (ptx, plain)]
    assert c_loads[0] < c_loads[1], c_loads
    # In each math partition the C load (a wait for the D buffer to be read, R, then its expect-tx, E) comes
    # before the WGMMAs (W), or with c_tma_late right after the first K-block pair's; the epilogue's own store
    # waits come in runs (WRR..). Per partition: the releases place the partitions' blocks differently.
    parts = math_partitions(ptx)
    assert len(parts) == gemm_1d2d.num_math_warpgroups(cfg.block_m), len(parts)
    for part in parts:
        marks = "".join("W" if "wgmma.mma_async" in line else "R" if "wait_group.read" in line else
                        "E" if re.search(EXPECT_TX_PTX, line) else "" for line in part.splitlines())
        assert "RE" in marks and ("WRE" in marks) == cfg.c_tma_late, marks


VARIANTS = _variants()


@pytest.mark.parametrize("desc,cfg,c_dtype", VARIANTS,
                         ids=[f"{d.kind}-n{d.n}-k{d.k}-{c.block_m}x{c.block_n}s{c.split_k}p{int(c.pipe_mma)}"
                              f"st{c.stages}g{c.group_m}{'-tma' if c.sfa_tma else ''}{'-sfb' if c.sfb_tma else ''}"
                              f"{'-se' if c.small_epi else ''}"
                              f"{'-packed' if d.sf_packed else ''}{'-c' if d.with_c else ''}" for d, c, _ in VARIANTS])
def test_compiles_with_required_instructions(desc, cfg, c_dtype):
    ptx = assert_fast_path_kernel(compile_variant(desc, cfg, c_dtype), H200.smem_per_block)
    # the 1d1d ring's scales (sfb_tma: per-channel, and per-token with sfa_tma) are copied by the producer's cp.async,
    # each lane's arrive on the slot's full barrier made when they land
    if cfg.sfb_tma:
        assert "cp.async.ca.shared.global" in ptx and re.search(CP_ASYNC_ARRIVE_PTX, ptx)
    elif cfg.sfa_tma:  # per-token scales in the ring by TMA: a third load
        plain = compile_variant(desc, dataclasses.replace(cfg, sfa_tma=False, sfb_tma=False), c_dtype).asm["ptx"]
        # ring loads only: C staged by TMA adds one load per math warpgroup to both
        c_loads = gemm_1d2d.num_math_warpgroups(cfg.block_m) * c_tma_effective(desc, cfg, c_dtype)
        loads = [len(re.findall(PTX_MUST_CONTAIN["TMA load"], p)) - c_loads for p in (ptx, plain)]
        boxes = cfg.block_m // layouts.a_box_rows(cfg.block_m)  # A boxes a stage (BLOCK_M 192: three of 64 rows)
        assert (boxes + 1) * loads[0] == (boxes + 1 + boxes) * loads[1], loads
    if cfg.block_m == 256:  # two m64 waves a warpgroup: 2 x 4 k32 WGMMAs per K block in each partition
        assert len(re.findall(PTX_MUST_CONTAIN["wgmma e4m3"], ptx)) == 16
    if cfg.block_m == 192:  # three math partitions, one wave each: 3 x 4 k32 WGMMAs per K block
        assert len(re.findall(PTX_MUST_CONTAIN["wgmma e4m3"], ptx)) == 12
        assert len(re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+152;", ptx)) == 2  # the two worker warpgroups


def test_compiles_after_an_interpreted_kernel_ran():
    """Triton 3.6's interpreter leaves ``triton.language`` patched after nested ``@jit`` calls; a real
    compile in the same process must still work (it failed on CI before ``restore_language``)."""
    import torch

    import finegemm
    from finegemm.jit.interpret import interpreting

    if interpreting():
        a = finegemm.per_token_cast_to_fp8(torch.randn(5, 256))
        b = finegemm.per_block_cast_to_fp8(torch.randn(64, 256))
        d = torch.empty(5, 64, dtype=torch.bfloat16)
        finegemm.fp8_gemm_nt(a, b, d)  # interpreted, on the CPU
    desc = GemmDesc("fp8_1d2d", 64, 2112, 128)
    kernel = compile_variant(desc, get_sm90_config(desc, H200), "bf16")
    assert "wgmma.mma_async" in kernel.asm["ptx"]


SPLIT_VARIANTS = [  # (desc, config): split-K summed in the kernel, alone and for the last tile round only
    (GemmDesc("fp8_1d2d", 64, 2112, 7168), dataclasses.replace(
        make_config(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200, 64, 128, 4, sfa_tma=True), splitk_fused=True)),
    (GemmDesc("fp8_1d2d", 4096, 2112, 7168), dataclasses.replace(
        make_config(GemmDesc("fp8_1d2d", 4096, 2112, 7168), H200, 128, 128, 8, sfa_tma=True), pipe_mma=False,
        splitk_fused=True, split_tail=True)),
    (GemmDesc("fp8_1d1d", 576, 4096, 7168, out_fp32=True, with_c=True),
     get_sm90_config(GemmDesc("fp8_1d1d", 576, 4096, 7168, out_fp32=True, with_c=True), H200)),
]


@pytest.mark.parametrize("desc,cfg", SPLIT_VARIANTS, ids=["fused", "tail-1d2d", "tail-wgrad-pick"])
def test_split_k_in_kernel_compiles(desc, cfg):
    """The in-kernel split-K reduction: partials stored, one GPU-scope acq_rel arrival count per warpgroup, the
    last split's reads from L2 (.cg), no reduction launch; no spills, WGMMAs still asynchronous."""
    assert cfg.splitk_fused and cfg.split_k > 1
    kernel = compile_variant(desc, cfg, "fp32")
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block)
    assert len(re.findall(r"atom\.global\.gpu\.acq_rel\.add", ptx)) == gemm_1d2d.num_math_warpgroups(cfg.block_m)
    assert re.search(r"ld\.global\.cg", ptx)
    if cfg.split_tail and cfg.c_tma:  # whole tiles still stage C by TMA: one more TMA load per math warpgroup
        plain = compile_variant(desc, dataclasses.replace(cfg, c_tma=False), "fp32").asm["ptx"]
        loads = [len(re.findall(PTX_MUST_CONTAIN["TMA load"], p)) for p in (ptx, plain)]
        assert loads[0] - loads[1] == gemm_1d2d.num_math_warpgroups(cfg.block_m), loads


@pytest.mark.parametrize("split,pdl", [(4, True), (1, True), (4, False)],
                         ids=["split-pdl", "whole-pdl", "split-no-pdl"])
def test_programmatic_dependent_launch(split, pdl):
    """With PDL (the default) the GEMM waits for the previous kernels (``griddepcontrol.wait``) before its first
    global access, and a split-K GEMM lets its reduction launch early (``griddepcontrol.launch_dependents``);
    the reduction waits for the GEMM in turn. Without PDL neither instruction is emitted in the GEMM."""
    desc = GemmDesc("fp8_1d2d", 64, 2112, 7168)
    cfg = make_config(desc, H200, 64, 128, split, sfa_tma=True)
    kernel = compile_variant(desc, cfg, "bf16", pdl=pdl)
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block)
    assert ("griddepcontrol.wait" in ptx) == pdl
    assert ("griddepcontrol.launch_dependents" in ptx) == (split > 1)
    assert kernel.metadata.launch_pdl == pdl
    if pdl:  # nothing reads or writes global memory before the wait
        head = ptx[:ptx.index("griddepcontrol.wait")]
        assert not re.search(r"cp\.async\.bulk|ld\.global|st\.global", head)


def test_k_grouped_chain_links():
    """``PDL_CHAIN`` (the k-grouped groups' GEMMs): the first link waits for the previous kernels before any global
    access and then lets the next link launch; a later link lets its successor launch before any global
    access, never waits at its start, and waits for its predecessor only at its end (the chain finishes in
    order, so the stream's later work sees every group)."""
    desc = GemmDesc("fp8_1d1d", 4096, 7168, 2048, out_fp32=True, with_c=True)
    cfg = dataclasses.replace(make_config(desc, H200, 128, 128, sfa_tma=True, sfb_tma=True), k_dynamic=True)
    first = assert_fast_path_kernel(compile_variant(desc, cfg, chain=1), H200.smem_per_block)
    wait, trigger = first.index("griddepcontrol.wait"), first.index("griddepcontrol.launch_dependents")
    assert wait < trigger and first.count("griddepcontrol") == 2
    assert not re.search(r"cp\.async\.bulk|ld\.global|st\.global", first[:wait])
    link = compile_variant(desc, cfg, chain=2)
    assert link.metadata.launch_pdl
    ptx = assert_fast_path_kernel(link, H200.smem_per_block)
    trigger, wait = ptx.index("griddepcontrol.launch_dependents"), ptx.index("griddepcontrol.wait")
    assert trigger < wait and ptx.count("griddepcontrol") == 2
    assert not re.search(r"cp\.async\.bulk|ld\.global|st\.global", ptx[:trigger])
    # at the end: after the default partition's TMA stores have been issued and drained
    stores = [m.start() for m in re.finditer(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)]
    assert stores and max(stores) < wait
    assert ptx.rfind("cp.async.bulk.wait_group", 0, wait) > max(stores)


def test_split_k_reduction_waits_for_the_gemm():
    """The split-K reduction kernels (FP8 and BF16) begin with ``griddepcontrol.wait``: launched with PDL they may
    start while the GEMM still runs, and must not read its partials before it has finished."""
    import inspect

    import triton
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from finegemm.kernels.sm90 import gemm_bf16
    from finegemm.kernels.sm90.compile_check import TARGET, restore_language

    for fn in (gemm_1d2d._splitk_reduce_kernel, gemm_bf16.splitk_reduce_kernel):
        raw = getattr(fn, "fn", fn)  # under the interpreter the decorator wraps the Python function
        constexprs = {"SPLIT_K": 4, "HAS_C": False, "BLOCK": 256}
        sig = {name: "constexpr" if name in constexprs else "*fp32" if name == "ws_ptr" else
               "*bf16" if name.endswith("_ptr") else "i32" for name in inspect.signature(raw).parameters}
        restore_language()
        kernel = triton.compile(ASTSource(JITFunction(raw), sig, constexprs), target=TARGET,
                                options={"num_warps": 4, "launch_pdl": True})
        ptx = kernel.asm["ptx"]
        assert "griddepcontrol.wait" in ptx
        assert not re.search(r"ld\.global", ptx[:ptx.index("griddepcontrol.wait")])


@pytest.mark.parametrize("bm,bn,split", [(64, 128, 1), (128, 128, 1), (64, 64, 4)])
def test_b_prefetch_variant(bm, bn, split):
    """``b_prefetch`` (B's tile some K blocks ahead into L2, for B streaming from HBM): the producer issues
    ``cp.async.bulk.prefetch.tensor`` on B's tensor map (the kernel's sixth parameter, the one its B loads
    use), from one thread, and the kernel still compiles without spills; with it off, no prefetch."""
    desc = GemmDesc("fp8_1d2d", 64, 7168, 16384)
    base = dataclasses.replace(make_config(desc, H200, bm, bn, split), split_k=split)
    off = compile_variant(desc, base).asm["ptx"]
    assert "cp.async.bulk.prefetch.tensor" not in off
    kernel = compile_variant(desc, dataclasses.replace(base, b_prefetch=8))
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block)
    assert len(re.findall(r"cp\.async\.bulk\.prefetch\.tensor\.2d\.L2\.global\.tile", ptx)) == 1
    # the asm names B's tensor map as parameter 5: b_desc is the sixth of the lowered kernel's arguments
    assert lowered_arg_names(kernel)[5] == "b_desc"


def test_b_prefetch_grouped_variant():
    from finegemm.jit.heuristics_sm90_grouped import make_grouped_config
    from finegemm.kernels.sm90.compile_check import compile_grouped_variant

    d = GemmDesc("fp8_1d2d", 256, 4096, 7168, layout="m_grouped_masked", num_groups=4, expected_m=256)
    cfg = dataclasses.replace(make_grouped_config(H200, 128, 128, True), b_prefetch=6)
    ptx = assert_fast_path_kernel(compile_grouped_variant(d, cfg), H200.smem_per_block)
    assert "cp.async.bulk.prefetch.tensor.2d.L2.global.tile" in ptx


@pytest.mark.parametrize("shape", [(4096, 7168, 16384), (128, 4096, 7168)], ids=lambda s: "x".join(map(str, s)))
def test_ring_barriers_count_one_arrive_per_math_warpgroup(shape):
    """The rules' picks with two math warpgroups (256 rows) and one (64 rows): full[i] (one arrive) and empty[i]
    (one per math warpgroup) for each stage, the empty barriers 8 bytes apart, then one C barrier per warpgroup,
    each at its own offset."""
    from finegemm.kernels.sm90.compile_check import barrier_inits

    desc = GemmDesc("fp8_1d2d", *shape)
    config = get_sm90_config(desc, H200)
    inits = barrier_inits(compile_variant(desc, config))
    wg = gemm_1d2d.num_math_warpgroups(config.block_m)
    assert len(inits) == 2 * config.stages + wg
    empty = inits[1:2 * config.stages:2]
    assert empty == [(empty[0][0] + 8 * i, wg) for i in range(config.stages)]
    assert all(count == 1 for _, count in inits[0:2 * config.stages:2])
    assert len({o for o, _ in inits}) == len(inits)


def test_promotion_ffma_yield_bits_follow_the_ptxas():
    """compile_check.yield_bits reads every FFMA's yield bit; Triton 3.6's bundled ptxas 12.8 leaves them uniform at
    the 256-row tile, ptxas >= 12.9 alternates them (FINEGEMM_PTXAS, commit f03df06)."""
    from finegemm.kernels.sm90.compile_check import ptxas_version, sass, yield_bits

    desc = GemmDesc("fp8_1d2d", 4096, 7168, 16384)
    kernel = compile_variant(desc, get_sm90_config(desc, H200))
    bits = yield_bits(kernel)
    assert len(bits) == len(re.findall(r"\*/\s+FFMA ", sass(kernel))) == 256 and set(bits) <= {0, 1}
    if ptxas_version() >= (12, 9):  # the ptxas the release runs for sm_90 (3.9: its ptxas-blackwell)
        assert sum(a != b for a, b in zip(bits, bits[1:])) > len(bits) // 2  # mostly alternating
    else:
        assert len(set(bits)) == 1


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 7168), (7168, 4096, 2048), (4096, 2112, 512)])
def test_in_place_accumulate_reduces_into_d_by_tma(m, n, k):
    """C is D (``D_REDUCE``): the epilogue adds each wave's tile into D with ``cp.reduce.async.bulk.tensor ... add``
    and reads no C (no global f32 loads, no C tensor map), where the separate-C variant loads C."""
    desc = GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
    config = get_sm90_config(desc, H200)
    assert config.split_k == 1
    reduced = compile_variant(desc, config, d_reduce=True).asm["ptx"]
    separate = compile_variant(desc, config).asm["ptx"]
    assert re.search(r"cp\.reduce\.async\.bulk\.tensor\.2d\.global\.shared::cta\.add", reduced)
    assert not re.search(TMA_STORE_PTX, reduced.replace("cp.reduce.async", ""))
    assert "cp.reduce.async.bulk" not in separate
    c_loads = r"ld\.global(\.\w+)*\.(f32|b32|v4\.f32|v4\.b32|v2\.f32)"
    assert re.search(c_loads, separate) or config.c_tma, "the separate-C variant reads C"
    assert not re.search(r"ld\.global(\.\w+)*\.v4\.(f32|b32)", reduced)


# ---------------------------------------------- tiles of two column blocks (BLOCK_N1), recipe (1, 128, 128)
SPLIT_N = [(GemmDesc("fp8_1d2d", 4096, 2112, 7168), 128, 192, True),
           (GemmDesc("fp8_1d2d", 128, 7168, 2048), 64, 96, True),
           (GemmDesc("fp8_1d2d", 77, 2112, 7168, sf_packed=True), 64, 144, True),
           (GemmDesc("fp8_1d2d", 4095, 4096, 1536, out_fp32=True, with_c=True), 128, 160, True),
           (GemmDesc("fp8_1d2d", 4096, 2112, 2048), 128, 192, False),
           (GemmDesc("fp8_1d2d", 64, 24576, 1536), 64, 96, True),
           (GemmDesc("fp8_1d2d", 77, 2112, 1152, out_fp32=True, with_c=True, sf_packed=True), 64, 96, True)]


def _ring_scale_reads_fenced(ptx: str) -> bool:
    """Whether every ``ld.shared.b32`` after a ``wgmma.wait_group`` (the ring's per-token scales) meets a
    ``fence.proxy.async`` before the next empty-slot arrive (the 128x128 ring-scale kernel, unfenced by design, does
    not; commit 3e186bc)."""
    read = False
    for e in re.findall(rf"wgmma\.wait_group|ld\.shared\.b32|fence\.proxy\.async|{ARRIVE_PTX}", ptx):
        if e.startswith("ld.shared"):
            read = True
        elif e.startswith(("wgmma", "fence")):
            read = False
        elif read:
            return False
    return True


@pytest.mark.parametrize("desc,bm,bn,sfa_tma", SPLIT_N,
                         ids=[f"{d.m}x{d.n}x{d.k}-{bm}x{bn}{'-tma' if t else ''}" for d, bm, bn, t in SPLIT_N])
def test_split_n_tiles_compile(desc, bm, bn, sfa_tma):
    """A tile of two column blocks: both WGMMA widths, B's two boxes (and the ring scales) on one expect-tx, both D
    boxes stored, pipelined only where registers allow (64x96, K blocks in pairs, an odd count's single tail), no
    serialized WGMMA, no spills, within the shared memory."""
    from finegemm.kernels.sm90.compile_check import wgmma_serialization

    cfg = make_config(desc, H200, bm, bn, sfa_tma=sfa_tma)
    assert cfg.pipe_mma == (bn == 96) and not cfg.c_tma  # 64x96: three 48-register blocks fit; wider ones do not
    bn0, bn1 = cfg.column_blocks
    kernel = compile_variant(desc, cfg)
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block)
    for width in (bn0, bn1):
        assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{width}k32\.f32\.e4m3\.e4m3", ptx), width
    stage = layouts.stage_tx_bytes(bm, bn, cfg.sfa_tma)
    assert re.search(expect_tx_ptx(stage), ptx), stage
    assert len(re.findall(TMA_STORE_PTX, ptx)) >= 2
    assert ("wgmma.wait_group.sync.aligned 2;" in ptx) == cfg.pipe_mma  # a pair's second K block left in flight
    assert wgmma_serialization(kernel) == []
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    # ring scales: the slot goes back behind a proxy fence (without it the H100 had 5 of 5 repeats of 4095x4096x1536
    # at 128x160 differ, results/repeat-probe-split-n-*)
    assert not sfa_tma or _ring_scale_reads_fenced(ptx)


def test_ring_scale_fence_check_can_fail():
    """The check above tells a fenced release from the 128x128 ring-scale kernel's unfenced one."""
    desc = GemmDesc("fp8_1d2d", 4095, 4096, 1536, out_fp32=True, with_c=True)
    ptx = compile_variant(desc, make_config(desc, H200, 128, 128, sfa_tma=True)).asm["ptx"]
    assert not _ring_scale_reads_fenced(ptx)


@pytest.mark.parametrize("kind,bm,split,layout", [("fp8_1d2d", 256, 1, "normal"), ("fp8_1d2d", 128, 2, "normal"),
                                                  ("fp8_1d1d", 128, 1, "normal"),
                                                  ("fp8_1d2d", 128, 1, "m_grouped_contiguous")])
def test_split_n_tiles_only_where_the_kernel_runs_them(kind, bm, split, layout):
    desc = GemmDesc(kind, 4096, 2112, 7168, out_fp32=kind == "fp8_1d1d", with_c=kind == "fp8_1d1d", layout=layout)
    with pytest.raises(ValueError, match="two column blocks"):
        make_config(desc, H200, bm, 192, split)
    with pytest.raises(ValueError, match="BLOCK_N"):
        make_config(GemmDesc("fp8_1d2d", 4096, 2112, 7168), H200, 128, 112)


def test_split_n_launch_plan():
    """The launch plan of a 128x192 tile: B's [128, 128] and [64, 128] boxes, D's [64, 128] and [64, 64], the kernel's
    BLOCK_N 128 and BLOCK_N1 64, a grid over 192-wide tiles (4096 x 2112: 32 x 11 = 352 tiles on 132 SMs); the rules
    never pick it."""
    import torch

    from finegemm.kernels.sm90 import dispatch

    desc = GemmDesc("fp8_1d2d", 4096, 2112, 7168)
    cfg = make_config(desc, H200, 128, 192, sfa_tma=True)
    a = torch.zeros(4096, 7168, dtype=torch.float8_e4m3fn)
    b = torch.zeros(2112, 7168, dtype=torch.float8_e4m3fn)
    sfa, sfb = torch.ones(56, 4096).T, torch.ones(17, 56)
    d = torch.zeros(4096, 2112, dtype=torch.bfloat16)
    grid, args, meta, reduce = dispatch._build_plan(desc, cfg, a, sfa, b, sfb, d, None)
    assert grid == (132,) and reduce is None
    assert list(args[1].block_shape) == [128, 128] and list(meta["b1_desc"].block_shape) == [64, 128]
    assert list(args[2].block_shape) == [64, 128] and list(meta["d1_desc"].block_shape) == [64, 64]
    assert (meta["BLOCK_N"], meta["BLOCK_N1"]) == (128, 64)
    assert get_sm90_config(desc, H200).column_blocks[1] == 0


FP32_OUT_PICKS = [  # FP32-out picks that spilled before the rule changes of b7e10c8
    GemmDesc("fp8_1d2d", 4096, 4096, 7168, out_fp32=True),  # 256 rows without C: 104 bytes in the K loop
    GemmDesc("fp8_1d2d", 4096, 7168, 16384, out_fp32=True),  # (now 128 and 192 rows)
    GemmDesc("fp8_1d1d", 4096, 2112, 7168, out_fp32=True, with_c=True),  # 128-row split tail + C by TMA: 280
    GemmDesc("fp8_1d1d", 32768, 4096, 512, out_fp32=True, with_c=True),  # 128x64 at ptxas 13.0 level 10: 56
]


@pytest.mark.parametrize("desc", FP32_OUT_PICKS,
                         ids=["1d2d-no-c-128", "1d2d-no-c-192", "1d1d-split-tail-c", "1d1d-128x64-c"])
def test_fp32_out_picks_compile_without_spills(desc):
    """The rules' FP32-out picks on these shapes compile without spills under the ptxas in use (CI: Triton's;
    the H200 image: 13.0, where the 1d1d kernels keep ptxas's default register-usage level)."""
    cfg = get_sm90_config(desc, H200)
    assert_fast_path_kernel(compile_variant(desc, cfg, "fp32"), H200.smem_per_block)


def test_weight_grad_without_c_pick_compiles_without_stack():
    """Recipe (1, 1, 128) with FP32 out and no C: the rule's 128-row pick compiles without a stack."""
    desc = GemmDesc("fp8_1d1d", 4096, 4096, 7168, out_fp32=True)
    cfg = get_sm90_config(desc, H200)
    assert cfg.block_m == 128
    usage = resource_usage(compile_variant(desc, cfg, "fp32"))
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage


@pytest.mark.parametrize("m,n,k", [(2112, 4096, 7168), (24576, 4096, 1536), (7168, 4096, 2048), (4096, 4096, 7168),
                                   (7168, 4096, 16384), (576, 4096, 7168)])
def test_default_in_place_weight_grad_picks_compile_without_spills(m, n, k):
    """The weight-gradient picks that add into D by TMA reduce-add by default when C is D (one-wave tiles 128 wide,
    dispatch.d_reduce_ok; 576x4096x7168 with its split tail): the reduce, no stack."""
    from finegemm.kernels.sm90 import dispatch

    desc = GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
    cfg = get_sm90_config(desc, H200)
    d = torch.zeros(1, 1)
    assert dispatch.d_reduce_ok(desc, cfg, d, d), cfg
    kernel = compile_variant(desc, cfg, "fp32", d_reduce=True)
    assert "cp.reduce.async.bulk.tensor" in kernel.asm["ptx"]
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, (cfg, usage)
