"""The producer-stored ring scales probe (``FINEGEMM_PROBE_RING_STS=1`` / ``2``, NOTES v30) on the CPU.

With it, the 1d1d kernels' ring scales (per-channel and per-token) are written into the slot by the producer warp,
by loads then ``st.shared`` (1) or by ``cp.async`` copies completing on the full barrier (2), instead of TMA boxes,
so the math warpgroups release a slot without the proxy fence, fused split-K tiles included. The switch is read at
import, so the switched compiles run in a child process; without it the kernels stay main's.
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


def _switched(kind: str, shape: tuple[int, int, int], value: str = "1") -> dict:
    env = dict(os.environ, FINEGEMM_PROBE_RING_STS=value)
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, *map(str, shape)], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("value", ["1", "2"], ids=["st.shared", "cp.async"])
@pytest.mark.parametrize("shape", WGRAD, ids=lambda s: "x".join(map(str, s)))
def test_the_switch_stores_the_ring_scales_and_drops_the_release_fences(shape, value):
    desc = GemmDesc("fp8_1d1d", *shape, out_fp32=True, with_c=True)
    config = get_config(desc, H200)
    assert config.sfa_tma and config.sfb_tma
    base = compile_variant(desc, config).asm["ptx"]
    got = _switched("fp8_1d1d", shape, value)
    ptx = got["ptx"]
    # a stage was A + B + the per-token and the per-channel scale boxes (4 bytes a row / column); now A + B
    ab = (config.block_m + config.block_n) * 128
    boxes = 4 * (config.block_m + config.block_n)
    assert f", {ab + boxes};" in base and f", {ab + boxes};" not in ptx
    assert f", {ab};" in ptx
    if value == "1":
        # the producer's shared stores (four words a lane per 128 scales), ordered before its arrive
        assert ptx.count("st.shared.v4.b32") >= 2 and "bar.warp.sync" in ptx
    else:
        # its copies (four words a lane per 128 scales), each lane's arrive made when they land
        assert ptx.count("cp.async.ca.shared.global") >= 8 and "cp.async.mbarrier.arrive.shared.b64" in ptx
        assert "cp.async.mbarrier.arrive" not in base
    # the fenced ring releases are gone (the epilogue's fences before its TMA stores remain)
    assert ptx.count(FENCE) < base.count(FENCE)
    assert got["local"] == 0


def test_the_switch_leaves_the_1d2d_kernels_alone():
    shape = (4096, 7168, 16384)
    desc = GemmDesc("fp8_1d2d", *shape)
    base = compile_variant(desc, get_config(desc, H200))
    assert _switched("fp8_1d2d", shape)["ptx"] == base.asm["ptx"]
    assert resource_usage(base)["LOCAL"] == 0
