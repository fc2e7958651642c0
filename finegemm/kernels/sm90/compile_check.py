"""Compile the sm90 kernel for ``GPUTarget("cuda", 90, 32)`` without a GPU (CI checks of PTX/SASS).

``compile_variant(desc, config)`` builds exactly the specialization :mod:`.dispatch` launches
(same constexprs, same descriptor block shapes and layouts) through ``GluonASTSource``;
``resource_usage`` reads registers / stack / local memory from the cubin with Triton's cuobjdump.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.experimental.gluon import language as gl

from ...jit import ptxas
from ...jit.heuristics import GemmDesc
from ...jit.heuristics_sm90 import Sm90Config
from ...jit.interpret import restore_language
from . import gemm_1d2d, layouts
from .gluon_compat import ast_source

TARGET = GPUTarget("cuda", 90, 32)
# fp8_gemm_kernel's m-grouped constexprs at their dense (GROUPING 0) defaults
DENSE_GROUPING = dict(GROUPING=0, NUM_GROUPS=1, GROUP_ROWS=0, SFK_ROWS=0, SFA_STRIDE_G=0, SFB_STRIDE_G=0,
                      USE_PSUM=False, ALIGN=128)


def _desc_sig(dtype: str, block: list[int], gl_dtype, layout=None) -> str:
    layout = layout or gl.NVMMASharedLayout.get_default_for(block, gl_dtype)
    return f"tensordesc<{dtype}[{', '.join(map(str, block))}],{layout!r}>"


def c_tma_effective(desc: GemmDesc, config: Sm90Config, c_dtype: str = "fp32") -> bool:
    """Whether the launch of ``config`` stages C by TMA (what :func:`.dispatch.c_tma_ok` lets through for
    a row-major aligned C of ``c_dtype``)."""
    return config.c_tma and config.can_stage_c and desc.with_c and desc.out_fp32 and c_dtype == "fp32"


def compile_variant(desc: GemmDesc, config: Sm90Config, c_dtype: str = "fp32", pdl: bool = True,
                    chain: int = 0, d_reduce: bool = False):
    """The compiled kernel (``triton.compiler.CompiledKernel``) for ``desc`` under ``config``; ``pdl``: with
    programmatic dependent launch, as the dense dispatch launches it by default (``FINEGEMM_PDL``);
    ``chain``: ``PDL_CHAIN`` (with ``pdl``: 1 the first link of a chain, 2 a later one, as the k-grouped launches
    run); ``d_reduce``: C is D, added by TMA reduce-add (``D_REDUCE``, as the dispatch launches ``desc.with_c``
    calls whose C is D: no C read)."""
    if d_reduce:
        desc = dataclasses.replace(desc, with_c=False)
    bm, split = config.block_m, config.split_k
    # the kernel's BLOCK_N: the tile's width, or its first column block (and BLOCK_N1 the second, dispatch._build_plan)
    bn, bn1 = config.column_blocks
    d_fp32 = desc.out_fp32 or (split > 1 and not config.splitk_fused)
    sf = "*i32" if desc.sf_packed else "*fp32"
    sig = {
        "a_desc": _desc_sig("fp8e4nv", [layouts.a_box_rows(bm), 128], gl.float8e4nv),
        "b_desc": _desc_sig("fp8e4nv", [bn, 128], gl.float8e4nv),
        "d_desc": _desc_sig("fp32", [64, bn], gl.float32) if d_fp32 else _desc_sig("bf16", [64, bn],
                                                                                     gl.bfloat16),
        "sfa_ptr": sf, "sfb_ptr": sf, "c_ptr": f"*{c_dtype}",
        "M": "i32", "stride_sfa_k": "i32", "stride_sfb": "i32", "stride_cm": "i32",
        "sfa_desc": _desc_sig("i32" if desc.sf_packed else "fp32", layouts.sfa_box(bm, config.sfa_tma),
                              None, gemm_1d2d.sfa_desc_layout()),
    }
    if config.sfb_tma:
        sig["sfb_desc"] = _desc_sig("i32" if desc.sf_packed else "fp32", layouts.sfb_box(bn), None,
                                    gemm_1d2d.sfa_desc_layout())
    constexprs = dict(
        N=desc.n, K=layouts.BLOCK_K if config.k_dynamic else desc.k, BLOCK_M=bm, BLOCK_N=bn, STAGES=config.stages,
        GROUP_M=config.group_m, SPLIT_K=split,
        SF_PACKED=desc.sf_packed, SFB_PER_CHANNEL=desc.kind == "fp8_1d1d", HAS_C=desc.with_c,
        PIPE_MMA=config.pipe_mma, PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.math_regs(bm),
        SMALL_EPI=config.small_epi, SFA_TMA=config.sfa_tma,
        # ASTSource applies no defaults: the dense form names every grouped parameter's default
        layout_ptr=None, d_ptr=None, **DENSE_GROUPING, SFB_TMA=config.sfb_tma,
        K_DYN=config.k_dynamic,
    )
    if not config.sfb_tma:
        constexprs["sfb_desc"] = None
    c_tma = c_tma_effective(desc, config, c_dtype)
    constexprs["C_TMA"] = c_tma
    constexprs["C_TMA_LATE"] = c_tma and config.c_tma_late and not (split > 1 and config.splitk_fused
                                                                    and config.split_tail)
    if c_tma:
        sig["c_desc"] = _desc_sig("fp32", [64, bn], gl.float32)
    else:
        constexprs["c_desc"] = None
    fused = split > 1 and config.splitk_fused
    constexprs["SPLITK_FUSED"] = fused
    constexprs["SPLIT_TAIL"] = fused and config.split_tail
    constexprs["PDL"] = pdl and chain != 2
    constexprs["PDL_CHAIN"] = chain
    constexprs["B_PREFETCH"] = config.b_prefetch
    constexprs["HEAD_SPLITS"] = desc.head_splits or (0, 0, 0)
    constexprs["D_REDUCE"] = d_reduce
    if fused:
        sig["ws_ptr"], sig["cnt_ptr"] = "*fp32", "*i32"
    else:
        constexprs["ws_ptr"] = constexprs["cnt_ptr"] = None
    constexprs["BLOCK_N1"] = bn1
    if bn1:
        sig["b1_desc"] = _desc_sig("fp8e4nv", [bn1, 128], gl.float8e4nv)
        sig["d1_desc"] = (_desc_sig("fp32", [64, bn1], gl.float32) if d_fp32
                          else _desc_sig("bf16", [64, bn1], gl.bfloat16))
    else:
        constexprs["b1_desc"] = constexprs["d1_desc"] = None
    for name in constexprs:
        sig[name] = "constexpr"
    src = ast_source(gemm_1d2d.fp8_gemm_kernel, sig, constexprs)
    restore_language()  # interpreted CPU tests earlier in this process may have left tl patched
    options = {"num_warps": config.num_warps, "launch_pdl": pdl,
               "ptx_options": ptxas.fp8_gemm_options(desc.kind == "fp8_1d1d")}
    return triton.compile(src, target=TARGET, options=options)


def compile_grouped_variant(desc: GemmDesc, config: Sm90Config, use_psum: bool = False, head_batched: bool = False):
    """The compiled m-grouped kernel (``GROUPING`` 1 for ``desc.layout == "m_grouped_contiguous"``, 2 for
    ``"m_grouped_masked"``) exactly as :mod:`.dispatch_grouped` launches it: pointers for ``layout_ptr``
    and ``d_ptr``, every grouped constexpr named (ASTSource applies no defaults). ``desc.m`` is
    M_total (contiguous) or max_m (masked); ``desc.num_groups`` the group count. ``head_batched``: the
    ``GROUPING`` 3 form of :func:`.dispatch_grouped.head_batched_plan`'s desc."""
    from . import dispatch_grouped

    bm, bn = config.block_m, config.block_n
    sf = "*i32" if desc.sf_packed else "*fp32"
    sig = {
        "a_desc": _desc_sig("fp8e4nv", [bm, 128], gl.float8e4nv),
        "b_desc": _desc_sig("fp8e4nv", [bn, 128], gl.float8e4nv),
        "d_desc": _desc_sig("bf16", [64, bn], gl.bfloat16),
        "sfa_ptr": sf, "sfb_ptr": sf, "c_ptr": "*bf16",
        "M": "i32", "stride_sfa_k": "i32", "stride_sfb": "i32", "stride_cm": "i32",
        "sfa_desc": _desc_sig("i32" if desc.sf_packed else "fp32", layouts.sfa_box(bm, config.sfa_tma),
                              None, gemm_1d2d.sfa_desc_layout()),
        "layout_ptr": "*bf16" if head_batched else "*i32", "d_ptr": "*bf16",
    }
    constexprs = dict(
        N=desc.n, K=desc.k, BLOCK_M=bm, BLOCK_N=bn, STAGES=config.stages, GROUP_M=config.group_m, SPLIT_K=1,
        SF_PACKED=desc.sf_packed, SFB_PER_CHANNEL=False, HAS_C=False, PIPE_MMA=config.pipe_mma,
        PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.MATH_REGS, SMALL_EPI=False, SFA_TMA=config.sfa_tma,
        **dispatch_grouped.grouped_constexprs(desc, use_psum), sfb_desc=None, SFB_TMA=False,
        K_DYN=False, c_desc=None, C_TMA=False, C_TMA_LATE=False, PDL=False, PDL_CHAIN=0, B_PREFETCH=config.b_prefetch,
        HEAD_SPLITS=(0, 0, 0), b1_desc=None, d1_desc=None, BLOCK_N1=0,
    )
    if head_batched:  # fp8_einsum's GROUPING 3 (dispatch_grouped.head_batched_plan's desc is the masked form's)
        constexprs["GROUPING"] = 3
    for name in constexprs:
        sig[name] = "constexpr"
    src = ast_source(gemm_1d2d.fp8_gemm_kernel, sig, constexprs)
    restore_language()
    return triton.compile(src, target=TARGET, options={"num_warps": config.num_warps,
                                                       "ptx_options": ptxas.fp8_gemm_options()})


