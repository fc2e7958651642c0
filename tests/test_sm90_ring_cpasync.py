"""The 1d1d ring's scales copied by the producer warp with ``cp.async`` (``RING_CPASYNC``, de04c26), on the
CPU.

The 1d1d kernels' ring scales (per-channel and per-token) are copied into the slot by the producer warp, each
lane's ``cp.async`` copies completing on the slot's full barrier, instead of TMA boxes, so the math warpgroups
release a whole-K tile's slot without the proxy fence. ``FINEGEMM_PROBE_RING_STS=0`` restores the TMA boxes; the
switch is read at import, so those compiles run in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90.compile_check import compile_variant, resource_usage
from finegemm.kernels.sm90.dispatch import get_config

# the weight-grad rule's 128x128 pipelined tile with C by TMA, and its fused split-K tile with the split tail
WGRAD = [(4096, 4096, 7168), (2112, 4096, 7168)]
FENCE = "fence.proxy.async.shared::cta"

_CHILD = """
import json, sys
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90.compile_check import compile_variant, resource_usage
from finegemm.kernels.sm90.dispatch import get_config
kind, m, n, k = sys.argv[1], *(int(x) for x in sys.argv[2:5])
desc = GemmDesc(kind, m, n, k, out_fp32=kind == "fp8_1d1d", with_c=kind == "fp8_1d1d")
kernel = compile_variant(desc, get_config(desc, H200))
print(json.dumps(dict(ptx=kernel.asm["ptx"], local=resource_usage(kernel)["LOCAL"])))
"""


def _switched(kind: str, shape: tuple[int, int, int], value: str = "0") -> dict:
    env = dict(os.environ, FINEGEMM_PROBE_RING_STS=value)
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, *map(str, shape)], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("shape", WGRAD, ids=lambda s: "x".join(map(str, s)))
def test_the_ring_scales_are_copied_by_cp_async_and_whole_k_releases_are_not_fenced(shape):
    desc = GemmDesc("fp8_1d1d", *shape, out_fp32=True, with_c=True)
    config = get_config(desc, H200)
    assert config.sfa_tma and config.sfb_tma
    kernel = compile_variant(desc, config)
    ptx = kernel.asm["ptx"]
    boxes = _switched("fp8_1d1d", shape)["ptx"]
    # a stage is A + B (the TMA form's was A + B + the per-token and per-channel scale boxes, 4 bytes a row / column)
    ab = (config.block_m + config.block_n) * 128
    scales = 4 * (config.block_m + config.block_n)
    assert f", {ab};" in ptx and f", {ab + scales};" not in ptx
    assert f", {ab + scales};" in boxes
    # the producer's copies (four words a lane per 128 scales), each lane's arrive made when they land
    assert ptx.count("cp.async.ca.shared.global") >= 8 and "cp.async.mbarrier.arrive.shared.b64" in ptx
    assert "cp.async.mbarrier.arrive" not in boxes
    # the whole-K tiles' fenced ring releases are gone (the epilogue's fences before its TMA stores remain); the
    # fused split-K tiles keep theirs (FENCE_RING: without it ptxas spills in the 4096x2112x7168 pick's epilogue)
    if config.splitk_fused:
        assert ptx.count(FENCE) == boxes.count(FENCE)
    else:
        assert ptx.count(FENCE) < boxes.count(FENCE)
    assert resource_usage(kernel)["LOCAL"] == 0


def test_the_switch_leaves_the_1d2d_kernels_alone():
    # (their scales are not in a ring the producer copies: FINEGEMM_PROBE_RING_STS=0 compiles the same PTX)
    shape = (4096, 7168, 16384)
    desc = GemmDesc("fp8_1d2d", *shape)
    base = compile_variant(desc, get_config(desc, H200))
    assert _switched("fp8_1d2d", shape)["ptx"] == base.asm["ptx"]
    assert resource_usage(base)["LOCAL"] == 0
