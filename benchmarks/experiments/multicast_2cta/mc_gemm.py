"""Prototype: FP8 1d2d GEMM on sm_90 in Gluon (Triton 3.9), with an optional 2-CTA cluster and TMA multicast of A.

D[m, n] = sum_kb (A_kb @ B_kb^T)[m, n] * sfa[m, kb] * sfb[n // 128, kb]   (bf16 out)

One source, two variants chosen by the compile option ``num_ctas`` (CLUSTER = 1 or 2):
  - CLUSTER 1: one CTA per [BLOCK_M, BLOCK_N] tile (plain TMA loads).
  - CLUSTER 2: a cluster of 2 CTAs per [BLOCK_M, 2 * BLOCK_N] "cluster tile". Gluon programs the whole cluster
    (SPMD over the cluster): tensors/smem span the cluster tile, and each layout's ``cga_layout`` says how the
    two CTAs split it:
      A box  [BLOCK_M, 128]      cga [[0, 0]]  -> broadcast: both CTAs hold the same A tile; the TMA load with
                                                  multicast=True is issued by CTA rank 0 only, mask 0b11.
      B box  [2*BLOCK_N, 128]    cga [[1, 0]]  -> split along N: CTA r loads rows [r*BLOCK_N, (r+1)*BLOCK_N).
      acc    [64, 2*BLOCK_N]     cga [[0, 1]]  -> each CTA holds its own [64, BLOCK_N] columns.
      D box  [64, 2*BLOCK_N]     cga [[0, 1]]  -> each CTA stores its own half.
    Ring barriers: full[s] per CTA (count 1; each CTA expects A+B bytes: A arrives by the peer's multicast);
    empty[s] per CTA (count 2 = math warpgroups; guards this CTA's B slot) and, cluster only, empty2[s], a
    two-CTA barrier living in CTA 0 (count 2 x 2 CTAs): the multicast of A into slot s (issued by CTA 0 into
    both CTAs) waits until the math warpgroups of BOTH CTAs released s. Gluon skips the wait on CTA 1.

Warp-specialized (producer warp + two math warpgroups of 64 rows), non-persistent, grouped raster over M.
Per K block: fresh WGMMA accumulator (async), the previous block's partial promoted on the CUDA cores while
the tensor cores work, slot released once its WGMMA retired.
"""

from __future__ import annotations

import os

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

BLOCK_M = 128
BLOCK_K = 128
PRODUCER_REGS = gl.constexpr(40)
MATH_REGS = gl.constexpr(232)


@gluon.constexpr_function
def _pow2(n):
    return 1 << (int(n) - 1).bit_length()


@gluon.jit
def _cta_rank(x):
    """%cluster_ctarank as an int32 scalar (per-CTA value; Gluon 3.9 has no builtin for it). ``x``: any int32
    scalar, only there to give the asm an operand."""
    return gl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r,r", [x], dtype=gl.int32, is_pure=True,
                                     pack=1)


@gluon.jit
def _arrive_pair(empty2, s, STAGES: gl.constexpr):
    # static slot indices (an if-chain), so that every remote-arrive address is a compile-time constant that
    # check_remote_arrives() can verify in the PTX (see FINDINGS.md: the 3.9 lowering can clear a slot bit)
    for j in gl.static_range(STAGES):
        if s == j:
            mbarrier.arrive(empty2.index(j))