def _cuobjdump(kernel, flag: str) -> str:
    """Triton's cuobjdump ``flag`` over the kernel's cubin (written to a temporary file)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(kernel.asm["cubin"])
        path = f.name
    try:
        return subprocess.run([_nvidia_tool("cuobjdump"), flag, path], capture_output=True, text=True,
                              check=True).stdout
    finally:
        os.unlink(path)


def resource_usage(kernel) -> dict[str, int]:
    """{'REG', 'STACK', 'SHARED', 'LOCAL'} of the cubin, from ``cuobjdump --dump-resource-usage``."""
    out = _cuobjdump(kernel, "--dump-resource-usage")
    return {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", out)}


def sass(kernel) -> str:
    """The cubin's SASS (``cuobjdump -sass``), e.g. to count the instructions of an epilogue."""
    return _cuobjdump(kernel, "-sass")


def yield_bits(kernel, opcodes: tuple[str, ...] = ("FFMA",)) -> list[int]:
    """The yield bit (bit 45 of the high word of each 128-bit instruction, with the stall count and scoreboards in
    the control field above bit 41) of every instruction of ``kernel``'s SASS whose opcode starts with one of
    ``opcodes``, in program order. ptxas >= 12.9 alternates it over the promotion's FFMA runs at 192/256-row tiles,
    Triton 3.6's bundled 12.8 leaves it uniform."""
    lines = sass(kernel).splitlines()
    instruction = re.compile(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)[^;]*;"
                             r"\s*/\* 0x[0-9a-f]{16} \*/")
    bits = []
    for line, nxt in zip(lines, lines[1:]):
        inst = instruction.match(line)
        high = re.search(r"/\* (0x[0-9a-f]{16}) \*/", nxt)
        if inst and high and inst.group(1).startswith(opcodes):
            bits.append((int(high.group(1), 16) >> 45) & 1)
    return bits


