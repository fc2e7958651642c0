"""The producer-stored weight scales probe (``FINEGEMM_PROBE_SFB_STS=1``, NOTES v30) on the CPU.

With it, the 1d1d kernels' per-channel ring scales are loaded by the producer warp and stored into the slot with
``st.shared`` instead of a TMA box, so the math warpgroups release a slot without the proxy fence. The switch is read
at import, so the switched compiles run in a child process; without it the kernels must stay main's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90.compile_check import compile_variant, resource_usage
from finegemm.kernels.sm90.dispatch import get_config

WGRAD = (4096, 4096, 7168)  # the weight-grad rule's 128x128 pipelined tile with C by TMA

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


def _switched(kind: str, shape: tuple[int, int, int]) -> dict:
    env = dict(os.environ, FINEGEMM_PROBE_SFB_STS="1")
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, *map(str, shape)], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _wgrad_ptx() -> tuple[str, int, int]:
    desc = GemmDesc("fp8_1d1d", *WGRAD, out_fp32=True, with_c=True)
    config = get_config(desc, H200)
    return compile_variant(desc, config).asm["ptx"], config.block_m, config.block_n


def test_the_switch_stores_the_scales_and_drops_the_release_fence():
    base, bm, bn = _wgrad_ptx()
    got = _switched("fp8_1d1d", WGRAD)
    ptx = got["ptx"]
    # a stage is A + B + the per-token scales by TMA; the per-channel scales' box (4 bytes a column) is gone
    stage = bm * 128 + bn * 128 + 4 * bm
    assert "mbarrier.arrive.expect_tx.shared.b64 _, [%r" in ptx
    assert f", {stage};" in ptx and f", {stage + 4 * bn};" not in ptx
    assert f", {stage + 4 * bn};" in base
    # the producer's shared stores, and every ring release of the pipelined loop without the fence
    assert "st.shared.v4.b32" in ptx and "bar.warp.sync" in ptx
    fences = ptx.count("fence.proxy.async.shared::cta")
    assert fences < base.count("fence.proxy.async.shared::cta")
    assert got["local"] == 0


def test_the_switch_leaves_the_1d2d_kernels_alone():
    shape = (4096, 7168, 16384)
    desc = GemmDesc("fp8_1d2d", *shape)
    base = compile_variant(desc, get_config(desc, H200))
    assert _switched("fp8_1d2d", shape)["ptx"] == base.asm["ptx"]
    assert resource_usage(base)["LOCAL"] == 0
