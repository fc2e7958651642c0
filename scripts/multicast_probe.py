"""First GPU step toward a 2-CTA TMA multicast in Gluon 3.6 (benchmarks/NOTES.md "What limits it" item 0).

A 2-CTA cluster (``num_ctas=2``): CTA rank 0 alone loads one 64x64 fp16 tile with a hand-written
``cp.async.bulk.tensor...multicast::cluster`` into the same shared-memory offset of both CTAs, each CTA waits on
its own mbarrier, then stores what it received (TMA) to rows ``[64 rank, 64 rank + 64)`` of ``out``. Also
records, per CTA, ``program_id``, ``%cluster_ctarank``, ``%clusterid.x`` and ``%ctaid.x`` (how Triton's launcher
sizes a ``num_ctas`` grid; the PTX already shows ``program_id`` is ``%clusterid.x`` there).

What the asm needs and how it gets it (all checked by the CPU compile, ``--compile-only``): the tensor map's
address from the kernel's first parameter (``<kernel>_param_0``, ``cvta.param``); the destination and the
mbarrier as offsets from ``global_smem`` (read from the compiled PTX of the same kernel: the buffer is
allocated first, the barrier after it); a cluster barrier after the mbarrier init so the peer's barrier exists
before the load lands, and one before exit so no CTA leaves while the other may still be written.

Usage: PYTHONPATH=. python3 scripts/multicast_probe.py [--compile-only]; on the GPU it prints PASS or what differs.
"""

from __future__ import annotations

import re
import sys

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

TILE = gl.constexpr(64)
NBYTES = 64 * 64 * 2


@gluon.jit
def _cluster_sync():
    gl.inline_asm_elementwise("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;"
                              " mov.u32 $0, 0;", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _multicast_kernel(desc, out_desc, info_ptr, BAR_OFFSET: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    gl.inline_asm_elementwise("fence.mbarrier_init.release.cluster; mov.u32 $0, 0;", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)
    fence_async_shared()
    mbarrier.expect(bar, desc.block_type.nbytes)  # each CTA arms its own barrier for the bytes it will receive
    _cluster_sync()
    rank = gl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r", [], dtype=gl.int32, is_pure=True,
                                     pack=1)
    # rank 0's thread 0 loads the tile into both CTAs: destination and barrier at the same offsets in each
    gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t, dst, mb; .reg .b64 tm; .reg .b16 mask;\n"
        "mov.u32 t, %tid.x; or.b32 t, t, $1; setp.eq.u32 p, t, 0;\n"
        "mov.u32 dst, global_smem; add.u32 mb, dst, $2;\n"
        "mov.u64 tm, _multicast_kernel_param_0; cvta.param.u64 tm, tm;\n"
        "mov.b16 mask, 3;\n"
        "@p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [dst], [tm, {$3, $3}], [mb], mask;\n"
        "mov.u32 $0, 0; }",
        "=r,r,r,r", [rank, BAR_OFFSET + rank * 0, rank * 0], dtype=gl.int32, is_pure=False, pack=1)
    mbarrier.wait(bar, 0)
    tma.async_copy_shared_to_global(out_desc, [rank * TILE, 0], smem)  # what this CTA received, to out[rank]
    tma.store_wait(0)
    # per CTA: program_id, rank, %clusterid.x, %ctaid.x. By inline asm: Triton takes values in a num_ctas
    # kernel as replicated over the cluster and lets only rank 0 execute a gl.store (and program_id is
    # %clusterid.x), so a plain store would record rank 0 alone.
    gl.inline_asm_elementwise(
        "{ .reg .b32 t, c, k, x; .reg .pred p; .reg .b64 a;\n"
        "mov.u32 t, %tid.x; setp.eq.u32 p, t, 0;\n"
        "mov.u32 c, %clusterid.x; mov.u32 k, %cluster_ctarank; mov.u32 x, %ctaid.x;\n"
        "mad.lo.u32 t, c, 2, k; mul.wide.u32 a, t, 16; add.u64 a, a, $1;\n"
        "@p st.global.v4.b32 [a], {$2, k, c, x};\n"
        "mov.u32 $0, 0; }",
        "=r,l,r", [info_ptr, gl.program_id(0)], dtype=gl.int32, is_pure=False, pack=1)
    _cluster_sync()  # neither CTA exits while its peer may still be written


def _layout():
    return gl.NVMMASharedLayout(128, 16, 2)


def _compile(bar_offset: int):
    tile = f"tensordesc<fp16[{TILE.value}, {TILE.value}],{_layout()!r}>"
    sig = {"desc": tile, "out_desc": tile, "info_ptr": "*i32", "BAR_OFFSET": "constexpr"}
    src = GluonASTSource(_multicast_kernel, sig, {"BAR_OFFSET": bar_offset})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": 2})


def barrier_offset() -> int:
    """The mbarrier's offset from ``global_smem`` in the compiled kernel (the ``add`` feeding mbarrier.init)."""
    ptx = _compile(NBYTES).asm["ptx"]
    found = re.findall(r"add\.s32\s+%r\d+, %r\d+, (\d+);", ptx)
    offsets = {int(x) for x in found}
    if NBYTES not in offsets:
        raise RuntimeError(f"mbarrier offset not found where expected ({NBYTES}); adds seen: {sorted(offsets)}")
    return NBYTES


def main() -> None:
    offset = barrier_offset()
    kernel = _compile(offset)
    ptx = kernel.asm["ptx"]
    print("cluster:", ".reqnctapercluster 2" in ptx, "| multicast:", "multicast::cluster" in ptx,
          "| cubin bytes:", len(kernel.asm["cubin"]), "| barrier offset:", offset)
    if "--compile-only" in sys.argv or not torch.cuda.is_available():
        return
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    src = torch.randn(TILE, TILE, device="cuda", dtype=torch.float16)
    desc = TensorDescriptor(src, [TILE, TILE], [TILE, 1], [TILE, TILE], _layout())
    out = torch.full((2 * TILE, TILE), float("nan"), device="cuda", dtype=torch.float16)
    out_desc = TensorDescriptor(out, [2 * TILE, TILE], [TILE, 1], [TILE, TILE], _layout())
    info = torch.full((8, 4), -1, device="cuda", dtype=torch.int32)
    _multicast_kernel[(1,)](desc, out_desc, info, BAR_OFFSET=offset, num_warps=4, num_ctas=2)
    torch.cuda.synchronize()
    print("per CTA (program_id, cluster rank, %clusterid.x, %ctaid.x):", info.tolist())
    same = [bool(torch.equal(out[r * TILE:(r + 1) * TILE], src)) for r in range(2)]
    print("PASS" if all(same) else f"FAIL: rank 0 / 1 received the tile: {same}")


if __name__ == "__main__":
    main()