@gluon.jit
def _tile_coords(M, N, BM: gl.constexpr, BNC: gl.constexpr, GROUP_M: gl.constexpr):
    pid = gl.program_id(0)  # cluster index (the launch grid counts clusters: gridDim.x = grid * num_ctas)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BNC)
    width = GROUP_M * num_n
    group = pid // width
    first_m = group * GROUP_M
    gsize = gl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % gsize
    pid_n = (pid % width) // gsize
    return pid_m * BM, pid_n * BNC


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, full, empty, empty2, M, N, KB: gl.constexpr, STAGES: gl.constexpr,
              GROUP_M: gl.constexpr):
    CL: gl.constexpr = gl.num_ctas()
    BM: gl.constexpr = a_desc.block_shape[0]
    BNC: gl.constexpr = b_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    m0, n0 = _tile_coords(M, N, BM, BNC, GROUP_M)
    nbytes: gl.constexpr = a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
    for kb in range(KB):
        s = kb % STAGES
        ph = (kb // STAGES) & 1
        # flipped phase: the first pass through the ring does not block
        mbarrier.wait(empty.index(s), ph ^ 1)
        if CL > 1:
            # the multicast writes the peer's slot too: both CTAs' consumers must have released s
            # (two-CTA barrier: only CTA 0 waits; the wait is compiled out on CTA 1)
            mbarrier.wait(empty2.index(s), ph ^ 1)
        bar = full.index(s)
        mbarrier.expect(bar, nbytes)
        tma.async_load(a_desc, [m0, kb * BK], bar, a_bufs.index(s), multicast=CL > 1)
        tma.async_load(b_desc, [n0, kb * BK], bar, b_bufs.index(s))


@gluon.jit
def _math(a_bufs, b_bufs, full, empty, empty2, d_desc, d_smem, sfa_ptr, sfb_ptr, M, N, stride_sfb,
          ROW0: gl.constexpr, KB: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr):
    CL: gl.constexpr = gl.num_ctas()
    BM: gl.constexpr = a_bufs.shape[1]
    BNC: gl.constexpr = b_bufs.shape[1]
    BN: gl.constexpr = BNC // CL
    gl.static_assert(BN == 128, "one sfb block per CTA tile")
    if CL > 1:
        CGA: gl.constexpr = [[0, 1]]
    else:
        CGA: gl.constexpr = []
    mma_l: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32],
                                                    cga_layout=CGA)
    row_l: gl.constexpr = gl.SliceLayout(1, mma_l)
    m0, n0 = _tile_coords(M, N, BM, BNC, GROUP_M)
    if CL > 1:
        nblk = (n0 + _cta_rank(m0) * BN) // 128
    else:
        nblk = n0 // 128
    nblk = gl.minimum(nblk, (N - 1) // 128)  # a CTA past N (its cluster's second tile) reads a valid scale
    rows = m0 + ROW0 + gl.arange(0, 64, layout=row_l)
    rmask = rows < M
    zero = gl.zeros([64, BNC], gl.float32, mma_l)
    acc = gl.zeros([64, BNC], gl.float32, mma_l)

    # K block 0
    s = 0
    mbarrier.wait(full.index(0), 0)
    tok = warpgroup_mma(a_bufs.index(0).slice(ROW0, 64, dim=0), b_bufs.index(0).permute((1, 0)), zero,
                        use_acc=False, is_async=True)
    sc = gl.load(sfa_ptr + rows, mask=rmask, other=0.0) * gl.load(sfb_ptr + nblk * stride_sfb)
    prev = warpgroup_mma_wait(0, deps=(tok, ))
    mbarrier.arrive(empty.index(0))
    if CL > 1:
        mbarrier.arrive(empty2.index(0))
    for kb in range(1, KB):
        s = kb % STAGES
        mbarrier.wait(full.index(s), (kb // STAGES) & 1)
        tok = warpgroup_mma(a_bufs.index(s).slice(ROW0, 64, dim=0), b_bufs.index(s).permute((1, 0)), zero,
                            use_acc=False, is_async=True)
        # promote block kb-1 on the CUDA cores while the tensor cores run block kb
        acc = acc + prev * sc[:, None]
        sc = gl.load(sfa_ptr + kb * M + rows, mask=rmask, other=0.0) * gl.load(sfb_ptr + nblk * stride_sfb + kb)
        prev = warpgroup_mma_wait(0, deps=(tok, ))
        mbarrier.arrive(empty.index(s))
        if CL > 1:
            _arrive_pair(empty2, s, STAGES)
    acc = acc + prev * sc[:, None]

    d_smem.store(acc.to(gl.bfloat16))
    fence_async_shared()
    tma.async_store(d_desc, [m0 + ROW0, n0], d_smem)
    tma.store_wait(0)


@gluon.jit
def mc_gemm_kernel(a_desc, b_desc, d_desc, sfa_ptr, sfb_ptr, M, N, stride_sfb, K: gl.constexpr,
                   STAGES: gl.constexpr, GROUP_M: gl.constexpr):
    """a_desc [M, K] fp8 box [128, 128]; b_desc [N, K] fp8 box [CL*128, 128]; d_desc [M, N] bf16 box [64, CL*128];
    sfa_ptr: fp32 [K/128, M] (MN-major: sfa[m, kb] at kb * M + m); sfb_ptr: fp32 [N/128, K/128], row stride
    ``stride_sfb``. Grid: number of cluster tiles (cdiv(M, 128) * cdiv(N, CL*128))."""
    CL: gl.constexpr = gl.num_ctas()
    KB: gl.constexpr = K // 128
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape, b_desc.layout)
    d_smem = gl.allocate_shared_memory(d_desc.dtype, [2] + d_desc.block_shape, d_desc.layout)
    full = mbarrier.allocate_mbarrier(batch=STAGES)
    empty = mbarrier.allocate_mbarrier(batch=STAGES)
    # barriers are initialized here, before warp_specialize: the compiler adds the cluster-scope init fence and
    # a relaxed cluster barrier before their first use (cluster barriers cannot run inside warp_specialize)
    if CL > 1:
        empty2 = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)
    else:
        empty2 = empty
    for i in gl.static_range(STAGES):
        mbarrier.init(full.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)
        if CL > 1:
            mbarrier.init(empty2.index(i), count=2)  # x 2 CTAs (two-CTA barrier): 4 arrivals
    gl.warp_specialize([
        (_math, (a_bufs, b_bufs, full, empty, empty2, d_desc, d_smem.index(0), sfa_ptr, sfb_ptr, M, N, stride_sfb,
                 0, KB, STAGES, GROUP_M)),
        (_math, (a_bufs, b_bufs, full, empty, empty2, d_desc, d_smem.index(1), sfa_ptr, sfb_ptr, M, N, stride_sfb,
                 64, KB, STAGES, GROUP_M)),
        (_producer, (a_desc, b_desc, a_bufs, b_bufs, full, empty, empty2, M, N, KB, STAGES, GROUP_M)),
    ], [4, 1], [MATH_REGS, PRODUCER_REGS])


# ----------------------------------------------------------------------------------------------------------------
# host side


def layouts(cluster: int):
    """(a, b, d) NVMMASharedLayouts and box shapes for a cluster of ``cluster`` CTAs (1 or 2)."""
    bn = 128 * cluster
    if cluster == 1:
        ca = cb = cd = None
    else:
        ca, cb, cd = [[0, 0]], [[1, 0]], [[0, 1]]
    la = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.float8e4nv, cga_layout=ca)
    lb = gl.NVMMASharedLayout.get_default_for([bn, BLOCK_K], gl.float8e4nv, cga_layout=cb)
    ld = gl.NVMMASharedLayout.get_default_for([64, bn], gl.bfloat16, cga_layout=cd)
    return (la, [BLOCK_M, BLOCK_K]), (lb, [bn, BLOCK_K]), (ld, [64, bn])


