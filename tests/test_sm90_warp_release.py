"""The per-warp slot release probe (``FINEGEMM_PROBE_EMPTY_SMEM``) on the CPU.

Its GPU A/B needs the empty barriers' offset from a compile of the same config to be right (a wrong one hangs
or corrupts another barrier), and the kernel without the switch must stay exactly main's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90 import gemm_1d2d
from finegemm.kernels.sm90.compile_check import barrier_inits, compile_variant, empty_barrier_offset
from finegemm.kernels.sm90.dispatch import get_config

SHAPES = [(4096, 7168, 16384), (128, 4096, 7168)]  # two math warpgroups (256 rows), one (64 rows)

_CHILD = """
import json, sys
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90.compile_check import barrier_inits, compile_variant, resource_usage
from finegemm.kernels.sm90.dispatch import get_config
m, n, k = (int(x) for x in sys.argv[1:4])
desc = GemmDesc("fp8_1d2d", m, n, k)
kernel = compile_variant(desc, get_config(desc, H200))
ptx = kernel.asm["ptx"]
print(json.dumps(dict(inits=barrier_inits(kernel), local=resource_usage(kernel)["LOCAL"],
                      arrives=ptx.count("mbarrier.arrive.shared::cta.b64 _, [a+"),
                      triton_arrives=ptx.count("mbarrier.arrive.shared::cta.b64 _, [%r"))))
"""


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_empty_barrier_offset_finds_the_ring_barriers(shape):
    desc = GemmDesc("fp8_1d2d", *shape)
    config = get_config(desc, H200)
    inits = barrier_inits(compile_variant(desc, config))
    wg = gemm_1d2d.num_math_warpgroups(config.block_m)
    offset = empty_barrier_offset(desc, config)
    # full[i] (one arrive) and empty[i] (one per math warpgroup) for each stage, then one C barrier per warpgroup
    assert len(inits) == 2 * config.stages + wg
    assert inits[1:2 * config.stages:2] == [(offset + 8 * i, wg) for i in range(config.stages)]
    assert all(count == 1 for _, count in inits[0:2 * config.stages:2])
    assert len({o for o, _ in inits}) == len(inits)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_switch_counts_and_arrives_per_warp(shape):
    desc = GemmDesc("fp8_1d2d", *shape)
    config = get_config(desc, H200)
    offset = empty_barrier_offset(desc, config)
    env = dict(os.environ, FINEGEMM_PROBE_EMPTY_SMEM=str(offset))
    out = subprocess.run([sys.executable, "-c", _CHILD, *map(str, shape)], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    wg = gemm_1d2d.num_math_warpgroups(config.block_m)
    inits = [tuple(x) for x in got["inits"]]
    # the allocation did not move, and the empty barriers now count the math warps
    assert inits[1:2 * config.stages:2] == [(offset + 8 * i, 4 * wg) for i in range(config.stages)]
    # every slot release is the probe's per-warp arrive (without the switch the same PTX has two of Triton's
    # thread-0 arrives and none of these), and nothing spills
    assert got["arrives"] >= 1 and got["triton_arrives"] == 0 and got["local"] == 0
