"""The 1d1d ring's scales copied by the producer warp with ``cp.async``, on the CPU.

The 1d1d kernels' ring scales (per-channel and per-token) are copied into the slot by the producer warp, each
lane's ``cp.async`` copies completing on the slot's full barrier, instead of TMA boxes, so the math warpgroups
release a whole-K tile's slot without the proxy fence (gemm_1d2d's ``_release``).
"""

from __future__ import annotations

import re

import pytest

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90.compile_check import CP_ASYNC_ARRIVE_PTX, compile_variant, resource_usage
from finegemm.kernels.sm90.dispatch import get_config

# the weight-grad rule's 128x128 pipelined tile with C by TMA, and its fused split-K tile with the split tail
WGRAD = [(4096, 4096, 7168), (2112, 4096, 7168)]


@pytest.mark.parametrize("shape", WGRAD, ids=lambda s: "x".join(map(str, s)))
def test_the_ring_scales_are_copied_by_cp_async(shape):
    desc = GemmDesc("fp8_1d1d", *shape, out_fp32=True, with_c=True)
    config = get_config(desc, H200)
    assert config.sfa_tma and config.sfb_tma
    kernel = compile_variant(desc, config)
    ptx = kernel.asm["ptx"]
    # a stage's expect-tx is A + B only (no scale boxes, 4 bytes a row / column)
    ab = (config.block_m + config.block_n) * 128
    scales = 4 * (config.block_m + config.block_n)
    assert f", {ab};" in ptx and f", {ab + scales};" not in ptx
    # the producer's copies (four words a lane per 128 scales), each lane's arrive made when they land
    assert ptx.count("cp.async.ca.shared.global") >= 8 and re.search(CP_ASYNC_ARRIVE_PTX, ptx)
    assert resource_usage(kernel)["LOCAL"] == 0
