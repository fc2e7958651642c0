"""CPU evidence (no GPU) for the multicast question of benchmarks/NOTES.md "What limits it" item 0: what Gluon 3.6
emits for a 2-CTA cluster, and whether inline PTX can reach the cluster's shared memory.

Compiles a small Gluon kernel for sm_90 with ``num_ctas=2`` and prints the PTX lines that answer:
- the kernel is a cluster launch (``.reqnctapercluster 2``);
- a TMA load into a CTA-broadcast shared layout (``cga_layout=[[0, 0]]``) is still one plain load per CTA, no
  ``.multicast::cluster`` (Gluon does not multicast by itself);
- inline asm can read the dynamic shared-memory base (``global_smem``), ``%cluster_ctarank`` and map an address
  into the peer CTA (``mapa.shared::cluster``), and ptxas accepts it (a cubin is built): the pieces a hand-written
  multicast load (``cp.async.bulk.tensor...multicast::cluster``) and cross-CTA ``mbarrier`` arrivals need, with
  the buffers at their allocation offsets from ``global_smem`` (printed: Triton's offsets are deterministic);
- the FP8 kernel's shape (warp_specialize, a TMA producer, WGMMA, TMA store) compiles under ``num_ctas=2`` once its
  layouts carry ``cga_layout=[[0, 0]]``.
Usage: python scripts/cluster_probe.py
"""

from __future__ import annotations

import re

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


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


@gluon.jit
def _ws_producer(a_desc, b_desc, a_s, b_s, bar):
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(a_desc, [0, 0], bar, a_s)
    tma.async_copy_global_to_shared(b_desc, [0, 0], bar, b_s)


@gluon.jit
def _ws_consumer(a_s, b_s, bar, d_desc, d_s):
    mbarrier.wait(bar, 0)
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 128, 32], cga_layout=[[0, 0]])
    acc = warpgroup_mma(a_s, b_s.permute((1, 0)), gl.zeros([64, 128], gl.float32, acc_layout), is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    d_s.store(acc.to(gl.bfloat16))
    fence_async_shared()
    tma.async_copy_shared_to_global(d_desc, [0, 0], d_s)
    tma.store_wait(0)


@gluon.jit
def _ws_probe(a_desc, b_desc, d_desc):
    a_s = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    d_s = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    gl.warp_specialize([(_ws_consumer, (a_s, b_s, bar, d_desc, d_s)), (_ws_producer, (a_desc, b_desc, a_s, b_s, bar))],
                       [1], [40])


def warp_specialized() -> None:
    """The shape of the FP8 kernel under ``num_ctas=2``: a TMA producer partition, an FP8 WGMMA into an accumulator
    whose layout carries ``cga_layout=[[0, 0]]``, a TMA store; compiled for sm_90a."""
    cga = [[0, 0]]
    fp8 = gl.NVMMASharedLayout(128, 8, 2, cga_layout=cga)
    bf16 = gl.NVMMASharedLayout(128, 16, 2, cga_layout=cga)
    sig = {"a_desc": f"tensordesc<fp8e4nv[64, 128],{fp8!r}>", "b_desc": f"tensordesc<fp8e4nv[128, 128],{fp8!r}>",
           "d_desc": f"tensordesc<bf16[64, 128],{bf16!r}>"}
    kernel = triton.compile(GluonASTSource(_ws_probe, sig, {}), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_ctas": 2})
    ptx = kernel.asm["ptx"]
    print("warp-specialized FP8 WGMMA kernel, num_ctas=2: cluster", ".reqnctapercluster 2" in ptx, "| wgmma",
          "wgmma.mma_async" in ptx, "| setmaxnreg", "setmaxnreg" in ptx, "| cubin bytes", len(kernel.asm["cubin"]))


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
    warp_specialized()


if __name__ == "__main__":
    main()
