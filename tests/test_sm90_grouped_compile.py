"""The m-grouped forms of the sm90 FP8 kernel (GROUPING 1 contiguous, 2 masked) compile for sm_90 on the CPU.

Every config the grouped heuristic picks for the DeepSeek-V3 grouped shapes, both contiguous layout forms
(per-row ids, PSUM ends), packed UE8M0 scales and both scale paths, checked for the instructions the kernel
needs and for spills.
"""

from __future__ import annotations

import pytest

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90_grouped import get_sm90_grouped_config, make_grouped_config
from finegemm.kernels.sm90.compile_check import (
    assert_fast_path_kernel,
    assert_group_walk_carried,
    compile_grouped_variant,
)


def _variants():
    out = []
    for n, k in ((4096, 7168), (7168, 2048)):
        d = GemmDesc("fp8_1d2d", 32768, n, k, layout="m_grouped_contiguous", num_groups=8)
        cfg = get_sm90_grouped_config(d, H200)
        out += [(d, cfg, False), (d, cfg, True)]
    d = GemmDesc("fp8_1d2d", 32768, 4096, 7168, layout="m_grouped_contiguous", num_groups=4, sf_packed=True)
    out.append((d, get_sm90_grouped_config(d, H200), True))
    out.append((d, make_grouped_config(H200, 64, 128, False), False))
    for expected in (64, 256):
        d = GemmDesc("fp8_1d2d", 1024, 7168, 2048, layout="m_grouped_masked", num_groups=16, expected_m=expected)
        out.append((d, get_sm90_grouped_config(d, H200), False))
    d = GemmDesc("fp8_1d2d", 64, 7168, 2048, layout="m_grouped_masked", num_groups=16, expected_m=64)
    out.append((d, make_grouped_config(H200, 64, 128, True), False))
    # two WGMMA partials in flight (K-block pairs), both forms
    out.append((d, make_grouped_config(H200, 64, 128, True, pipe_mma=True), False))
    d = GemmDesc("fp8_1d2d", 256, 4096, 7168, layout="m_grouped_masked", num_groups=4, expected_m=256)
    out.append((d, make_grouped_config(H200, 128, 128, True, pipe_mma=True), False))
    d = GemmDesc("fp8_1d2d", 32768, 4096, 7168, layout="m_grouped_contiguous", num_groups=4)
    out.append((d, make_grouped_config(H200, 128, 128, True, pipe_mma=True), True))
    # 256-row contiguous tiles (two 128-row halves, a second pass where their groups differ): per-row ids
    # and PSUM ends, packed UE8M0 scales in the ring
    out.append((d, make_grouped_config(H200, 256, 128, True), False))
    out.append((d, make_grouped_config(H200, 256, 128, True), True))
    d = GemmDesc("fp8_1d2d", 32768, 4096, 7168, layout="m_grouped_contiguous", num_groups=4, sf_packed=True)
    out.append((d, make_grouped_config(H200, 256, 128, True), False))
    d = GemmDesc("fp8_1d2d", 200, 4096, 7168, layout="m_grouped_masked", num_groups=4, expected_m=128,
                 sf_packed=True)
    out.append((d, get_sm90_grouped_config(d, H200), False))
    # 256-row masked tiles (partial waves staged through shared memory), packed scales from global memory
    for packed in (False, True):
        d = GemmDesc("fp8_1d2d", 1024, 4096, 7168, layout="m_grouped_masked", num_groups=1, expected_m=1024,
                     sf_packed=packed)
        out.append((d, get_sm90_grouped_config(d, H200), False))
    # 256-row masked tiles over four groups (the group walk's start carried across groups)
    d = GemmDesc("fp8_1d2d", 256, 4096, 7168, layout="m_grouped_masked", num_groups=4, expected_m=256)
    out.append((d, make_grouped_config(H200, 256, 128, True), False))
    # the 64-row decode pick (64x64 pipelined) with packed UE8M0 scales
    d = GemmDesc("fp8_1d2d", 64, 4096, 7168, layout="m_grouped_masked", num_groups=16, expected_m=64, sf_packed=True)
    out.append((d, get_sm90_grouped_config(d, H200), False))
    return out


VARIANTS = _variants()


@pytest.mark.parametrize("desc,cfg,psum", VARIANTS,
                         ids=[f"{d.layout[10:]}-g{d.num_groups}-m{d.m}-n{d.n}-k{d.k}-{c.block_m}x{c.block_n}"
                              f"st{c.stages}{'-tma' if c.sfa_tma else ''}{'-pipe' if c.pipe_mma else ''}"
                              f"{'-psum' if p else ''}"
                              f"{'-packed' if d.sf_packed else ''}" for d, c, p in VARIANTS])
def test_grouped_compiles_with_required_instructions(desc, cfg, psum):
    kernel = compile_grouped_variant(desc, cfg, psum)
    ptx = assert_fast_path_kernel(kernel, H200.smem_per_block)
    if desc.layout == "m_grouped_masked":
        # partial waves are stored from registers with a row mask, full ones by TMA
        assert "st.global" in ptx
        if desc.num_groups > 1:  # each group's walk starts after the groups before it
            assert_group_walk_carried(kernel)
