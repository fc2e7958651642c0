"""CPU evidence (no GPU) for the multicast question of benchmarks/NOTES.md "What limits it" item 0: what Gluon 3.6
emits for a 2-CTA cluster, and whether inline PTX can reach the cluster's shared memory.

Compiles a small Gluon kernel for sm_90 with ``num_ctas=2`` and prints the PTX lines that answer:
- the kernel is a cluster launch (``.reqnctapercluster 2``);
- a TMA load into a CTA-broadcast shared layout (``cga_layout=[[0, 0]]``) is still one plain load per CTA, no
  ``.multicast::cluster`` (Gluon does not multicast by itself);
- inline asm can read the dynamic shared-memory base (``global_smem``), ``%cluster_ctarank`` and map an address
  into the peer CTA (``mapa.shared::cluster``), and ptxas accepts it (a cubin is built): the pieces a hand-written
  multicast load (``cp.async.bulk.tensor...multicast::cluster``) and cross-CTA ``mbarrier`` arrivals need, with
  the buffers at their allocation offsets from ``global_smem`` (printed: Triton's offsets are deterministic).
Usage: python scripts/cluster_probe.py
"""

from __future__ import annotations

import re

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma


@gluon.jit
def _probe(desc, out_ptr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    base = gl.inline_asm_elementwise("mov.u32 $0, global_smem;", "=r", [], dtype=gl.int32, is_pure=True, pack=1)
    rank = gl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r", [], dtype=gl.int32, is_pure=True,
                                     pack=1)
    peer = gl.inline_asm_elementwise("mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", [base, rank ^ 1],
                                     dtype=gl.int32, is_pure=True, pack=1)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, [0, 0], bar, smem)
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + gl.program_id(0), base + rank + peer)


def main() -> None:
    layout = gl.NVMMASharedLayout(128, 16, 2, cga_layout=[[0, 0]])  # both CTAs hold the whole tile
    sig = {"desc": f"tensordesc<fp16[64, 64],{layout!r}>", "out_ptr": "*i32"}
    kernel = triton.compile(GluonASTSource(_probe, sig, {}), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_ctas": 2})
    ptx = kernel.asm["ptx"]
    wanted = r"reqnctapercluster|explicitcluster|cp\.async\.bulk|global_smem|cluster_ctarank|mapa|mbarrier\.init"
    for line in ptx.splitlines():
        if re.search(wanted, line):
            print("   ", line.strip())
    print("multicast in the PTX:", "multicast" in ptx, "| cubin bytes:", len(kernel.asm["cubin"]),
          "| shared bytes:", kernel.metadata.shared)


if __name__ == "__main__":
    main()