def _nvidia_tool(name: str) -> str:
    """The NVIDIA tool ``name`` (ptxas, cuobjdump) Triton itself uses for ``TARGET``: its bundled one unless
    ``TRITON_<NAME>_PATH`` names another. For ptxas this matters: the PTX's version follows the ptxas Triton
    compiles with, and that is ``get_ptxas(arch)``'s pick, not always ``knobs.nvidia.ptxas`` (Triton 3.9 assembles
    sm_90 with its ``ptxas-blackwell``)."""
    if name == "ptxas":
        return get_ptxas(TARGET.arch).path
    return getattr(triton.knobs.nvidia, name).path


def ptxas_version() -> tuple[int, int]:
    """(major, minor) of the ptxas Triton assembles ``TARGET`` with (:func:`_nvidia_tool`): 12.8 for Triton 3.6's
    bundled one, 13.4 for 3.9's ``ptxas-blackwell``, or the one ``FINEGEMM_PTXAS`` chose."""
    major, minor = get_ptxas(TARGET.arch).version.split(".")[:2]
    return int(major), int(minor)


def wgmma_serialization(kernel) -> list[str]:
    """ptxas's "wgmma.mma_async instructions are serialized" notes (C7510-C7520) for the kernel's PTX.

    ptxas inserts a full WGMMA wait after every instruction of the function when it cannot prove an
    in-flight accumulator untouched, e.g. when a loop copies the registers of a WGMMA still running; the cubin then
    has one ``WARPGROUP.DEPBAR`` per QGMMA, and the kernel loses its overlap without any error. Triton does not show
    ptxas's info lines, so this reruns it.
    """
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "k.ptx")
        with open(ptx, "w") as f:
            f.write(kernel.asm["ptx"])
        arch = f"sm_{TARGET.arch}a"
        run = subprocess.run([_nvidia_tool("ptxas"), f"-arch={arch}", "-v", ptx, "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True, check=True)
    return [line.strip() for line in (run.stdout + run.stderr).splitlines() if "are serialized" in line]


# The PTX instructions the tests look for, one pattern each, matching every tested release's spelling of the same
# instruction. Triton 3.6 writes the mbarrier ops' state space ``.shared`` and a TMA load's destination
# ``shared::cluster``; 3.7 and later write ``.shared::cta`` for both (PTX ISA 8.0, 8.6). For a kernel launched
# without a cluster they name the same memory, so the instruction and what it does are the same.
# a TMA tensor load global -> shared, completing on an mbarrier
TMA_LOAD_PTX = r"cp\.async\.bulk\.tensor\.2d\.shared::(?:cluster|cta)\.global"
# a TMA tensor store shared -> global (the same spelling on every release)
TMA_STORE_PTX = r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta"
# an arrive that also sets the barrier's expected transaction bytes (the operand after the barrier)
EXPECT_TX_PTX = r"mbarrier\.arrive\.expect_tx\.shared(?:::cta)?\.b64"
# a wait on a barrier's phase parity
TRY_WAIT_PTX = r"mbarrier\.try_wait\.parity\.shared(?:::cta)?\.b64"
# a plain arrive (e.g. a ring slot given back to the producer), not cp.async's
ARRIVE_PTX = r"(?<!\.)mbarrier\.arrive\.shared(?:::cta)?\.b64"
# a cp.async group's arrive on an mbarrier once its copies land
CP_ASYNC_ARRIVE_PTX = r"cp\.async\.mbarrier\.arrive\.shared(?:::cta)?\.b64"


def expect_tx_ptx(nbytes: int) -> str:
    """:data:`EXPECT_TX_PTX` on one barrier register with ``nbytes`` expected: a stage's or a C box's expect-tx."""
    return rf"{EXPECT_TX_PTX} _, \[%r\d+\], {nbytes};"


PTX_MUST_CONTAIN = {
    "wgmma e4m3": r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.e4m3\.e4m3",
    "TMA load": TMA_LOAD_PTX,
    "TMA store": TMA_STORE_PTX,
    "mbarrier": TRY_WAIT_PTX,
    "setmaxnreg": r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32",
}


def assert_ptx_contains(kernel, must_contain: dict[str, str]) -> str:
    """Assert that ``kernel``'s PTX matches each pattern of ``must_contain`` (name -> regex); returns the PTX."""
    ptx = kernel.asm["ptx"]
    for what, pattern in must_contain.items():
        assert re.search(pattern, ptx), f"PTX lacks {what} ({pattern})"
    return ptx


def assert_async_wgmma_kernel(kernel, must_contain: dict[str, str]) -> tuple[str, dict[str, int]]:
    """Assert what every compiled sm90 TMA + WGMMA kernel must show; returns its PTX and
    :func:`resource_usage`: the PTX has each of ``must_contain``'s instructions, the cubin spills no
    register (no local memory, no stack), and ptxas keeps the WGMMAs asynchronous
    (:func:`wgmma_serialization`)."""
    ptx = assert_ptx_contains(kernel, must_contain)
    usage = resource_usage(kernel)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, f"register spills: {usage}"
    assert not (notes := wgmma_serialization(kernel)), notes
    return ptx, usage


def assert_fast_path_kernel(kernel, smem_per_block: int, must_contain: dict[str, str] = PTX_MUST_CONTAIN) -> str:
    """Assert what every compiled warp-specialized sm90 kernel must show; returns its PTX.

    :func:`assert_async_wgmma_kernel` with ``must_contain``, and the shared memory fits ``smem_per_block``,
    and the producer gives registers back (40) while the math warpgroups take them.
    """
    ptx, _ = assert_async_wgmma_kernel(kernel, must_contain)
    assert kernel.metadata.shared <= smem_per_block
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40", ptx)
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+2(32|40|48|56)", ptx)
    return ptx


def math_partitions(ptx: str) -> list[str]:
    """The PTX of each math partition of a warp-specialized kernel, in program order: the stretches between two
    ``setmaxnreg`` (each partition sets its registers on entry, a worker's loop on the way back) that hold a
    ``wgmma.mma_async``. A block the compiler places outside its partition's stretch is not in it (Triton 3.9 puts
    a worker's loop exit, its last store wait, ahead of its entry)."""
    lines = ptx.splitlines()
    cuts = [0] + [i for i, line in enumerate(lines) if "setmaxnreg." in line] + [len(lines)]
    parts = ["\n".join(lines[a:b]) for a, b in zip(cuts, cuts[1:])]
    return [part for part in parts if "wgmma.mma_async" in part]


def group_walk_starts(kernel) -> tuple[list[str], list[str]]:
    """The masked group walk's ``g_start % num_programs`` ops in ``kernel``'s TTGIR
    (:func:`.gemm_1d2d._first_local_unit`), as (ops whose dividend is a value, ops whose dividend was folded to a
    constant). A folded one means every group's tiles start at CTA 0: Triton 3.6's SCCP folds a group-loop carry
    that feeds an inner ``scf.for``'s bounds."""
    ir = kernel.asm["ttgir"]
    nprog = set(re.findall(r"(%[\w.]+) = tt\.get_num_programs", ir))
    kept: list[str] = []
    folded: list[str] = []
    for a, b in re.findall(r"arith\.remsi (%[\w.\-]+), (%[\w.]+) :", ir):
        if b in nprog:
            (folded if re.fullmatch(r"%c-?\d+_i32(_\d+)?", a) else kept).append(f"{a} % {b}")
    return kept, folded


def assert_group_walk_carried(kernel) -> None:
    """Assert that a masked kernel of more than one group starts each group's walk after the groups before it:
    :func:`group_walk_starts` finds the walk's ops and none folded to a constant."""
    kept, folded = group_walk_starts(kernel)
    assert kept and not folded, (kept, folded)


def barrier_inits(kernel) -> list[tuple[int, int]]:
    """(byte offset from ``global_smem``, arrival count) of every ``mbarrier.init`` in ``kernel``'s PTX, in program
    order (the address is an ``add`` of a constant to ``global_smem``'s)."""
    ptx = kernel.asm["ptx"]
    base = set(re.findall(r"mov\.b32\s+(%r\d+), global_smem;", ptx))
    offsets = {reg: int(off) for reg, src, off in re.findall(r"add\.s32\s+(%r\d+), (%r\d+), (\d+);", ptx)
               if src in base}
    return [(offsets[reg], int(count))
            for reg, count in re.findall(r"mbarrier\.init\.shared::cta\.b64 \[(%r\d+)\], (\d+);", ptx)]


def lowered_arg_names(kernel) -> list[str]:
    """The compiled kernel's arguments in their lowered order (a host TMA descriptor expands to the tensor map
    and its shape and stride arguments): what ``<kernel>_param_<i>`` names in inline PTX (:mod:`.l2_prefetch`)."""
    args = re.search(r"tt\.func public @\w+\((.*?)\) attributes", kernel.asm["ttgir"]).group(1)
    return [a.split(":")[0].strip().lstrip("%") for a in args.split(", %")]


def compile_bf16_variant(desc: GemmDesc, config, c_dtype: str = "fp32"):
    """The compiled :func:`.gemm_bf16.bf16_gemm_kernel` for ``desc`` under a
    :class:`~finegemm.jit.heuristics_sm90.Sm90Bf16Config`: the specialization
    :mod:`.dispatch_bf16` launches (descriptor blocks, layouts and constexprs built the same way) for a C of
    ``c_dtype``, staged by TMA where the config says so and C has D's dtype (:func:`.dispatch_bf16.c_tma_ok`)."""
    from . import gemm_bf16

    bm, bk, split = config.block_m, config.block_k, config.split_k
    bn, bn1 = config.column_blocks
    d_fp32 = desc.out_fp32 or split > 1
    a_block = [64, bk] if desc.a_k_major else [bk, 64]
    b_block = [bn, bk] if desc.b_k_major else [bk, bn]
    d_sig = (_desc_sig("fp32", [64, config.d_box_cols], gl.float32) if d_fp32
             else _desc_sig("bf16", [64, config.d_box_cols], gl.bfloat16))
    sig = {
        "a_desc": _desc_sig("bf16", a_block, gl.bfloat16),
        "b_desc": _desc_sig("bf16", b_block, gl.bfloat16),
        "d_desc": d_sig,
        "c_ptr": f"*{c_dtype}", "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32", "stride_cn": "i32",
    }
    constexprs = dict(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, STAGES=config.stages, GROUP_M=config.group_m, SPLIT_K=split,
        A_MN_MAJOR=not desc.a_k_major, B_MN_MAJOR=not desc.b_k_major, HAS_C=desc.with_c,
        PRODUCER_REGS=layouts.PRODUCER_REGS, MATH_REGS=layouts.math_regs(bm), B_PREFETCH=config.b_prefetch,
    )
    if config.c_tma and split == 1 and desc.with_c and c_dtype == ("fp32" if d_fp32 else "bf16"):
        sig["c_desc"] = d_sig
        constexprs["C_TMA"] = True
    if bn1:
        sig["b1_desc"] = _desc_sig("bf16", [bn1, bk] if desc.b_k_major else [bk, bn1], gl.bfloat16)
        sig["d1_desc"] = (_desc_sig("fp32", [64, bn1], gl.float32) if d_fp32
                          else _desc_sig("bf16", [64, bn1], gl.bfloat16))
        if constexprs.get("C_TMA"):
            sig["c1_desc"] = sig["d1_desc"]
    constexprs["BLOCK_N1"] = bn1
    for name in constexprs:
        sig[name] = "constexpr"
    src = ast_source(gemm_bf16.bf16_gemm_kernel, sig, constexprs)
    restore_language()  # interpreted CPU tests earlier in this process may have left tl patched
    return triton.compile(src, target=TARGET, options={"num_warps": config.num_warps})


BF16_PTX_MUST_CONTAIN = {
    "wgmma bf16": r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16",
    "TMA load": TMA_LOAD_PTX,
    "TMA store": TMA_STORE_PTX,
    "mbarrier": TRY_WAIT_PTX,
    "setmaxnreg": r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32",
}


def compile_bf16_grouped_variant(desc: GemmDesc, config, use_psum: bool = False, head_batched: bool = False):
    """The compiled :func:`.gemm_bf16.bf16_grouped_gemm_kernel` (``GROUPING`` 1 for ``desc.layout ==
    "m_grouped_contiguous"``, 2 for ``"m_grouped_masked"``, 3 with ``head_batched``: einsum's per-head form, whose
    desc is :func:`.dispatch_bf16_grouped.head_batched_plan`'s) exactly as :mod:`.dispatch_bf16_grouped`
    launches it: the same descriptor boxes and layouts, every constexpr from its ``kernel_meta``.
    ``desc.m`` is M_total (contiguous) or max_m (masked); ``desc.num_groups`` the group count."""
    from . import dispatch_bf16_grouped, gemm_bf16

    sig = {
        "a_desc": _desc_sig("bf16", dispatch_bf16_grouped.a_block(desc, config), gl.bfloat16),
        "b_desc": _desc_sig("bf16", dispatch_bf16_grouped.b_block(desc, config), gl.bfloat16),
        "d_desc": _desc_sig("bf16", [64, config.block_n], gl.bfloat16),
        "layout_ptr": "*bf16" if head_batched else "*i32", "d_ptr": "*bf16", "M": "i32",
    }
    constexprs = (dispatch_bf16_grouped.head_batched_meta(desc, config) if head_batched
                  else dispatch_bf16_grouped.kernel_meta(desc, config, use_psum))
    for name in constexprs:
        sig[name] = "constexpr"
    src = ast_source(gemm_bf16.bf16_grouped_gemm_kernel, sig, constexprs)
    restore_language()
    return triton.compile(src, target=TARGET, options={"num_warps": config.num_warps})