def default_stages(cluster: int) -> int:
    return int(os.environ.get("MC_STAGES", "6"))


def compile_cpu(cluster: int, K: int = 7168, stages: int | None = None, group_m: int = 8):
    """Compile the variant for sm_90 without a GPU (triton.compile with an explicit target)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    os.environ.setdefault("TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas")
    os.environ.setdefault("TRITON_PTXAS_BLACKWELL_PATH", os.environ["TRITON_PTXAS_PATH"])
    stages = stages or default_stages(cluster)
    (la, ba), (lb, bb), (ld, bd) = layouts(cluster)

    def td(dt, block, lay):
        return f"tensordesc<{dt}[{', '.join(map(str, block))}],{lay!r}>"

    sig = {"a_desc": td("fp8e4nv", ba, la), "b_desc": td("fp8e4nv", bb, lb), "d_desc": td("bf16", bd, ld),
           "sfa_ptr": "*fp32", "sfb_ptr": "*fp32", "M": "i32", "N": "i32", "stride_sfb": "i32",
           "K": "constexpr", "STAGES": "constexpr", "GROUP_M": "constexpr"}
    src = GluonASTSource(mc_gemm_kernel, sig, {"K": K, "STAGES": stages, "GROUP_M": group_m})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": cluster})


def mc_gemm(a, sfa_mn, b, sfb, d, cluster: int = 2, stages: int | None = None, group_m: int = 8):
    """Launch on the GPU. a [M, K] e4m3, b [N, K] e4m3, d [M, N] bf16 (all row-major);
    sfa_mn: fp32 [K/128, M] contiguous (MN-major); sfb: fp32 [N/128, K/128] (row stride sfb.stride(0))."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    M, K = a.shape
    N = b.shape[0]
    assert K % 128 == 0 and sfa_mn.shape == (K // 128, M) and sfa_mn.is_contiguous()
    stages = stages or default_stages(cluster)
    (la, ba), (lb, bb), (ld, bd) = layouts(cluster)
    a_desc = TensorDescriptor.from_tensor(a, ba, la)
    b_desc = TensorDescriptor.from_tensor(b, bb, lb)
    d_desc = TensorDescriptor.from_tensor(d, bd, ld)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, 128 * cluster), )  # clusters, not CTAs
    return mc_gemm_kernel[grid](a_desc, b_desc, d_desc, sfa_mn, sfb, M, N, sfb.stride(0), K=K, STAGES=stages,
                                GROUP_M=group_m, num_warps=4, num_ctas=cluster)


def check_remote_arrives(ptx: str) -> list:
    """Every ``mbarrier.arrive.shared::cluster`` whose address is ``(global_smem + C) & MASK``: whether the mask
    only clears the CTA-rank bits (>= 24) and bits that are zero in C. Returns [(C, mask, ok)]."""
    import re
    regs, out = {}, []
    base = None
    for line in ptx.splitlines():
        m = re.search(r"mov.b32\s+(%r\d+), global_smem;", line)
        if m:
            base = m.group(1)
            regs[base] = 0
        m = re.search(r"add.s32\s+(%r\d+), (%r\d+), (-?\d+);", line)
        if m and m.group(2) in regs:
            regs[m.group(1)] = regs[m.group(2)] + int(m.group(3))
        m = re.search(r"and.b32\s+(%r\d+), (%r\d+), (-?\d+);", line)
        if m and m.group(2) in regs and int(m.group(3)) < -(1 << 20):
            c, mask = regs[m.group(2)], int(m.group(3)) & 0xFFFFFFFF
            cleared = (~mask) & 0xFFFFFF
            out.append((c, hex(mask), (c & cleared) == 0))
    return out


def report(ck) -> dict:
    ptx = ck.asm["ptx"]
    md = ck.metadata
    out = {"num_ctas": md.num_ctas, "shared": md.shared, "n_regs": getattr(ck, "n_regs", None),
           "n_spills": getattr(ck, "n_spills", None),
           "multicast_tma": ptx.count("multicast::cluster"),
           "reqnctapercluster": ".reqnctapercluster" in ptx,
           "cluster_barriers": ptx.count("barrier.cluster.arrive"),
           "remote_arrive": ptx.count("mbarrier.arrive.shared::cluster"),
           "local_mem": ".local" in ptx,
           "remote_arrive_addr_ok": all(ok for _, _, ok in check_remote_arrives(ptx)),
           "remote_arrive_addrs": check_remote_arrives(ptx)}
    return out


if __name__ == "__main__":
    import json
    import sys
    for cl in (1, 2):
        ck = compile_cpu(cl)
        open(os.path.join(os.path.dirname(__file__), f"mc_gemm_cl{cl}.ptx"), "w").write(ck.asm["ptx"])
        open(os.path.join(os.path.dirname(__file__), f"mc_gemm_cl{cl}.ttgir"), "w").write(ck.asm["ttgir"])
        print(f"cluster {cl}:", json.dumps(report(ck)))
        sys.stdout.flush()
